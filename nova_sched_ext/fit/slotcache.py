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

* the packed record of every ``HostState`` it has seen, in one buffer
  (``offsets[slot]`` says where each host's record starts), repacked only
  when the host changed;
* a memo of raw weights per request shape and host (a request's weight on
  a host depends only on the host's record, the request and the reference
  list), so that a host that did not change since a request of the same
  shape is not recounted at all.

A request then costs two passes over the hosts that run in C (``map``
and ``compress``: nothing in Python per host): the slot of each host and
its stamp against the stamp its record was built at. Then one C call
(``nse_slot_weights_indexed``, through
:mod:`~nova_sched_ext.fit.lowlevel`) reads the memo or counts the slots of
the hosts it misses.

Whether a host changed since its record was built is
:mod:`~nova_sched_ext.fit.hoststamp`'s answer, as for the filter's
per-host cache: the stamp pass compares ``hoststamp.stamp`` with the
stamp recorded, and only the hosts whose stamps differ (or that have
none) are asked ``hoststamp.unchanged``, in Python.

When the helper refuses its input the memo is suspect and the arena starts
over; the call is answered by the pure-Python twin
(:func:`nova_sched_ext.fit.engine.with_fallback`, the fit engine's one
fallback rule).

Thread safety: weighers are shared by every request thread; each arena
call holds the arena's lock, and the C call does not keep pointers past
its return.
"""

from array import array
import functools
from itertools import compress
from itertools import repeat
from operator import is_
from operator import ne
import threading

from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import hoststamp
from nova_sched_ext.fit import lowlevel
from nova_sched_ext.fit import pyfit

_NAN = float('nan')
_NAN_ARRAY = array('d', [_NAN])


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
        lowlevel.require()
        self.shapes = tuple(shapes)
        self.shape_weights = tuple(float(w) for w in shape_weights)
        self._packed_shapes = lowlevel.packed_shapes(self.shapes,
                                                     self.shape_weights)
        self._memo_columns = memo_columns
        self._max_hosts = max_hosts
        self._lock = threading.Lock()
        self._requests = {}
        self._clear()

    def _clear(self):
        # host state -> its slot
        self._slot_by_host = {}
        # slot -> the stamp that vouches for its record (see
        # hoststamp.vouching_stamp), the host's version, its packed record
        # bytes (compaction)
        self._stamps = []
        self._versions = []
        self._records = []
        self._capacity = 0
        self._offsets = array('q', [0])
        self._memo = array('d', [_NAN])
        self._new_arena(8)
        self._used = 0
        self._requests.clear()

    def _new_arena(self, size):
        # int64 words, so that every record (a multiple of 8 bytes) starts
        # 8-byte aligned, as the helper requires; written through a byte
        # view.
        self._arena = array('q', bytes(size))
        self._arena_bytes = memoryview(self._arena).cast('B')
        self._arena_size = size

    # -- hosts ---------------------------------------------------------------

    def _grow_slots(self, wanted):
        # The memo is column-major (one column per request shape), so that
        # a request reads its column in slot order.
        old = self._capacity
        capacity = max(wanted, 2 * old, 64)
        cols = self._memo_columns
        offsets = array('q', bytes(8 * capacity))
        memo = _NAN_ARRAY * (capacity * cols)
        if old:
            offsets[:old] = self._offsets[:old]
            for col in range(cols):
                memo[col * capacity:col * capacity + old] = \
                    self._memo[col * old:(col + 1) * old]
        self._offsets, self._memo = offsets, memo
        self._capacity = capacity

    def _write_record(self, slot, record):
        old = self._records[slot] if slot < len(self._records) else None
        if old is not None and len(old) == len(record):
            offset = self._offsets[slot]
        else:
            if self._used + len(record) > self._arena_size:
                self._compact(len(record))
            offset = self._used
            self._used += len(record)
        self._arena_bytes[offset:offset + len(record)] = record
        self._offsets[slot] = offset
        if old is None:
            self._records.append(record)
        else:
            self._records[slot] = record

    def _compact(self, extra):
        # Records that changed size were appended; copy the live ones into
        # a new buffer large enough for them, the next one, and growth.
        live = sum(len(r) for r in self._records)
        self._new_arena(max(2 * (live + extra), 4096))
        used = 0
        for slot, record in enumerate(self._records):
            self._arena_bytes[used:used + len(record)] = record
            self._offsets[slot] = used
            used += len(record)
        self._used = used

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
        # Read before the record is built, as the filter's cache does.
        version = hoststamp.version(host_state)
        # The record is built for one fit run: the weigher places a
        # request as consume_from_request does, whatever the candidates.
        # The host's own cache has it when its stamp vouches for it (the
        # filter built it this request, or the kept host state's warm-up
        # did); else it is built now, as a miss of that cache would.
        record = adapters.prepared_hosts((host_state,),
                                         per_candidate=False)[0].packed
        stamp = hoststamp.vouching_stamp(version)
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

    def _slots_of(self, host_states):
        """The slots of the hosts, storing the ones that changed.

        Two passes over the hosts, in C (``map``, ``compress``; nothing per
        host stays allocated): the slots by host, then each host's stamp
        against the one its record was built at. Reading the stamp fields
        in one pass matters at thousands of hosts, where each pass over
        Nova's ``HostState`` objects is bound by memory latency; and
        comparing rather than hashing them, since Nova hands over new
        ``updated`` objects on every request and hashing an aware datetime
        allocates. Only the hosts that are new, or whose stamps do not
        vouch for them, are looked at in Python.
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
            ne, map(hoststamp.stamp, host_states),
            map(self._stamps.__getitem__, slots)))
        for i in list(suspect):
            host_state, slot = host_states[i], slots[i]
            if not hoststamp.unchanged(self._versions[slot], host_state):
                slots[i] = self._store(host_state, slot)
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
                    self._memo[0:size] = _NAN_ARRAY * size
            column = self._requests[key] = len(self._requests)
        return column

    def weights(self, host_states, request, room_cap=None):
        """NUMASlotWeigher's raw weights of ``host_states`` for a request.

        The same numbers as :func:`nova_sched_ext.fit.engine.slot_weights`
        with ``counts=False`` over :func:`adapters.prepared_hosts` (one fit
        run per host, ``per_candidate=False``). When
        the C helper refuses the input, the arena starts over and the
        pure-Python twin answers (one error logged).

        :param host_states: a list of Nova ``HostState``
        :param request: the request's :class:`~fit.model.Shape`
        :param room_cap: None, or the room mode's cap (0: none)
        """
        if not host_states:
            return []
        return engine.with_fallback(
            functools.partial(self._weights_c, host_states, request,
                              room_cap),
            functools.partial(self._weights_twin, host_states, request,
                              room_cap))

    def _weights_c(self, host_states, request, room_cap):
        """:meth:`weights` in C.

        :raises lowlevel.HelperError: the helper refused the input (the
            arena has started over)
        """
        with self._lock:
            slots = self._slots_of(host_states)
            column = self._column((request, room_cap))
            try:
                return lowlevel.slot_weights_indexed(
                    self._arena, self._used, self._offsets,
                    # No candidate counts: every host is weighed with the
                    # one fit run its record is built for, the run
                    # consume_from_request makes (and the memo serves).
                    len(self._records), slots, None,
                    self._packed_shapes, request, room_cap,
                    memo=self._memo, memo_rows=self._capacity,
                    memo_col=column, memo_cols=self._memo_columns)
            except lowlevel.HelperError:
                # Whatever the memo holds is suspect: start over.
                self._clear()
                raise

    def _weights_twin(self, host_states, request, room_cap):
        prepared = adapters.prepared_hosts(host_states, per_candidate=False)
        return pyfit.slot_weights([p.model for p in prepared], self.shapes,
                                  self.shape_weights, request, room_cap)[2]
