"""Replays of tiny traces through Nova's handlers; outcomes known by hand."""

import datetime
from unittest import mock

from nova.scheduler import filters

from nova_sched_ext_tools.sim import cloud
from nova_sched_ext_tools.sim import policies
from nova_sched_ext_tools.sim import replay
from nova_sched_ext_tools.sim import trace
from tests.unit.tools.sim import base
from tests.unit.tools.sim.base import GB
from tests.unit.tools.sim.base import host
from tests.unit.tools.sim.base import request


class TestGroups(base.SimTestCase):

    def test_affinity_members_land_together(self):
        hosts = [host('h%d' % i, '0', (16, 32), (16, 32)) for i in range(3)]
        members = [request(i, 8, 8, strategy=trace.AFFINITY, group='1')
                   for i in range(5)]
        # a stranger between the members changes nothing
        members.insert(2, request(99, 8, 8))
        result, placed, _ = self.replay(hosts, members)
        group_hosts = {placed[i] for i in range(4)}
        self.assertEqual(1, len(group_hosts), placed)
        # the 32 vCPUs of that host are taken by 4 members: the 5th cannot
        # join them, and Nova's affinity filter allows no other host
        self.assertIsNone(placed[4])
        self.assertEqual(1, result.rejected_by[trace.AFFINITY])
        self.assertEqual(1, result.rejected)
        self.assertEqual(0, result.rejected_non_affinity)

    def test_anti_affinity_spreads(self):
        hosts = [host('h%d' % i, '0', (32, 64)) for i in range(3)]
        members = [request(i, 2, 2, strategy=trace.ANTI_AFFINITY, group='1')
                   for i in range(4)]
        result, placed, _ = self.replay(hosts, members)
        self.assertEqual({'h0', 'h1', 'h2'}, {placed[0], placed[1],
                                              placed[2]})
        self.assertIsNone(placed[3])
        self.assertEqual(1, result.rejected_by[trace.ANTI_AFFINITY])
        # another group is not held back by this one
        other = members + [request(9, 2, 2, strategy=trace.ANTI_AFFINITY,
                                   group='2')]
        _result, placed, _ = self.replay(hosts, other)
        self.assertIsNotNone(placed[9])

    def test_fault_domain_partitions_never_share_a_rack(self):
        hosts = [host('a1', 'A', (32, 64)), host('a2', 'A', (32, 64)),
                 host('b1', 'B', (32, 64)), host('b2', 'B', (32, 64))]
        plan = [(0, 0), (1, 1), (2, 0), (3, 1), (4, 0), (5, 2)]
        requests = [request(seq, 4, 4, strategy=trace.FAULT_DOMAIN,
                            group='g', domain=domain)
                    for seq, domain in plan]
        result, placed, simulator = self.replay(hosts, requests)
        rack = {h.name: h.rack for h in hosts}
        racks = {}
        for seq, domain in plan[:5]:
            self.assertIsNotNone(placed[seq])
            racks.setdefault(domain, set()).add(rack[placed[seq]])
        self.assertEqual(1, len(racks[0]))
        self.assertEqual(1, len(racks[1]))
        self.assertNotEqual(racks[0], racks[1])
        # partition 2 finds both racks taken by other partitions
        self.assertIsNone(placed[5])
        self.assertEqual(1, result.rejected_by[trace.FAULT_DOMAIN])
        # The package's deployment-set filter enforced the rule.
        self.assertIn('DeploymentSetFilter', result.filters)
        self.assertNotIn('SimFaultDomainFilter', result.filters)

    def test_fault_domain_groups_are_independent(self):
        hosts = [host('a1', 'A', (32, 64)), host('b1', 'B', (32, 64))]
        requests = [
            request(0, 4, 4, strategy=trace.FAULT_DOMAIN, group='1',
                    domain=0),
            request(1, 4, 4, strategy=trace.FAULT_DOMAIN, group='2',
                    domain=1),
        ]
        # best-fit stacks: group 2 would go where group 1 is, and may
        result, placed, _ = self.replay(hosts, requests)
        self.assertEqual(0, result.rejected)

    def test_fault_domain_goes_to_the_configured_deployment_set_filter(self):
        self.conf.config(
            group='filter_scheduler',
            available_filters=policies.SIM_AVAILABLE_FILTERS +
            ['tests.unit.tools.sim.test_replay.DeploymentSetFilter'],
            enabled_filters=['DeploymentSetFilter'])
        hosts = [host('a1', 'A', (32, 64))]
        requests = [request(0, 4, 4, strategy=trace.FAULT_DOMAIN, group='1',
                            domain=0)]
        DeploymentSetFilter.seen = []
        simulator = replay.Simulator(hosts)
        self.assertNotIn('SimFaultDomainFilter',
                         [type(f).__name__ for f in simulator.filters])
        result = simulator.run(requests)
        self.assertEqual(1, result.placed)
        # The request reached the filter as a deployment-set member.
        self.assertEqual(1, len(DeploymentSetFilter.seen))
        hints = DeploymentSetFilter.seen[0].scheduler_hints
        self.assertEqual(['partition'], hints['deployment_set_strategy'])
        self.assertEqual(['0'], hints['deployment_set_partition'])


class DeploymentSetFilter(filters.BaseHostFilter):
    """Stands in for the package's deployment-set filter, by its name."""

    seen = []

    def host_passes(self, host_state, spec_obj):
        DeploymentSetFilter.seen.append(spec_obj)
        return True


class TestNUMA(base.SimTestCase):

    def test_single_numa_request_bigger_than_any_cell(self):
        hosts = [host('h0', '0', (8, 32), (8, 32))]
        requests = [request(0, 12, 8, numa=1), request(1, 12, 8, numa=2)]
        result, placed, simulator = self.replay(hosts, requests)
        self.assertIsNone(placed[0])
        self.assertEqual('h0', placed[1])
        # half and half, as Nova splits hw:numa_nodes=2
        cells = simulator.hosts[0].numa_topology.cells
        self.assertEqual([6, 6], [c.cpu_usage for c in cells])
        self.assertEqual([4096, 4096], [c.memory_usage for c in cells])
        self.assertEqual(12, simulator.hosts[0].vcpus_used)

    def test_memory_per_cell_counts_too(self):
        hosts = [host('h0', '0', (16, 8), (16, 8))]
        result, placed, _ = self.replay(hosts, [request(0, 2, 12, numa=1),
                                                request(1, 2, 12, numa=2)])
        self.assertIsNone(placed[0])
        self.assertEqual('h0', placed[1])

    def test_cells_fill_up(self):
        hosts = [host('h0', '0', (8, 64), (8, 64))]
        requests = [request(i, 4, 4) for i in range(5)]
        result, placed, _ = self.replay(hosts, requests)
        self.assertEqual(4, result.placed)
        self.assertIsNone(placed[4])
        self.assertEqual(16, result.placed_vcpus)
        self.assertEqual(0, result.late_fit_failures)

    def test_full_and_fast_pipelines_agree(self):
        hosts = [host('h%d' % i, str(i % 2), (8 + 4 * i, 16 + 8 * i),
                      (12, 24)) for i in range(5)]
        spec = trace.SyntheticSpec(count=40, seed=5, load=1.5,
                                   max_vcpus=16, max_memory_mb=32 * 1024)
        requests = trace.synthetic_requests(spec, hosts)
        for name in ('nova-default', 'best-fit'):
            with policies.Overrides(policies.PRESETS[name].settings()):
                full, _, sim_full = self.replay(hosts, requests)
                fast, _, sim_fast = self.replay(hosts, requests, fast=True)
            self.assertIn('NUMATopologyFilter', full.filters)
            self.assertNotIn('NUMATopologyFilter', fast.filters)
            self.assertLess(len(fast.weighers), len(full.weighers))
            self.assertEqual(full.placements, fast.placements, name)
            self.assertGreater(full.rejected, 0)
            self.assertGreater(full.departed, 0)


class TestDepartures(base.SimTestCase):

    def test_departure_frees_resources(self):
        hosts = [host('h0', '0', (8, 16))]
        requests = [request(0, 8, 16, arrival=0, lifetime=5),
                    request(1, 8, 16, arrival=10)]
        result, placed, simulator = self.replay(hosts, requests)
        self.assertEqual('h0', placed[0])
        self.assertEqual('h0', placed[1])
        self.assertEqual(1, result.departed)
        state = simulator.hosts[0]
        self.assertEqual(8, state.vcpus_used)
        self.assertEqual(8, state.numa_topology.cells[0].cpu_usage)
        self.assertEqual(1, len(state.instances))

    def test_no_departure_no_room(self):
        hosts = [host('h0', '0', (8, 16))]
        requests = [request(0, 8, 16, arrival=0, lifetime=50),
                    request(1, 8, 16, arrival=10)]
        result, placed, _ = self.replay(hosts, requests)
        self.assertIsNone(placed[1])
        self.assertEqual(0, result.departed)

    def test_departed_members_leave_their_group(self):
        hosts = [host('h0', '0', (8, 16)), host('h1', '0', (8, 16))]
        requests = [
            request(0, 2, 2, strategy=trace.ANTI_AFFINITY, group='1',
                    arrival=0, lifetime=5),
            request(1, 2, 2, strategy=trace.ANTI_AFFINITY, group='1',
                    arrival=1),
            request(2, 2, 2, strategy=trace.ANTI_AFFINITY, group='1',
                    arrival=10),
        ]
        result, placed, _ = self.replay(hosts, requests)
        self.assertEqual(0, result.rejected)
        self.assertEqual(placed[0], placed[2])
        self.assertNotEqual(placed[1], placed[2])


class TestConfiguration(base.SimTestCase):

    def two_small(self):
        hosts = [host('h0', '0', (16, 32)), host('h1', '0', (16, 32))]
        return hosts, [request(0, 2, 4), request(1, 2, 4)]

    def test_nova_default_spreads_best_fit_stacks(self):
        hosts, requests = self.two_small()
        self.preset('nova-default')
        _r, placed, _ = self.replay(hosts, requests)
        self.assertNotEqual(placed[0], placed[1])
        self.preset('best-fit')
        _r, placed, _ = self.replay(hosts, requests)
        self.assertEqual(placed[0], placed[1])

    def test_multiplier_from_config(self):
        hosts, requests = self.two_small()
        self.conf.config(group='filter_scheduler', ram_weight_multiplier=-2.0,
                         cpu_weight_multiplier=0.0)
        result, placed, _ = self.replay(hosts, requests)
        self.assertEqual(placed[0], placed[1])
        self.assertEqual(-2.0, result.settings['ram_weight_multiplier'])

    def test_weighers_and_filters_are_named_by_config(self):
        self.conf.config(group='filter_scheduler',
                         weight_classes=['nova.scheduler.weights.ram.'
                                         'RAMWeigher'],
                         enabled_filters=['NUMATopologyFilter'])
        hosts, requests = self.two_small()
        result, _placed, _ = self.replay(hosts, requests)
        self.assertEqual(['NUMATopologyFilter', 'DeploymentSetFilter'],
                         result.filters)
        self.assertEqual(['nova.scheduler.weights.ram.RAMWeigher'],
                         result.weighers)

    def test_unknown_filter_is_a_clear_error(self):
        self.conf.config(group='filter_scheduler',
                         enabled_filters=['NoSuchFilter'])
        exc = self.assertRaises(replay.SimulationError, replay.Simulator,
                                [host('h0', '0', (8, 8))])
        self.assertIn('NoSuchFilter', str(exc))

    def test_unloadable_weigher_is_a_clear_error(self):
        self.conf.config(group='filter_scheduler',
                         weight_classes=['no.such.Weigher'])
        exc = self.assertRaises(replay.SimulationError, replay.Simulator,
                                [host('h0', '0', (8, 8))])
        self.assertIn('no.such.Weigher', str(exc))

    def test_numa_slot_preset_says_when_the_weigher_is_missing(self):
        preset = policies.PRESETS['numa-slot']
        with mock.patch.object(policies.importlib, 'import_module',
                               side_effect=ImportError('No module')):
            exc = self.assertRaises(policies.PolicyError, preset.settings)
        self.assertIn('NUMASlotWeigher', str(exc))

    def test_host_subset_size_is_seeded(self):
        hosts = [host('h%d' % i, '0', (64, 128)) for i in range(6)]
        requests = [request(i, 2, 2) for i in range(12)]
        self.conf.config(group='filter_scheduler', host_subset_size=4)
        one = self.replay(hosts, requests, seed=1)[0].placements
        self.assertEqual(one, self.replay(hosts, requests,
                                          seed=1)[0].placements)
        others = [self.replay(hosts, requests, seed=s)[0].placements
                  for s in (2, 3, 4)]
        self.assertTrue(any(o != one for o in others))

    def test_placement_prefilter(self):
        hosts = [host('h0', '0', (8, 16))]
        simulator = replay.Simulator(hosts)
        state = simulator.hosts[0]
        self.assertTrue(cloud.placement_allows(state, 8, 16 * 1024))
        self.assertFalse(cloud.placement_allows(state, 9, 1024))
        self.assertFalse(cloud.placement_allows(state, 1, 16 * 1024 + 1))


class TestSlots(base.SimTestCase):

    def test_large_slots_left(self):
        hosts = [host('h0', '0', (16, 32), (16, 32)),
                 host('h1', '0', (8, 32), (24, 32))]
        big = trace.Flavor(16, 16 * 1024, 2)
        whole = trace.Flavor(16, 32 * 1024, 1)
        simulator = replay.Simulator(hosts, slot_flavors=[big, whole],
                                     sample_every=1)
        before = {h.host: simulator.slot_counter.host_slots(h)
                  for h in simulator.hosts}
        # h0: two cells of 16c/32g take two of each; h1: 8c+24c, 32g each,
        # takes one 16c16g over both cells (8+8), then cell 0 is out of
        # CPUs, and one 16c32g in cell 1 (32 GB).
        self.assertEqual({'h0': (2, 2), 'h1': (1, 1)}, before)
        result = simulator.run([request(0, 8, 8, numa=1)])
        # Equal free RAM and vCPUs: Nova's weighers tie, the first host
        # wins.  Its cells become 8c/24g and 16c/32g: one of each left.
        self.assertEqual(['h0'], result.placements)
        by_host = {h.host: simulator.slot_counter.host_slots(h)
                   for h in simulator.hosts}
        self.assertEqual({'h0': (1, 1), 'h1': (1, 1)}, by_host)
        self.assertEqual({big.name: 2, whole.name: 2},
                         result.large_slots_left)
        self.assertEqual([{'request': 0, 'placed': 0, 'rejected': 0,
                           'slots': {big.name: 3, whole.name: 3}},
                          {'request': 1, 'placed': 1, 'rejected': 0,
                           'slots': {big.name: 2, whole.name: 2}}],
                         result.samples)

    def _counted(self, updated=True):
        """A one-host simulator whose slots were counted once: (4, 4)."""
        simulator = replay.Simulator(
            [host('h0', '0', (16, 32), (16, 32))],
            # Two a cell by CPUs; two a cell by RAM.
            slot_flavors=[trace.Flavor(8, 8 * GB, 1),
                          trace.Flavor(2, 16 * GB, 1)])
        state = simulator.hosts[0]
        if not updated:
            state.updated = None
        self.assertEqual((4, 4), simulator.slot_counter.host_slots(state))
        return simulator, state

    def _used_topology(self):
        """h0's NUMA topology after one 8c8g instance landed in cell 0."""
        simulator, state = self._counted()
        simulator.schedule(request(0, 8, 8))
        return state.numa_topology

    def test_counts_follow_each_change_of_a_host(self):
        # Whatever changes (a claim, a departure, any field of the host's
        # stamp, its NUMA usage under a new stamp or without one), the
        # counter must count again, not return the old (4, 4).
        simulator, state = self._counted()
        simulator.schedule(request(0, 8, 8))
        self.assertEqual((3, 3), simulator.slot_counter.host_slots(state))
        simulator.depart(cloud.stable_uuid('instance', 0))
        self.assertEqual((4, 4), simulator.slot_counter.host_slots(state))

        used = self._used_topology()
        later = state.updated + datetime.timedelta(seconds=1)
        for changes, counts in (
                ({'vcpus_used': 8}, (3, 4)),
                ({'free_ram_mb': 48 * GB}, (4, 3)),
                ({'cpu_allocation_ratio': 2.0}, (8, 4)),
                ({'ram_allocation_ratio': 2.0}, (4, 8)),
                ({'updated': later, 'numa_topology': used}, (3, 3))):
            simulator, state = self._counted()
            for name, value in changes.items():
                setattr(state, name, value)
            self.assertEqual(counts,
                             simulator.slot_counter.host_slots(state),
                             changes)

        # A host without a stamp: its topology object tells.
        simulator, state = self._counted(updated=False)
        state.numa_topology = used
        self.assertEqual((3, 3), simulator.slot_counter.host_slots(state))

    def test_an_unchanged_host_is_not_counted_again(self):
        # Nova's refresh: new, equal objects under the same stamp.
        simulator, state = self._counted()
        state.numa_topology = state.numa_topology.obj_clone()
        counter = simulator.slot_counter
        with mock.patch.object(counter, '_greedy',
                               side_effect=AssertionError('counted again')):
            self.assertEqual((4, 4), counter.host_slots(state))
