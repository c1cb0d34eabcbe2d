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

"""The minimal and random strategies, and loading them by name."""

import dataclasses
import itertools
import random
from unittest import mock

from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st

from nova_sched_ext.preemption import strategies
from nova_sched_ext.preemption.strategies import minimal
from nova_sched_ext.preemption.strategies import search as search_mod
from nova_sched_ext.preemption import victims
from nova_sched_ext_tools.bench import victims as bench
from tests import base
from tests.unit.preemption import test_victims
from tests.unit.preemption import victims_fixtures as fx


def full_host(name, *victim_specs):
    """A host with no free VCPU or memory but its victims'.

    :param victim_specs: ``(uuid, vcpus, memory_mb, hours after T0)``
    """
    host = fx.Host(name)
    vcpus = sum(spec[1] for spec in victim_specs)
    memory = sum(spec[2] for spec in victim_specs)
    host.add(fx.vcpu(host.capacity['VCPU'] - vcpus,
                     host.capacity['MEMORY_MB'] - memory))
    for uuid, cpus, mem, hours in victim_specs:
        host.add(fx.vcpu(cpus, mem), victim=uuid, created_at=fx.at(hours))
    return host.candidate()


def exhaustive_choice(hosts, request):
    """The documented order, applied to every subset of every host."""
    fitting = []
    for host in hosts:
        for size in range(len(host.victims) + 1):
            for subset in itertools.combinations(host.victims, size):
                if victims.host_fits(host, request, subset) is True:
                    wasted = strategies.waste(
                        request.resources, host.free,
                        victims.freed_resources(subset))
                    fitting.append((size, wasted, host, subset))
    size = min(f[0] for f in fitting)
    least = min(f[1] for f in fitting if f[0] == size)
    ties = [f for f in fitting if f[0] == size and f[1] <= least + 1e-6]
    _size, _wasted, host, subset = min(ties, key=lambda f: (
        -min((v.created_ts for v in f[3]), default=0.0), f[2].host,
        f[2].nodename, sorted(v.uuid for v in f[3])))
    return host.host, sorted(v.uuid for v in subset)


def chosen(plan):
    return [(p.host.host, sorted(v.uuid for v in p.victims))
            for p in plan.placements]


class TestMinimalVictims(base.TestCase):

    def setUp(self):
        super().setUp()
        self.strategy = strategies.MinimalVictims()

    def choose(self, hosts, shape, count=1):
        request = fx.request(shape, count)
        plan = self.strategy.choose(hosts, request)
        fx.check_plan(hosts, request, plan)
        return chosen(plan)

    def test_fewest_victims_first(self):
        hosts = [full_host('a-two-small', ('s1', 1, 512, 0),
                           ('s2', 1, 512, 0)),
                 full_host('b-one-big', ('big', 8, 4096, 0))]
        self.assertEqual([('b-one-big', ['big'])],
                         self.choose(hosts, fx.vcpu(2, 1024)))

    def test_then_least_waste(self):
        hosts = [full_host('a-big', ('big', 4, 2048, 0)),
                 full_host('b-exact', ('exact', 2, 2048, 0)),
                 full_host('c-bigger', ('bigger', 8, 2048, 0))]
        self.assertEqual([('b-exact', ['exact'])],
                         self.choose(hosts, fx.vcpu(2, 2048)))
        self.assertEqual(0.0, strategies.waste(
            {'VCPU': 2, 'MEMORY_MB': 2048}, {}, {'VCPU': 2,
                                                 'MEMORY_MB': 2048}))
        self.assertEqual(1.0, strategies.waste(
            {'VCPU': 2, 'MEMORY_MB': 2048}, {}, {'VCPU': 4,
                                                 'MEMORY_MB': 2048}))
        # Room already free counts as freed beyond the need.
        self.assertEqual(1.5, strategies.waste(
            {'VCPU': 2, 'MEMORY_MB': 2048}, {'VCPU': 2},
            {'VCPU': 3, 'MEMORY_MB': 2048}))

    def test_then_youngest_victims(self):
        hosts = [full_host('a-old', ('old', 2, 1024, 1)),
                 full_host('b-young', ('young', 2, 1024, 100)),
                 full_host('c-middle', ('middle', 2, 1024, 50))]
        self.assertEqual([('b-young', ['young'])],
                         self.choose(hosts, fx.vcpu(2, 1024)))
        # Among pairs, the one whose oldest victim is youngest.
        hosts = [full_host('a', ('a1', 1, 512, 10), ('a2', 1, 512, 90)),
                 full_host('b', ('b1', 1, 512, 40), ('b2', 1, 512, 50))]
        self.assertEqual([('b', ['b1', 'b2'])],
                         self.choose(hosts, fx.vcpu(2, 1024)))

    def test_then_host_name(self):
        hosts = [full_host('b', ('b1', 2, 1024, 0)),
                 full_host('a', ('a1', 2, 1024, 0))]
        self.assertEqual([('a', ['a1'])],
                         self.choose(hosts, fx.vcpu(2, 1024)))

    def test_no_eviction_when_a_host_has_room(self):
        roomy = fx.Host('roomy').candidate()
        hosts = [full_host('a', ('a1', 2, 1024, 0)), roomy]
        self.assertEqual([('roomy', [])],
                         self.choose(hosts, fx.vcpu(2, 1024)))

    def test_numa_aware(self):
        host, a, b = test_victims.split_cells_host()
        candidate = host.candidate()
        # a wastes less than b, but only b frees a whole cell.
        self.assertEqual([('split', ['b'])],
                         self.choose([candidate], fx.pinned(3)))
        # Host level only, a would do.
        self.assertEqual([('split', ['a'])],
                         self.choose([host.candidate(with_numa=False)],
                                     fx.pinned(3)))

    def test_best_pair_failing_numa_falls_back_to_another_host(self):
        # On "a" the only pair wastes least but leaves 2 + 1 free pinned
        # CPUs in two cells; "b"'s pair wastes more (more memory) and
        # frees 3 in one cell.  "a" is searched first.
        a = fx.Host('a')
        a.add(fx.pinned(2), cell=0)
        a.add(fx.pinned(1, 512), cell=0, victim='a1')
        a.add(fx.pinned(3), cell=1)
        a.add(fx.pinned(1, 512), cell=1, victim='a2')
        b = fx.Host('b')
        b.add(fx.pinned(1), cell=0)
        b.add(fx.pinned(2, 1024), cell=0, victim='b1')
        b.add(fx.pinned(1, 1024), cell=0, victim='b2')
        b.add(fx.pinned(4), cell=1)
        hosts = [a.candidate(), b.candidate()]
        self.assertEqual([('b', ['b1', 'b2'])],
                         self.choose(hosts, fx.pinned(3)))
        # Host level only, "a" would win.
        self.assertEqual(
            [('a', ['a1', 'a2'])],
            self.choose([a.candidate(with_numa=False),
                         b.candidate(with_numa=False)], fx.pinned(3)))

    def test_host_hopeless_at_numa_level_is_dropped_early(self):
        # Host level, 4 pinned CPUs fit once any two victims are gone; at
        # NUMA level no cell ever has 4 free (on-demand CPUs in both).
        host = fx.Host('h')
        host.add(fx.pinned(2), cell=0)
        host.add(fx.pinned(1, 512), cell=0, victim='v1')
        host.add(fx.pinned(1), cell=1)
        host.add(fx.pinned(1, 512), cell=1, victim='v2')
        host.add(fx.pinned(1, 512), cell=1, victim='v3')
        candidate = host.candidate()
        with mock.patch.object(victims, 'numa_fits',
                               wraps=victims.numa_fits) as numa_fits:
            self.assertIsNone(self.strategy.choose(
                [candidate], fx.request(fx.pinned(4, 512))))
        # The best set, then every victim: never the other sets.
        self.assertEqual(2, numa_fits.call_count)
        self.assertEqual(('v1', 'v2', 'v3'), tuple(
            v.uuid for v in numa_fits.call_args[0][2]))

    def test_gives_up_after_too_many_numa_failures(self):
        host, a, b = test_victims.split_cells_host()
        with mock.patch.object(minimal, 'MAX_NUMA_FAILURES', 0), \
                mock.patch.object(minimal.LOG, 'warning') as warning:
            self.assertIsNone(self.strategy.choose(
                [host.candidate()], fx.request(fx.pinned(3))))
        self.assertIn('giving up', warning.call_args[0][0])

    def test_nothing_fits(self):
        hosts = [full_host('a', ('a1', 2, 1024, 0))]
        self.assertIsNone(self.strategy.choose(
            hosts, fx.request(fx.vcpu(4, 1024))))
        self.assertIsNone(self.strategy.choose([], fx.request(fx.vcpu(1))))

    def test_greedy_beyond_the_subset_cap(self):
        specs = [('v%d' % i, 1, 256, i) for i in range(8)]
        hosts = [full_host('a', *specs)]
        request = fx.request(fx.vcpu(3, 768))
        with mock.patch.object(minimal, 'MAX_SUBSETS_PER_HOST', 1), \
                mock.patch.object(minimal.LOG, 'debug') as debug:
            plan = self.strategy.choose(hosts, request)
        fx.check_plan(hosts, request, plan)
        self.assertEqual(3, len(plan.victims))
        # Greedy keeps the youngest among equals.
        self.assertEqual(['v5', 'v6', 'v7'],
                         sorted(v.uuid for v in plan.victims))
        self.assertIn('greedily', debug.call_args[0][0])

    def test_creation_times_that_do_not_compare(self):
        # Unknown, naive and aware creation times side by side: the host
        # bounds fall back to seconds since the epoch; same order.
        def aged(uuid, at):
            return dataclasses.replace(
                next(v for v in host.victims if v.uuid == uuid),
                created_at=at)

        hosts = []
        for name, times in (('a', (None, fx.at(5), fx.at(6))),
                            ('b', (fx.at(7).replace(tzinfo=None), None,
                                   fx.at(1))),
                            ('c', (fx.at(4), fx.at(8), fx.at(2)))):
            host = full_host(name, *[('%s%d' % (name, i), 1, 512, 0)
                                     for i in range(3)])
            hosts.append(dataclasses.replace(host, victims=tuple(
                aged('%s%d' % (name, i), at)
                for i, at in enumerate(times))))
        for shape in (fx.vcpu(1, 512), fx.vcpu(2, 1024), fx.vcpu(3, 1536)):
            request = fx.request(shape)
            plan = self.strategy.choose(hosts, request)
            fx.check_plan(hosts, request, plan)
            self.assertEqual([exhaustive_choice(hosts, request)],
                             chosen(plan))
        self.assertEqual([('c', ['c1'])], chosen(self.strategy.choose(
            hosts, fx.request(fx.vcpu(1, 512)))))

    def test_exact_search_only_where_a_bound_may_win(self):
        # 40 hosts whose pairs all waste the same; the host with the
        # youngest pair wins on age, and its bounds are the only ones that
        # can reach that key: one exact search, not forty.
        hosts = [full_host('h%02d' % i, ('h%02d-a' % i, 1, 512, i),
                           ('h%02d-b' % i, 1, 512, i + 0.5),
                           ('h%02d-old' % i, 1, 512, -100))
                 for i in range(40)]
        request = fx.request(fx.vcpu(2, 1024))
        with mock.patch.object(self.strategy, '_best',
                               wraps=self.strategy._best) as best:
            plan = self.strategy.choose(hosts, request)
        fx.check_plan(hosts, request, plan)
        self.assertEqual([exhaustive_choice(hosts, request)], chosen(plan))
        self.assertEqual([('h39', ['h39-a', 'h39-b'])], chosen(plan))
        self.assertEqual(1, best.call_count)

    @settings(max_examples=20, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(min_value=0, max_value=2 ** 32))
    def test_host_bounds_never_exceed_a_subset(self, seed):
        # The lazy search is exact only if a host's placeholder entries sort
        # before every subset of the host they stand for.
        rng = random.Random(seed)
        hosts = bench.random_cluster(rng)
        shape = rng.choice(bench.SHAPES + (bench.Shape(6, 6144),))
        request = fx.request(shape)
        need = search_mod.Need({rc: amount for rc, amount
                                in request.resources.items() if amount})
        searches = [search for search in (
            strategies.MinimalVictims._prepare(host, need) for host in hosts)
            if search is not None]
        if not any(search.host.victims for search in searches):
            return
        bounds = search_mod.Bounds(searches, need)
        checked = 0
        for size in range(1, 5):
            coarse = {entry[-2]: entry
                      for entry in bounds.placeholders(size, searches)}
            for seq, search in enumerate(searches):
                entries = []
                if size == 1:
                    self.strategy._singles(search, seq, need, entries)
                elif size <= len(search.host.victims):
                    self.strategy._subsets(search, seq, size, need, entries)
                if not entries:
                    continue
                first = min(entries)
                self.assertIn(seq, coarse)
                self.assertLessEqual(coarse[seq][:6], first[:6])
                if size > 1:
                    refined = bounds.refined(size, seq, search)
                    self.assertIsNotNone(refined)
                    self.assertLessEqual(coarse[seq][:6], refined[:6])
                    self.assertLessEqual(refined[:6], first[:6])
                    best = self.strategy._best(search, seq, size, need)
                    self.assertEqual(first[:6], best[:6])
                checked += 1
        self.assertGreater(checked, 0)

    @settings(max_examples=25, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(min_value=0, max_value=2 ** 32))
    def test_agrees_with_brute_force_and_the_documented_order(self, seed):
        rng = random.Random(seed)
        hosts = bench.random_cluster(rng)
        request, optimum = bench.random_request(rng, hosts)
        if request is None:
            return
        plan = self.strategy.choose(hosts, request)
        fx.check_plan(hosts, request, plan)
        self.assertEqual(optimum, len(plan.victims))
        self.assertEqual([exhaustive_choice(hosts, request)], chosen(plan))
        other = strategies.RandomVictims(seed=seed).choose(hosts, request)
        fx.check_plan(hosts, request, other)
        self.assertGreaterEqual(len(other.victims), optimum)

    @settings(max_examples=10, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(min_value=0, max_value=2 ** 32),
           st.integers(min_value=2, max_value=4))
    def test_multi_instance_plans_are_valid(self, seed, count):
        rng = random.Random(seed)
        hosts = bench.random_cluster(rng)
        shape = rng.choice(bench.SHAPES)
        request = fx.request(shape, count)
        for strategy in (self.strategy, strategies.RandomVictims(seed)):
            plan = strategy.choose(hosts, request)
            if plan is not None:
                fx.check_plan(hosts, request, plan)


class TestRandomVictims(base.TestCase):

    def clusters(self):
        rng = random.Random(7)
        for _ in range(8):
            hosts = bench.random_cluster(rng)
            request, _optimum = bench.random_request(rng, hosts)
            if request is not None:
                yield hosts, request

    def test_seeded_and_valid(self):
        differs = False
        for hosts, request in self.clusters():
            first = strategies.RandomVictims(seed=3).choose(hosts, request)
            again = strategies.RandomVictims(seed=3).choose(hosts, request)
            other = strategies.RandomVictims(seed=4).choose(hosts, request)
            fx.check_plan(hosts, request, first)
            fx.check_plan(hosts, request, other)
            self.assertEqual(chosen(first), chosen(again))
            differs = differs or chosen(first) != chosen(other)
        self.assertTrue(differs)

    def test_only_hosts_that_can_fit(self):
        hosts = [full_host('small', ('s', 1, 512, 0)),
                 full_host('big', ('b', 4, 2048, 0))]
        for seed in range(10):
            plan = strategies.RandomVictims(seed).choose(
                hosts, fx.request(fx.vcpu(4, 2048)))
            self.assertEqual([('big', ['b'])], chosen(plan))


class TestLoadStrategy(base.TestCase):

    def test_by_name(self):
        self.assertEqual(['minimal', 'random'],
                         strategies.available_strategies())
        self.assertIsInstance(strategies.load_strategy(),
                              strategies.MinimalVictims)
        loaded = strategies.load_strategy('random', seed=5)
        self.assertIsInstance(loaded, strategies.RandomVictims)
        self.assertEqual(random.Random(5).random(), loaded.rng.random())

    def test_unknown_name_lists_the_available_ones(self):
        exc = self.assertRaises(ValueError, strategies.load_strategy,
                                'smallest')
        self.assertIn("'smallest'", str(exc))
        self.assertIn('minimal, random', str(exc))
