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


"""Sharing providers: a pool's room counted once for all its hosts.

The oracle of :func:`pools.max_flow` is the min-cut of the same bipartite
graph written out by hand: for every set X of pools whose room is used up,
the pools' room in X plus the demand of every host that may draw from a
pool outside X; the smallest of those is the maximum flow.
"""

import itertools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from nova_sched_ext.capacity import pools
from tests import base


def min_cut(demands, allowances):
    names = sorted(allowances)
    best = None
    for size in range(len(names) + 1):
        for cut in itertools.combinations(names, size):
            cut = set(cut)
            value = sum(allowances[p] for p in cut) + sum(
                n for n, ps in demands
                if not set(p for p in ps if allowances.get(p, 0) > 0) <= cut)
            best = value if best is None else min(best, value)
    return best


class TestMaxFlow(base.TestCase):

    def test_one_pool_shared_by_many_hosts(self):
        self.assertEqual(50, pools.max_flow([(50, ['s'])] * 10, {'s': 50}))
        self.assertEqual(30, pools.max_flow([(10, ['s'])] * 3, {'s': 50}))

    def test_a_host_with_no_pool_left_takes_nothing(self):
        self.assertEqual(5, pools.max_flow([(5, ['a']), (5, ['b'])],
                                           {'a': 10, 'b': 0}))
        self.assertEqual(0, pools.max_flow([(5, [])], {'a': 10}))

    def test_overlapping_pools_need_the_right_assignment(self):
        # h1 may use a or b, h2 only a: a greedy h1 -> a would leave h2
        # short; the flow sends h1 to b.
        self.assertEqual(8, pools.max_flow([(4, ['a', 'b']), (4, ['a'])],
                                           {'a': 4, 'b': 4}))

    @settings(max_examples=base.hypothesis_examples(1 / 2, 50),
              deadline=None, derandomize=True,
              database=None)
    @given(st.lists(st.tuples(st.integers(0, 20),
                              st.sets(st.sampled_from('abcd'))),
                    max_size=7),
           st.dictionaries(st.sampled_from('abcd'), st.integers(0, 30)))
    def test_against_the_min_cut(self, demands, allowances):
        demands = [(n, sorted(ps)) for n, ps in demands]
        self.assertEqual(min_cut(demands, allowances),
                         pools.max_flow(demands, allowances))


class TestScopeTotal(base.TestCase):

    def test_hosts_without_pools_are_their_counts(self):
        self.assertEqual(12, pools.scope_total([4, 8], [None, None], {}))

    def test_the_pool_caps_what_its_hosts_draw_together(self):
        hp = pools.HostPools(50, {'DISK_GB': ('s',)})
        self.assertEqual(50 + 7, pools.scope_total(
            [50, 50, 50, 7], [hp, hp, hp, None], {'DISK_GB': {'s': 50}}))

    def test_instances_served_locally_are_not_capped(self):
        # each host serves 5 instances from its own disk, then 10 from
        # the pool, which has room for 12 in all
        hp = pools.HostPools(10, {'DISK_GB': ('s',)})
        self.assertEqual(5 + 5 + 12, pools.scope_total(
            [15, 15], [hp, hp], {'DISK_GB': {'s': 12}}))

    def test_two_pooled_classes_take_the_scarcer(self):
        hp = pools.HostPools(10, {'DISK_GB': ('s',), 'IPV4_ADDRESS': ('n',)})
        self.assertEqual(6, pools.scope_total(
            [10, 10], [hp, hp],
            {'DISK_GB': {'s': 15}, 'IPV4_ADDRESS': {'n': 6}}))
