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


"""What placement would let the scheduler claim on a host: an emulation.

:func:`placement_limit` answers how many instances of a flavor placement
would let the scheduler claim on one host, one after another, as its
``GET /allocation_candidates`` query decides a host is a candidate: the
free-room rule of :mod:`~nova_sched_ext.cloud.room` for every resource
class of every request group of the flavor, the group's required and
forbidden traits, the request's root traits, and the sharing providers
(``MISC_SHARES_VIA_AGGREGATE``, such as a shared storage pool) associated
with the host by aggregate, after the host's own providers (what the host
draws from those is shared with other hosts: see
:mod:`~nova_sched_ext.capacity.pools`).  :func:`placement_only` is the
os-capacity figure: per host, the minimum over the flavor's resource
classes of ``floor(free / requested)``, nothing else.

It reads the trees :class:`~nova_sched_ext.cloud.placement.PlacementReader`
gives (or the offline tools build), and asks placement nothing.
"""

import typing

from nova_sched_ext.cloud import room

#: A safety net for the nested-tree simulation (never reached in practice:
#: every step consumes resources).
MAX_STEPS = 1 << 20

#: The resource classes the fragmentation figure adds up as vCPUs.
CPU_CLASSES = ('VCPU', 'PCPU')
MEMORY_CLASS = 'MEMORY_MB'


#: How many more allocations of an amount one inventory allows.
units = room.units


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
        count = room.free(inventory, usages.get(rc, 0)) // amount
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
        free = sum(room.free(p.inventories[rc], p.usages.get(rc, 0))
                   for p in tree.providers if rc in p.inventories)
        counts.append(free // amount)
    return min(counts) if counts else 0


def free_room(tree):
    """(free vCPUs, free MiB): VCPU plus PCPU, and MEMORY_MB of a tree."""
    def free(classes):
        return sum(room.free(p.inventories[rc], p.usages.get(rc, 0))
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
