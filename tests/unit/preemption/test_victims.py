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

"""host_fits, plan_eviction and the brute-force optimum."""

import dataclasses
import datetime
from unittest import mock

from nova import exception
from nova import objects
from nova.virt import hardware

from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model
from nova_sched_ext.preemption import strategies
from nova_sched_ext.preemption import victims
from tests import base
from tests.unit.preemption import victims_fixtures as fx


def split_cells_host():
    """Host-level room for 3 pinned CPUs, but only with the right victim.

    Cells of 4 pinned CPUs.  Cell 0: 2 on-demand + victim ``a`` (1 CPU),
    1 free.  Cell 1: 1 on-demand + victim ``b`` (2 CPUs), 1 free.  A
    3-CPU single-cell request lacks 1 PCPU at the host level, which either
    victim covers, but only evicting ``b`` frees 3 CPUs in one cell.
    """
    host = fx.Host('split')
    host.add(fx.pinned(2), cell=0)
    a = host.add(fx.pinned(1), cell=0, victim='a')
    host.add(fx.pinned(1), cell=1)
    b = host.add(fx.pinned(2), cell=1, victim='b')
    return host, a, b


class TestHostFits(base.TestCase):

    def test_host_level_counts_free_room_and_victims(self):
        host = fx.Host('h')
        host.add(fx.vcpu(12, 4096))
        v = host.add(fx.vcpu(4, 4096), victim='v')
        candidate = host.candidate()
        self.assertEqual(0, candidate.free['VCPU'])
        request = fx.request(fx.vcpu(4, 2048))
        self.assertFalse(victims.host_fits(candidate, request))
        self.assertTrue(victims.host_fits(candidate, request, [v]))
        self.assertFalse(victims.host_fits(
            candidate, fx.request(fx.vcpu(5, 2048)), [v]))

    def test_max_unit_is_a_hard_limit(self):
        host = fx.Host('h')
        v = host.add(fx.vcpu(8), victim='v')
        candidate = host.candidate(max_unit={'VCPU': 4})
        self.assertFalse(victims.host_fits(
            candidate, fx.request(fx.vcpu(6)), [v]))
        self.assertTrue(victims.host_fits(
            candidate, fx.request(fx.vcpu(4)), [v]))

    def test_numa_level_needs_the_victim_in_the_right_cell(self):
        host, a, b = split_cells_host()
        candidate = host.candidate()
        request = fx.request(fx.pinned(3))
        self.assertEqual(2, candidate.free['PCPU'])
        # Both victims cover the host-level deficit...
        self.assertTrue(victims.host_level_fits(candidate, request.resources,
                                                [a]))
        self.assertTrue(victims.host_level_fits(candidate, request.resources,
                                                [b]))
        # ...but only b frees a whole cell, and Nova agrees.
        self.assertFalse(victims.host_fits(candidate, request, [a]))
        self.assertTrue(victims.host_fits(candidate, request, [b]))
        for gone, expected in (([a], False), ([b], True), ([a, b], True),
                               ([], False)):
            topology = victims.topology_without(host.topology, gone)
            self.assertEqual(expected, victims.nova_fit(
                topology, candidate.host_state, request) is not None)

    def test_caller_objects_are_not_changed(self):
        host, a, b = split_cells_host()
        candidate = host.candidate()
        pinned_before = [set(c.pinned_cpus) for c in host.topology.cells]
        request = fx.request(fx.pinned(3), count=2)
        victims.host_fits(candidate, request, [a, b])
        strategies.MinimalVictims().choose([candidate], request)
        self.assertIs(host.topology, candidate.host_state.numa_topology)
        self.assertEqual(pinned_before,
                         [set(c.pinned_cpus) for c in host.topology.cells])
        self.assertEqual((a, b), candidate.victims)
        self.assertIsNone(request.numa_topology.cells[0].cpu_pinning)

    def test_request_without_numa_is_host_level_only(self):
        host, a, b = split_cells_host()
        # 2 shared CPUs per cell at ratio 4: 16 VCPU, all free.
        request = fx.request(fx.vcpu(16))
        self.assertTrue(victims.host_fits(host.candidate(), request))

    def test_host_without_host_state_is_host_level_only(self):
        host, a, b = split_cells_host()
        candidate = host.candidate(with_numa=False)
        self.assertTrue(victims.host_fits(candidate,
                                          fx.request(fx.pinned(3)), [a]))

    def test_numa_request_on_host_without_topology_does_not_fit(self):
        host = fx.Host('h')
        candidate = host.candidate()
        candidate.host_state.numa_topology = None
        self.assertFalse(victims.host_fits(candidate,
                                           fx.request(fx.pinned(1))))

    def test_engine_unknown_falls_back_to_nova(self):
        host, a, b = split_cells_host()
        candidate = host.candidate()
        request = fx.request(fx.pinned(3))
        with mock.patch.object(engine, 'fits',
                               return_value=model.UNKNOWN) as fits, \
                mock.patch.object(hardware, 'numa_fit_instance_to_host',
                                  wraps=hardware.numa_fit_instance_to_host
                                  ) as nova:
            self.assertFalse(victims.host_fits(candidate, request, [a]))
            self.assertTrue(victims.host_fits(candidate, request, [b]))
        self.assertEqual(2, fits.call_count)
        self.assertEqual(2, nova.call_count)

    def test_pci_held_by_victims_is_unknown(self):
        host, a, b = split_cells_host()
        candidate = host.candidate()
        request = fx.request(fx.pinned(3))
        request.spec_obj.pci_requests = objects.InstancePCIRequests(
            requests=[objects.InstancePCIRequest(
                count=1, spec=[{'vendor_id': '8086'}])])
        with_pci = dataclasses.replace(
            b, pci_requests=request.spec_obj.pci_requests)
        request = victims.Request(request.resources, request.spec_obj)

        def fits_without_pci(topology, host_state, req):
            # The host's PCI pools are what is missing.
            return not req.pci_requests

        with mock.patch.object(victims, '_numa_fits_topology',
                               side_effect=fits_without_pci):
            # b's device would come back: not known, not a yes.
            self.assertIsNone(victims.host_fits(candidate, request,
                                                [with_pci]))
            # b holds no device: a plain no.
            self.assertFalse(victims.host_fits(candidate, request, [b]))
            # The strategies never evict on an unknown.
            guess = dataclasses.replace(candidate, victims=(a, with_pci))
            self.assertIsNone(strategies.MinimalVictims().choose(
                [guess], request))
            self.assertIsNone(strategies.RandomVictims(1).choose(
                [guess], request))

    def test_stale_victim_pinning_is_unknown(self):
        host, a, b = split_cells_host()
        other = fx.Host('other')
        ghost = other.add(fx.pinned(4), cell=0, victim='ghost')
        candidate = host.candidate()
        # ghost's CPU 5 is free on this host: Nova refuses to unpin it.
        with mock.patch.object(victims.LOG, 'warning') as warning:
            self.assertIsNone(victims.host_fits(
                candidate, fx.request(fx.pinned(3)), [ghost]))
        self.assertIn('ghost', str(warning.call_args))


class TestPlanEviction(base.TestCase):

    def setUp(self):
        super().setUp()
        self.minimal = strategies.MinimalVictims()

    def test_all_or_nothing(self):
        host = fx.Host('h')
        host.add(fx.vcpu(12, 2048))
        one = host.add(fx.vcpu(2), victim='one', created_at=fx.at(1))
        two = host.add(fx.vcpu(2), victim='two', created_at=fx.at(2))
        candidate = host.candidate()
        plan = self.minimal.choose([candidate], fx.request(fx.vcpu(2),
                                                           count=2))
        fx.check_plan([candidate], fx.request(fx.vcpu(2), count=2), plan)
        self.assertEqual([(two,), (one,)],
                         [p.victims for p in plan.placements])
        self.assertEqual((two, one), plan.victims)
        self.assertEqual((candidate,), plan.hosts)
        # Three do not fit even with both victims gone: nothing at all.
        self.assertIsNone(self.minimal.choose(
            [candidate], fx.request(fx.vcpu(2), count=3)))
        self.assertIsNone(strategies.RandomVictims(seed=1).choose(
            [candidate], fx.request(fx.vcpu(2), count=3)))

    def test_later_instances_use_room_freed_by_earlier_ones(self):
        host = fx.Host('h')
        host.add(fx.vcpu(12))
        big = host.add(fx.vcpu(4), victim='big')
        candidate = host.candidate()
        request = fx.request(fx.vcpu(2), count=2)
        plan = self.minimal.choose([candidate], request)
        self.assertEqual([(big,), ()], [p.victims for p in plan.placements])
        fx.check_plan([candidate], request, plan)

    def test_numa_usage_follows_each_placement(self):
        # Two 2-CPU instances: each needs its own victim's cell, since the
        # first instance takes the room its victim freed.
        host = fx.Host('h')
        host.add(fx.pinned(2), cell=0)
        a = host.add(fx.pinned(2), cell=0, victim='a')
        host.add(fx.pinned(2), cell=1)
        b = host.add(fx.pinned(2), cell=1, victim='b')
        candidate = host.candidate()
        request = fx.request(fx.pinned(2), count=2)
        plan = self.minimal.choose([candidate], request)
        fx.check_plan([candidate], request, plan)
        self.assertEqual({a, b}, set(plan.victims))
        self.assertIsNone(self.minimal.choose(
            [candidate], fx.request(fx.pinned(2), count=3)))

    def test_engine_and_nova_disagreeing_evicts_nothing(self):
        host, a, b = split_cells_host()
        candidate = host.candidate()
        with mock.patch.object(victims, 'nova_fit', return_value=None), \
                mock.patch.object(victims.LOG, 'warning') as warning:
            self.assertIsNone(self.minimal.choose(
                [candidate], fx.request(fx.pinned(1), count=2)))
        self.assertIn('disagree', warning.call_args[0][0])

    def test_a_claim_nova_would_refuse_evicts_nothing(self):
        # Issue 31: Nova's fit can answer a topology whose pinning the
        # claim's numa_usage_from_instance_numa refuses.
        host, a, b = split_cells_host()
        candidate = host.candidate()
        account = hardware.numa_usage_from_instance_numa

        def refuse_claims(topology, instance_topology, free=False):
            if free:
                return account(topology, instance_topology, free=True)
            raise exception.CPUPinningUnknown(requested=[99],
                                              available=[0])
        for count in (1, 2):
            with mock.patch.object(
                    victims.hardware, 'numa_usage_from_instance_numa',
                    side_effect=refuse_claims), \
                    mock.patch.object(victims.LOG, 'warning') as warning:
                self.assertIsNone(self.minimal.choose(
                    [candidate], fx.request(fx.pinned(3), count=count)))
            self.assertIn('claim', warning.call_args[0][0])

    def test_count_must_be_positive(self):
        self.assertRaises(ValueError, victims.plan_eviction, [],
                          fx.request(fx.vcpu(1), count=0), self.minimal)


class TestVictim(base.TestCase):

    def test_creation_time(self):
        naive = victims.Victim('n', 'p', fx.T0.replace(tzinfo=None), {})
        self.assertEqual(victims.Victim('a', 'p', fx.T0, {}).created_ts,
                         naive.created_ts)
        self.assertEqual(float('-inf'),
                         victims.Victim('u', 'p', None, {}).created_ts)

    def test_creation_times_of_many(self):
        tokyo = datetime.timezone(datetime.timedelta(hours=9))
        times = [fx.at(1), fx.at(2).replace(tzinfo=None), None,
                 fx.at(3).astimezone(tokyo), fx.at(0.5)]
        many = [victims.Victim('v%d' % i, 'p', at, {})
                for i, at in enumerate(times)]
        expected = [victims.Victim('w', 'p', at, {}).created_ts
                    for at in times]
        # One already cached, the others computed and then cached.
        self.assertEqual(expected[4], many[4].created_ts)
        self.assertEqual(expected, victims.created_timestamps(many))
        self.assertEqual(expected, [victims.timestamp(at) for at in times])
        self.assertEqual(expected, [v.__dict__['created_ts'] for v in many])
        self.assertEqual(expected, victims.created_timestamps(many))

    def test_equal_by_uuid(self):
        self.assertEqual(victims.Victim('a', 'p', fx.T0, {'VCPU': 1}),
                         victims.Victim('a', 'q', None, {}))
        self.assertEqual(1, len({victims.Victim('a', 'p', fx.T0, {}),
                                 victims.Victim('a', 'p', fx.T0, {})}))


class TestBruteForce(base.TestCase):

    def test_optimum(self):
        host, a, b = split_cells_host()
        self.assertEqual(1, victims.brute_force_optimum(
            [host.candidate()], fx.request(fx.pinned(3))))
        self.assertEqual(0, victims.brute_force_optimum(
            [host.candidate()], fx.request(fx.pinned(1))))
        self.assertIsNone(victims.brute_force_optimum(
            [host.candidate()], fx.request(fx.pinned(5))))
        full = fx.Host('full')
        full.add(fx.vcpu(14))
        small = [full.add(fx.vcpu(1), victim='v%d' % i) for i in range(2)]
        self.assertEqual(2, victims.brute_force_optimum(
            [full.candidate()], fx.request(fx.vcpu(2))))
        self.assertEqual(2, len(small))
