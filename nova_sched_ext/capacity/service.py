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
and 4 of flavor B takes 10 A *or* 4 B, not both.  The adding up is
:class:`Tally` (sums only, the sharing providers' share taken when a
scope is made of it), so that the kept state
(:mod:`~nova_sched_ext.capacity.kept`) can bring the sums of its last
answer up to date with the hosts that changed (:meth:`Tallied.changed`)
and get what a full count's :meth:`Tallied.of` gets.
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


# --- one host of a selection ------------------------------------------------

class Outcome(typing.NamedTuple):
    """One host of a selection, as the count judged it."""

    host: sources.Host
    #: why it is not counted (a ``SKIP_*`` reason), or None
    skipped: typing.Optional[str]
    #: its :class:`HostResult` when it is counted
    result: typing.Optional[HostResult]


def judge(host, tree, requests, checks, count_host=None):
    """The :class:`Outcome` of one host of a selection.

    :param tree: its provider tree, or None (not in placement)
    :param count_host: as :func:`assemble`'s
    """
    if host.skipped:
        return Outcome(host, host.skipped, None)
    if tree is None:
        return Outcome(host, sources.SKIP_NO_PROVIDER, None)
    if cloud_claims.has_trait(tree, os_traits.COMPUTE_STATUS_DISABLED):
        # compute_status_filter keeps the scheduler away from it
        return Outcome(host, sources.SKIP_SERVICE_DISABLED, None)
    return Outcome(host, None, (count_host or count_one_host)(
        host, tree, requests, checks))


def host_key(host):
    """What names a host among the :class:`Tallied` hosts.

    Its compute node's UUID; a node that never reported has none (it is
    skipped), and its ``Host`` object names it instead: the kept state
    makes a new one whenever anything about it changes.
    """
    return host.uuid if host.uuid is not None else id(host)


# --- sums ------------------------------------------------------------------

def _figures_of(names):
    """A function: ``{flavor name: figure}`` to the figures of ``names``."""
    if len(names) == 1:
        name = names[0]
        return lambda figures: (figures[name],)
    return operator.itemgetter(*names)


def _sums(vectors, width):
    return tuple(map(sum, zip(*vectors))) or (0,) * width


class Tally(typing.NamedTuple):
    """What some hosts of a selection add up to, flavor by flavor.

    Sums only, so that a kept tally can take hosts out and put hosts in
    (:meth:`changed`) and stay what :meth:`of` makes of its hosts.  The
    share of the sharing providers, which does not add up, is taken when
    a :class:`Scope` is made of it (:func:`make_scope`).
    """

    #: hosts of the selection, counted or not (a scope shows if it has one)
    members: int
    #: hosts counted
    hosts: int
    #: per flavor, in the report's order: the instances the hosts take
    capacity: tuple
    #: per flavor: the os-capacity figures
    placement_only: tuple
    #: free vCPUs and MiB of the counted hosts that take none of the flavors
    stranded_vcpus: int
    stranded_memory_mb: int
    #: (host, flavor) pairs counted with Nova's own fit
    fallbacks: int
    #: {reason: hosts} of the members not counted
    skipped: dict
    #: per flavor, ``{host key: pools.HostPools}`` of the hosts that draw
    #: from sharing providers; () when none does
    pooled: tuple

    @classmethod
    def of(cls, names, outcomes):
        """The tally of ``outcomes``, ``[(host key, Outcome), ...]``.

        :param names: the flavors' names, in the report's order
        """
        figures = _figures_of(names)
        counted = [(key, o.result) for key, o in outcomes
                   if o.result is not None]
        capacities = [figures(r.capacity) for _key, r in counted]
        stranded = [r for (_key, r), capacity in zip(counted, capacities)
                    if not any(capacity)]
        pooled = ()
        if any(r.pools for _key, r in counted):
            pooled = tuple({key: r.pools[name] for key, r in counted
                            if name in r.pools} for name in names)
        skipped = collections.Counter(o.skipped for _key, o in outcomes
                                      if o.skipped)
        return cls(
            members=len(outcomes), hosts=len(counted),
            capacity=_sums(capacities, len(names)),
            placement_only=_sums([figures(r.placement_only)
                                  for _key, r in counted], len(names)),
            stranded_vcpus=sum(r.free_vcpus for r in stranded),
            stranded_memory_mb=sum(r.free_memory_mb for r in stranded),
            fallbacks=sum(r.fallbacks for _key, r in counted),
            skipped=dict(skipped), pooled=pooled)

    def changed(self, removed, added):
        """This tally less the hosts of ``removed``, plus those of ``added``.

        :param removed: the :class:`Tally` of hosts of this one, as they
            were tallied in it
        :param added: a :class:`Tally` of hosts not in this one (any taken
            out by ``removed`` may come back)
        """
        skipped = collections.Counter(self.skipped)
        skipped.subtract(removed.skipped)
        skipped.update(added.skipped)
        return Tally(
            members=self.members - removed.members + added.members,
            hosts=self.hosts - removed.hosts + added.hosts,
            capacity=tuple(map(_less_plus, self.capacity, removed.capacity,
                               added.capacity)),
            placement_only=tuple(map(_less_plus, self.placement_only,
                                     removed.placement_only,
                                     added.placement_only)),
            stranded_vcpus=_less_plus(self.stranded_vcpus,
                                      removed.stranded_vcpus,
                                      added.stranded_vcpus),
            stranded_memory_mb=_less_plus(self.stranded_memory_mb,
                                          removed.stranded_memory_mb,
                                          added.stranded_memory_mb),
            fallbacks=_less_plus(self.fallbacks, removed.fallbacks,
                                 added.fallbacks),
            skipped={reason: n for reason, n in skipped.items() if n},
            pooled=_pooled_changed(self.pooled, removed.pooled,
                                   added.pooled, len(self.capacity)))


def _less_plus(value, removed, added):
    return value - removed + added


def _pooled_changed(pooled, removed, added, width):
    if not (pooled or added):
        return ()
    empty = ({},) * width
    changed = tuple(
        {**{key: hp for key, hp in mine.items() if key not in gone}, **new}
        for mine, gone, new in zip(pooled or empty, removed or empty,
                                   added or empty))
    return changed if any(changed) else ()


def _grouping(by, agg):
    """A function: a host to the keys of its scopes of ``by``.

    None for ``cloud`` (the whole selection) and ``host`` (each counted
    host on its own, in the selection's order).
    """
    if by == 'cell':
        return lambda host: (host.cell_name,)
    if by == 'az':
        return lambda host: (host.availability_zone,)
    if by == 'aggregate':
        if agg is not None:
            # every host of the selection is in it
            only = ((agg.name, agg.id),)
            return lambda host: only
        return lambda host: tuple((a.name, a.id) for a in host.aggregates)
    return None


class Tallied(object):
    """The hosts of a selection, judged, and their sums per scope of ``by``.

    What a report is made of (:func:`assemble`).  Never changed once made,
    so that reports can be made of it while another thread brings it up
    to date: :meth:`changed` makes another.

    :param agg: the aggregate selected, or None
    :param names: the flavors' names, in the report's order
    :param outcomes: ``{host key: Outcome}`` of every host of the selection
    """

    def __init__(self, by, agg, names, outcomes, overall, tallies,
                 in_order):
        self.by = by
        self.agg = agg
        self.names = names
        self.outcomes = outcomes
        #: the :class:`Tally` of the whole selection
        self.overall = overall
        #: ``{scope key: Tally}`` of the scopes with a host, but for by
        #: ``cloud`` (the overall tally) and ``host``
        self.tallies = tallies
        #: whether ``outcomes`` are in the selection's order (the hosts'
        #: own scopes follow it)
        self.in_order = in_order

    @classmethod
    def of(cls, by, agg, names, outcomes):
        """Sum ``outcomes`` (in the selection's order) up."""
        tallies = {key: Tally.of(names, group) for key, group in
                   _grouped(_grouping(by, agg), outcomes.items()).items()}
        return cls(by, agg, names, outcomes,
                   Tally.of(names, list(outcomes.items())), tallies, True)

    def empty(self):
        return Tally.of(self.names, [])

    def changed(self, outcomes):
        """The same sums, with the hosts of ``outcomes`` judged again.

        Only their old figures are taken out and their new ones put in,
        with :meth:`Tally.of` as :meth:`of` sums them: the cost is that of
        the hosts changed, not of the selection.

        :param outcomes: ``{host key: Outcome now, or None (not in the
            selection now)}``
        """
        removed = [(key, self.outcomes[key]) for key in outcomes
                   if key in self.outcomes]
        added = [(key, o) for key, o in outcomes.items() if o is not None]
        kept = dict(self.outcomes)
        for key in outcomes:
            kept.pop(key, None)
        kept.update(added)
        grouping = _grouping(self.by, self.agg)
        before = _grouped(grouping, removed)
        after = _grouped(grouping, added)
        tallies = dict(self.tallies)
        for key in set(before) | set(after):
            tally = tallies.get(key, self.empty()).changed(
                Tally.of(self.names, before.get(key, [])),
                Tally.of(self.names, after.get(key, [])))
            if tally.members:
                tallies[key] = tally
            else:
                tallies.pop(key, None)
        overall = self.overall.changed(Tally.of(self.names, removed),
                                       Tally.of(self.names, added))
        return Tallied(self.by, self.agg, self.names, kept, overall,
                       tallies, False)


def _grouped(grouping, outcomes):
    """``{scope key: [(host key, Outcome), ...]}`` of ``grouping``."""
    groups = collections.defaultdict(list)
    if grouping is not None:
        for item in outcomes:
            for key in grouping(item[1].host):
                groups[key].append(item)
    return groups


def tally(selected, trees, requests, by, agg, count_host=None):
    """The :class:`Tallied` of every host of ``selected``.

    :param trees: ``{compute node uuid: Tree}``; a host with none is
        skipped (not in placement)
    :param count_host: as :func:`assemble`'s
    """
    checks = HostChecks()
    outcomes = {}
    for host in selected:
        outcomes[host_key(host)] = judge(host, trees.get(host.uuid),
                                         requests, checks, count_host)
    return Tallied.of(by, agg, tuple(r.name for r in requests), outcomes)


# --- scopes ----------------------------------------------------------------

def _largest(flavors, capacity):
    fitting = [f for f in flavors if capacity.get(f.name)]
    if not fitting:
        return None
    return max(fitting, key=lambda f: (f.vcpus, f.memory_mb, f.name)).name


def make_scope(kind, name, tally, flavors, allowances=None):
    """A :class:`Scope` of the hosts of ``tally``.

    :param allowances: ``{flavor name: pool allowances}`` (see
        :func:`pools.scope_total`) when hosts draw from sharing providers
    """
    capacity = {}
    placement_only = {}
    for index, flavor in enumerate(flavors):
        count = tally.capacity[index]
        if tally.pooled and tally.pooled[index]:
            count -= pools.shortfall(tally.pooled[index].values(),
                                     (allowances or {}).get(flavor.name, {}))
        capacity[flavor.name] = count
        placement_only[flavor.name] = tally.placement_only[index]
    return Scope(scope=kind, name=name, capacity=capacity,
                 placement_only=placement_only,
                 largest_flavor=_largest(flavors, capacity),
                 fragmentation={'vcpus': tally.stranded_vcpus,
                                'memory_mb': tally.stranded_memory_mb},
                 hosts=tally.hosts)


def _host_scope_names(results):
    per_name = collections.Counter(r.host.name for r in results)
    return [r.host.name if per_name[r.host.name] == 1 else
            '%s:%s' % (r.host.name, r.host.nodename) for r in results]


def _host_scopes(tallied, flavors, allowances):
    if not tallied.in_order:
        raise ValueError('the hosts\' own scopes follow the selection\'s '
                         'order, which a Tallied brought up to date has '
                         'lost: tally the selection again')
    counted = [(key, o) for key, o in tallied.outcomes.items()
               if o.result is not None]
    names = _host_scope_names([o.result for _key, o in counted])
    return [make_scope('host', name, Tally.of(tallied.names, [item]),
                       flavors, allowances)
            for name, item in zip(names, counted)]


def scopes_by(by, tallied, flavors, cells, aggregate=None, az=None,
              allowances=None):
    """The scopes of ``by`` over the :class:`Tallied` selection.

    A group whose hosts are all skipped still shows, with no host
    counted.  ``allowances``: see :func:`make_scope`.
    """
    scope = functools.partial(make_scope, flavors=flavors,
                              allowances=allowances)
    if by == 'cloud':
        return [scope('cloud', CLOUD_NAME, tallied.overall)]
    if by == 'host':
        return _host_scopes(tallied, flavors, allowances)
    tallies = tallied.tallies
    if by == 'cell':
        names = set(tallies) | ({c.name or c.uuid for c in cells}
                                if aggregate is None and az is None
                                else set())
        return [scope('cell', name, tallies.get(name) or tallied.empty())
                for name in sorted(names)]
    if by == 'az':
        names = set(tallies) | ({az} if az else set())
        return [scope('az', name, tallies.get(name) or tallied.empty())
                for name in sorted(names)]
    # by == 'aggregate': (name, id) keys, in that order
    keys = ([(aggregate.name, aggregate.id)] if aggregate is not None
            else sorted(tallies))
    return [scope('aggregate', key[0], tallies.get(key) or tallied.empty())
            for key in keys]


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


def known_zones(cloud):
    """Every availability zone of ``cloud``'s aggregates and hosts."""
    zones = {agg.metadata[sources.AZ_KEY] for agg in cloud.aggregates
             if sources.AZ_KEY in agg.metadata}
    zones |= {h.availability_zone for h in cloud.hosts}
    return zones


def choose(cloud, az=None, aggregate=None, zones=None):
    """The aggregate ``aggregate`` names, or None; checks ``az`` too.

    :param zones: the cloud's availability zones, if known already (the
        kept state's, found once per poll); otherwise found now
    :raises UnknownScope: no such aggregate or zone
    """
    agg = None
    if aggregate is not None:
        agg = find_aggregate(cloud.aggregates, aggregate)
    if az is not None:
        known = zones if zones is not None else known_zones(cloud)
        if az not in known:
            raise errors.UnknownScope(
                'unknown availability zone %r (known: %s)'
                % (az, ', '.join(sorted(known)) or 'none'))
    return agg


def selects(host, az, agg):
    """Whether ``host`` is in the zone ``az`` and the aggregate ``agg``."""
    return ((az is None or host.availability_zone == az) and
            (agg is None or any(a.id == agg.id for a in host.aggregates)))


def select(cloud, az=None, aggregate=None):
    """``(hosts, aggregate)``: the hosts in ``az`` and ``aggregate``."""
    agg = choose(cloud, az=az, aggregate=aggregate)
    return [h for h in cloud.hosts if selects(h, az, agg)], agg


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
             requests=None, tallied=None):
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
    :param tallied: the :class:`Tallied` of ``selected`` and ``trees``
        for ``by`` and ``agg``, if made already (the kept state's, brought
        up to date by :meth:`Tallied.changed`); ``selected`` is not
        walked then, and ``trees`` only read if a host draws from a
        sharing provider
    """
    if requests is None:
        requests = [flavor_requests.flavor_request(f)
                    for f in flavor_objects]
    if tallied is None:
        tallied = tally(selected, trees, requests, by, agg,
                        count_host=count_host)
    allowances = None
    if tallied.overall.pooled:
        allowances = {
            r.name: cloud_claims.pool_allowances(trees.values(),
                                                 r.queries[0])
            for r in requests if r.queries}
    scopes = scopes_by(by, tallied, flavor_objects, cloud.cells,
                       aggregate=agg, az=az, allowances=allowances)
    if per_host and by != 'host':
        scopes += scopes_by('host', tallied, flavor_objects, cloud.cells,
                            allowances=allowances)
    overall = tallied.overall
    report = Report(
        by=by, generated_at=generated_at,
        flavors=[FlavorInfo.of(f) for f in flavor_objects], scopes=scopes,
        hosts_counted=overall.hosts, hosts_skipped=dict(overall.skipped),
        engine_fallbacks=overall.fallbacks)
    LOG.info('Capacity of %d flavor(s) on %d host(s) (%d skipped) by %s: '
             '%d counted with Nova\'s fit', len(flavor_objects),
             overall.hosts, sum(overall.skipped.values()), by,
             report.engine_fallbacks)
    return report
