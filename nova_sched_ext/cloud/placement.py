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


"""Placement as the package reads it: providers, trees, and the reader.

The model (:class:`Inventory`, :class:`Provider`, :class:`Tree`, and the
query of a flavor, :class:`Group` and :class:`Request`) and
:class:`PlacementReader`, which reads, through Nova's own
``SchedulerReportClient`` (so with the ``[placement]`` keystoneauth options
of the scheduler's ``nova.conf``), the provider trees of the compute nodes
and, per provider, its inventories, usages, traits and allocations, and
the sharing providers (``MISC_SHARES_VIA_AGGREGATE``) associated with them
by aggregate.

What placement would let the scheduler claim on such a tree is
:mod:`nova_sched_ext.cloud.claims`; how much room one inventory has left
is :mod:`nova_sched_ext.cloud.room`.
"""

from concurrent import futures
import typing

from keystoneauth1 import exceptions as ks_exc
from oslo_log import log as logging

from nova_sched_ext.cloud import errors
from nova_sched_ext.cloud import room

LOG = logging.getLogger(__name__)

#: Nested providers (``root_provider_uuid``) and traits are in 1.14.
MICROVERSION = '1.14'

#: The trait of a provider that shares its inventory with the providers
#: of its aggregates.
SHARING_TRAIT = 'MISC_SHARES_VIA_AGGREGATE'
#: ``GET /resource_providers?required=`` is in 1.18.
SHARING_MICROVERSION = '1.18'

#: What the reader raises when placement cannot be read: a
#: ``BackendUnavailable`` (unreachable, an error answer) or a
#: ``ConfigError`` (the credentials were refused).
ReadError = errors.CloudError


class Inventory(typing.NamedTuple):
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = 1 << 31
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self):
        """What placement lets be allocated in all (:func:`room.capacity`)."""
        return room.capacity(self)

    def allows(self, amount):
        """Whether the units allow one allocation (:func:`room.allows`)."""
        return room.allows(self, amount)

    @classmethod
    def from_json(cls, inv):
        """An inventory from placement's JSON (``GET .../inventories``)."""
        return cls(total=inv['total'], reserved=inv.get('reserved', 0),
                   min_unit=inv.get('min_unit', 1),
                   max_unit=inv.get('max_unit', inv['total']),
                   step_size=inv.get('step_size', 1),
                   allocation_ratio=inv.get('allocation_ratio', 1.0))


class _ProviderFields(typing.NamedTuple):
    uuid: str
    name: str
    parent_uuid: typing.Optional[str]
    inventories: dict          # {resource class: Inventory}
    usages: dict               # {resource class: used}
    traits: frozenset
    #: the aggregates it is a member of (the candidate query's member_of)
    aggregates: frozenset = frozenset()
    #: placement's generation of the provider, when read with it
    generation: typing.Optional[int] = None


class Provider(_ProviderFields):
    """One resource provider as read (a tuple: never changed, replaced).

    :meth:`headroom` is computed once per provider object: ``_replace``
    (a claim, a resync) makes a new one, which computes it again.
    """

    def headroom(self):
        """``{resource class: room.Headroom}`` of the inventories."""
        cached = self.__dict__.get('_headroom')
        if cached is None:
            usages = self.usages
            cached = self.__dict__['_headroom'] = {
                rc: room.headroom(inventory, usages.get(rc, 0))
                for rc, inventory in self.inventories.items()}
        return cached


class ProviderRoom(typing.NamedTuple):
    """One provider as :meth:`PlacementReader.provider_room` reads it."""

    inventories: dict          # {resource class: Inventory}
    usages: dict               # {resource class: used}
    allocations: dict          # {consumer uuid: {resource class: amount}}
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
            inventories={rc: Inventory.from_json(inv) for rc, inv in
                         inventories['inventories'].items()},
            usages=dict(usages['usages']),
            traits=frozenset(traits['traits']))

    def listing(self):
        """Every provider placement has, in one call: its summaries.

        Each has ``uuid``, ``name``, ``generation``,
        ``parent_provider_uuid`` and ``root_provider_uuid``; placement
        bumps a provider's generation on every change of its inventories,
        allocations, traits and aggregates.
        """
        body = self._get('/resource_providers')
        return (body or {}).get('resource_providers', [])

    def provider(self, summary):
        """One provider of :meth:`listing`, read now, with its aggregates.

        Its ``generation`` is the listing's, which is no newer than what
        was read: a change made while it is read shows in the next
        listing as a newer generation.  None if it was deleted meanwhile.
        """
        provider = self._provider(summary)
        if provider is None:
            return None
        aggregates = self._get('/resource_providers/%s/aggregates'
                               % summary['uuid'])
        if aggregates is None:
            return None
        return provider._replace(
            aggregates=frozenset(aggregates.get('aggregates', ())),
            generation=summary.get('generation'))

    def usages(self, uuids):
        """{uuid: {resource class: used}} of these providers, read now.

        ``workers`` at a time; a provider deleted meanwhile is left out.
        """
        def read(uuid):
            body = self._get('/resource_providers/%s/usages' % uuid)
            return uuid, None if body is None else dict(body['usages'])

        return {uuid: used for uuid, used in self._map(read, list(uuids))
                if used is not None}

    def read_all(self, summaries):
        """:meth:`provider` of each summary, ``workers`` at a time."""
        return self._map(self.provider, list(summaries))

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

    def provider_room(self, uuid):
        """What one provider has, holds and gives, or None if it is gone.

        Its inventories (``{resource class: Inventory}``), usages and
        allocations (``{consumer uuid: {resource class: amount}}``) and
        traits, read one after another (not at one generation: a caller
        that acts on them claims through placement, which checks again).
        """
        base = '/resource_providers/%s' % uuid
        inventories = self._get(base + '/inventories')
        usages = self._get(base + '/usages')
        allocations = self._get(base + '/allocations')
        traits = self._get(base + '/traits')
        if None in (inventories, usages, allocations, traits):
            return None
        return ProviderRoom(
            inventories={rc: Inventory.from_json(inv) for rc, inv in
                         inventories['inventories'].items()},
            usages=dict(usages['usages']),
            allocations={
                consumer: dict(allocation.get('resources', {}))
                for consumer, allocation in
                allocations.get('allocations', {}).items()},
            traits=frozenset(traits['traits']))

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


def trees_of(providers, root_uuids):
    """{root uuid: :class:`Tree`} of the roots among ``providers``.

    What :meth:`PlacementReader.trees` reads, made from providers already
    read with their aggregates (the kept provider state's): each root's
    tree in the same order (the root, then by depth, name and UUID), and
    the sharing providers (``MISC_SHARES_VIA_AGGREGATE``, outside those
    trees) that share an aggregate with a member, in UUID order.
    """
    providers = list(providers)
    by_uuid = {p.uuid: p for p in providers}
    wanted = set(root_uuids)

    def root_of(provider):
        seen = 0
        while provider.parent_uuid and seen < 64:
            parent = by_uuid.get(provider.parent_uuid)
            if parent is None:
                return None
            provider, seen = parent, seen + 1
        return provider.uuid

    groups = {}
    for provider in providers:
        root = root_of(provider)
        if root in wanted:
            groups.setdefault(root, []).append(provider)
    summaries = {root: [{'uuid': p.uuid,
                         'parent_provider_uuid': p.parent_uuid}
                        for p in group]
                 for root, group in groups.items()}
    trees = {}
    for root, group in groups.items():
        group.sort(key=lambda p: (p.uuid != root,
                                  _depth(p, summaries[root]),
                                  p.name or '', p.uuid))
        trees[root] = Tree(providers=tuple(group))
    in_trees = {p.uuid for group in groups.values() for p in group}
    pools = sorted((p for p in providers
                    if SHARING_TRAIT in p.traits and p.uuid not in in_trees),
                   key=lambda p: p.uuid)
    if not pools:
        return trees
    result = {}
    for root, tree in trees.items():
        aggregates = frozenset().union(*(p.aggregates
                                         for p in tree.providers))
        result[root] = tree._replace(sharing=tuple(
            p for p in pools if p.aggregates & aggregates))
    return result


def _depth(provider, summaries):
    parents = {s['uuid']: s.get('parent_provider_uuid') for s in summaries}
    depth, uuid = 0, provider.uuid
    while parents.get(uuid) and depth < 64:
        uuid = parents[uuid]
        depth += 1
    return depth
