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


"""Nova's compute nodes, services and aggregates, kept current by polls.

:class:`ComputeState` holds what :func:`~nova_sched_ext.cloud.computes.
read_cloud` reads (a :class:`~nova_sched_ext.cloud.computes.Host` per
compute node of the enabled cells, the aggregates, the cells), and
:meth:`ComputeState.refresh` brings it up to date without reading every
record again:

* per cell, one narrow row per compute node (``uuid``, ``created_at``,
  ``updated_at``: :func:`~nova_sched_ext.cloud.computes.node_stamps`),
  then Nova's ``ComputeNodeList.get_all_by_uuids`` of only the nodes that
  are new, whose times moved, or that were read less than ``clock_margin``
  seconds after their last save (a second save in the same second keeps
  the time: MySQL stores it to the second);
* per cell, every ``nova-compute`` service row (narrow: the table's own
  columns), a ``Service`` made again only for a row that changed other
  than by a heartbeat (:data:`HEARTBEAT_COLUMNS`): whether its node can
  be picked (disabled, forced down, up) is judged from the row itself,
  heartbeat included, at every refresh;
* the aggregates, all of them (a few rows per aggregate).

A :class:`~nova_sched_ext.cloud.computes.Host` is made again only when its
node's record, whether its service lets it be picked (there, enabled, up:
``skipped``) or its aggregates changed; otherwise the same object is
kept, so that what was worked out from it (a capacity count) can be kept
too.  A compute
node's record moves whenever the resource tracker sees its usage change:
an instance built, deleted or moved, a resize confirmed.

Not thread-safe by itself: one poller refreshes it; readers take the
:meth:`ComputeState.snapshot` it publishes, which later refreshes do not
change.
"""

import typing

from nova import objects
from nova import servicegroup
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import computes
from nova_sched_ext.compat import nova as nova_compat

LOG = logging.getLogger(__name__)


class Snapshot(typing.NamedTuple):
    """The kept cloud at one refresh: a :class:`~.computes.Cloud` and more.

    ``hosts`` in :func:`~.computes.host_order`; the same ``Host`` object
    as at the last refresh for a node, service and aggregates unchanged.
    """

    hosts: tuple
    aggregates: tuple
    cells: tuple

    def cloud(self):
        return computes.Cloud(hosts=list(self.hosts),
                              aggregates=list(self.aggregates),
                              cells=list(self.cells))


class _Node(typing.NamedTuple):
    compute: typing.Any
    #: (created_at, updated_at), naive UTC
    stamp: tuple
    #: read at least the clock margin after its last save
    trusted: bool


#: What a heartbeat changes in a service's row (the cloud reader's rule).
HEARTBEAT_COLUMNS = computes.HEARTBEAT_COLUMNS


class _Service(typing.NamedTuple):
    row: tuple
    #: the ``Service`` made of the row, or of an earlier one that differs
    #: only by heartbeats (what the count reads of it, in ``HostState``,
    #: does not change with a heartbeat)
    service: typing.Any
    #: the row's columns by name: whether the node can be picked is
    #: judged from them, with the heartbeat of this read
    columns: typing.Any


def _naive(value):
    return value.replace(tzinfo=None) if value is not None else None


def _aggregate_key(aggregates):
    return tuple((agg.id, agg.uuid, agg.name,
                  tuple(sorted((agg.metadata or {}).items())))
                 for agg in aggregates)


class ComputeState(object):
    """The compute nodes of the enabled cells, kept by :meth:`refresh`.

    :param context: an admin context
    :param clock_margin: seconds after its last save before a node read is
        trusted to be its latest record
    """

    def __init__(self, context, clock_margin=2.0):
        self._context = context
        self._margin = clock_margin
        self._service_group = servicegroup.API()
        #: {cell uuid: {node uuid: _Node}}
        self._nodes = {}
        #: {cell uuid: {host: _Service}}
        self._services = {}
        #: {node uuid: (Host, key)}: the key says when to make it again
        self._hosts = {}
        self._snapshot = Snapshot((), (), ())
        #: whether a refresh has completed
        self.ready = False

    def snapshot(self):
        """The cloud as the last refresh found it (see :class:`Snapshot`)."""
        return self._snapshot

    def refresh(self):
        """Read what changed; returns the node UUIDs made again or gone.

        :raises CloudError: a database that cannot be read, in one line
            (the kept state stays as it was)
        """
        cells = cloud_cells.enabled_cells(self._context)
        aggregates = computes.read_aggregates(self._context)
        by_host = computes.aggregates_by_host(aggregates)
        read = dict((cell.uuid, result) for cell, result in
                    cloud_cells.in_cells(self._context, cells, self._read))
        changed = set()
        hosts = {}
        for cell in cells:
            nodes, services = read[cell.uuid]
            self._nodes[cell.uuid] = nodes
            self._services[cell.uuid] = services
            for uuid, node in nodes.items():
                compute = node.compute
                kept_service = services.get(compute.host)
                service = kept_service.service if kept_service else None
                aggs = by_host.get(compute.host, [])
                key = (compute, _aggregate_key(aggs), cell.uuid)
                kept = self._hosts.get(uuid)
                host = kept[0] if kept is not None else None
                if kept is None or not _same_key(kept[1], key):
                    host = computes.make_host(compute, service, aggs, cell)
                    changed.add(uuid)
                skipped = computes.why_not(
                    kept_service.columns if kept_service else None,
                    host.state, self._service_group)
                if host.skipped != skipped and uuid not in changed:
                    # the service came or went, was disabled or enabled,
                    # went down or up: a new object (the old one may be
                    # in use)
                    host = computes.make_host(compute, service, aggs, cell)
                    changed.add(uuid)
                host.skipped = skipped
                hosts[uuid] = (host, key)
        for gone in set(self._nodes) - {cell.uuid for cell in cells}:
            del self._nodes[gone]
            self._services.pop(gone, None)
        removed = set(self._hosts) - set(hosts)
        self._hosts = hosts
        ordered = sorted((host for host, _key in hosts.values()),
                         key=computes.host_order)
        self._snapshot = Snapshot(hosts=tuple(ordered),
                                  aggregates=tuple(aggregates),
                                  cells=tuple(cells))
        self.ready = True
        return frozenset(changed | removed)

    def _read(self, cctxt):
        """One cell: ``({node uuid: _Node}, {host: _Service})``, read now."""
        cell_uuid = cctxt.cell_uuid
        kept_nodes = self._nodes.get(cell_uuid, {})
        kept_services = self._services.get(cell_uuid, {})
        # Before the read: a record is trusted only if it was already
        # this old then.
        read_at = timeutils.utcnow()
        stamps = computes.node_stamps(cctxt)
        todo = []
        nodes = {}
        for uuid, created_at, updated_at in stamps:
            stamp = (_naive(created_at), _naive(updated_at))
            kept = kept_nodes.get(uuid)
            if kept is None or not kept.trusted or kept.stamp != stamp:
                todo.append(uuid)
            else:
                nodes[uuid] = kept
        if todo:
            for compute in objects.ComputeNodeList.get_all_by_uuids(
                    cctxt, todo):
                stamp = (_naive(compute.created_at),
                         _naive(compute.updated_at))
                saved = stamp[1] or stamp[0]
                trusted = (saved is not None and
                           (_naive(read_at) - saved).total_seconds() >=
                           self._margin)
                kept = kept_nodes.get(compute.uuid)
                if (kept is not None and kept.stamp == stamp and
                        _same_record(kept.compute, compute)):
                    # read again only to be sure: the record kept stays
                    compute = kept.compute
                nodes[compute.uuid] = _Node(compute, stamp, trusted)
        services = {}
        settings = None
        for row in computes.service_rows(cctxt):
            values = tuple(row)
            kept = kept_services.get(row.host)
            if kept is None or kept.row != values:
                if settings is None:
                    settings = computes.settings_of_rows(row._fields)
                service = (kept.service if kept is not None and
                           settings(kept.row) == settings(values) else
                           nova_compat.service_from_row(cctxt, row._mapping))
                kept = _Service(values, service, row._mapping)
            services[row.host] = kept
        return nodes, services


def _same_key(old, new):
    # the record itself (a node read again is a new object), then values
    return old[0] is new[0] and old[1:] == new[1:]


def _same_record(old, new):
    try:
        return old.obj_to_primitive() == new.obj_to_primitive()
    except Exception:  # a record that cannot say: not the same
        return False
