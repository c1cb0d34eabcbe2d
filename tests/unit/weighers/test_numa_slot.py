"""NUMASlotWeigher with Nova's fakes and Nova's weight handler."""

from unittest import mock

import fixtures
from nova import objects
from nova.scheduler import weights
from nova.tests.unit.scheduler import fakes
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import conf
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import lowlevel
from nova_sched_ext.fit import slotcache
from nova_sched_ext.weighers import numa_slot
from tests import base


def flavor(name, vcpus, memory_mb, extra_specs=None, disabled=False,
           flavorid=None):
    return objects.Flavor(
        name=name, flavorid=flavorid or name, vcpus=vcpus,
        memory_mb=memory_mb, root_gb=0, ephemeral_gb=0, swap=0,
        extra_specs=extra_specs or {}, disabled=disabled)


DEDICATED_1 = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}
BIG = flavor('big', 8, 8192, DEDICATED_1)
SMALL = flavor('small', 2, 1024, DEDICATED_1)


def host_state(name, free_pcpus_per_cell, pcpus=16):
    cells = []
    for i, free in enumerate(free_pcpus_per_cell):
        cpus = set(range(i * 32, i * 32 + pcpus))
        pinned = set(sorted(cpus)[:pcpus - free])
        cells.append(objects.NUMACell(
            id=i, cpuset=set(), pcpuset=cpus, memory=32768, cpu_usage=0,
            memory_usage=0, pinned_cpus=pinned,
            siblings=[{c} for c in sorted(cpus)],
            mempages=[objects.NUMAPagesTopology(
                size_kb=4, total=32768 * 256, used=0, reserved=0)],
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False)))
    used = sum(pcpus - f for f in free_pcpus_per_cell)
    return fakes.FakeHostState(name, name, {
        'numa_topology': objects.NUMATopology(cells=cells),
        'pci_stats': None, 'cpu_allocation_ratio': 1.0,
        'ram_allocation_ratio': 1.0,
        'vcpus_total': pcpus * len(cells), 'vcpus_used': used,
        'total_usable_ram_mb': 32768 * len(cells),
        'free_ram_mb': 32768 * len(cells),
        'allocation_candidates': [{'mappings': {}}],
        'aggregates': []})


def request(flavor_obj):
    from nova.virt import hardware
    image = objects.ImageMeta(properties=objects.ImageMetaProps())
    return objects.RequestSpec(
        flavor=flavor_obj, image=image, instance_uuid=uuids.instance,
        numa_topology=hardware.numa_get_constraints(flavor_obj, image),
        pci_requests=None, num_instances=1)


class WeigherTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.loaded = [BIG]
        self.loader = mock.Mock(side_effect=lambda: list(self.loaded))
        self.weigher = self.make_weigher()
        self.handler = weights.HostWeightHandler()

    def make_weigher(self):
        weigher = numa_slot.NUMASlotWeigher()
        weigher.references = numa_slot.ReferenceFlavors(loader=self.loader)
        return weigher

    def best(self, hosts, spec, weighers=None):
        weighed = self.handler.get_weighed_objects(
            weighers or [self.weigher], hosts, spec)
        return [w.obj.host for w in weighed]


class TestNUMASlotWeigher(WeigherTestCase):

    def test_small_request_goes_where_it_costs_no_big_slot(self):
        # 'intact' can take two big instances (8 free pCPUs per cell);
        # 'fragmented' has 6 + 6 free: no big slot to lose.
        hosts = [host_state('intact', [8, 8]),
                 host_state('fragmented', [6, 6])]
        self.assertEqual('fragmented',
                         self.best(hosts, request(SMALL))[0])

    def test_default_weighers_would_spread_to_the_emptier_host(self):
        # The contrast the weigher exists for: RAMWeigher-style spreading
        # picks the emptier host and breaks its big slot.
        from nova.scheduler.weights import cpu
        hosts = [host_state('intact', [8, 8]),
                 host_state('fragmented', [6, 6])]
        self.assertEqual('intact', self.best(hosts, request(SMALL),
                                             [cpu.CPUWeigher()])[0])

    def test_equal_loss_prefers_the_fuller_host(self):
        hosts = [host_state('emptier', [4, 4]),
                 host_state('fuller', [3, 3])]
        self.assertEqual('fuller', self.best(hosts, request(SMALL))[0])

    def test_weights_are_minus_the_weighted_loss(self):
        hosts = [host_state('a', [16, 16])]
        result = self.weigher.weigh_objects(
            [weights.WeighedHost(h, 0.0) for h in hosts], request(SMALL))
        # 16 free pCPUs hold 2 big instances per cell; a small one (2
        # pCPUs) leaves 14: one big slot lost, weighing BIG's 8 vCPUs,
        # minus a tie-break below one slot.
        self.assertLess(result[0], -8.0)
        self.assertGreater(result[0], -8.0 - 4.0)

    def test_no_reference_flavor_weighs_all_hosts_the_same(self):
        self.loaded = []
        hosts = [host_state('a', [8, 8]), host_state('b', [6, 6])]
        self.assertEqual([0.0, 0.0], self.weigher.weigh_objects(
            [weights.WeighedHost(h, 0.0) for h in hosts], request(SMALL)))

    def test_engine_failure_weighs_all_hosts_the_same(self):
        # An unexpected failure; a refusal of the C helper is answered by
        # the twin instead (TestRefusedByTheHelper).
        hosts = [host_state('a', [8, 8]), host_state('b', [6, 6])]
        with mock.patch.object(engine, 'slot_weights', autospec=True,
                               side_effect=RuntimeError('boom')), \
                mock.patch.object(slotcache.SlotArena, 'weights',
                                  autospec=True,
                                  side_effect=RuntimeError('boom')):
            self.assertEqual([0.0, 0.0], self.weigher.weigh_objects(
                [weights.WeighedHost(h, 0.0) for h in hosts],
                request(SMALL)))

    def test_aggregate_overrides_the_multiplier(self):
        self.conf.config(numa_slot_weight_multiplier=2.0,
                         group='nova_sched_ext')
        state = host_state('a', [8, 8])
        self.assertEqual(2.0, self.weigher.weight_multiplier(state))
        state.aggregates = [objects.Aggregate(
            id=1, name='agg', hosts=['a'],
            metadata={'numa_slot_weight_multiplier': '-1.5'})]
        self.assertEqual(-1.5, self.weigher.weight_multiplier(state))

    def test_an_aggregate_multiplier_that_is_not_finite_is_ignored(self):
        self.conf.config(numa_slot_weight_multiplier=2.0,
                         group='nova_sched_ext')
        state = host_state('a', [8, 8])
        for value in ('nan', 'inf', '-inf', '1e999'):
            state.aggregates = [objects.Aggregate(
                id=1, name='agg', hosts=['a'],
                metadata={'numa_slot_weight_multiplier': value})]
            self.assertEqual(2.0, self.weigher.weight_multiplier(state),
                             value)

    def test_multiplier_follows_the_option_at_each_request(self):
        hosts = [host_state('a', [8, 8]), host_state('b', [2, 2])]
        weighed = [weights.WeighedHost(h, 0.0) for h in hosts]
        self.conf.config(numa_slot_weight_multiplier=2.0,
                         group='nova_sched_ext')
        self.weigher.weigh_objects(weighed, request(SMALL))
        self.assertEqual(2.0, self.weigher.weight_multiplier(hosts[0]))
        self.conf.config(numa_slot_weight_multiplier=-3.0,
                         group='nova_sched_ext')
        # Nova's handler: weigh_objects, then the multiplier of each host.
        result = self.handler.get_weighed_objects([self.weigher], hosts,
                                                  request(SMALL))
        self.assertEqual(-3.0, self.weigher.weight_multiplier(hosts[0]))
        self.assertEqual([-3.0, 0.0], sorted(w.weight for w in result))
        # An aggregate's value still wins.
        hosts[1].aggregates = [objects.Aggregate(
            id=1, name='agg', hosts=['b'],
            metadata={'numa_slot_weight_multiplier': '5'})]
        self.assertEqual(5.0, self.weigher.weight_multiplier(hosts[1]))

    def test_non_numa_request_counts_host_level_slots(self):
        plain = flavor('plain', 4, 4096)
        self.loaded = [flavor('plain-big', 16, 16384)]
        weigher = self.make_weigher()
        roomy = host_state('roomy', [16, 16])
        tight = host_state('tight', [16, 16])
        tight.vcpus_used = 12     # 20 VCPU left: one plain-big slot
        self.assertEqual('tight', self.best(
            [roomy, tight], request(plain), [weigher])[0])


def in_group(spec, policy, hosts=None):
    group = objects.InstanceGroup(uuid=uuids.group, policy=policy,
                                  members=[spec.instance_uuid])
    if hosts is not None:
        group.hosts = hosts
    spec.instance_group = group
    return spec


class TestAffinityRoom(WeigherTestCase):
    """Room mode: the first member of an affinity group needs room."""

    def setUp(self):
        super().setUp()
        # 'roomy' takes four more BIG instances, 'tight' only one; a BIG
        # request costs one BIG slot on either, and the fuller host wins
        # the tie in slot-loss mode.
        self.hosts = [host_state('roomy', [16, 16]),
                      host_state('tight', [8, 0])]

    def test_first_member_goes_where_the_group_has_room(self):
        spec = in_group(request(BIG), 'affinity', hosts=[])
        self.assertEqual('roomy', self.best(self.hosts, spec)[0])

    def test_slot_loss_alone_without_a_group(self):
        self.assertEqual('tight', self.best(self.hosts, request(BIG))[0])

    def test_soft_affinity_counts_too(self):
        spec = in_group(request(BIG), 'soft-affinity', hosts=[])
        self.assertEqual('roomy', self.best(self.hosts, spec)[0])

    def test_later_members_and_other_policies_use_slot_loss(self):
        placed = in_group(request(BIG), 'affinity', hosts=['tight'])
        self.assertEqual('tight', self.best(self.hosts, placed)[0])
        anti = in_group(request(BIG), 'anti-affinity', hosts=[])
        self.assertEqual('tight', self.best(self.hosts, anti)[0])

    def test_unset_hosts_are_not_lazy_loaded(self):
        spec = in_group(request(BIG), 'affinity')
        with mock.patch.object(objects.InstanceGroup, 'obj_load_attr',
                               side_effect=AssertionError('lazy load')):
            self.assertEqual('tight', self.best(self.hosts, spec)[0])

    def test_option_turns_it_off(self):
        self.conf.config(numa_slot_affinity_room=False,
                         group='nova_sched_ext')
        spec = in_group(request(BIG), 'affinity', hosts=[])
        self.assertEqual('tight', self.best(self.hosts, spec)[0])

    def test_group_size_caps_the_room(self):
        # Both hosts have room for one member: equal room, and the slot
        # loss (then the fuller host) decides.
        self.conf.config(numa_slot_affinity_group_size=1,
                         group='nova_sched_ext')
        spec = in_group(request(BIG), 'affinity', hosts=[])
        self.assertEqual('tight', self.best(self.hosts, spec)[0])
        # a multi-create of two needs room for both
        spec.num_instances = 2
        self.assertEqual('roomy', self.best(self.hosts, spec)[0])

    def test_room_weights(self):
        spec = in_group(request(BIG), 'affinity', hosts=[])
        result = self.weigher.weigh_objects(
            [weights.WeighedHost(h, 0.0) for h in self.hosts], spec)
        # room 4 and 1, plus a share in (0, 0.5] that orders equal rooms
        self.assertGreater(result[0], 4.0)
        self.assertLessEqual(result[0], 4.5)
        self.assertGreater(result[1], 1.0)
        self.assertLessEqual(result[1], 1.5)


class TestKeptBetweenRequests(WeigherTestCase):
    """The C fast path keeps hosts and weights, never stale ones."""

    def setUp(self):
        super().setUp()
        if engine.backend_name() != 'c':
            self.skipTest('the C fit helper is not built')

    def weigh(self, hosts, spec):
        return self.weigher.weigh_objects(
            [weights.WeighedHost(h, 0.0) for h in hosts], spec)

    def twin(self, hosts, spec):
        self.conf.config(fit_backend='python', group='nova_sched_ext')
        try:
            return self.make_weigher().weigh_objects(
                [weights.WeighedHost(h, 0.0) for h in hosts], spec)
        finally:
            self.conf.config(fit_backend='c', group='nova_sched_ext')

    def test_unchanged_hosts_are_not_rebuilt(self):
        hosts = [host_state('a', [8, 8]), host_state('b', [6, 6])]
        with mock.patch.object(
                adapters, '_refresh',
                side_effect=adapters._refresh) as rebuild:
            first = self.weigh(hosts, request(SMALL))
            second = self.weigh(hosts, request(SMALL))
            self.weigh(hosts, request(BIG))
        self.assertEqual(first, second)
        self.assertEqual(2, rebuild.call_count)

    def test_a_host_whose_usage_changes_gets_new_weights(self):
        a, b = host_state('a', [8, 8]), host_state('b', [6, 6])
        spec = request(SMALL)
        self.assertEqual('b', self.best([a, b], spec)[0])
        before = self.weigh([a, b], spec)
        # Nova's own way: the scheduler consumes b for a BIG instance.
        b.limits['numa_topology'] = objects.NUMATopologyLimits(
            cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0)
        b.consume_from_request(in_group(request(BIG), 'affinity', []))
        after = self.weigh([a, b], spec)
        self.assertEqual(before[0], after[0])
        self.assertNotEqual(before[1], after[1])
        self.assertEqual(self.twin([a, b], spec), after)
        # By hand, without touching 'updated': the usage is compared too.
        a.vcpus_used = 31
        self.assertEqual(self.twin([a, b], spec), self.weigh([a, b], spec))

    def test_a_replaced_topology_is_looked_at_again(self):
        a = host_state('a', [8, 8])
        spec = request(SMALL)
        self.weigh([a], spec)
        a.numa_topology = host_state('a', [2, 2]).numa_topology
        self.assertEqual(self.twin([a], spec), self.weigh([a], spec))

    def test_several_allocation_candidates_match_the_twin(self):
        hosts = [host_state('a', [8, 8]), host_state('b', [6, 6])]
        spec = request(SMALL)
        self.weigh(hosts, spec)
        hosts[0].allocation_candidates = [{'mappings': {}}] * 2
        self.assertEqual(self.twin(hosts, spec), self.weigh(hosts, spec))

    def test_new_reference_list_gets_a_new_arena(self):
        hosts = [host_state('a', [16, 16]), host_state('b', [6, 6])]
        spec = request(SMALL)
        self.conf.config(numa_slot_reference_refresh_interval=1,
                         group='nova_sched_ext')
        with mock.patch.object(numa_slot.time, 'monotonic',
                               return_value=10.0):
            with_big = self.weigh(hosts, spec)
        self.loaded = [flavor('huge', 16, 16384, DEDICATED_1)]
        with mock.patch.object(numa_slot.time, 'monotonic',
                               return_value=20.0):
            with_huge = self.weigh(hosts, spec)
        self.assertNotEqual(with_big, with_huge)
        self.assertEqual(self.twin(hosts, spec), with_huge)


class TestReferenceFlavors(WeigherTestCase):

    def test_reference_list_is_cached_and_refreshed(self):
        self.conf.config(numa_slot_reference_refresh_interval=60,
                         group='nova_sched_ext')
        refs = numa_slot.ReferenceFlavors(loader=self.loader)
        with mock.patch.object(numa_slot.time, 'monotonic',
                               return_value=1000.0):
            refs.get()
            refs.get()
        self.assertEqual(1, self.loader.call_count)
        with mock.patch.object(numa_slot.time, 'monotonic',
                               return_value=1061.0):
            self.assertEqual(('big',), refs.get()[2])
        self.assertEqual(2, self.loader.call_count)

    def test_failed_reload_keeps_previous_list(self):
        self.conf.config(numa_slot_reference_refresh_interval=1,
                         group='nova_sched_ext')
        refs = numa_slot.ReferenceFlavors(loader=self.loader)
        with mock.patch.object(numa_slot.time, 'monotonic',
                               return_value=10.0):
            refs.get()
        self.loader.side_effect = RuntimeError('db down')
        with mock.patch.object(numa_slot.time, 'monotonic',
                               return_value=20.0):
            self.assertEqual(('big',), refs.get()[2])

    def test_invalid_flavor_is_skipped_with_a_warning(self):
        bad = flavor('bad', 4, 4096, {'hw:numa_nodes': 'two'})
        self.loaded = [bad, BIG]
        logs = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.weighers.numa_slot'))
        refs = numa_slot.ReferenceFlavors(loader=self.loader)
        self.assertEqual(('big',), refs.get()[2])
        self.assertIn('ignores reference flavor bad', logs.output)

    def test_slot_weights(self):
        self.assertEqual(8.0, numa_slot._slot_weight(BIG))
        self.conf.config(numa_slot_weight_by='memory_mb',
                         group='nova_sched_ext')
        self.assertEqual(8.0, numa_slot._slot_weight(BIG))
        self.conf.config(numa_slot_weight_by='equal', group='nova_sched_ext')
        self.assertEqual(1.0, numa_slot._slot_weight(BIG))
        self.conf.config(numa_slot_flavor_weights={'big': '50'},
                         group='nova_sched_ext')
        self.assertEqual(50.0, numa_slot._slot_weight(BIG))
        self.conf.config(numa_slot_flavor_weights={'big': '-3'},
                         group='nova_sched_ext')
        self.assertEqual(1.0, numa_slot._slot_weight(BIG))
        for value in ('inf', 'nan', '1e999'):
            self.conf.config(numa_slot_flavor_weights={'big': value},
                             group='nova_sched_ext')
            self.assertEqual(1.0, numa_slot._slot_weight(BIG), value)

    def test_auto_mode_takes_the_largest_enabled_flavors(self):
        self.conf.config(numa_slot_auto_reference_count=2,
                         group='nova_sched_ext')
        all_flavors = [SMALL, flavor('off', 64, 1, disabled=True), BIG,
                       flavor('mid', 4, 4096)]
        with mock.patch.object(objects.FlavorList, 'get_all',
                               return_value=all_flavors):
            got = numa_slot.ReferenceFlavors._load_flavors()
        self.assertEqual(['big', 'mid'], [f.name for f in got])

    def test_unknown_configured_flavor_is_logged(self):
        self.conf.config(numa_slot_reference_flavors=['nope', 'big'],
                         group='nova_sched_ext')
        logs = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.weighers.numa_slot'))
        from nova import exception

        def by_name(context, name):
            if name == 'big':
                return BIG
            raise exception.FlavorNotFound(flavor_id=name)

        with mock.patch.object(objects.Flavor, 'get_by_name',
                               side_effect=by_name), \
                mock.patch.object(
                    objects.Flavor, 'get_by_flavor_id',
                    side_effect=exception.FlavorNotFound(flavor_id='x')):
            got = numa_slot.ReferenceFlavors._load_flavors()
        self.assertEqual(['big'], [f.name for f in got])
        self.assertIn("reference flavor 'nope'", logs.output)


class TestHostsWithAbsurdValues(WeigherTestCase):
    """A host with absurd numbers is unknown, never another host's weight.

    Issue 11: a ``cpu_allocation_ratio`` of inf, NaN or 1e308 raised while
    the host's record was built, which logged a traceback on every request
    and left the slot arena giving two hosts one weight.
    """

    BACKENDS = ('c', 'python')

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        self.forget_warnings()

    def forget_warnings(self):
        self.useFixture(fixtures.MockPatchObject(
            adapters, '_BAD_HOSTS', adapters._WarnedHosts()))

    def weigh(self, hosts, spec, backend):
        self.conf.config(fit_backend=backend, group='nova_sched_ext')
        if backend == 'c' and engine.backend_name() != 'c':
            self.skipTest('the C fit helper is not built')
        return self.weigher.weigh_objects(
            [weights.WeighedHost(h, 0.0) for h in hosts], spec)

    def assertUnknown(self, name, value):
        for backend in self.BACKENDS:
            logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
            self.forget_warnings()
            self.weigher = self.make_weigher()
            a, b = host_state('a', [8, 8]), host_state('b', [6, 6])
            bad = host_state('bad', [6, 6])
            setattr(bad, name, value)
            spec = request(SMALL)
            alone = self.weigh([a, b], spec, backend)
            got = self.weigh([a, bad, b], spec, backend)
            # The others keep their own weights; the unknown host weighs
            # as much as the worst of them.
            self.assertEqual([alone[0], min(alone), alone[1]], got,
                             backend)
            # The host weighed after it (a new one for the arena) too.
            later = host_state('later', [6, 6])
            self.assertEqual(alone[1], self.weigh([bad, later], spec,
                                                  backend)[1], backend)
            # Shown again: still unknown, still no error.
            self.assertEqual(got, self.weigh([a, bad, b], spec, backend),
                             backend)
            # One warning, naming the host and the value.
            self.assertEqual(1, len(logs.output.splitlines()), backend)
            self.assertIn('host bad (node bad)', logs.output)
            self.assertIn(name, logs.output)
            self.assertNotIn('Traceback', logs.output)
            self.assertNotIn('could not weigh', logs.output)

    def test_infinite_cpu_allocation_ratio(self):
        self.assertUnknown('cpu_allocation_ratio', float('inf'))

    def test_nan_cpu_allocation_ratio(self):
        self.assertUnknown('cpu_allocation_ratio', float('nan'))

    def test_huge_cpu_allocation_ratio(self):
        self.assertUnknown('cpu_allocation_ratio', 1e308)

    def test_negative_cpu_allocation_ratio(self):
        self.assertUnknown('cpu_allocation_ratio', -1.0)

    def test_nan_ram_allocation_ratio(self):
        self.assertUnknown('ram_allocation_ratio', float('nan'))

    def test_absurd_vcpu_count(self):
        self.assertUnknown('vcpus_total', 1 << 62)

    def test_one_warning_per_host_across_requests(self):
        import datetime
        for backend in self.BACKENDS:
            logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
            self.forget_warnings()
            self.weigher = self.make_weigher()
            hosts = [host_state('good', [8, 8]),
                     host_state('bad-one', [6, 6]),
                     host_state('bad-two', [6, 6])]
            hosts[1].cpu_allocation_ratio = float('inf')
            hosts[2].ram_allocation_ratio = float('nan')
            for i in range(4):
                # A compute node update each time: every host is rebuilt.
                for h in hosts:
                    h.updated = datetime.datetime(2026, 1, 1, 12, 0, i)
                self.weigh(hosts, request(SMALL), backend)
            lines = logs.output.splitlines()
            self.assertEqual(
                1, len([ln for ln in lines if 'bad-one' in ln]), backend)
            self.assertEqual(
                1, len([ln for ln in lines if 'bad-two' in ln]), backend)
            self.assertIn('cpu_allocation_ratio inf', logs.output)
            self.assertIn('ram_allocation_ratio nan', logs.output)
            self.assertNotIn('Traceback', logs.output)
            # Another absurd value is worth one more warning.
            hosts[1].cpu_allocation_ratio = 1e308
            hosts[1].updated = datetime.datetime(2026, 1, 1, 12, 1, 0)
            self.weigh(hosts, request(SMALL), backend)
            self.weigh(hosts, request(BIG), backend)
            self.assertEqual(
                2, len([ln for ln in logs.output.splitlines()
                        if 'bad-one' in ln]), backend)

    def test_an_unknown_host_is_the_worst_for_a_request_without_numa(self):
        # Before: weight 0, the best of all, since the request's slots
        # were counted at the host level only and an unknown host has none.
        plain = flavor('plain', 4, 4096)
        self.loaded = [flavor('plain-big', 16, 16384), BIG]
        for backend in self.BACKENDS:
            self.forget_warnings()
            self.weigher = self.make_weigher()
            roomy, tight = host_state('roomy', [16, 16]), host_state(
                'tight', [16, 16])
            tight.vcpus_used = 12
            bad = host_state('bad', [16, 16])
            bad.cpu_allocation_ratio = float('inf')
            spec = request(plain)
            got = self.weigh([roomy, bad, tight], spec, backend)
            self.assertEqual(min(got[0], got[2]), got[1], backend)
            self.assertLess(got[1], 0.0, backend)
            self.assertEqual('tight', self.best([roomy, bad, tight],
                                                spec)[0], backend)
            # In room mode too.
            grouped = in_group(request(plain), 'affinity', hosts=[])
            got = self.weigh([roomy, bad, tight], grouped, backend)
            self.assertEqual(min(got[0], got[2]), got[1], backend)


class TestRefusedByTheHelper(WeigherTestCase):
    """The arena path follows the engine's one fallback rule."""

    def setUp(self):
        super().setUp()
        if engine.backend_name() != 'c':
            self.skipTest('the C fit helper is not built')

    def test_the_twin_answers_with_one_error(self):
        hosts = [host_state('a', [8, 8]), host_state('b', [6, 6])]
        weighed = [weights.WeighedHost(h, 0.0) for h in hosts]
        expected = self.weigher.weigh_objects(weighed, request(SMALL))
        self.assertNotEqual(expected[0], expected[1])
        logs = self.useFixture(fixtures.FakeLogger(level='ERROR'))
        with mock.patch.object(
                lowlevel, 'slot_weights_indexed', autospec=True,
                side_effect=lowlevel.HelperError('nse_slot_weights_indexed',
                                                 -2)):
            got = self.weigher.weigh_objects(weighed, request(SMALL))
        for mine, c in zip(got, expected):
            self.assertAlmostEqual(c, mine, places=9)
        self.assertEqual(1, len(logs.output.splitlines()), logs.output)
        self.assertIn('nse_slot_weights_indexed (NSE_ERR_BAD_HOST, -2)',
                      logs.output)
        self.assertNotIn('could not weigh', logs.output)


def shared_host_state(name, cells, candidates=1):
    """A host of shared-CPU cells, ``cells`` a list of (CPUs, MiB)."""
    numa_cells = []
    for i, (cpus, memory) in enumerate(cells):
        cpuset = set(range(i * 32, i * 32 + cpus))
        numa_cells.append(objects.NUMACell(
            id=i, cpuset=cpuset, pcpuset=set(), memory=memory, cpu_usage=0,
            memory_usage=0, pinned_cpus=set(),
            siblings=[{c} for c in sorted(cpuset)],
            mempages=[objects.NUMAPagesTopology(
                size_kb=4, total=memory * 256, used=0, reserved=0)],
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False)))
    return fakes.FakeHostState(name, name, {
        'numa_topology': objects.NUMATopology(cells=numa_cells),
        'pci_stats': None, 'cpu_allocation_ratio': 1.0,
        'ram_allocation_ratio': 1.0,
        'vcpus_total': sum(c for c, _ in cells), 'vcpus_used': 0,
        'total_usable_ram_mb': sum(m for _, m in cells),
        'free_ram_mb': sum(m for _, m in cells),
        'allocation_candidates': [{'mappings': {}, 'allocations': {i: {}}}
                                  for i in range(candidates)],
        'aggregates': []})


class TestOneFitRunWhateverTheCandidates(WeigherTestCase):
    """The request is placed as the scheduler consumes it: one fit run.

    Nova's filter runs the fit once per allocation candidate, each run
    starting from the instance cell ids the last one left, so a host can
    pass on a later candidate's run although a fresh run fails. The
    scheduler's consume_from_request (and the compute's claim) then fit
    once, from the request: that fails, and the weigher must see it fail
    too, whatever the number of candidates.
    """

    def test_weight_does_not_depend_on_the_candidates(self):
        # Three 1 GiB cells cannot take the 2 GiB cell, but Nova's second
        # run says they can (its fit cache, keyed by cell ids that the
        # first run left equal).
        self.loaded = [flavor('one', 1, 1024, {'hw:numa_nodes': '1'})]
        spec = request(flavor('asymmetric', 2, 3072, {
            'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0',
            'hw:numa_cpus.1': '1', 'hw:numa_mem.0': '1024',
            'hw:numa_mem.1': '2048'}))
        for backend in ('c', 'python'):
            self.conf.config(fit_backend=backend, group='nova_sched_ext')
            if backend == 'c' and engine.backend_name() != 'c':
                self.skipTest('the C fit helper is not built')
            by_candidates = []
            for candidates in (1, 2):
                self.weigher = self.make_weigher()
                hosts = [shared_host_state('roomy', [(2, 4096)] * 3),
                         shared_host_state('tight', [(1, 1024)] * 3,
                                           candidates)]
                by_candidates.append(self.weigher.weigh_objects(
                    [weights.WeighedHost(h, 0.0) for h in hosts], spec))
            self.assertEqual(by_candidates[0], by_candidates[1], backend)
