"""The slot arena: kept records and memoised weights vs counting afresh.

Every figure the arena returns must equal what the engine and the Python
twin compute from scratch for the same hosts, whatever happened to the
hosts between requests (usage changes, replaced topologies, a changed
number of cells, several allocation candidates) and however the arena's
own storage had to grow, compact or start over.
"""

import datetime
import random
import threading
from unittest import mock

import fixtures
from hypothesis import given
from hypothesis import strategies as st
from nova import objects
from nova.tests.unit.scheduler import fakes

from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import hoststamp
from nova_sched_ext.fit import pyfit
from nova_sched_ext.fit import slotcache
from tests import base
from tests.unit.fit import strategies
from tests.unit.fit import test_slots


def host_state(name, topology, vcpus_used=0, free_ram_mb=65536):
    return fakes.FakeHostState(name, name, {
        'numa_topology': topology, 'pci_stats': None,
        'cpu_allocation_ratio': 16.0, 'ram_allocation_ratio': 1.5,
        'vcpus_total': 64, 'vcpus_used': vcpus_used,
        'total_usable_ram_mb': 65536, 'free_ram_mb': free_ram_mb,
        'allocation_candidates': [{'mappings': {}}], 'aggregates': []})


def fresh(hosts, shapes, weights, request, room_cap):
    """(engine, twin) weights counted from scratch.

    One fit run per host whatever its allocation candidates: the weigher
    places a request as consume_from_request does.
    """
    prepared = adapters.prepared_hosts(hosts, per_candidate=False)
    c = engine.slot_weights(prepared, shapes, weights, request,
                            counts=False, room_cap=room_cap)[2]
    python = pyfit.slot_weights([p.model for p in prepared], shapes,
                                weights, request, room_cap)[2]
    return list(c), python


def bench_host(cells):
    from nova_sched_ext_tools.bench import cli as bench
    return bench.host_topology(objects, cells)


class TestSlotArena(base.TestCase):

    def setUp(self):
        super().setUp()
        if engine.backend_name() != 'c':
            self.skipTest('the C fit helper is not built')

    def check(self, arena, hosts, request, room_cap=None):
        got = arena.weights(hosts, request, room_cap)
        c, python = fresh(hosts, arena.shapes, arena.shape_weights,
                          request, room_cap)
        self.assertEqual(c, got)
        for mine, twin in zip(got, python):
            self.assertAlmostEqual(twin, mine, places=9)
        return got

    @test_slots.SETTINGS
    @given(st.data())
    def test_equal_to_counting_afresh_across_changes(self, data):
        hosts = [host_state('h%d' % i,
                            data.draw(strategies.host_topologies(4)),
                            vcpus_used=data.draw(st.integers(0, 64)))
                 for i in range(data.draw(st.integers(1, 5)))]
        shapes = [test_slots.to_shape(data.draw(test_slots.shapes(2)))
                  for _ in range(3)]
        weights = [float(data.draw(st.integers(1, 32))) for _ in shapes]
        arena = slotcache.SlotArena(shapes, weights, memo_columns=2)
        for _ in range(4):
            request = test_slots.to_shape(
                data.draw(test_slots.shapes(2)))._replace(
                    vcpus=2, memory_mb=1024)
            room_cap = data.draw(st.sampled_from([None, 0, 2]))
            subset = data.draw(st.lists(st.sampled_from(hosts),
                                        min_size=1, max_size=len(hosts)))
            self.check(arena, subset, request, room_cap)
            self.check(arena, subset, request, room_cap)
            # Change one host the ways Nova and people do.
            host = data.draw(st.sampled_from(hosts))
            change = data.draw(st.sampled_from(
                ['usage', 'topology', 'candidates', 'ratio', 'stamp',
                 'refresh']))
            if change == 'stamp':
                # Nova's way: the host gets a stamp ('updated'), then
                # every change below moves it, as Nova's do.
                host.updated = self._next_time()
            elif change == 'refresh':
                # Nova's HostManager reloading an unchanged compute node:
                # equal new objects.
                host.numa_topology = host.numa_topology.obj_clone()
                if host.updated is not None:
                    host.updated = host.updated.replace()
            elif change == 'usage':
                host.vcpus_used = data.draw(st.integers(0, 64))
            elif change == 'topology':
                # possibly another number of cells: another record size
                host.numa_topology = data.draw(
                    strategies.host_topologies(4))
            elif change == 'candidates':
                host.allocation_candidates = [{'mappings': {}}] * \
                    data.draw(st.integers(1, 3))
            else:
                host.cpu_allocation_ratio = 2.0
            if change in ('usage', 'topology', 'ratio') and \
                    host.updated is not None:
                host.updated = self._next_time()

    _clock = [datetime.datetime(2026, 1, 1)]

    def _next_time(self):
        self._clock[0] += datetime.timedelta(seconds=1)
        return self._clock[0]

    def _cloud(self, count, seed=1):
        from nova_sched_ext_tools.bench import cli as bench
        rng = random.Random(seed)
        hosts = bench._cloud(objects, count, rng)
        for h in hosts:
            h.vcpus_total, h.vcpus_used = 64, rng.randint(0, 48)
            h.total_usable_ram_mb = 131072
            h.free_ram_mb = rng.randint(16384, 131072)
            h.allocation_candidates = [{'mappings': {}}]
        return hosts

    def _shapes(self):
        from nova_sched_ext_tools.bench import cli as bench
        topology = bench.instance_topology(objects, 1, 4, 4096)
        small = test_slots.to_shape(topology)._replace(vcpus=0,
                                                       memory_mb=4096)
        big = test_slots.to_shape(
            bench.instance_topology(objects, 2, 8, 16384))._replace(
                vcpus=0, memory_mb=32768)
        return small, big

    def test_growth_compaction_and_starting_over(self):
        small, big = self._shapes()
        hosts = self._cloud(150)
        arena = slotcache.SlotArena([big, small], [16.0, 4.0],
                                    memo_columns=1, max_hosts=200)
        self.check(arena, hosts[:70], small)
        self.check(arena, hosts, big, 0)
        # records of another size are appended, then compacted
        from nova_sched_ext_tools.bench import cli as bench
        for h in hosts[::3]:
            h.numa_topology = bench.host_topology(objects, 1)
            h.updated = None
        self.check(arena, hosts, small)
        # more hosts than max_hosts: the next request starts over
        self.check(arena, self._cloud(120, seed=2) + hosts[:10], big)
        self.assertGreater(len(arena._slot_by_host), 200)
        self.check(arena, hosts, small, 1)
        self.assertEqual(150, len(arena._slot_by_host))
        # a request larger than max_hosts works too
        self.check(arena, self._cloud(250, seed=3), small)

    def test_a_refreshed_host_with_the_same_stamp_is_not_rebuilt(self):
        small, big = self._shapes()
        hosts = self._cloud(6)
        for h in hosts:
            h.updated = datetime.datetime(2026, 1, 1, 12, 0, 0)
        arena = slotcache.SlotArena([big, small], [16.0, 4.0])
        self.check(arena, hosts, small)
        with mock.patch.object(
                adapters, '_refresh',
                side_effect=adapters._refresh) as rebuild:
            # What Nova's HostManager does before each request: new, equal
            # topology and 'updated' objects.
            for h in hosts:
                h.numa_topology = h.numa_topology.obj_clone()
                h.updated = h.updated.replace()
            self.check(arena, hosts, small)
            self.assertEqual(0, rebuild.call_count)
            # A compute node saved again: a later 'updated'.
            hosts[0].updated += datetime.timedelta(seconds=1)
            hosts[0].numa_topology = bench_host(1)
            self.check(arena, hosts, small)
            self.assertEqual(1, rebuild.call_count)
            # Saved twice within one second (MySQL keeps whole seconds):
            # the usage tells.
            hosts[1].vcpus_used += 4
            hosts[1].free_ram_mb -= 8192
            hosts[1].numa_topology = bench_host(1)
            self.check(arena, hosts, small)
            self.assertEqual(2, rebuild.call_count)
            # A stamp that moved with nothing else changed: rebuilt.
            hosts[2].updated += datetime.timedelta(seconds=1)
            self.check(arena, hosts, big)
            self.assertEqual(3, rebuild.call_count)
            self.assertEqual([hoststamp.stamp(h) for h in hosts],
                             arena._stamps)

    def test_a_new_host_takes_the_model_its_cache_vouches_for(self):
        # The filter (or the kept host state's warm-up) built the models:
        # the arena does not build them again.
        small, big = self._shapes()
        hosts = self._cloud(6)
        for h in hosts:
            h.updated = datetime.datetime(2026, 1, 1, 12, 0, 0)
        adapters.prepared_hosts(hosts)
        arena = slotcache.SlotArena([big, small], [16.0, 4.0])
        with mock.patch.object(adapters, '_refresh',
                               side_effect=adapters._refresh) as rebuild:
            self.check(arena, hosts, small)
            self.assertEqual(0, rebuild.call_count)
            # one that changed since is built, for both
            hosts[0].updated += datetime.timedelta(seconds=1)
            hosts[0].numa_topology = bench_host(1)
            arena = slotcache.SlotArena([big, small], [16.0, 4.0])
            self.check(arena, hosts, small)
            self.assertEqual(1, rebuild.call_count)

    def test_hosts_without_a_stamp_are_compared_field_by_field(self):
        small, big = self._shapes()
        hosts = self._cloud(3)
        arena = slotcache.SlotArena([big, small], [16.0, 4.0])
        self.check(arena, hosts, small)
        with mock.patch.object(
                adapters, '_refresh',
                side_effect=adapters._refresh) as rebuild:
            self.check(arena, hosts, small)
            self.assertEqual(0, rebuild.call_count)
            hosts[0].numa_topology = bench_host(1)
            hosts[1].ram_allocation_ratio = 1.0
            self.check(arena, hosts, small)
            self.assertEqual(2, rebuild.call_count)
        self.assertEqual([hoststamp.NO_STAMP] * len(hosts), arena._stamps)

    def test_threads_share_one_arena(self):
        small, big = self._shapes()
        hosts = self._cloud(200)
        arena = slotcache.SlotArena([big, small], [16.0, 4.0])
        expected = {
            (shape, cap): fresh(hosts, arena.shapes, arena.shape_weights,
                                shape, cap)[0]
            for shape in (small, big) for cap in (None, 0)}
        failures = []

        def run(seed):
            rng = random.Random(seed)
            for _ in range(20):
                key = rng.choice(sorted(expected, key=repr))
                if arena.weights(hosts, *key) != expected[key]:
                    failures.append(key)

        threads = [threading.Thread(target=run, args=(i,))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([], failures)

    def test_refused_input_falls_back_to_the_twin_and_starts_over(self):
        small, big = self._shapes()
        hosts = self._cloud(5)
        arena = slotcache.SlotArena([big], [16.0])
        arena.weights(hosts, small)
        arena._offsets[0] = 1 << 40
        # memo hits do not read the record; a new request shape does
        arena.weights(hosts, small)
        logs = self.useFixture(fixtures.FakeLogger(level='ERROR'))
        # The engine's one fallback rule: one error, the twin's weights.
        got = arena.weights(hosts, big)
        self.assertEqual(fresh(hosts, arena.shapes, arena.shape_weights,
                               big, None)[1], got)
        self.assertEqual(1, len(logs.output.splitlines()), logs.output)
        self.assertIn('nse_slot_weights_indexed (NSE_ERR_TRUNCATED, -1)',
                      logs.output)
        # nothing half-done is kept
        self.assertEqual({}, arena._slot_by_host)
        self.check(arena, hosts, small)

    def test_no_hosts(self):
        small, big = self._shapes()
        self.assertEqual([], slotcache.SlotArena([big], [16.0]).weights(
            [], small))


class TestAHostThatCannotBeStored(base.TestCase):
    """A host whose record fails to build leaves the arena as it was.

    Issue 11: the failed host stayed registered in a slot without a record,
    so the next new host was given the same slot (from then on both got one
    weight) and the failed host, shown again, raised TypeError.
    """

    def setUp(self):
        super().setUp()
        if engine.backend_name() != 'c':
            self.skipTest('the C fit helper is not built')
        cloud = TestSlotArena('test_no_hosts')
        self.small, self.big = cloud._shapes()
        self.hosts = cloud._cloud(4, seed=5)
        self.good, self.bad, self.later, self.other = self.hosts
        self.arena = slotcache.SlotArena([self.big, self.small],
                                         [16.0, 4.0])
        self.check = cloud.check
        self.failing = True
        real = adapters._refresh

        def rebuild(host):
            if host is self.bad and self.failing:
                raise RuntimeError('cannot build this record')
            return real(host)

        self.useFixture(fixtures.MockPatchObject(
            adapters, '_refresh', side_effect=rebuild))

    def assertConsistent(self):
        arena = self.arena
        slots = sorted(arena._slot_by_host.values())
        self.assertEqual(list(range(len(slots))), slots)
        self.assertEqual(len(slots), len(arena._records))
        self.assertEqual(len(slots), len(arena._stamps))
        self.assertEqual(len(slots), len(arena._versions))

    def test_a_failed_host_is_not_registered(self):
        self.check(self.arena, [self.good], self.small)
        self.assertRaises(RuntimeError, self.arena.weights,
                          [self.bad], self.small)
        self.assertNotIn(self.bad, self.arena._slot_by_host)
        self.assertConsistent()

    def test_the_next_host_gets_its_own_slot_and_weight(self):
        self.check(self.arena, [self.good], self.small)
        self.assertRaises(RuntimeError, self.arena.weights,
                          [self.good, self.bad], self.small)
        self.check(self.arena, [self.later], self.small)
        self.failing = False
        # Each host has its own weight, as counted afresh.
        self.check(self.arena, self.hosts, self.small)
        self.check(self.arena, [self.later, self.bad], self.big)
        self.assertEqual(len(self.hosts),
                         len(set(self.arena._slot_by_host.values())))
        self.assertConsistent()

    def test_the_failed_host_shown_again_does_not_raise_type_error(self):
        self.assertRaises(RuntimeError, self.arena.weights,
                          [self.bad], self.small)
        # Still failing: the same error, not a TypeError of a slot
        # without a version.
        self.assertRaises(RuntimeError, self.arena.weights,
                          [self.bad], self.small)
        self.assertRaises(RuntimeError, self.arena.weights,
                          [self.bad, self.good], self.small)
        self.failing = False
        self.check(self.arena, [self.bad, self.good], self.small)
        self.assertConsistent()

    def test_a_known_host_that_fails_keeps_its_old_record(self):
        self.failing = False
        self.check(self.arena, self.hosts, self.small)
        self.failing = True
        self.bad.vcpus_used += 1
        self.assertRaises(RuntimeError, self.arena.weights,
                          self.hosts, self.small)
        self.assertConsistent()
        self.failing = False
        self.check(self.arena, self.hosts, self.small)


class TestHostsWithAbsurdValues(base.TestCase):
    """Absurd values make a host unknown in the arena, with one warning."""

    def setUp(self):
        super().setUp()
        if engine.backend_name() != 'c':
            self.skipTest('the C fit helper is not built')
        self.logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        self.useFixture(fixtures.MockPatchObject(
            adapters, '_BAD_HOSTS', adapters._WarnedHosts()))
        cloud = TestSlotArena('test_no_hosts')
        self.small, self.big = cloud._shapes()
        self.check = cloud.check
        self.good, self.bad, self.later = cloud._cloud(3, seed=11)
        from nova_sched_ext_tools.bench import cli as bench
        # Hosts the requests fit, each with a weight of its own.
        for i, h in enumerate((self.good, self.bad, self.later)):
            h.numa_topology = bench.host_topology(
                objects, 2, pinned_share=0.1 + 0.2 * i,
                used_share=0.1 + 0.2 * i, rng=random.Random(i))
        self.arena = slotcache.SlotArena([self.big, self.small],
                                         [16.0, 4.0])

    def assertUnknown(self, **values):
        for name, value in values.items():
            setattr(self.bad, name, value)
        self.check(self.arena, [self.good], self.small)
        # Alone, the unknown host weighs 0: the worst of no known host.
        self.assertEqual([0.0], self.arena.weights([self.bad], self.small))
        alone = fresh([self.good, self.later], self.arena.shapes,
                      self.arena.shape_weights, self.small, None)[0]
        self.assertNotEqual(alone[0], alone[1])
        self.assertEqual(alone[1:],
                         self.arena.weights([self.later], self.small))
        got = self.check(self.arena, [self.good, self.bad, self.later],
                         self.small)
        # The host after the failed one keeps its own weight; the unknown
        # host weighs as much as the worst known one.
        self.assertEqual([alone[0], alone[1]], [got[0], got[2]])
        self.assertEqual(min(got[0], got[2]), got[1])
        self.assertEqual(3, len(set(self.arena._slot_by_host.values())))
        # Shown again, in another request shape.
        self.check(self.arena, [self.bad, self.later, self.good], self.big)
        # Rebuilt on the way (the arena, the per-host cache), warned once.
        self.assertEqual(1, self.logs.output.count(
            'host %s (node %s)' % (self.bad.host, self.bad.nodename)))
        self.assertEqual(1, len(self.logs.output.splitlines()))
        self.assertIn(next(iter(values)), self.logs.output)

    def test_infinite_cpu_allocation_ratio(self):
        self.assertUnknown(cpu_allocation_ratio=float('inf'))

    def test_nan_cpu_allocation_ratio(self):
        self.assertUnknown(cpu_allocation_ratio=float('nan'))

    def test_huge_cpu_allocation_ratio(self):
        self.assertUnknown(cpu_allocation_ratio=1e308)

    def test_negative_cpu_allocation_ratio(self):
        self.assertUnknown(cpu_allocation_ratio=-1.0)

    def test_infinite_ram_allocation_ratio(self):
        self.assertUnknown(ram_allocation_ratio=float('inf'))

    def test_nan_ram_allocation_ratio(self):
        self.assertUnknown(ram_allocation_ratio=float('nan'))

    def test_huge_total_ram(self):
        self.assertUnknown(total_usable_ram_mb=1 << 62)
