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


"""The NUMA-exact capacity count: :func:`compute` and its :class:`Report`.

For each flavor and compute host, the count is how many instances of the
flavor the host could take at the same time, placed one after another as
Nova places them (:func:`~nova_sched_ext.capacity.count.count_hosts`), and
never more than placement allows
(:func:`~nova_sched_ext.cloud.claims.placement_limit`).  A host counts
for a flavor only if the scheduler could pick it for the flavor at all:

* its ``nova-compute`` service is enabled and up, and its compute node has
  reported (ComputeFilter; otherwise the host is in ``hosts_skipped``), and
  its resource provider is in placement without ``COMPUTE_STATUS_DISABLED``;
* placement would offer it: the flavor's required and forbidden traits,
  ``resources:`` overrides, units and ratios;
* ``[scheduler] enable_isolated_aggregate_filtering``: no aggregate of the
  host requires a trait the flavor does not;
* when they are in ``[filter_scheduler] enabled_filters``:
  AggregateInstanceExtraSpecsFilter, ComputeCapabilitiesFilter and
  AggregateTypeAffinityFilter pass, run as Nova's own classes; and
  NumInstancesFilter or AggregateNumInstancesFilter cap the count;
* the requested availability zone and aggregate contain it.

The counts are added up per scope (host, aggregate, availability zone,
cell, cloud), each flavor on its own: a scope that takes 10 of flavor A
and 4 of flavor B takes 10 A *or* 4 B, not both.
"""

import collections
import dataclasses
import datetime
import functools
import operator
import typing

from nova import objects
from nova.scheduler.filters import aggregate_instance_extra_specs
from nova.scheduler.filters import compute_capabilities_filter
from nova.scheduler.filters import num_instances_filter
from nova.scheduler.filters import type_filter
import os_traits
from oslo_log import log as logging

from nova_sched_ext.capacity import errors
from nova_sched_ext.capacity import flavors as flavor_requests
from nova_sched_ext.capacity import pools
from nova_sched_ext.capacity import sources
from nova_sched_ext.cloud import claims as cloud_claims
from nova_sched_ext.cloud import placement
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import count

CONF = conf.CONF
LOG = logging.getLogger(__name__)

#: how hosts can be grouped into scopes
BY = ('host', 'aggregate', 'az', 'cell', 'cloud')
CLOUD_NAME = 'cloud'

#: Nova filters that decide on the flavor (and the host) alone, run as
#: Nova's own classes when enabled.
FLAVOR_FILTERS = (
    aggregate_instance_extra_specs.AggregateInstanceExtraSpecsFilter,
    compute_capabilities_filter.ComputeCapabilitiesFilter,
    type_filter.AggregateTypeAffinityFilter,
)
#: Nova filters that cap how many instances a host takes.
COUNT_FILTERS = (
    num_instances_filter.AggregateNumInstancesFilter,
    num_instances_filter.NumInstancesFilter,
)


# --- the report ------------------------------------------------------------

@dataclasses.dataclass
class FlavorInfo:
    id: str
    name: str
    vcpus: int
    ram: int
    disk: int

    @classmethod
    def of(cls, flavor):
        return cls(id=flavor.flavorid, name=flavor.name, vcpus=flavor.vcpus,
                   ram=flavor.memory_mb, disk=flavor.root_gb)

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Scope:
    """The capacity of one group of hosts."""

    scope: str
    name: str
    #: {flavor name: instances the scope takes}
    capacity: dict
    #: {flavor name: the os-capacity figure} (no NUMA, traits or units)
    placement_only: dict
    #: the largest flavor (vCPUs, then RAM) the scope still takes, or None
    largest_flavor: typing.Optional[str]
    #: free vCPUs (VCPU and PCPU) and MiB of RAM on the hosts that take
    #: none of the flavors
    fragmentation: dict
    #: hosts counted
    hosts: int

    def to_dict(self):
        return {'scope': self.scope, 'name': self.name,
                'capacity': dict(self.capacity),
                'placement_only': dict(self.placement_only),
                'largest_flavor': self.largest_flavor,
                'fragmentation': dict(self.fragmentation),
                'hosts': self.hosts}


@dataclasses.dataclass
class Report:
    """What :func:`compute` found.

    ``scopes`` has one :class:`Scope` per group of ``by``, then, with
    ``per_host``, one per host (``scope`` ``host``).
    """

    by: str
    generated_at: datetime.datetime
    flavors: list
    scopes: list
    hosts_counted: int
    #: {reason: compute nodes}: why nodes of the selection are not counted
    hosts_skipped: dict
    #: (host, flavor) pairs counted with Nova's own fit
    engine_fallbacks: int

    def to_dict(self):
        stamp = self.generated_at.astimezone(datetime.timezone.utc)
        return {
            'by': self.by,
            'generated_at': stamp.strftime('%Y-%m-%dT%H:%M:%SZ'),
            'flavors': [f.to_dict() for f in self.flavors],
            'scopes': [s.to_dict() for s in self.scopes],
            'hosts_counted': self.hosts_counted,
            'hosts_skipped': dict(sorted(self.hosts_skipped.items())),
            'engine_fallbacks': self.engine_fallbacks,
        }


# --- per host --------------------------------------------------------------

@dataclasses.dataclass
class HostResult:
    host: sources.Host
    capacity: dict
    placement_only: dict
    free_vcpus: int
    free_memory_mb: int
    fallbacks: int = 0
    #: {flavor name: pools.HostPools}: what the counts draw from sharing
    #: providers (shared with other hosts)
    pools: dict = dataclasses.field(default_factory=dict)

    @property
    def takes_nothing(self):
        return not any(self.capacity.values())


class HostChecks(object):
    """The scheduler's checks of a host for a flavor, beyond placement."""

    def __init__(self):
        enabled = set(CONF.filter_scheduler.enabled_filters)
        self.filters = [cls() for cls in FLAVOR_FILTERS
                        if cls.__name__ in enabled]
        self.counters = [cls() for cls in COUNT_FILTERS
                         if cls.__name__ in enabled]
        self.isolated_aggregates = (
            CONF.scheduler.enable_isolated_aggregate_filtering)

    def passes(self, host, request):
        if self.isolated_aggregates and _isolated(host, request):
            return False
        for host_filter in self.filters:
            if not host_filter.host_passes(host.state, request.spec):
                LOG.debug('Capacity: %s rejects host %s for flavor %s',
                          type(host_filter).__name__, host.name,
                          request.name)
                return False
        return True

    def instance_cap(self, host, request):
        """The most instances the count filters let the host take, or None."""
        caps = [max(nova_compat.max_instances_per_host(
            counter, host.state, request.spec) - host.state.num_instances, 0)
            for counter in self.counters]
        return min(caps) if caps else None


def _isolated(host, request):
    """isolate_aggregates: an aggregate needs a trait the flavor lacks."""
    for aggregate in host.aggregates:
        for key, value in aggregate.metadata.items():
            if (key.startswith('trait:') and value == 'required' and
                    key[len('trait:'):] not in request.required_traits):
                return True
    return False


def _shape(request):
    return count.FlavorShape(
        engine=request.shape, instance_topology=request.instance_topology,
        pci_requests=request.pci_requests, name=request.name)


def _prepared(state):
    # The engine replays Nova's fit once per allocation candidate; a fresh
    # boot on a compute node provider has one.
    state.allocation_candidates = [{'mappings': {}}]
    return adapters.prepared_host(state)


def count_one_host(host, tree, requests, checks):
    """The :class:`HostResult` of one counted host."""
    model = count.host_model(host.state, _prepared(host.state))
    placement_only, claims = {}, []
    for request in requests:
        placement_only[request.name] = (cloud_claims.placement_only(
            tree, request.queries[0]) if request.queries else 0)
        if request.invalid or not request.queries or \
                not checks.passes(host, request):
            claims.append(cloud_claims.Claims(0))
            continue
        claims.append(cloud_claims.placement_claims(
            tree, request.queries, cap=checks.instance_cap(host, request)))
    # every flavor of this host in one pass of the fit engine
    results = count.count_hosts([model], [_shape(r) for r in requests],
                                [c.instances for c in claims])
    capacity, host_pools = {}, {}
    for request, claim, result in zip(requests, claims, results):
        capacity[request.name] = result.instances
        # the host's own providers serve first: the pooled instances are
        # the last ones placement allows, some of which NUMA may refuse
        pooled = result.instances - (claim.instances - claim.pooled)
        if claim.pooled and pooled > 0:
            host_pools[request.name] = pools.HostPools(
                pooled, claim.pools_by_class)
    free_vcpus, free_memory = cloud_claims.free_room(tree)
    return HostResult(host=host, capacity=capacity,
                      placement_only=placement_only, free_vcpus=free_vcpus,
                      free_memory_mb=free_memory,
                      fallbacks=sum(r.fallback for r in results),
                      pools=host_pools)


# --- scopes ----------------------------------------------------------------

def _largest(flavors, capacity):
    fitting = [f for f in flavors if capacity.get(f.name)]
    if not fitting:
        return None
    return max(fitting, key=lambda f: (f.vcpus, f.memory_mb, f.name)).name


def make_scope(kind, name, results, flavors, allowances=None):
    """A :class:`Scope` of the counted hosts ``results``.

    :param allowances: ``{flavor name: pool allowances}`` (see
        :func:`pools.scope_total`) when hosts draw from sharing providers
    """
    capacity = {}
    placement_only = {}
    stranded_vcpus = stranded_memory = 0
    # every counted host has every flavor's figures (count_one_host)
    pooled = any(r.pools for r in results)
    capacities = [r.capacity for r in results]
    placement_onlys = [r.placement_only for r in results]
    for flavor in flavors:
        wanted = operator.itemgetter(flavor.name)
        counts = list(map(wanted, capacities))
        capacity[flavor.name] = (pools.scope_total(
            counts, [r.pools.get(flavor.name) for r in results],
            (allowances or {}).get(flavor.name, {}))
            if pooled else sum(counts))
        placement_only[flavor.name] = sum(map(wanted, placement_onlys))
    for result in results:
        if result.takes_nothing:
            stranded_vcpus += result.free_vcpus
            stranded_memory += result.free_memory_mb
    return Scope(scope=kind, name=name, capacity=capacity,
                 placement_only=placement_only,
                 largest_flavor=_largest(flavors, capacity),
                 fragmentation={'vcpus': stranded_vcpus,
                                'memory_mb': stranded_memory},
                 hosts=len(results))


def _host_scope_names(results):
    per_name = collections.Counter(r.host.name for r in results)
    return [r.host.name if per_name[r.host.name] == 1 else
            '%s:%s' % (r.host.name, r.host.nodename) for r in results]


def scopes_by(by, results, selected, flavors, cells, aggregate=None, az=None,
              allowances=None):
    """The scopes of ``by`` over the counted ``results``.

    ``selected`` are all the hosts of the selection, counted or not: a
    group whose hosts are all skipped still shows, with no host counted.
    ``allowances``: see :func:`make_scope`.
    """
    scope = functools.partial(make_scope, allowances=allowances)
    if by == 'cloud':
        return [scope('cloud', CLOUD_NAME, results, flavors)]
    if by == 'host':
        return [scope('host', name, [r], flavors)
                for name, r in zip(_host_scope_names(results), results)]
    if by == 'cell':
        names = sorted({h.cell_name for h in selected} |
                       ({c.name or c.uuid for c in cells}
                        if aggregate is None and az is None else set()))
        return [scope('cell', name, [r for r in results
                                     if r.host.cell_name == name], flavors)
                for name in names]
    if by == 'az':
        names = sorted({h.availability_zone for h in selected} |
                       ({az} if az else set()))
        return [scope('az', name,
                      [r for r in results
                       if r.host.availability_zone == name], flavors)
                for name in names]
    # by == 'aggregate'
    if aggregate is not None:
        aggregates = [aggregate]
    else:
        seen = {a.id: a for h in selected for a in h.aggregates}
        aggregates = sorted(seen.values(), key=lambda a: (a.name, a.id))
    return [scope('aggregate', agg.name,
                  [r for r in results
                   if any(a.id == agg.id for a in r.host.aggregates)],
                  flavors)
            for agg in aggregates]


# --- selection -------------------------------------------------------------

def find_aggregate(aggregates, wanted):
    """The aggregate named, or with the ID or UUID, ``wanted``."""
    wanted = str(wanted)
    for match in (lambda a: a.name == wanted,
                  lambda a: str(a.id) == wanted,
                  lambda a: a.uuid == wanted):
        found = [a for a in aggregates if match(a)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise errors.UnknownScope(
                'aggregate %r is ambiguous: %d aggregates have this name; '
                'give its ID or UUID' % (wanted, len(found)))
    raise errors.UnknownScope('unknown aggregate %r' % wanted)


def _known_zones(cloud):
    zones = {agg.metadata[sources.AZ_KEY] for agg in cloud.aggregates
             if sources.AZ_KEY in agg.metadata}
    zones |= {h.availability_zone for h in cloud.hosts}
    return zones


def select(cloud, az=None, aggregate=None):
    """``(hosts, aggregate)``: the hosts in ``az`` and ``aggregate``."""
    agg = None
    if aggregate is not None:
        agg = find_aggregate(cloud.aggregates, aggregate)
    if az is not None and az not in _known_zones(cloud):
        raise errors.UnknownScope(
            'unknown availability zone %r (known: %s)'
            % (az, ', '.join(sorted(_known_zones(cloud))) or 'none'))
    hosts = [h for h in cloud.hosts
             if (az is None or h.availability_zone == az) and
             (agg is None or any(a.id == agg.id for a in h.aggregates))]
    return hosts, agg


def _read_trees(context, hosts):
    reader = placement.PlacementReader(
        context, workers=CONF.nova_sched_ext_capacity.placement_workers)
    return reader.trees([h.uuid for h in hosts])


# --- the count -------------------------------------------------------------

def compute(context, flavors=None, by='cloud', az=None, aggregate=None,
            per_host=False):
    """Count how many more instances of each flavor the cloud takes.

    :param context: an admin ``nova.context.RequestContext``
    :param flavors: flavor names or IDs; None: every public, enabled flavor
    :param by: 'host', 'aggregate', 'az', 'cell' or 'cloud'
    :param az: count only the hosts of this availability zone
    :param aggregate: count only the hosts of this aggregate (name, ID or
        UUID)
    :param per_host: also give one scope per host
    :returns: a :class:`Report`
    :raises errors.CapacityError: an unknown flavor, zone, aggregate or
        ``by``, unusable configuration, an unreachable database or
        placement (one line each)
    """
    check_by(by)
    objects.register_all()
    generated_at = datetime.datetime.now(datetime.timezone.utc)
    flavor_objects = sources.read_flavors(context, flavors)
    cloud = sources.read_cloud(context)
    selected, agg = select(cloud, az=az, aggregate=aggregate)
    live = [h for h in selected if not h.skipped]
    trees = _read_trees(context, live) if live else {}
    return assemble(generated_at, flavor_objects, cloud, selected, agg,
                    trees, by=by, az=az, per_host=per_host)


def check_by(by):
    """:raises UnknownScope: ``by`` is no way of grouping hosts."""
    if by not in BY:
        raise errors.UnknownScope('cannot group hosts by %r: use one of %s'
                                  % (by, ', '.join(BY)))


def assemble(generated_at, flavor_objects, cloud, selected, agg, trees,
             by='cloud', az=None, per_host=False, count_host=None,
             requests=None):
    """The :class:`Report` of what was read: a function of its arguments.

    :param cloud: the :class:`~sources.Cloud` read (its cells)
    :param selected: the hosts of the selection (:func:`select`)
    :param agg: the aggregate selected, or None
    :param trees: ``{compute node uuid: Tree}`` of the selection's hosts
        that can be picked
    :param count_host: :func:`count_one_host`, or a callable with its
        arguments that gives the same (the kept state's, which keeps the
        results of the hosts that did not change)
    :param requests: the flavors' requests
        (:func:`~nova_sched_ext.capacity.flavors.flavor_request` of each),
        if made already
    """
    count_host = count_host or count_one_host
    if requests is None:
        requests = [flavor_requests.flavor_request(f)
                    for f in flavor_objects]
    skipped = collections.Counter(h.skipped for h in selected if h.skipped)
    checks = HostChecks()
    results = []
    for host in selected:
        if host.skipped:
            continue
        tree = trees.get(host.uuid)
        if tree is None:
            reason = sources.SKIP_NO_PROVIDER
        elif cloud_claims.has_trait(tree, os_traits.COMPUTE_STATUS_DISABLED):
            # compute_status_filter keeps the scheduler away from it
            reason = sources.SKIP_SERVICE_DISABLED
        else:
            reason = None
        if reason:
            skipped[reason] += 1
            continue
        results.append(count_host(host, tree, requests, checks))

    allowances = None
    if any(tree.sharing for tree in trees.values()):
        allowances = {
            r.name: cloud_claims.pool_allowances(trees.values(),
                                                 r.queries[0])
            for r in requests if r.queries}
    scopes = scopes_by(by, results, selected, flavor_objects, cloud.cells,
                       aggregate=agg, az=az, allowances=allowances)
    if per_host and by != 'host':
        scopes += scopes_by('host', results, selected, flavor_objects,
                            cloud.cells, allowances=allowances)
    report = Report(
        by=by, generated_at=generated_at,
        flavors=[FlavorInfo.of(f) for f in flavor_objects], scopes=scopes,
        hosts_counted=len(results), hosts_skipped=dict(skipped),
        engine_fallbacks=sum(r.fallbacks for r in results))
    LOG.info('Capacity of %d flavor(s) on %d host(s) (%d skipped) by %s: '
             '%d counted with Nova\'s fit', len(flavor_objects),
             len(results), sum(skipped.values()), by,
             report.engine_fallbacks)
    return report
