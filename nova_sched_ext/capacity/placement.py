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


"""What placement says of the compute hosts, and what it would allow.

:class:`PlacementReader` reads, through Nova's own
``SchedulerReportClient`` (so with the ``[placement]`` keystoneauth options
of the scheduler's ``nova.conf``), the provider trees of the compute nodes
and, per provider, its inventories, usages and traits.

:func:`placement_limit` answers how many instances of a flavor placement
would let the scheduler claim on one host, one after another, as its
``GET /allocation_candidates`` query decides a host is a candidate:
``used + amount <= (total - reserved) * allocation_ratio``,
``min_unit <= amount <= max_unit``, ``amount % step_size == 0``, for every
resource class of every request group of the flavor, the group's required
and forbidden traits, the request's root traits, and the sharing providers
(``MISC_SHARES_VIA_AGGREGATE``, such as a shared storage pool) associated
with the host by aggregate, after the host's own providers (what the host
draws from those is shared with other hosts: see
:mod:`~nova_sched_ext.capacity.pools`).  :func:`placement_only`
is the os-capacity figure: per host, the minimum over the flavor's
resource classes of ``floor(free / requested)``, nothing else.
"""

from concurrent import futures
import math
import typing

from keystoneauth1 import exceptions as ks_exc
from oslo_log import log as logging

from nova_sched_ext.capacity import errors

LOG = logging.getLogger(__name__)

#: Nested providers (``root_provider_uuid``) and traits are in 1.14.
MICROVERSION = '1.14'
#: A safety net for the nested-tree simulation (never reached in practice:
#: every step consumes resources).
MAX_STEPS = 1 << 20

#: The trait of a provider that shares its inventory with the providers
#: of its aggregates.
SHARING_TRAIT = 'MISC_SHARES_VIA_AGGREGATE'
#: ``GET /resource_providers?required=`` is in 1.18.
SHARING_MICROVERSION = '1.18'

#: The resource classes the fragmentation figure adds up as vCPUs.
CPU_CLASSES = ('VCPU', 'PCPU')
MEMORY_CLASS = 'MEMORY_MB'


class Inventory(typing.NamedTuple):
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = 1 << 31
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self):
        # placement's own expression (a float, as in its SQL)
        return (self.total - self.reserved) * self.allocation_ratio

    def allows(self, amount):
        return (self.min_unit <= amount <= self.max_unit and
                amount % self.step_size == 0)


class Provider(typing.NamedTuple):
    uuid: str
    name: str
    parent_uuid: typing.Optional[str]
    inventories: dict          # {resource class: Inventory}
    usages: dict               # {resource class: used}
    traits: frozenset


class Tree(typing.NamedTuple):
    """A compute node's provider tree, the root first."""

    providers: tuple
    #: the sharing providers associated with the tree by aggregate, which
    #: placement lets serve its requests too, in UUID order
    sharing: tuple = ()

    @property
    def members(self):
        """The providers that can serve the host: its own, then sharing."""
        return self.providers + self.sharing

    @property
    def root(self):
        return self.providers[0]


class Group(typing.NamedTuple):
    """One request group of a flavor, as placement gets it."""

    resources: dict            # {resource class: amount}, amounts > 0
    required_traits: frozenset
    forbidden_traits: frozenset
    #: False for the unnumbered group: each class may come from another
    #: provider of the tree; True: all from one provider
    same_provider: bool = False


class Request(typing.NamedTuple):
    """One allocation candidates query of a flavor."""

    groups: tuple
    root_required: frozenset = frozenset()
    root_forbidden: frozenset = frozenset()
    #: 'isolate': numbered groups on distinct providers
    group_policy: typing.Optional[str] = None

    def merged_resources(self):
        merged = {}
        for group in self.groups:
            for rc, amount in group.resources.items():
                merged[rc] = merged.get(rc, 0) + amount
        return merged


def _free(inventory, used):
    return inventory.capacity - used


def _fit(capacity, used, amount):
    """Largest n with ``used + n * amount <= capacity`` (amount > 0)."""
    n = int(max(capacity - used, 0) // amount)
    # Float rounding: settle on placement's own comparison.
    while n > 0 and used + n * amount > capacity:
        n -= 1
    while used + (n + 1) * amount <= capacity:
        n += 1
    return n


def units(inventory, used, amount):
    """How many more allocations of ``amount`` one inventory allows."""
    if amount <= 0 or not inventory.allows(amount):
        return 0
    return _fit(inventory.capacity, used, amount)


def _traits_ok(traits, required, forbidden):
    return required <= traits and not (forbidden & traits)


def _unnumbered_traits_ok(tree, group):
    """Traits of the unnumbered group: held by the providers serving it."""
    serving = [p for p in tree.members
               if p is tree.root or set(group.resources) & set(p.inventories)]
    traits = frozenset().union(*(p.traits for p in serving))
    if not group.required_traits <= traits:
        return False
    return not any(group.forbidden_traits & p.traits for p in serving)


def _request_possible(tree, request):
    root = tree.root
    if not _traits_ok(root.traits, request.root_required,
                      request.root_forbidden):
        return False
    for group in request.groups:
        if not group.same_provider and not _unnumbered_traits_ok(tree, group):
            return False
    return True


def _single_provider_count(provider, request, usages):
    """Instances of ``request`` one provider alone can take."""
    if request.group_policy == 'isolate' and sum(
            1 for g in request.groups if g.same_provider) > 1:
        return 0
    for group in request.groups:
        if group.same_provider and not _traits_ok(
                provider.traits, group.required_traits,
                group.forbidden_traits):
            return 0
    n = None
    for rc, amount in request.merged_resources().items():
        inventory = provider.inventories.get(rc)
        if inventory is None:
            return 0
        # Each group's amount must be allowed on its own, and all of them
        # come out of this one inventory.
        if not all(inventory.allows(g.resources[rc]) for g in request.groups
                   if g.resources.get(rc)):
            return 0
        count = _fit(inventory.capacity, usages.get(rc, 0), amount)
        n = count if n is None else min(n, count)
    return n or 0


def _pick(tree, group, usages, taken):
    """Providers for one instance of ``group``: {rc: provider uuid}."""
    if group.same_provider:
        for provider in tree.members:
            if provider.uuid in taken:
                continue
            if not _traits_ok(provider.traits, group.required_traits,
                              group.forbidden_traits):
                continue
            if all(rc in provider.inventories and
                   units(provider.inventories[rc],
                         usages[provider.uuid].get(rc, 0), amount) > 0
                   for rc, amount in group.resources.items()):
                return {rc: provider.uuid for rc in group.resources}
        return None
    picked = {}
    for rc, amount in group.resources.items():
        for provider in tree.members:
            inventory = provider.inventories.get(rc)
            if inventory is not None and units(
                    inventory, usages[provider.uuid].get(rc, 0), amount):
                picked[rc] = provider.uuid
                break
        else:
            return None
    return picked


def _claim_one(tree, request, usages):
    """Claim one instance of ``request`` first-fit.

    :returns: None if it cannot, else ``{resource class: provider uuid}``
        of what it took from each provider
    """
    taken = set()
    trial = {uuid: dict(used) for uuid, used in usages.items()}
    claimed = {}
    for group in request.groups:
        picked = _pick(tree, group, trial, taken)
        if picked is None:
            return None
        if group.same_provider and request.group_policy == 'isolate':
            taken.update(picked.values())
        for rc, uuid in picked.items():
            trial[uuid][rc] = trial[uuid].get(rc, 0) + group.resources[rc]
            claimed.setdefault(rc, set()).add(uuid)
    usages.update(trial)
    return claimed


class Claims(typing.NamedTuple):
    """What placement lets the scheduler claim on one host."""

    #: how many instances, one after another
    instances: int
    #: how many of them take something from a sharing provider (the last
    #: ones: the host's own providers serve first)
    pooled: int = 0
    #: ``{resource class: sharing provider uuids}``: the classes those take
    #: from sharing providers, and the pools that could give each (None:
    #: none)
    pools_by_class: typing.Optional[dict] = None


def placement_limit(tree, requests, cap=None):
    """How many instances placement lets the scheduler claim on a host.

    ``placement_claims(tree, requests, cap).instances``.
    """
    return placement_claims(tree, requests, cap).instances


def placement_claims(tree, requests, cap=None):
    """How many instances placement lets the scheduler claim on a host.

    :param tree: the host's :class:`Tree`
    :param requests: the flavor's allocation candidate queries, in the
        order the scheduler merges their candidates (the PCPU query, then
        the VCPU fallback query for pinned flavors); each instance is
        claimed with the first query that still has a candidate, as the
        scheduler claims the first candidate of a host
    :param cap: stop counting there (None: no cap)

    A tree of one provider is counted exactly in closed form; a nested
    tree, or one with sharing providers, one claim after another, each
    request group taking the first provider that can serve it, the tree's
    own before the sharing ones (placement offers every combination; the
    scheduler claims the first it is given).  Each sharing provider is
    counted as if this host were the only one drawing from it.

    :returns: a :class:`Claims`
    """
    usages = {p.uuid: dict(p.usages) for p in tree.members}
    sharing = {p.uuid for p in tree.sharing}
    total = pooled = 0
    pools_by_class = {}
    for request in requests:
        if cap is not None and total >= cap:
            break
        if not request.groups or not _request_possible(tree, request):
            continue
        if len(tree.providers) == 1 and not tree.sharing:
            provider = tree.root
            n = _single_provider_count(provider, request,
                                       usages[provider.uuid])
            if cap is not None:
                n = min(n, cap - total)
            for rc, amount in request.merged_resources().items():
                used = usages[provider.uuid]
                used[rc] = used.get(rc, 0) + n * amount
            total += n
            continue
        steps = 0
        while (cap is None or total < cap) and steps < MAX_STEPS:
            claimed = _claim_one(tree, request, usages)
            if claimed is None:
                break
            total += 1
            steps += 1
            shared = [rc for rc, uuids in claimed.items() if uuids & sharing]
            if shared:
                pooled += 1
                for rc in shared:
                    pools_by_class.setdefault(rc, tuple(
                        p.uuid for p in tree.sharing if rc in p.inventories))
    return Claims(instances=total, pooled=pooled,
                  pools_by_class=pools_by_class or None)


def placement_only(tree, request):
    """The os-capacity figure for one host: min over classes of free/asked.

    Free is summed over the providers of the tree that have the class;
    traits, units and NUMA are ignored, as os-capacity ignores them.
    """
    counts = []
    for rc, amount in request.merged_resources().items():
        if amount <= 0:
            continue
        free = sum(max(_free(p.inventories[rc], p.usages.get(rc, 0)), 0)
                   for p in tree.providers if rc in p.inventories)
        counts.append(int(math.floor(free / amount)))
    return min(counts) if counts else 0


def free_room(tree):
    """(free vCPUs, free MiB): VCPU plus PCPU, and MEMORY_MB of a tree."""
    def free(classes):
        return sum(int(max(math.floor(_free(p.inventories[rc],
                                            p.usages.get(rc, 0))), 0))
                   for p in tree.providers for rc in classes
                   if rc in p.inventories)
    return free(CPU_CLASSES), free((MEMORY_CLASS,))


def pool_allowances(trees, request):
    """``{resource class: {pool uuid: instances}}`` of one flavor's query.

    How many instances of the flavor each sharing provider of ``trees``
    takes, by each class of the query it has, on its own.
    """
    pools = {p.uuid: p for tree in trees for p in tree.sharing}
    allowances = {}
    for rc, amount in request.merged_resources().items():
        for uuid, pool in pools.items():
            inventory = pool.inventories.get(rc)
            if inventory is not None and amount > 0:
                allowances.setdefault(rc, {})[uuid] = units(
                    inventory, pool.usages.get(rc, 0), amount)
    return allowances


def has_trait(tree, trait):
    return trait in tree.root.traits


# --- reading placement -------------------------------------------------------

def _unreachable(exc):
    text = ' '.join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (ks_exc.MissingAuthPlugin, ks_exc.AuthPluginException,
                        ks_exc.Unauthorized, ks_exc.Forbidden)):
        return errors.ConfigError(
            'placement refused the credentials of the [placement] section '
            'of nova.conf: %s' % text)
    return errors.BackendUnavailable('cannot reach placement: %s' % text)


def _sdk_errors():
    try:
        from openstack import exceptions as sdk_exc
    except ImportError:  # pragma: no cover - Nova 34 depends on it
        return ()
    return (sdk_exc.SDKException,)


class PlacementReader(object):
    """Provider trees of compute nodes, read through Nova's report client.

    :param client: a ``nova.scheduler.client.report.SchedulerReportClient``
        (None: Nova's own, from the ``[placement]`` options)
    :param workers: how many requests to have in flight at once
    """

    def __init__(self, context, client=None, workers=1):
        self._context = context
        self._workers = max(int(workers), 1)
        try:
            if client is None:
                from nova.scheduler.client import report
                client = report.SchedulerReportClient()
        except (ks_exc.ClientException,) + _sdk_errors() as exc:
            raise _unreachable(exc) from None
        self._client = client

    def _get(self, url, version=MICROVERSION):
        """The JSON body of a GET, or None for a 404."""
        try:
            resp = self._client.get(url, version=version,
                                    global_request_id=self._context.global_id)
        except (ks_exc.ClientException,) + _sdk_errors() as exc:
            raise _unreachable(exc) from None
        if resp is None:
            raise errors.BackendUnavailable(
                'cannot reach placement: no answer to GET %s' % url)
        if resp.status_code == 404:
            return None
        if resp.status_code in (401, 403):
            raise errors.ConfigError(
                'placement refused GET %s (HTTP %d): check the credentials '
                'of the [placement] section of nova.conf'
                % (url, resp.status_code))
        if resp.status_code != 200:
            raise errors.BackendUnavailable(
                'placement answered HTTP %d to GET %s'
                % (resp.status_code, url))
        return resp.json()

    def _provider(self, summary):
        uuid = summary['uuid']
        base = '/resource_providers/%s' % uuid
        inventories = self._get(base + '/inventories')
        usages = self._get(base + '/usages')
        traits = self._get(base + '/traits')
        if inventories is None or usages is None or traits is None:
            return None
        return Provider(
            uuid=uuid, name=summary.get('name'),
            parent_uuid=summary.get('parent_provider_uuid'),
            inventories={rc: Inventory(
                total=inv['total'], reserved=inv.get('reserved', 0),
                min_unit=inv.get('min_unit', 1),
                max_unit=inv.get('max_unit', inv['total']),
                step_size=inv.get('step_size', 1),
                allocation_ratio=inv.get('allocation_ratio', 1.0))
                for rc, inv in inventories['inventories'].items()},
            usages=dict(usages['usages']),
            traits=frozenset(traits['traits']))

    def trees(self, root_uuids):
        """{root uuid: :class:`Tree`} of the roots placement knows."""
        listing = self._get('/resource_providers')
        summaries = (listing or {}).get('resource_providers', [])
        wanted = set(root_uuids)
        by_root = {}
        for summary in summaries:
            root = summary.get('root_provider_uuid') or summary['uuid']
            if root in wanted:
                by_root.setdefault(root, []).append(summary)
        todo = [s for group in by_root.values() for s in group]
        providers = self._map(self._provider, todo)
        read = {s['uuid']: p for s, p in zip(todo, providers)}
        trees = {}
        for root, group in by_root.items():
            members = [read[s['uuid']] for s in group]
            if any(p is None for p in members):
                # Deleted while we read it: as good as absent.
                continue
            members.sort(key=lambda p: (p.uuid != root, _depth(p, group),
                                        p.name or '', p.uuid))
            trees[root] = Tree(providers=tuple(members))
        return self._with_sharing(trees)

    def allocations(self, provider_uuids):
        """``{provider uuid: {consumer uuid: {resource class: amount}}}``.

        What each provider has allocated to whom (one request per
        provider, ``GET /resource_providers/{uuid}/allocations``); a
        provider deleted meanwhile has none.
        """
        uuids = list(provider_uuids)

        def read(uuid):
            body = self._get('/resource_providers/%s/allocations' % uuid)
            return {consumer: dict(allocation.get('resources', {}))
                    for consumer, allocation in
                    (body or {}).get('allocations', {}).items()}
        return dict(zip(uuids, self._map(read, uuids)))

    def _map(self, function, items):
        if self._workers > 1 and len(items) > 1:
            with futures.ThreadPoolExecutor(self._workers) as pool:
                return list(pool.map(function, items))
        return [function(item) for item in items]

    def _aggregates(self, uuid):
        body = self._get('/resource_providers/%s/aggregates' % uuid)
        return frozenset((body or {}).get('aggregates', ()))

    def _with_sharing(self, trees):
        """The trees with the sharing providers of their aggregates.

        Nothing more is read when placement has no sharing provider.
        """
        listing = self._get('/resource_providers?required=%s'
                            % SHARING_TRAIT, version=SHARING_MICROVERSION)
        summaries = (listing or {}).get('resource_providers', [])
        in_trees = {p.uuid for tree in trees.values() for p in tree.providers}
        summaries = [s for s in summaries if s['uuid'] not in in_trees]
        if not summaries or not trees:
            return trees
        pools = [p for p in self._map(self._provider, summaries)
                 if p is not None]
        pool_aggregates = dict(zip([p.uuid for p in pools],
                                   self._map(self._aggregates,
                                             [p.uuid for p in pools])))
        members = sorted(in_trees)
        member_aggregates = dict(zip(members,
                                     self._map(self._aggregates, members)))
        pools.sort(key=lambda p: p.uuid)
        result = {}
        for root, tree in trees.items():
            aggregates = frozenset().union(*(
                member_aggregates[p.uuid] for p in tree.providers))
            sharing = tuple(p for p in pools
                            if pool_aggregates[p.uuid] & aggregates)
            result[root] = tree._replace(sharing=sharing)
        return result


def _depth(provider, summaries):
    parents = {s['uuid']: s.get('parent_provider_uuid') for s in summaries}
    depth, uuid = 0, provider.uuid
    while parents.get(uuid) and depth < 64:
        uuid = parents[uuid]
        depth += 1
    return depth
