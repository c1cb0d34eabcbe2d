# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""NUMASlotWeigher's per-request fast path: records and weights kept.

A :class:`SlotArena` holds, for one list of reference shapes and weights,

* the packed record of every ``HostState`` it has seen, in one C buffer
  (``offsets[slot]`` says where each host's record starts), repacked only
  when the host changed;
* a memo of raw weights per request shape and host (a request's weight on
  a host depends only on the host's record, the request and the reference
  list), so that a host that did not change since a request of the same
  shape is not recounted at all.

A request then costs three passes over the hosts that run in C (``map``
and ``compress``: nothing in Python per host): the slot of each host, its
stamp against the stamp its record was built at, its number of allocation
candidates. Then one C call (``nse_slot_weights_indexed``) reads the memo
or counts the slots of the hosts it misses.

How a host is known to be unchanged: by its *stamp*, ``updated``,
``free_ram_mb`` and ``vcpus_used``. Nova's ``HostManager`` rebuilds a
host's NUMA topology and PCI stats objects from the compute node on every
request, but sets ``updated`` to the compute node's ``updated_at``, which
the database moves on every change of the record; ``consume_from_request``
stamps ``updated`` too. So an equal stamp means an equal record, and the
rebuilt objects need not be looked at. The usage fields cover two saves of
a compute node within the same second (``updated_at`` has a resolution of
one second in MySQL): each instance claimed or dropped changes them.

A host without a stamp (``updated`` is None: a compute node that never
reported, or a host built by hand) is compared field by field with what its
record was built from: ``updated``, the NUMA topology and PCI stats objects
by identity, the host-level usage and totals and the allocation ratios by
value, as the per-host cache of :func:`adapters.prepared_hosts` does. The
arena keeps the objects it compares alive, so an identity is never compared
with a recycled object.

Thread safety: weighers are shared by every request thread; each arena
call holds the arena's lock, and the C call does not keep pointers past
its return.
"""

from itertools import compress
from itertools import repeat
import operator
from operator import is_
from operator import ne
import threading

from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import packing

# A host's version: everything its packed record is built from, compared
# for hosts without a stamp.
_VERSION = operator.attrgetter(
    'updated', 'numa_topology', 'pci_stats', 'free_ram_mb', 'vcpus_used',
    'cpu_allocation_ratio', 'ram_allocation_ratio', 'vcpus_total',
    'total_usable_ram_mb')
# A host's stamp (see the module's docstring), and what a host without
# one is compared with: never equal, so that it is checked field by field.
_STAMP = operator.attrgetter('updated', 'free_ram_mb', 'vcpus_used')
_UNSTAMPED = object()
_CANDIDATES = operator.attrgetter('allocation_candidates')
_NAN = float('nan')


class ArenaError(Exception):
    """The C helper refused the arena's input (a bug: please report)."""


class SlotArena(object):
    """Packed hosts and memoised weights for one reference list.

    :param shapes: the reference :class:`~nova_sched_ext.fit.model.Shape`
        tuple
    :param shape_weights: their slot weights, parallel to ``shapes``
    :param memo_columns: how many distinct request shapes (and modes) the
        memo keeps at once; past that the memo starts over
    :param max_hosts: when more hosts than this are held (hosts Nova
        dropped count until then), the next request starts over
    """

    def __init__(self, shapes, shape_weights, memo_columns=32,
                 max_hosts=200000):
        cfit = engine._load_cfit()
        if cfit is None:
            raise ArenaError('the C fit helper is not available')
        self._ffi, self._lib = cfit.ffi, cfit.lib
        self.shapes = tuple(shapes)
        self.shape_weights = tuple(float(w) for w in shape_weights)
        ffi = self._ffi
        self._c_shapes = ffi.new('struct nse_shape[]', max(len(shapes), 1))
        packed = b''.join(packing.pack_shape(s) for s in self.shapes)
        ffi.memmove(self._c_shapes, packed, len(packed))
        self._c_weights = ffi.new('double[]', list(self.shape_weights) or
                                  [0.0])
        self._memo_columns = memo_columns
        self._max_hosts = max_hosts
        self._lock = threading.Lock()
        self._requests = {}
        self._clear()

    def _clear(self):
        # host state -> its slot
        self._slot_by_host = {}
        # slot -> the stamp its record was built at (_UNSTAMPED for a host
        # without one), its version, its packed record bytes (compaction)
        self._stamps = []
        self._versions = []
        self._records = []
        self._capacity = 0
        self._offsets = self._ffi.new('int64_t[]', 1)
        self._memo = self._ffi.new('double[]', 1)
        self._arena = self._ffi.new('unsigned char[]', 8)
        self._arena_size = 8
        self._used = 0
        self._requests.clear()

    # -- hosts ---------------------------------------------------------------

    def _grow_slots(self, wanted):
        # The memo is column-major (one column per request shape), so that
        # a request reads its column in slot order.
        ffi = self._ffi
        capacity = max(wanted, 2 * self._capacity, 64)
        cols = self._memo_columns
        offsets = ffi.new('int64_t[]', capacity)
        memo = ffi.new('double[]', [_NAN] * (capacity * cols))
        if self._capacity:
            ffi.memmove(offsets, self._offsets,
                        self._capacity * ffi.sizeof('int64_t'))
            for col in range(cols):
                ffi.memmove(memo + col * capacity,
                            self._memo + col * self._capacity,
                            self._capacity * ffi.sizeof('double'))
        self._offsets, self._memo = offsets, memo
        self._capacity = capacity

    def _write_record(self, slot, record):
        ffi = self._ffi
        old = self._records[slot] if slot < len(self._records) else None
        if old is not None and len(old) == len(record):
            offset = self._offsets[slot]
        else:
            if self._used + len(record) > self._arena_size:
                self._compact(len(record))
            offset = self._used
            self._used += len(record)
        ffi.memmove(self._arena + offset, record, len(record))
        self._offsets[slot] = offset
        if old is None:
            self._records.append(record)
        else:
            self._records[slot] = record

    def _compact(self, extra):
        # Records that changed size were appended; copy the live ones into
        # a new buffer large enough for them, the next one, and growth.
        live = sum(len(r) for r in self._records)
        size = max(2 * (live + extra), 4096)
        arena = self._ffi.new('unsigned char[]', size)
        used = 0
        for slot, record in enumerate(self._records):
            self._ffi.memmove(arena + used, record, len(record))
            self._offsets[slot] = used
            used += len(record)
        self._arena, self._arena_size, self._used = arena, size, used

    def _store(self, host_state, slot):
        """(Re)build the record of a host, in its slot or a new one.

        All or nothing: the record, version and stamp are built before
        anything of the arena changes, and a new host is registered only
        once its record is written. A host whose record cannot be built
        (the exception propagates) leaves the arena as it was: registered
        without a record, it would share its slot with the next new host
        (one weight for both) and have no version to be checked against.
        A known host keeps its old record, stamp and memo, which still
        agree with each other; its stamp or version no longer matches, so
        it is tried again at the next request.
        """
        # The record is built for one allocation candidate; the C call
        # gets each request's number of candidates.
        record = adapters.rebuild_prepared_host(host_state).packed
        version = _VERSION(host_state)
        stamp = _UNSTAMPED if host_state.updated is None \
            else _STAMP(host_state)
        new = slot is None
        if new:
            slot = len(self._records)
            if slot >= self._capacity:
                # Harmless if what follows fails: room to spare.
                self._grow_slots(slot + 1)
        self._write_record(slot, record)
        for col in self._requests.values():
            self._memo[col * self._capacity + slot] = _NAN
        if new:
            self._stamps.append(stamp)
            self._versions.append(version)
            self._slot_by_host[host_state] = slot
        else:
            self._stamps[slot] = stamp
            self._versions[slot] = version
        return slot

    def _checked_slot(self, hs, slot):
        """The slot of a host its stamp did not vouch for, rebuilt if changed.

        That is a host without a stamp, or one whose stamp moved.
        """
        v = self._versions[slot]
        if (v[0] == hs.updated and v[1] is hs.numa_topology and
                v[2] is hs.pci_stats and v[3] == hs.free_ram_mb and
                v[4] == hs.vcpus_used and
                v[5] == hs.cpu_allocation_ratio and
                v[6] == hs.ram_allocation_ratio and
                v[7] == hs.vcpus_total and
                v[8] == hs.total_usable_ram_mb):
            return slot
        return self._store(hs, slot)

    def _slots_of(self, host_states):
        """The slots of the hosts, storing the ones that changed.

        Two passes over the hosts, in C (``map``, ``compress``; nothing per
        host stays allocated): the slots by host, then each host's stamp
        against the one its record was built at. Reading the three stamp
        fields in one pass matters at thousands of hosts, where each pass
        over Nova's ``HostState`` objects is bound by memory latency; and
        comparing rather than hashing them, since Nova hands over new
        ``updated`` objects on every request and hashing an aware datetime
        allocates. Only the hosts that are new, changed or without a stamp
        are looked at in Python.
        """
        if len(self._slot_by_host) > self._max_hosts:
            # Hosts Nova dropped are still held: start over.
            self._clear()
        slots = list(map(self._slot_by_host.get, host_states))
        positions = range(len(slots))
        if None in slots:
            for i in compress(positions, map(is_, slots, repeat(None))):
                slots[i] = self._store(host_states[i], None)
        suspect = compress(positions, map(
            ne, map(_STAMP, host_states),
            map(self._stamps.__getitem__, slots)))
        for i in list(suspect):
            slots[i] = self._checked_slot(host_states[i], slots[i])
        return slots

    # -- requests ------------------------------------------------------------

    def _column(self, key):
        column = self._requests.get(key)
        if column is None:
            if len(self._requests) >= self._memo_columns:
                # Start the memo over rather than track recency per column.
                self._requests.clear()
                size = self._capacity * self._memo_columns
                if size:
                    self._memo[0:size] = [_NAN] * size
            column = self._requests[key] = len(self._requests)
        return column

    def weights(self, host_states, request, room_cap=None):
        """NUMASlotWeigher's raw weights of ``host_states`` for a request.

        The same numbers as :func:`nova_sched_ext.fit.engine.slot_weights`
        with ``counts=False`` over :func:`adapters.prepared_hosts`.

        :param host_states: a list of Nova ``HostState``
        :param request: the request's :class:`~fit.model.Shape`
        :param room_cap: None, or the room mode's cap (0: none)
        :raises ArenaError: the C helper refused the input
        """
        n = len(host_states)
        if not n:
            return []
        ffi, lib = self._ffi, self._lib
        candidates = list(map(adapters.candidate_count,
                              map(_CANDIDATES, host_states)))
        c_request = ffi.new('struct nse_shape *')
        ffi.memmove(c_request, packing.pack_shape(request),
                    ffi.sizeof('struct nse_shape'))
        out = ffi.new('double[]', n)
        with self._lock:
            slots = self._slots_of(host_states)
            column = self._column((request, room_cap))
            index = ffi.new('int32_t[]', slots)
            c_candidates = ffi.NULL if candidates.count(1) == n else \
                ffi.new('int32_t[]', candidates)
            rc = lib.nse_slot_weights_indexed(
                self._arena, self._used, self._offsets, len(self._records),
                index, c_candidates, n, self._c_shapes, self._c_weights,
                len(self.shapes), c_request,
                -1 if room_cap is None else max(int(room_cap), 0),
                self._memo, self._capacity, column, self._memo_columns, out)
            if rc != 0:
                # Whatever the memo holds is suspect: start over.
                self._clear()
                raise ArenaError('nse_slot_weights_indexed refused its '
                                 'input (error %d)' % rc)
        return ffi.unpack(out, n)
