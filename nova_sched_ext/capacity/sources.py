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


"""Read the cloud as nova-scheduler reads it.

* the cells from the API database (``CellMappingList``; cell0 and disabled
  cells are never scheduled to), then in every cell at once the
  ``nova-compute`` services and the compute nodes, as
  ``HostManager._get_computes_for_cells`` reads them;
* the host aggregates from the API database, as ``HostManager`` keeps them;
* a ``HostState`` per compute node, filled by Nova's own
  ``HostState.update`` from the compute node, its service and aggregates:
  NUMA topology, PCI stats, allocation ratios and usage are what the
  scheduler's filters see;
* the flavors from the API database.

Database errors become :class:`~nova_sched_ext.capacity.errors.CapacityError`
with one line saying which database; nothing is written anywhere.
"""

import contextlib
import dataclasses
import re
import typing

from nova import context as nova_context
from nova import exception as nova_exc
from nova import objects
from nova.scheduler import host_manager
from nova import servicegroup
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
import oslo_messaging
import sqlalchemy.exc

from nova_sched_ext.capacity import errors

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: Why a compute node is not counted (the report's ``hosts_skipped``).
SKIP_NO_SERVICE = 'no_service'
SKIP_SERVICE_DISABLED = 'service_disabled'
SKIP_SERVICE_DOWN = 'service_down'
SKIP_NOT_REPORTING = 'not_reporting'
SKIP_NO_PROVIDER = 'no_resource_provider'

AZ_KEY = 'availability_zone'

#: SQLAlchemy's link to its error pages, noise in a one-line message
_SQLA_HINT = re.compile(r'\s*\(Background on this error at: [^)]*\)')


@dataclasses.dataclass
class Host:
    """One compute node the scheduler could pick, with what it is in."""

    #: the ``nova.scheduler.host_manager.HostState``
    state: typing.Any
    #: the ``objects.CellMapping``
    cell: typing.Any
    aggregates: list
    availability_zone: str
    #: why the host is not counted (a ``SKIP_*`` reason), or None
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


def _short(exc):
    text = _SQLA_HINT.sub('', ' '.join(str(exc).split())).strip()
    text = text or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + '...'


#: Errors of a database that cannot be reached or read.
DB_ERRORS = (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError)


@contextlib.contextmanager
def database(what):
    """Turn the errors of reading ``what`` into one-line CapacityErrors."""
    try:
        yield
    except db_exc.CantStartEngineError as exc:
        raise errors.ConfigError(
            'cannot use the %s: %s (check the [api_database] and '
            '[database] connection options of nova.conf)'
            % (what, _short(exc))) from None
    except DB_ERRORS as exc:
        raise errors.BackendUnavailable(
            'cannot read the %s: %s' % (what, _short(exc))) from None


def register_transport_options(conf=CONF):
    """Register ``[DEFAULT] transport_url`` & co. of oslo.messaging.

    A cell mapping formats its transport URL with ``[DEFAULT]
    transport_url`` when it is loaded; oslo.messaging registers the option
    when RPC starts, and the capacity services start none
    (``parse_args(init_rpc=False)``). Building a ``TransportURL`` registers
    it, and connects to nothing.
    """
    oslo_messaging.TransportURL(conf)


def enabled_cells(context):
    """The cells nova-scheduler schedules to, as its HostManager finds."""
    register_transport_options()
    with database('API database (cell mappings)'):
        cells = objects.CellMappingList.get_all(context)
    return [c for c in cells if not c.is_cell0() and not c.disabled]


def _computes(cctxt):
    services = objects.ServiceList.get_by_binary(
        cctxt, 'nova-compute', include_disabled=True)
    return services, objects.ComputeNodeList.get_all(cctxt)


def in_every_cell(context, cells, function, *args):
    """``(cell, function(cell context, *args))`` of every cell, read at once.

    A cell whose database does not answer, cannot be used or fails the
    read raises a one-line :class:`~.errors.CapacityError` naming it.
    """
    results = nova_context.scatter_gather_cells(
        context, cells, nova_context.CELL_TIMEOUT, function, *args)
    by_uuid = {cell.uuid: cell for cell in cells}
    for cell_uuid, result in results.items():
        cell = by_uuid[cell_uuid]
        name = cell.name or cell.uuid
        if result is nova_context.did_not_respond_sentinel:
            raise errors.BackendUnavailable(
                'the database of cell %s did not answer within %d seconds'
                % (name, nova_context.CELL_TIMEOUT))
        if isinstance(result, db_exc.CantStartEngineError):
            raise errors.ConfigError(
                'cannot use the database of cell %s: %s (check its '
                'database_connection in the cell mapping)'
                % (name, _short(result)))
        if isinstance(result, Exception):
            raise errors.BackendUnavailable(
                'cannot read the database of cell %s: %s'
                % (name, _short(result)))
        yield cell, result


def host_availability_zone(aggregates):
    """A host's AZ as Nova's ``get_host_availability_zone`` says it."""
    zoned = sorted((agg for agg in aggregates if AZ_KEY in agg.metadata),
                   key=lambda agg: agg.id)
    if zoned:
        return zoned[0].metadata[AZ_KEY]
    return CONF.default_availability_zone


def read_aggregates(context):
    with database('API database (host aggregates)'):
        return list(objects.AggregateList.get_all(context))


def read_cloud(context):
    """The schedulable hosts of every enabled cell (see :class:`Cloud`)."""
    cells = enabled_cells(context)
    aggregates = read_aggregates(context)
    by_host = {}
    for agg in aggregates:
        for host in agg.hosts or ():
            by_host.setdefault(host, []).append(agg)
    service_group = servicegroup.API()
    hosts = []
    for cell, (services, computes) in in_every_cell(context, cells,
                                                    _computes):
        services = {service.host: service for service in services}
        for compute in computes:
            aggs = by_host.get(compute.host, [])
            state = host_manager.HostState(
                compute.host, compute.hypervisor_hostname, cell.uuid)
            service = services.get(compute.host)
            if service is not None:
                state.update(compute, dict(service), aggs, {})
            host = Host(state=state, cell=cell, aggregates=aggs,
                        availability_zone=host_availability_zone(aggs))
            host.skipped = _why_not(service, state, service_group)
            if host.skipped:
                LOG.debug('Capacity: compute node %s (host %s) not '
                          'counted: %s', compute.hypervisor_hostname,
                          compute.host, host.skipped)
            hosts.append(host)
    hosts.sort(key=lambda h: (h.name, h.nodename or ''))
    return Cloud(hosts=hosts, aggregates=aggregates, cells=cells)


def _why_not(service, state, service_group):
    """Why the scheduler cannot pick a node at all, or None."""
    if service is None:
        return SKIP_NO_SERVICE
    # ComputeFilter's checks, in its order.
    if service.disabled:
        return SKIP_SERVICE_DISABLED
    if not service_group.service_is_up(service):
        return SKIP_SERVICE_DOWN
    if state.uuid is None:
        # HostState ignores a node that has not reported its usage.
        return SKIP_NOT_REPORTING
    return None


def _public_flavors(context):
    with database('API database (flavors)'):
        flavors = objects.FlavorList.get_all(
            context, inactive=False,
            filters={'is_public': True, 'disabled': False})
    return sorted(flavors, key=lambda f: (f.vcpus, f.memory_mb, f.name))


def _flavor(context, name):
    with database('API database (flavors)'):
        for lookup in (objects.Flavor.get_by_name,
                       objects.Flavor.get_by_flavor_id):
            try:
                return lookup(context, name)
            except nova_exc.FlavorNotFound:
                continue
    raise errors.UnknownFlavor('unknown flavor %r (no flavor has this name '
                               'or ID)' % name)


def read_flavors(context, names=None):
    """The flavors to count: ``names`` (names or IDs) or every public one.

    :raises UnknownFlavor: a name is neither a flavor's name nor its ID
    """
    if names is None:
        return _public_flavors(context)
    flavors, seen = [], set()
    for name in names:
        flavor = _flavor(context, name)
        if flavor.flavorid not in seen:
            seen.add(flavor.flavorid)
            flavors.append(flavor)
    return flavors
