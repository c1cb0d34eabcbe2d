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


"""The compute nodes and their services, as nova-scheduler reads them.

* the cells from the API database (:func:`~.cells.enabled_cells`: cell0 and
  disabled cells are never scheduled to), then in every cell at once the
  ``nova-compute`` services and the compute nodes, as
  ``HostManager._get_computes_for_cells`` reads them;
* the host aggregates from the API database, as ``HostManager`` keeps them;
* a ``HostState`` per compute node, filled by Nova's own
  ``HostState.update`` from the compute node, its service and aggregates:
  NUMA topology, PCI stats, allocation ratios and usage are what the
  scheduler's filters see.

A database that does not answer is one line
(:mod:`~nova_sched_ext.cloud.errors`); nothing is written anywhere.
"""

import dataclasses
import operator
import typing

from nova import objects
from nova.scheduler import host_manager
from nova import servicegroup
from oslo_config import cfg
from oslo_log import log as logging
import sqlalchemy as sa

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.compat import nova as nova_compat

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: Why a compute node cannot be picked (the capacity report's
#: ``hosts_skipped``, the defragmentation planner's disabled hosts).
SKIP_NO_SERVICE = 'no_service'
SKIP_SERVICE_DISABLED = 'service_disabled'
SKIP_SERVICE_DOWN = 'service_down'
SKIP_NOT_REPORTING = 'not_reporting'
SKIP_NO_PROVIDER = 'no_resource_provider'

AZ_KEY = 'availability_zone'

COMPUTE_BINARY = 'nova-compute'
_COMPUTE_NODES = nova_compat.compute_nodes_table()
_SERVICES = nova_compat.services_table()


@dataclasses.dataclass
class Host:
    """One compute node the scheduler could pick, with what it is in."""

    #: the ``nova.scheduler.host_manager.HostState``
    state: typing.Any
    #: the ``objects.CellMapping``
    cell: typing.Any
    aggregates: list
    availability_zone: str
    #: why the host cannot be picked (a ``SKIP_*`` reason), or None
    skipped: typing.Optional[str] = None

    @property
    def name(self):
        return self.state.host

    @property
    def nodename(self):
        return self.state.nodename

    @property
    def uuid(self):
        return self.state.uuid

    @property
    def cell_name(self):
        return self.cell.name or self.cell.uuid


class Cloud(typing.NamedTuple):
    """What :func:`read_cloud` found."""

    #: every compute node of the enabled cells, as a :class:`Host` (those
    #: the scheduler cannot pick say why in ``skipped``)
    hosts: list
    #: every host aggregate (``objects.Aggregate``)
    aggregates: list
    #: the enabled cells (``objects.CellMapping``), cell0 left out
    cells: list


def _computes(cctxt):
    services = objects.ServiceList.get_by_binary(
        cctxt, 'nova-compute', include_disabled=True)
    return services, objects.ComputeNodeList.get_all(cctxt)


def host_availability_zone(aggregates):
    """A host's AZ as Nova's ``get_host_availability_zone`` says it."""
    zoned = sorted((agg for agg in aggregates if AZ_KEY in agg.metadata),
                   key=lambda agg: agg.id)
    if zoned:
        return zoned[0].metadata[AZ_KEY]
    return CONF.default_availability_zone


def read_aggregates(context):
    with cloud_cells.database('API database (host aggregates)'):
        return list(objects.AggregateList.get_all(context))


def read_cloud(context):
    """The schedulable hosts of every enabled cell (see :class:`Cloud`).

    :raises CloudError: a database that cannot be read, in one line
    """
    cells = cloud_cells.enabled_cells(context)
    aggregates = read_aggregates(context)
    by_host = aggregates_by_host(aggregates)
    service_group = servicegroup.API()
    hosts = []
    for cell, (services, computes) in cloud_cells.in_cells(context, cells,
                                                           _computes):
        services = {service.host: service for service in services}
        for compute in computes:
            service = services.get(compute.host)
            host = make_host(compute, service, by_host.get(compute.host, []),
                             cell)
            host.skipped = why_not(service, host.state, service_group)
            if host.skipped:
                LOG.debug('Compute node %s (host %s) cannot be picked: %s',
                          compute.hypervisor_hostname, compute.host,
                          host.skipped)
            hosts.append(host)
    hosts.sort(key=host_order)
    return Cloud(hosts=hosts, aggregates=aggregates, cells=cells)


def host_order(host):
    """The order of :attr:`Cloud.hosts`: by host, then node name."""
    return (host.name, host.nodename or '')


def aggregates_by_host(aggregates):
    """``{host name: [aggregate]}``, each host's in the listing's order."""
    by_host = {}
    for agg in aggregates:
        for host in agg.hosts or ():
            by_host.setdefault(host, []).append(agg)
    return by_host


def make_host(compute, service, aggregates, cell):
    """The :class:`Host` of a compute node, its ``skipped`` not yet said.

    Its ``HostState`` is filled by Nova's own ``HostState.update`` from
    the node, its service (None: left empty, as the node is skipped) and
    the host's aggregates.
    """
    state = host_manager.HostState(compute.host, compute.hypervisor_hostname,
                                   cell.uuid)
    if service is not None:
        state.update(compute, dict(service), aggregates, {})
    return Host(state=state, cell=cell, aggregates=aggregates,
                availability_zone=host_availability_zone(aggregates))


def why_not(service, state, service_group):
    """Why the scheduler cannot pick a node at all, or None.

    :param service: the node's ``Service``, or a mapping of its row of the
        services table (what ComputeFilter reads of it, ``disabled`` and
        what the servicegroup driver reads, is in both), or None
    """
    if service is None:
        return SKIP_NO_SERVICE
    # ComputeFilter's checks, in its order.
    if service['disabled']:
        return SKIP_SERVICE_DISABLED
    if not service_group.service_is_up(service):
        return SKIP_SERVICE_DOWN
    if state.uuid is None:
        # HostState ignores a node that has not reported its usage.
        return SKIP_NOT_REPORTING
    return None


def hosts_of_nodes(context, node_uuids):
    """``{compute node uuid: host}`` of the nodes found, from every cell.

    A UUID that is no compute node (a nested resource provider) is left
    out.

    :raises CellUnavailable: a cell does not answer
    """
    results = cloud_cells.in_every_cell(
        context, objects.ComputeNodeList.get_all_by_uuids, node_uuids)
    return {node.uuid: node.host
            for nodes in results.values() for node in nodes}


# --- narrow reads: what changed, without reading every record -------------

def node_stamps(cctxt, compute_uuids=None):
    """``[(uuid, created_at, updated_at)]`` of the cell's live nodes.

    One narrow row per compute node (deleted nodes are not returned, as
    Nova's own query returns none): a node whose times did not move is the
    record read before, unless it was read within the same second as its
    last save (MySQL keeps the time to the second).

    :param cctxt: a context targeted at the cell
    :param compute_uuids: only these nodes; None: every one
    """
    c = _COMPUTE_NODES.c
    query = sa.select(c.uuid, c.created_at, c.updated_at).where(
        c.deleted == 0)
    if compute_uuids is not None:
        query = query.where(c.uuid.in_(compute_uuids))
    engine = nova_compat.cell_engine(cctxt)
    with engine.connect() as conn:
        return conn.execute(query).fetchall()


#: What a heartbeat changes in a service's row (Nova's servicegroup
#: database driver saves ``report_count``; the save stamps the times).  A
#: row that changed in these alone keeps what was made of it: at 10,000
#: computes whose services all report, a poll or a request would otherwise
#: make every ``Service`` again.
HEARTBEAT_COLUMNS = frozenset(('report_count', 'updated_at', 'last_seen_up'))


def settings_of_rows(columns):
    """A function: a service row to its values but the heartbeat's.

    :param columns: the rows' column names (a SQLAlchemy row's ``_fields``)
    """
    return operator.itemgetter(*[
        index for index, name in enumerate(columns)
        if name not in HEARTBEAT_COLUMNS])


def service_rows(cctxt, hosts=None):
    """The live ``nova-compute`` service rows of ``hosts`` (None: all).

    Raw rows (``nova_compat.service_from_row`` makes the ``Service``): a
    heartbeat changes a row every ``report_interval`` seconds, and a row
    that did not change needs no new object.
    """
    c = _SERVICES.c
    query = sa.select(_SERVICES).where(c.deleted == 0,
                                       c.binary == COMPUTE_BINARY)
    if hosts is not None:
        query = query.where(c.host.in_(hosts))
    engine = nova_compat.cell_engine(cctxt)
    with engine.connect() as conn:
        return conn.execute(query).fetchall()
