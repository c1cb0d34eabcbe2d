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

"""The broker's decision, as a pure function of what it has read.

:func:`plan` takes a :class:`Request`, the configuration and one
:class:`ClusterView` per cluster (what the broker read of it: reachable or
not, image, free addresses, capacity per variant flavor, preemptible
instances, deployment-set members) and returns a :class:`Plan`: the
ordered boot candidates, and a :class:`Verdict` for every cluster and
variant saying why it was kept or dropped.  It reads no cloud and keeps
no state but the chooser's, so the simulator replays a trace through the
very same decision (``nova-sched-ext-sim --broker``).

The order: the role's variants in the family's priority order (with
``broker.conversion: most-room``, inside each pool the variant the
clusters have most room for first, see :func:`variant_order`); for each
variant, the clusters that hold its pool, have the image, at least
``count`` free addresses on the network and a capacity covering the whole
``count``, in the order the chooser gives them; last, the pairs whose
capacity is unknown (the cluster's capacity API is down), in variant and
cluster order, to be tried on Nova's answer alone.  A deployment set over
its cross-cluster cap refuses the request; a preemptible role drops the
clusters of a data center at its preemptible cap.
"""

import dataclasses
import typing

from nova_sched_ext.broker import config as broker_config
from nova_sched_ext import exception as sched_ext_exception

DEFAULT_ROLE = 'pay-as-you-go'
#: the most servers one request boots (one multi-create)
MAX_COUNT = 1000


class RequestError(ValueError, sched_ext_exception.UserFacingError):
    """A request the configuration cannot serve; the message says why."""


@dataclasses.dataclass(frozen=True)
class Request:
    """What a user asks the broker for."""

    family: str
    image: str
    network: str
    count: int = 1
    role: str = DEFAULT_ROLE
    datacenter: typing.Optional[str] = None
    zone: typing.Optional[str] = None
    #: only these clusters (by configured name), or every one
    clusters: tuple = ()
    deployment_set: typing.Optional[str] = None
    #: the servers' name (a multi-create adds -1, -2, ...)
    name: str = 'broker'


@dataclasses.dataclass
class ClusterView:
    """What the broker read of one cluster before deciding."""

    cluster: broker_config.Cluster
    #: why the cluster cannot be used at all (unreachable, credentials)
    error: typing.Optional[str] = None
    image_present: bool = False
    #: free addresses on the request's network; None: no such network
    free_ips: typing.Optional[int] = None
    #: {variant flavor: instances it still takes}; None: unknown
    capacity: typing.Optional[dict] = None
    #: why the capacity is unknown
    capacity_error: typing.Optional[str] = None
    #: variant flavors the cluster does not define
    missing_flavors: frozenset = frozenset()
    #: preemptible instances the cluster holds
    preemptible: int = 0
    #: members of the request's deployment set in the cluster
    set_members: int = 0


@dataclasses.dataclass(frozen=True)
class Candidate:
    cluster: str
    variant: broker_config.Variant
    #: what the capacity API said, None when it could not be read
    capacity: typing.Optional[int]


@dataclasses.dataclass(frozen=True)
class Verdict:
    cluster: str
    #: None for a verdict on the cluster as a whole
    variant: typing.Optional[broker_config.Variant]
    kept: bool
    reason: str
    capacity: typing.Optional[int] = None

    def to_dict(self):
        return {'cluster': self.cluster,
                'flavor': self.variant.flavor if self.variant else None,
                'pool': self.variant.pool if self.variant else None,
                'numa': self.variant.numa if self.variant else None,
                'kept': self.kept, 'reason': self.reason,
                'capacity': self.capacity}


@dataclasses.dataclass
class Plan:
    request: Request
    variants: tuple
    candidates: list
    verdicts: list
    #: why nothing can be tried, or None
    refusal: typing.Optional[str] = None
    warnings: list = dataclasses.field(default_factory=list)

    def to_dict(self):
        return {
            'family': self.request.family, 'role': self.request.role,
            'count': self.request.count,
            'variants': [v.flavor for v in self.variants],
            'candidates': [{'cluster': c.cluster, 'flavor': c.variant.flavor,
                            'pool': c.variant.pool, 'numa': c.variant.numa,
                            'capacity': c.capacity}
                           for c in self.candidates],
            'verdicts': [v.to_dict() for v in self.verdicts],
            'refusal': self.refusal, 'warnings': list(self.warnings)}


def role_variants(conf, request):
    """The variants ``request``'s role may get, in priority order.

    :raises RequestError: unknown family or role, a role that allows no
        variant of the family, a bad count, data center or cluster
    """
    family = conf.families.get(request.family)
    if family is None:
        raise RequestError('unknown flavor family %r; known: %s'
                           % (request.family, ', '.join(sorted(
                               conf.families))))
    role = conf.roles.get(request.role)
    if role is None:
        raise RequestError('unknown role %r; known: %s'
                           % (request.role, ', '.join(sorted(conf.roles))))
    if isinstance(request.count, bool) or not isinstance(
            request.count, int) or not 1 <= request.count <= MAX_COUNT:
        raise RequestError('count must be an integer from 1 to %d, got %r'
                           % (MAX_COUNT, request.count))
    unknown = [name for name in request.clusters
               if name not in conf.clusters]
    if unknown:
        raise RequestError('unknown cluster %s; known: %s'
                           % (', '.join(map(repr, unknown)),
                              ', '.join(conf.clusters)))
    datacenters = {c.datacenter for c in conf.clusters.values()}
    if request.datacenter is not None and \
            request.datacenter not in datacenters:
        raise RequestError('unknown data center %r; known: %s'
                           % (request.datacenter,
                              ', '.join(sorted(datacenters))))
    variants = tuple(v for v in family.variants if role.allows(v))
    if not variants:
        raise RequestError(
            'role %s allows no variant of flavor family %s (it takes NUMA '
            'kinds %s%s)' % (role.name, family.name, '/'.join(role.numa),
                             ', pools ' + '/'.join(role.pools)
                             if role.pools else ''))
    return role, variants


def plan(conf, request, views, chooser, tried=()):
    """The :class:`Plan` of ``request`` on what ``views`` say.

    :param conf: the :class:`~nova_sched_ext.broker.config.Config`
    :param views: ``{cluster name: ClusterView}``, one per cluster of
        the configuration
    :param chooser: a :class:`~nova_sched_ext.broker.choosers.Chooser`
    :param tried: ``(cluster, flavor)`` pairs that already failed
    :raises RequestError: see :func:`role_variants`
    """
    role, variants = role_variants(conf, request)
    count = request.count
    result = Plan(request=request, variants=variants, candidates=[],
                  verdicts=[])
    reachable = [v for v in views.values() if v.error is None]

    if request.deployment_set:
        cap = conf.set_cap(request.deployment_set)
        members = sum(v.set_members for v in reachable)
        if len(reachable) < len(views):
            result.warnings.append(
                'deployment set %s: the members in unreachable clusters are '
                'not counted' % request.deployment_set)
        if cap is not None and members + count > cap:
            result.refusal = (
                'deployment set %s has %d members across the clusters; %d '
                'more would pass its cap of %d'
                % (request.deployment_set, members, count, cap))
            return result

    preemptible_by_dc = {}
    for view in reachable:
        dc = view.cluster.datacenter
        preemptible_by_dc[dc] = preemptible_by_dc.get(dc, 0) + \
            view.preemptible

    usable = []
    for name, view in views.items():
        reason = _cluster_problem(conf, request, role, view,
                                  preemptible_by_dc)
        if reason:
            result.verdicts.append(Verdict(name, None, False, reason))
        else:
            usable.append(view)

    unknown_capacity = []
    eligible_by_variant = {}
    for variant in variants:
        eligible = eligible_by_variant[variant] = []
        for view in usable:
            name = view.cluster.name
            reason, capacity = _variant_problem(view, variant, count, tried)
            if reason is None and capacity is None:
                unknown_capacity.append(Candidate(name, variant, None))
                result.verdicts.append(Verdict(
                    name, variant, True, 'capacity unknown (%s): tried last, '
                    'on Nova\'s answer alone' % view.capacity_error))
            elif reason is None:
                eligible.append(Candidate(name, variant, capacity))
                result.verdicts.append(Verdict(
                    name, variant, True, 'capacity %d covers %d'
                    % (capacity, count), capacity))
            else:
                result.verdicts.append(Verdict(name, variant, False, reason,
                                               capacity))
    for variant in variant_order(conf, variants, eligible_by_variant):
        result.candidates.extend(chooser.order(
            request, variant, eligible_by_variant[variant]))
    result.candidates.extend(unknown_capacity)
    if not result.candidates:
        result.refusal = (
            'no cluster can take %d x %s for role %s: %s'
            % (count, request.family, role.name, _summary(result.verdicts)))
    return result


def variant_order(conf, variants, eligible_by_variant):
    """The order in which ``variants`` (in priority order) are tried.

    ``priority``: as given.  ``most-room``: the pools stay in the order
    of their first variant, so a role still gets the better pool first
    whenever it has room (dpdk before normal in the seed's order); inside
    a pool, the variant with the most room over the eligible clusters
    (the sum of their capacities, in instances of the one size the
    family's variants share) comes first.  Taking an instance from the
    kind that has most room spends the smallest share of it, and leaves
    the scarce kind to the requests that cannot convert (a role allowed
    one NUMA kind only, or a family of a single variant).  Equal room,
    and the variants no cluster has room for, keep the family's order.

    In both, the uneven variants of a dual variant come right after it
    (the even split first: it is what Nova would build of the flavor),
    the one with the most room over the eligible clusters first, equal
    room keeping the family's order; when the role may not get the even
    split, they take its place.
    """
    priority = {variant: i for i, variant in enumerate(variants)}

    def room(variant):
        return sum(c.capacity for c in eligible_by_variant[variant])

    groups = {}
    for variant in variants:
        if variant.numa == broker_config.UNEVEN:
            groups.setdefault(variant.base, []).append(variant)
    for members in groups.values():
        members.sort(key=lambda v: (-room(v), priority[v]))
    heads = {v.flavor for v in variants if v.numa != broker_config.UNEVEN}
    # one unit per even variant (followed by its uneven ones), and one
    # per uneven group whose even variant the role may not get
    units = []
    for variant in variants:
        if variant.numa != broker_config.UNEVEN:
            units.append((variant, [variant] + groups.get(variant.flavor,
                                                          [])))
        elif variant.base not in heads and \
                groups[variant.base][0] is variant:
            units.append((variant, groups[variant.base]))
    if conf.conversion != broker_config.PRIORITY:
        pools = []
        for variant in variants:
            if variant.pool not in pools:
                pools.append(variant.pool)
        units.sort(key=lambda unit: (pools.index(unit[0].pool),
                                     -room(unit[0]),
                                     min(priority[v] for v in unit[1])))
    return [v for _head, members in units for v in members]


def _cluster_problem(conf, request, role, view, preemptible_by_dc):
    cluster = view.cluster
    if request.clusters and cluster.name not in request.clusters:
        return 'not among the requested clusters'
    if request.datacenter and cluster.datacenter != request.datacenter:
        return 'in data center %s, not %s' % (cluster.datacenter,
                                              request.datacenter)
    if request.zone and cluster.zone != request.zone:
        return 'zone %s, not %s' % (cluster.zone or '(any)', request.zone)
    if view.error is not None:
        return 'unreachable: %s' % view.error
    if not view.image_present:
        return 'image %s is not in this cluster' % request.image
    if view.free_ips is None:
        return 'network %s is not in this cluster' % request.network
    if view.free_ips < request.count:
        return 'network %s has %d free addresses, %d needed' % (
            request.network, view.free_ips, request.count)
    if role.preemptible:
        cap = conf.preemptible_caps.get(cluster.datacenter)
        held = preemptible_by_dc.get(cluster.datacenter, 0)
        if cap is not None and held + request.count > cap:
            return ('data center %s holds %d preemptible instances; %d more '
                    'would pass its cap of %d' % (cluster.datacenter, held,
                                                  request.count, cap))
    return None


def _variant_problem(view, variant, count, tried):
    """``(reason it is dropped or None, capacity or None)``."""
    if variant.pool not in view.cluster.pools:
        return 'no pool %s in this cluster' % variant.pool, None
    if variant.flavor in view.missing_flavors:
        return 'flavor %s is not defined here' % variant.flavor, None
    if (view.cluster.name, variant.flavor) in tried:
        return 'already tried for this request', None
    if view.capacity is None:
        return None, None
    capacity = view.capacity.get(variant.flavor, 0)
    if capacity < count:
        return 'capacity %d, %d needed' % (capacity, count), capacity
    return None, capacity


def _summary(verdicts):
    reasons = {}
    for verdict in verdicts:
        where = verdict.cluster if verdict.variant is None else '%s/%s' % (
            verdict.cluster, verdict.variant.flavor)
        reasons.setdefault(verdict.reason, []).append(where)
    return '; '.join('%s (%s)' % (reason, ', '.join(where))
                     for reason, where in reasons.items()) or 'no cluster'
