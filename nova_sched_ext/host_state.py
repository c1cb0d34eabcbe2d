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

"""Host state kept between scheduling requests.

Nova 34's ``HostManager`` builds the state of every candidate host anew
for each request: it reads the candidates' compute nodes and *every*
``nova-compute`` service of each cell, then makes a ``HostState`` per
candidate, its ``NUMATopology`` parsed from JSON and its
``PciDeviceStats`` built. At thousands of hosts that is seconds per
request, and the fit engine's models, cached on the ``HostState``, are
never found again. :class:`KeptHostManager` keeps, per compute node, the
``ComputeNode`` it read and a *base* ``HostState`` built from it, and per
request:

* reads, per cell, one narrow row per candidate compute node (``uuid``,
  ``created_at``, ``updated_at``; deleted nodes are not returned, as Nova's
  own query returns none) and reloads, with Nova's
  ``ComputeNodeList.get_all_by_uuids``, only the nodes it does not hold,
  whose times moved, or that it read less than ``[nova_sched_ext]
  host_state_clock_margin`` seconds after their ``updated_at`` (a second
  save in the same second keeps the time: MySQL stores it to the second,
  and each compute writes it from its own clock);
* reads the ``nova-compute`` service rows of the candidates' hosts only,
  and rebuilds the ``Service`` of a row that changed other than by a
  heartbeat (a row a heartbeat changed gets its new heartbeat values in
  the kept service's dict, which is all a ``HostState`` keeps of it);
* gives the request a **HostState of its own** per candidate
  (:class:`KeptHostState`): a copy of the base, with the service, the
  aggregates and the instances Nova's ``HostManager`` would give it
  (aggregates and instances as Nova reads them, from what the scheduler
  keeps of ``update_aggregates`` and ``update_instance_info``, or from the
  database when the computes do not send their instances).

Why the state is never older or other than Nova's: every field of a
request's ``HostState`` comes from the same rows Nova would read for that
request (the kept ``ComputeNode`` is used only while its row provably did
not change since it was read), and from the same aggregate and instance
records. What a request changes (``consume_from_request`` when it claims,
the limits the filters set, ``updated`` reset after a failed multi-create)
changes its own copy only: the base, and the next request, never see it,
exactly as Nova's next request reads the compute node again. The copy
shares the base's ``NUMATopology`` (``consume_from_request`` replaces it,
never changes it) and ``PciDeviceStats`` until the request consumes PCI
devices, when the copy gets a new one built from the compute node, as
Nova builds it. ``[nova_sched_ext] host_state_full_refresh_interval``
drops everything kept now and then, and ``SIGHUP`` (Nova's reset) too.

The fit engine's caches on a ``HostState`` (attributes whose name starts
with :data:`SHARED_CACHE_PREFIX`, vouched for by the host's stamp, see
:mod:`nova_sched_ext.fit.hoststamp`) are written through to the base by a
copy the request has not consumed from, and the copies of one compute
node are equal (and hash alike) by the node's UUID, so that
NUMASlotWeigher's arena finds a host's slot again. Within a request each
node has one copy, so equality there is identity, as Nova expects.

Thread safety: each request builds its own copies; the kept records are
replaced, never changed, under one lock (:class:`_KeptRecords`).
"""

import collections
import operator
import threading
import time

from nova import objects
from nova.pci import stats as pci_stats
from nova.scheduler import host_manager
from nova.scheduler import weights
from nova import weights as nova_weights
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import computes as cloud_computes
from nova_sched_ext.cloud import errors as cloud_errors
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf
from nova_sched_ext import filter_handler
from nova_sched_ext.fit import adapters as fit_adapters

LOG = logging.getLogger(__name__)

#: The attribute names of caches the package's plugins keep on a
#: ``HostState``, vouched for by the host's stamp: a request's copy writes
#: them through to the kept base.
SHARED_CACHE_PREFIX = '_nova_sched_ext'


class KeptHostState(host_manager.HostState):
    """One request's ``HostState`` of a kept compute node.

    Made by :meth:`from_base`, never by ``__init__``: a copy of the kept
    base's fields, with the containers a request changes made its own.
    """

    @classmethod
    def from_base(cls, base):
        state = cls.__new__(cls)
        fields = state.__dict__
        fields.update(base.__dict__)
        # What Nova's fresh HostState starts every request with; the
        # filters (limits) and the manager (allocation candidates) fill
        # them for this request only.
        fields['limits'] = {}
        fields['allocation_candidates'] = []
        fields['_kept_base'] = base
        fields['_kept_consumed'] = False
        return state

    def __setattr__(self, name, value):
        self.__dict__[name] = value
        if (name.startswith(SHARED_CACHE_PREFIX) and
                not self.__dict__['_kept_consumed']):
            self.__dict__['_kept_base'].__dict__[name] = value

    def consume_from_request(self, spec_obj):
        fields = self.__dict__
        fields['_kept_consumed'] = True
        base = fields['_kept_base']
        if (self.pci_stats is base.pci_stats and
                spec_obj.obj_attr_is_set('pci_requests') and
                spec_obj.pci_requests and spec_obj.pci_requests.requests):
            # apply_requests changes the pools in place: this request's
            # own, as Nova builds them from the compute node.
            compute = base._kept_compute
            self.pci_stats = pci_stats.PciDeviceStats(
                base.numa_topology, stats=compute.pci_device_pools)
        return super().consume_from_request(spec_obj)

    # The copies of one node are one host to the package's caches; within
    # a request there is one copy per node, so this is identity there.
    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not KeptHostState or self.uuid is None:
            return False
        return self.uuid == other.uuid

    def __hash__(self):
        return hash(self.uuid) if self.uuid is not None else id(self)


class _Kept(object):
    """What is kept of one compute node: its record, and the base state."""

    __slots__ = ('compute', 'stamp', 'trusted', 'read_at', 'base')

    def __init__(self, compute, stamp, trusted, read_at, base=None):
        self.compute = compute
        #: (created_at, updated_at) of the row read, naive UTC
        self.stamp = stamp
        #: whether the row was read long enough after its update
        self.trusted = trusted
        #: monotonic time just before the row was read
        self.read_at = read_at
        self.base = base


def _read_records(cctxt, uuids, margin):
    """``{uuid: _Kept}`` of the cell's live compute nodes ``uuids``.

    A record is trusted when its row was at least ``margin`` seconds old
    (by ``updated_at``, else ``created_at``) when the read began.
    """
    # Before the read: a row is trusted only if it was already this old
    # then.
    read_at = timeutils.utcnow()
    read_mono = time.monotonic()
    fresh = {}
    for compute in objects.ComputeNodeList.get_all_by_uuids(cctxt, uuids):
        stamp = _stamp_of(compute)
        fresh[compute.uuid] = _Kept(compute, stamp,
                                    _old_enough(stamp, read_at, margin),
                                    read_mono)
    return fresh


def _old_enough(stamp, now, margin):
    """Whether a row of ``stamp`` was at least ``margin`` s old at ``now``."""
    changed = stamp[1] or stamp[0]
    return changed is not None and (now - changed).total_seconds() >= margin


class _KeptService(object):
    """A service row and what a request's ``HostState`` gets of it."""

    __slots__ = ('row', 'service', 'as_dict')

    def __init__(self, row, service, as_dict=None):
        self.row = row
        #: the ``Service`` made of the row, or of an earlier row that
        #: differs only by heartbeats (then ``as_dict`` has this row's)
        self.service = service
        # What HostState.update stores; read-only, so shared.
        self.as_dict = (as_dict if as_dict is not None else
                        host_manager.ReadOnlyDict(dict(service)))

    @classmethod
    def of_row(cls, cctxt, row, kept, settings):
        """What is kept of ``row``; ``kept``: of the host's previous row.

        A row that changed only by a heartbeat
        (:data:`~nova_sched_ext.cloud.computes.HEARTBEAT_COLUMNS`) keeps
        the ``Service`` made before, and its dict gets this row's
        heartbeat values, coerced by the ``Service``'s own fields: the
        dict Nova's ``dict(Service)`` of this row would be, without
        making a ``Service`` (about 0.1 ms each, for every candidate
        whose service reported since the host was last a candidate).
        """
        values = tuple(row)
        if kept is None or settings(kept.row) != settings(values):
            return cls(values, nova_compat.service_from_row(cctxt,
                                                            row._mapping))
        service = kept.service
        as_dict = dict(kept.as_dict)
        fields = type(service).fields
        mapping = row._mapping
        for name in cloud_computes.HEARTBEAT_COLUMNS:
            if name in as_dict:
                as_dict[name] = fields[name].coerce(service, name,
                                                    mapping[name])
        return cls(values, service, host_manager.ReadOnlyDict(as_dict))


def _fresh_services(cctxt, rows, services):
    """``{host: _KeptService}`` of the ``rows`` that differ from ``services``.

    :param rows: service rows as read
    :param services: ``{host: _KeptService}`` kept so far
    """
    fresh = {}
    settings = None
    for row in rows:
        kept = services.get(row.host)
        if kept is None or kept.row != tuple(row):
            if settings is None:
                settings = cloud_computes.settings_of_rows(row._fields)
            fresh[row.host] = _KeptService.of_row(cctxt, row, kept,
                                                  settings)
    return fresh


class _KeptRecords(object):
    """The kept records of every cell, and the lock they are kept under.

    ``nodes`` and ``services`` are replaced by empty ones when everything
    kept is dropped (:meth:`drop`). Who reads records to keep them takes
    the pair as it stands (:meth:`current`; a request takes the two
    attributes without the lock) and keeps what it read with :meth:`keep`,
    which keeps nothing when the pair was replaced meanwhile: a read that
    began before a drop is not kept after it.
    """

    def __init__(self):
        self._lock = threading.Lock()
        #: cell uuid -> compute node uuid -> _Kept
        self.nodes = collections.defaultdict(dict)
        #: cell uuid -> host -> _KeptService
        self.services = collections.defaultdict(dict)
        #: monotonic time of the last drop (or of the start)
        self.since = time.monotonic()

    def current(self):
        """``(nodes, services)`` as they stand, to read and keep into."""
        with self._lock:
            return self.nodes, self.services

    def keep(self, seen, cell_uuid, nodes=None, services=None):
        """Keep what was read of a cell, unless dropped meanwhile.

        :param seen: ``(nodes, services)`` as the read began with them
        :param nodes: ``{uuid: _Kept}`` read, or None
        :param services: ``{host: _KeptService}`` read, or None
        :returns: False when the records were dropped since ``seen``
            (then nothing is kept)
        """
        with self._lock:
            if self._dropped_since(seen):
                return False
            if nodes is not None:
                self.nodes[cell_uuid].update(nodes)
            if services is not None:
                self.services[cell_uuid].update(services)
            return True

    def forget_gone(self, seen, cell_uuid, node_uuids, hosts):
        """Forget the cell's nodes and hosts but ``node_uuids`` and ``hosts``.

        Nothing, when the records were dropped since ``seen``. A node
        created after the poll that saw ``node_uuids`` and already read by
        a request is read again by the next one: harmless.
        """
        with self._lock:
            if self._dropped_since(seen):
                return
            nodes = self.nodes.get(cell_uuid, {})
            for uuid in [u for u in nodes if u not in node_uuids]:
                del nodes[uuid]
            services = self.services.get(cell_uuid, {})
            for host in [h for h in services if h not in hosts]:
                del services[host]

    def _dropped_since(self, seen):
        """Whether the pair ``seen`` was replaced since; under the lock."""
        return self.nodes is not seen[0] or self.services is not seen[1]

    def drop(self):
        """Forget every record: the next request reloads its hosts."""
        with self._lock:
            self.nodes = collections.defaultdict(dict)
            self.services = collections.defaultdict(dict)
            self.since = time.monotonic()

    def node_uuids(self, host):
        """The UUIDs of the compute nodes of ``host`` kept here."""
        with self._lock:
            cells = list(self.nodes.values())
        return sorted(uuid for nodes in cells
                      for uuid, kept in list(nodes.items())
                      if kept.compute.host == host)


def _naive(value):
    return value.replace(tzinfo=None) if value is not None else None


def _stamp_of(compute):
    return (_naive(compute.created_at), _naive(compute.updated_at))


# The narrow reads are the cloud reader's (one reader of the cloud); the
# names stay here for the code and tests that use them.
_node_stamps = cloud_computes.node_stamps
_service_rows = cloud_computes.service_rows


def _all_service_rows(cctxt):
    """Every live ``nova-compute`` service row of the cell."""
    return cloud_computes.service_rows(cctxt, None)


#: compute nodes read per query by the warm-up
_WARM_UP_BATCH = 500


def _warm_order(kept, stamp, now, margin, read_before):
    """When the warm-up reads a polled node, as a sort key; None: not now.

    Never read first, then changed or not trusted, then read before
    ``read_before`` (monotonic; None: never again for its age), oldest
    first.  A row changed less than ``margin`` seconds before ``now``
    waits: read now, its record would not be trusted, and each request
    would read it again all the same.
    """
    if kept is not None and kept.trusted and \
            _same_or_newer(kept.stamp, stamp):
        # Asked of every node at every poll: most are this one, judged
        # without the date arithmetic (a trusted row was old enough).
        if read_before is not None and kept.read_at < read_before:
            return (2, kept.read_at)
        return None
    if not _old_enough(stamp, now, margin):
        return None
    return (0, 0.0) if kept is None else (1, 0.0)


def _same_or_newer(kept, polled):
    """Whether a kept record's stamp is the polled row's, or later.

    A record read after the poll may be newer than the stamp the poll
    saw; it is not read again for that.
    """
    if kept == polled:
        return True
    return (kept[0] == polled[0] and kept[1] is not None and
            polled[1] is not None and kept[1] > polled[1])


class _Polled(object):
    """One cell's rows as the last poll read them."""

    __slots__ = ('stamps', 'services', 'at')

    def __init__(self, stamps, services, at):
        #: {compute node uuid: (created_at, updated_at)}, live nodes
        self.stamps = stamps
        #: {host: service row}, live nova-compute services
        self.services = services
        #: monotonic time of the poll
        self.at = at


class _PolledRows(object):
    """Every enabled cell's node stamps and service rows, as last polled."""

    def __init__(self):
        #: {cell uuid: _Polled} of the last poll
        self.by_cell = {}
        #: the compute node UUIDs the last poll saw, in every cell
        self.known = frozenset()

    def read(self, context, cells):
        """Read ``cells``' rows now, keep and return them by cell UUID.

        A cell that does not answer is left out (its requests read their
        own rows) with a warning.
        """
        def read(cctxt):
            stamps = {row.uuid: (_naive(row.created_at),
                                 _naive(row.updated_at))
                      for row in _node_stamps(cctxt, None)}
            services = {row.host: row for row in _all_service_rows(cctxt)}
            return _Polled(stamps, services, time.monotonic())

        polled = {}
        for cell, result in cloud_cells.answers(context, cells, read):
            if isinstance(result, cloud_errors.CellUnavailable):
                LOG.warning('Kept host state: cannot poll cell %s (%s); '
                            'its requests read their rows.',
                            result.cell_uuid, result)
                continue
            polled[cell.uuid] = result
        # Nova asks every cell for every candidate: a node another cell's
        # poll saw is not this cell's to read.
        self.known = frozenset(
            uuid for rows in polled.values() for uuid in rows.stamps)
        self.by_cell = polled
        return polled

    def rows(self, cell_uuid):
        """One cell's ``_Polled``, unless unpolled or too old.

        None when the cell was not polled, or its rows are older than
        ``kept_state_max_age``.
        """
        polled = self.by_cell.get(cell_uuid)
        if polled is None:
            return None
        if (time.monotonic() - polled.at >
                conf.CONF.nova_sched_ext.kept_state_max_age):
            return None
        return polled


class _WarmUp(object):
    """The kept records read and built in the poller's thread.

    With ``[nova_sched_ext] host_state_warm_up_nodes``, after each poll
    (:meth:`KeptHostManager.poll_rows`), so that no request pays for a
    host's first sight. What a request would build is built the same way
    (:func:`_read_records`, the manager's ``_new_base``,
    ``adapters.prepared_hosts``) and kept in the same records, so a
    request finds it as if an earlier request had read it.
    """

    def __init__(self, manager, records):
        #: the manager whose cells are warmed and who builds a base
        self._manager = manager
        self._records = records
        #: whether the poller warms the state (then it also reads each
        #: record again when host_state_full_refresh_interval old)
        self.warming = False
        # Build the packed fit models too when a plugin reads them.
        self.builds_fit_models = any(
            getattr(plugin, 'READS_FIT_MODELS', False)
            for plugin in (list(getattr(manager, 'enabled_filters', ())) +
                           list(getattr(manager, 'weighers', ()))))

    def run(self, context, polled, limit):
        """Read and build now what the next requests would.

        After the poll that read ``polled`` (``{cell uuid: _Polled}``):
        the ``Service`` of each polled service row that changed, and the
        record, base ``HostState`` and packed fit model of at most
        ``limit`` compute nodes: first those never read, then those whose
        row changed (once it is ``host_state_clock_margin`` old, when the
        record read is trusted), then those read
        ``host_state_full_refresh_interval`` ago, oldest first.  Records
        of nodes the poll no longer saw are forgotten.

        :returns: how many nodes are still due
        """
        self.warming = True
        opts = conf.CONF.nova_sched_ext
        margin = opts.host_state_clock_margin
        interval = opts.host_state_full_refresh_interval
        seen = self._records.current()
        kept_nodes, kept_services = seen
        cells = {cell.uuid: cell for cell in self._manager.enabled_cells}
        now = timeutils.utcnow()
        read_before = (time.monotonic() - interval) if interval else None
        due = []
        for cell_uuid, rows in polled.items():
            cell = cells.get(cell_uuid)
            if cell is None:
                continue
            nodes = kept_nodes.get(cell_uuid, {})
            services = kept_services.get(cell_uuid, {})
            self._records.forget_gone(seen, cell_uuid, rows.stamps,
                                      rows.services)
            self._build_services(context, cell, rows, services, seen)
            for uuid, stamp in rows.stamps.items():
                order = _warm_order(nodes.get(uuid), stamp, now, margin,
                                    read_before)
                if order is not None:
                    due.append((order, cell_uuid, uuid))
        due.sort(key=operator.itemgetter(0))
        by_cell = collections.defaultdict(list)
        for _order, cell_uuid, uuid in due[:limit]:
            by_cell[cell_uuid].append(uuid)
        for cell_uuid, uuids in by_cell.items():
            for start in range(0, len(uuids), _WARM_UP_BATCH):
                if not self._read_nodes(context, cells[cell_uuid],
                                        uuids[start:start + _WARM_UP_BATCH],
                                        margin, seen):
                    return len(due)
        return max(len(due) - limit, 0)

    def _build_services(self, context, cell, rows, services, seen):
        """The kept ``Service`` of every polled row that changed."""
        [(_cell, result)] = cloud_cells.answers(
            context, [cell], _fresh_services, list(rows.services.values()),
            services)
        if isinstance(result, cloud_errors.CellUnavailable):
            LOG.debug('Kept host state: the warm-up could not build the '
                      'services of cell %s: %s', cell.uuid, result)
            return
        if result:
            self._records.keep(seen, cell.uuid, services=result)

    def _read_nodes(self, context, cell, uuids, margin, seen):
        """Read ``uuids`` of ``cell``, build their bases, keep them.

        :returns: False when the kept state was dropped meanwhile, or the
            cell did not answer (the rest waits for the next poll)
        """
        [(_cell, fresh)] = cloud_cells.answers(context, [cell],
                                               _read_records, uuids, margin)
        if isinstance(fresh, cloud_errors.CellUnavailable):
            LOG.debug('Kept host state: the warm-up could not read the '
                      'compute nodes of cell %s: %s', cell.uuid, fresh)
            return False
        for uuid, kept in list(fresh.items()):
            try:
                kept.base = self._manager._new_base(kept.compute, cell.uuid)
            except Exception:
                # Left to the request, which fails on it as Nova's would.
                LOG.debug('Kept host state: the warm-up could not build '
                          'the state of compute node %s.', uuid,
                          exc_info=True)
                del fresh[uuid]
        if self.builds_fit_models:
            bases = [kept.base for kept in fresh.values()]
            try:
                fit_adapters.prepared_hosts(bases, per_candidate=False)
            except Exception:
                # A request builds it (and says what is wrong) instead.
                LOG.debug('Kept host state: the warm-up could not build '
                          'the fit models of %d node(s).', len(bases),
                          exc_info=True)
        return self._records.keep(seen, cell.uuid, nodes=fresh)


class _CellRead(object):
    """One request's read of one cell: what changed since it was kept.

    Called with the cell's context (``cloud_cells.answers``), returns
    ``(computes, fresh, found, fresh_services)``: the ``_Kept`` of every
    candidate in the cell, those read again, the service of each of their
    hosts, and the services read again.  A candidate is read again when
    it is not kept, not trusted, its ``created_at``/``updated_at`` moved,
    or it was read before ``read_before``.  With ``compute_uuids`` the
    stamps and service rows come from the poller's last read of the cell
    (``polled_rows(cell_uuid)``) when it has one; a candidate or host it
    did not see is read here.

    :param seen: the ``(nodes, services)`` pair of ``_KeptRecords`` the
        request started with
    """

    def __init__(self, seen, compute_uuids, polled_rows, polled_known,
                 read_before, margin):
        self.kept_nodes, self.kept_services = seen
        self.compute_uuids = compute_uuids
        self.polled_rows = polled_rows
        self.polled_known = polled_known
        self.read_before = read_before
        self.margin = margin

    def __call__(self, cctxt):
        cell_uuid = cctxt.cell_uuid
        nodes = self.kept_nodes.get(cell_uuid, {})
        services = self.kept_services.get(cell_uuid, {})
        polled = (self.polled_rows(cell_uuid)
                  if self.compute_uuids is not None else None)
        stamps, same = self._stamps(cctxt, polled)
        fresh_uuids = [
            uuid for uuid, created_at, updated_at in stamps
            if self._read_again(nodes.get(uuid), same,
                                (created_at, updated_at))]
        fresh = (_read_records(cctxt, fresh_uuids, self.margin)
                 if fresh_uuids else {})
        computes = []
        for uuid, _created, _updated in stamps:
            if uuid in fresh:
                computes.append(fresh[uuid])
            elif uuid not in fresh_uuids:
                computes.append(nodes[uuid])
            # else: deleted between the two reads, as Nova would not
            # have returned it.
        hosts = sorted({kept.compute.host for kept in computes})
        rows = self._service_rows(cctxt, polled, hosts)
        fresh_services = _fresh_services(cctxt, rows, services)
        found = {row.host: fresh_services.get(row.host) or
                 services[row.host] for row in rows}
        return computes, fresh, found, fresh_services

    def _stamps(self, cctxt, polled):
        """The candidates' ``(uuid, created_at, updated_at)``; the test."""
        if polled is None:
            return _node_stamps(cctxt, self.compute_uuids), operator.eq
        stamps = [(uuid,) + polled.stamps[uuid]
                  for uuid in self.compute_uuids if uuid in polled.stamps]
        unseen = [uuid for uuid in self.compute_uuids
                  if uuid not in polled.stamps and
                  uuid not in self.polled_known]
        if unseen:
            stamps += list(_node_stamps(cctxt, unseen))
        return stamps, _same_or_newer

    def _read_again(self, kept, same, stamp):
        return (kept is None or not kept.trusted or
                not same(kept.stamp, stamp) or
                (self.read_before is not None and
                 kept.read_at < self.read_before))

    @staticmethod
    def _service_rows(cctxt, polled, hosts):
        if not hosts:
            return ()
        if polled is None:
            return _service_rows(cctxt, hosts)
        rows = [polled.services[host] for host in hosts
                if host in polled.services]
        unseen = [host for host in hosts if host not in polled.services]
        if unseen:
            rows += list(_service_rows(cctxt, unseen))
        return rows


class KeptHostManager(host_manager.HostManager):
    """Nova's ``HostManager``, its host state kept between requests."""

    def __init__(self):
        super().__init__()
        self._init_kept()

    @classmethod
    def adopt(cls, manager):
        """Turn a ``HostManager`` Nova built into a kept one, in place.

        Nova's ``SchedulerManager`` builds its ``HostManager`` itself,
        which loads the aggregates and starts loading every instance;
        building a second one would do that twice.
        """
        manager.__class__ = cls
        manager._init_kept()
        return manager

    def _init_kept(self):
        self._records = _KeptRecords()
        # the rows of poll_rows (kept candidates)
        self._polled = _PolledRows()
        self._warm_up = _WarmUp(self, self._records)
        #: nodes the last warm-up left for the next polls
        self.warm_up_pending = 0
        filter_handler.quicken(self)
        if type(self.weight_handler) is weights.HostWeightHandler:
            # Nova's loader finds weighers next to the handler's module:
            # turned, not made, as the manager itself
            self.weight_handler.__class__ = QuietHostWeightHandler

    def poll_rows(self, context):
        """Read every enabled cell's node stamps and service rows now.

        With ``[nova_sched_ext] kept_candidates`` the kept provider
        state's poller calls this every poll: the requests until the next
        poll take the candidates' ``created_at``/``updated_at`` and their
        hosts' service rows from it, instead of reading them per request
        (a candidate or host the poll did not see is read as before).  A
        change is then seen at most one poll interval late; rows older
        than ``kept_state_max_age`` are not used.  A cell that does not
        answer is read per request.  With ``host_state_warm_up_nodes``,
        the warm-up (:class:`_WarmUp`) then reads and builds what the next
        requests would; ``warm_up_pending`` is what it left for the next
        polls.
        """
        polled = self._polled.read(context, list(self.enabled_cells))
        limit = conf.CONF.nova_sched_ext.host_state_warm_up_nodes
        if limit:
            self.warm_up_pending = self._warm_up.run(context, polled, limit)

    def drop_kept_state(self):
        """Forget every kept record: the next request reloads its hosts."""
        self._records.drop()

    def node_uuids(self, host):
        """The UUIDs of the compute nodes of ``host`` kept here."""
        return self._records.node_uuids(host)

    def refresh_cells_caches(self):
        super().refresh_cells_caches()
        if hasattr(self, '_records'):
            # SIGHUP: the cells may have changed; start over.
            self.drop_kept_state()

    def _maybe_drop_all(self):
        """The full refresh, when the poller does not read records again.

        :returns: the age in seconds past which a request reads a kept
            record again, or None
        """
        opts = conf.CONF.nova_sched_ext
        interval = opts.host_state_full_refresh_interval
        if not interval:
            return None
        if self._warm_up.warming:
            # The poller reads each record again when it is this old; one
            # it has not (it fell behind, or stopped) is read here.
            return interval + opts.kept_state_max_age
        if time.monotonic() - self._records.since >= interval:
            LOG.debug('Dropping the kept host state after %d s: this '
                      'request reloads every candidate.', interval)
            self.drop_kept_state()
        return None

    # -- the refresh ------------------------------------------------------

    def _get_computes_for_cells(self, context, cells, compute_uuids):
        """Nova's answer, read from the rows that changed.

        The same ``(compute nodes by cell uuid, services by host)`` as
        ``HostManager._get_computes_for_cells``, the ``ComputeNode``
        objects kept while their rows are unchanged; each service is the
        read-only dict a ``HostState`` keeps of Nova's ``Service`` of the
        row (``dict(Service)``), kept while the row is unchanged and
        made without a ``Service`` when a heartbeat alone changed it.
        """
        max_read_age = self._maybe_drop_all()
        # Without the lock: a pair a drop apart keeps nothing (keep).
        seen = (self._records.nodes, self._records.services)
        targeted_operation = _CellRead(
            seen, compute_uuids,
            polled_rows=self._polled.rows, polled_known=self._polled.known,
            read_before=(time.monotonic() - max_read_age
                         if max_read_age is not None else None),
            margin=conf.CONF.nova_sched_ext.host_state_clock_margin)
        compute_nodes = collections.defaultdict(list)
        services = {}
        for cell, result in cloud_cells.answers(context, cells,
                                                targeted_operation):
            if isinstance(result, cloud_errors.CellUnavailable):
                # As Nova's HostManager: this request goes on without the
                # cell's hosts.
                LOG.warning('Failed to get computes for cell %s: %s',
                            result.cell_uuid, result)
            else:
                cell_uuid = cell.uuid
                computes, fresh, found, fresh_services = result
                # Unless dropped meanwhile: keep what was read.
                self._records.keep(seen, cell_uuid, nodes=fresh,
                                   services=fresh_services)
                compute_nodes[cell_uuid].extend(
                    kept.compute for kept in computes)
                # The service as the request's HostState gets it (the
                # dict of Nova's Service of the row read), which is what
                # Nova's _get_host_states takes of a Service: dict().
                services.update((host, kept.as_dict)
                                for host, kept in found.items())
        return compute_nodes, services

    def _get_host_states(self, context, compute_nodes, services):
        """Nova's generator of ``HostState``, one copy per kept base.

        What ``HostManager._get_host_states`` gives, field by field: the
        compute node's fields from the kept base built from the same
        ``ComputeNode``, then the service, aggregates and instances as
        Nova sets them.
        """
        host_state_map = {}
        seen_nodes = set()
        for cell_uuid, computes in compute_nodes.items():
            kept_nodes = self._records.nodes.get(cell_uuid, {})
            for compute in computes:
                service = services.get(compute.host)
                if not service:
                    LOG.warning(
                        'No compute service record found for host %(host)s',
                        {'host': compute.host})
                    continue
                host = compute.host
                node = compute.hypervisor_hostname
                state_key = (host, node)
                if state_key in host_state_map:
                    # As Nova: the later record of a (host, node) wins.
                    state = host_state_map[state_key]
                    state.update(compute, dict(service))
                else:
                    base = self._base_state(kept_nodes.get(compute.uuid),
                                            compute, cell_uuid)
                    state = host_state_map[state_key] = \
                        KeptHostState.from_base(base)
                    if not isinstance(service, host_manager.ReadOnlyDict):
                        # A Service (a caller's own mapping).
                        service = host_manager.ReadOnlyDict(dict(service))
                    fields = state.__dict__
                    fields['service'] = service
                fields = state.__dict__
                fields['aggregates'] = nova_compat.host_aggregates(self, host)
                fields['instances'] = nova_compat.host_instances(
                    self, context, compute)
                seen_nodes.add(state_key)
        return (host_state_map[key] for key in seen_nodes)

    def _base_state(self, kept, compute, cell_uuid):
        """The base ``HostState`` of ``compute``, built once per record."""
        if kept is not None and kept.compute is compute:
            base = kept.base
            if base is None:
                base = kept.base = self._new_base(compute, cell_uuid)
            return base
        # A record this manager no longer keeps (dropped meanwhile).
        return self._new_base(compute, cell_uuid)

    def _new_base(self, compute, cell_uuid):
        base = self.host_state_cls(compute.host, compute.hypervisor_hostname,
                                   cell_uuid, compute=compute)
        base.update(compute)
        base._kept_compute = compute
        return base


#: Nova's weighing logs to it
_WEIGHTS_LOG = logging.getLogger(nova_weights.__name__)


class QuietHostWeightHandler(weights.HostWeightHandler):
    """Nova's weight handler, without its debug lines when they are off.

    Nova's ``BaseWeightHandler.get_weighed_objects`` (Nova 34's) builds
    three dicts per weigher for its debug lines, one entry per host with
    an f-string of the multiplier and weight, whether DEBUG is on or not,
    and asks each weigher's ``weight_multiplier`` per host (an option
    read through oslo.config, a few microseconds each).  At 1,000
    candidates and Nova's 13 weighers that is most of the weighing's
    time.  With ``nova.weights`` logging at DEBUG, Nova's own method
    runs, lines and all; otherwise :func:`weighed_objects`: the same
    arithmetic in the same order and the same stable sort, the
    multiplier of Nova's own weighers asked once per set of aggregates.
    The kept host manager weighs with it.
    """

    def get_weighed_objects(self, weighers, obj_list, weighing_properties):
        if _WEIGHTS_LOG.isEnabledFor(logging.DEBUG):
            return super().get_weighed_objects(weighers, obj_list,
                                               weighing_properties)
        return weighed_objects(self.object_class, weighers, obj_list,
                               weighing_properties)


def weighed_objects(object_class, weighers, obj_list, weighing_properties):
    """``BaseWeightHandler.get_weighed_objects`` without the debug lines.

    Each weigher's weights, normalized by ``nova.weights.normalize``,
    times its ``weight_multiplier`` of each host, added to the host's
    weight; the multiplier of Nova's own weighers, a function of the
    host's aggregates and an option, is asked once per set of aggregates
    (:func:`nova_sched_ext.compat.nova.multiplier_reads_aggregates_only`).

    :returns: the weighed objects, heaviest first, as Nova's handler
        returns them
    """
    weighed = [object_class(obj, 0.0) for obj in obj_list]
    if len(weighed) <= 1:
        return weighed
    for weigher in weighers:
        weights = weigher.weigh_objects(weighed, weighing_properties)
        normalized = nova_weights.normalize(
            weights, minval=weigher.minval, maxval=weigher.maxval)
        multiplier = weigher.weight_multiplier
        if nova_compat.multiplier_reads_aggregates_only(weigher):
            multiplier = _by_aggregates(multiplier)
        for obj, weight in zip(weighed, normalized):
            obj.weight += multiplier(obj.obj) * weight
    return sorted(weighed, key=operator.attrgetter('weight'), reverse=True)


def _by_aggregates(weight_multiplier):
    """``weight_multiplier`` asked once per set of aggregate objects.

    For one weighing: within it the hosts' aggregates are the same
    objects (the host manager's), and the option does not change.  A
    Nova weigher's multiplier reads an option through oslo.config, a few
    microseconds per host and weigher, which is most of the weighing.
    """
    memo = {}

    def multiplier(host):
        key = tuple(map(id, host.aggregates))
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = weight_multiplier(host)
            return value
    return multiplier
