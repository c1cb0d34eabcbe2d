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


"""Shared resource pools: what many hosts draw from one provider.

A sharing provider of placement (trait ``MISC_SHARES_VIA_AGGREGATE``, such
as a shared storage pool with the ``DISK_GB`` of many compute nodes) serves
every host in its aggregates, but its room is counted once: ten hosts that
could each take 50 instances of a flavor from a pool with room for 50
take 50 together, not 500.  Each host's own count
(:func:`~nova_sched_ext.cloud.claims.placement_claims`) sees the
whole pool; :func:`scope_total` then takes, for a scope, what the pools
can give all of its hosts at once (the sum of the hosts' counts less
their :func:`shortfall`).

For one resource class, that is a maximum flow: each host can place its
``pooled`` instances (those of its count that draw from a pool) on any
pool associated with it that has the class, each pool takes at most as
many instances as its room allows.  Hosts with the same pools are one node
of the flow (the flow depends on nothing else), so the graph is as small
as the number of distinct pool sets.  The scope's total is its hosts'
counts less what the pools cannot give, taken over the pooled classes.
It is exact when the scope's pooled hosts draw the same classes from the
pools (the common case: ``DISK_GB`` from a storage pool); when hosts draw
different classes, each class is bounded on its own, which can leave the
total above what the pools give together.
"""

import collections


def max_flow(demands, allowances):
    """The largest number of instances the pools can take from the hosts.

    :param demands: ``[(instances, pools), ...]``: per host (or group of
        hosts), how many instances it would draw and from which pools
        (an iterable of pool ids) it may draw them
    :param allowances: ``{pool id: instances the pool takes}``
    :returns: an int, at most the sum of the demands
    """
    merged = collections.Counter()
    for instances, pools in demands:
        pools = frozenset(p for p in pools if allowances.get(p, 0) > 0)
        if instances > 0 and pools:
            merged[pools] += instances
    groups = list(merged.items())
    pools = sorted({p for group, _ in groups for p in group})
    # nodes: 0 source, 1..G groups, G+1..G+P pools, G+P+1 sink
    n_groups = len(groups)
    sink = n_groups + len(pools) + 1
    pool_node = {p: n_groups + 1 + i for i, p in enumerate(pools)}
    capacity = collections.defaultdict(int)
    edges = collections.defaultdict(list)

    def add(u, v, c):
        if (u, v) not in capacity and (v, u) not in capacity:
            edges[u].append(v)
            edges[v].append(u)
        capacity[(u, v)] += c

    unlimited = sum(instances for _, instances in groups)
    for g, (group, instances) in enumerate(groups, start=1):
        add(0, g, instances)
        for p in group:
            add(g, pool_node[p], unlimited)
    for p in pools:
        add(pool_node[p], sink, allowances[p])

    total = 0
    while True:
        # Edmonds-Karp: the shortest augmenting path, by BFS
        parent = {0: None}
        queue = collections.deque([0])
        while queue and sink not in parent:
            u = queue.popleft()
            for v in edges[u]:
                if v not in parent and capacity[(u, v)] > 0:
                    parent[v] = u
                    queue.append(v)
        if sink not in parent:
            return total
        path, v = [], sink
        while parent[v] is not None:
            path.append((parent[v], v))
            v = parent[v]
        pushed = min(capacity[e] for e in path)
        for u, v in path:
            capacity[(u, v)] -= pushed
            capacity[(v, u)] += pushed
        total += pushed


class HostPools(object):
    """What one host's count of one flavor draws from sharing providers.

    :param pooled: how many of the host's counted instances draw from a
        pool
    :param pools_by_class: ``{resource class: pool ids}``: for each class
        the instances take from pools, the pools the host may take it from
    """

    __slots__ = ('pooled', 'pools_by_class')

    def __init__(self, pooled, pools_by_class):
        self.pooled = pooled
        self.pools_by_class = pools_by_class

    def __repr__(self):
        return 'HostPools(%d, %r)' % (self.pooled, self.pools_by_class)


def scope_total(counts, host_pools, allowances):
    """A scope's count of one flavor, the pools' room shared by its hosts.

    :param counts: the hosts' own counts
    :param host_pools: parallel to ``counts``: a :class:`HostPools`, or
        None for a host that draws nothing from a pool
    :param allowances: ``{resource class: {pool id: instances}}``: how many
        instances of the flavor each pool takes, by the class it gives
    :returns: the scope's total
    """
    return sum(counts) - shortfall(host_pools, allowances)


def shortfall(host_pools, allowances):
    """How many of the hosts' counted instances the pools cannot give.

    What :func:`scope_total` takes off the sum of a scope's counts: the
    hosts' own counts add up, this part does not (it depends only on the
    hosts that draw from a pool).

    :param host_pools: :class:`HostPools` of the scope's hosts, or None
        for a host that draws nothing from a pool
    :param allowances: as :func:`scope_total`'s
    """
    pooled = [hp for hp in host_pools if hp is not None and hp.pooled > 0]
    if not pooled:
        return 0
    wanted = sum(hp.pooled for hp in pooled)
    given = wanted
    for rc in sorted({rc for hp in pooled for rc in hp.pools_by_class}):
        drawing = [(hp.pooled, hp.pools_by_class[rc]) for hp in pooled
                   if rc in hp.pools_by_class]
        others = wanted - sum(n for n, _ in drawing)
        given = min(given, others + max_flow(drawing,
                                             allowances.get(rc, {})))
    return wanted - given
