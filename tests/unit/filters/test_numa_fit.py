"""NUMAFitFilter with Nova's own fakes, beside Nova's NUMATopologyFilter."""

import datetime
import threading
from unittest import mock

import fixtures
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from nova import objects
from nova.scheduler.filters import numa_topology_filter
from nova.tests.unit.scheduler import fakes
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.filters import numa_fit
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from tests import base
from tests.unit.fit import strategies


def spec(numa_topology, pci_requests=None, rebuild=False):
    spec_obj = objects.RequestSpec(
        numa_topology=numa_topology,
        pci_requests=objects.InstancePCIRequests(requests=pci_requests)
        if pci_requests else None,
        instance_uuid=uuids.fake,
        flavor=objects.Flavor(extra_specs={}),
        image=objects.ImageMeta(properties=objects.ImageMetaProps()))
    if rebuild:
        spec_obj.scheduler_hints = {'_nova_check_type': ['rebuild']}
    return spec_obj


def host(name, topology, pci_stats=None, candidates=1):
    return fakes.FakeHostState(name, name, {
        'numa_topology': topology, 'pci_stats': pci_stats,
        'cpu_allocation_ratio': 16.0, 'ram_allocation_ratio': 1.5,
        'allocation_candidates': [{'mappings': {}}] * candidates})


def dedicated(cpus, memory=512, cells=1):
    return objects.InstanceNUMATopology(cells=[
        objects.InstanceNUMACell(
            id=i, cpuset=set(), pcpuset=set(range(i * cpus, (i + 1) * cpus)),
            memory=memory, cpu_policy='dedicated')
        for i in range(cells)])


def host_topology(pcpus_per_cell, cells=2, pinned=()):
    return objects.NUMATopology(cells=[
        objects.NUMACell(
            id=i, cpuset=set(),
            pcpuset=set(range(i * 16, i * 16 + pcpus_per_cell)),
            memory=4096, cpu_usage=0, memory_usage=0,
            pinned_cpus=set(c for c in pinned if i * 16 <= c < i * 16 + 16),
            siblings=[{c} for c in range(i * 16, i * 16 + pcpus_per_cell)],
            mempages=[objects.NUMAPagesTopology(size_kb=4, total=1048576,
                                                used=0, reserved=0)],
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False))
        for i in range(cells)])


class TestNUMAFitFilter(base.TestCase):

    def setUp(self):
        super().setUp()
        self.filt = numa_fit.NUMAFitFilter()
        self.nova = numa_topology_filter.NUMATopologyFilter()

    def names(self, hosts):
        return [h.host for h in hosts]

    def test_rejects_hosts_that_cannot_fit(self):
        hosts = [host('big', host_topology(8)),
                 host('small', host_topology(2)),
                 host('busy', host_topology(8, pinned=range(0, 32))),
                 host('none', None)]
        kept = self.filt.filter_all(hosts, spec(dedicated(4)))
        self.assertEqual(['big'], self.names(kept))

    def test_request_without_numa_passes_everything(self):
        hosts = [host('a', None), host('b', host_topology(1))]
        self.assertEqual(['a', 'b'],
                         self.names(self.filt.filter_all(hosts, spec(None))))

    def test_rebuild_is_not_filtered(self):
        hosts = [host('small', host_topology(1))]
        kept = self.filt.filter_all(hosts, spec(dedicated(4), rebuild=True))
        self.assertEqual(['small'], self.names(kept))

    def test_host_passes_matches_filter_all(self):
        self.assertTrue(self.filt.host_passes(host('big', host_topology(8)),
                                              spec(dedicated(4))))
        self.assertFalse(self.filt.host_passes(
            host('small', host_topology(2)), spec(dedicated(4))))

    def test_unsupported_request_keeps_all_hosts(self):
        topology = dedicated(4)
        request = spec(topology)
        request.network_metadata = objects.NetworkMetadata(
            physnets={'physnet0'}, tunneled=False)
        hosts = [host('small', host_topology(2))]
        self.assertEqual(['small'],
                         self.names(self.filt.filter_all(hosts, request)))

    def test_internal_error_keeps_all_hosts_and_never_raises(self):
        hosts = [host('small', host_topology(2))]
        with mock.patch.object(engine, 'check_hosts', autospec=True,
                               side_effect=RuntimeError('boom')):
            kept = self.filt.filter_all(hosts, spec(dedicated(4)))
        self.assertEqual(['small'], self.names(kept))

    def test_no_allocation_candidate_is_rejected_like_nova(self):
        state = host('big', host_topology(8), candidates=0)
        request = spec(dedicated(4))
        self.assertFalse(self.nova.host_passes(state, request))
        self.assertEqual([], self.filt.filter_all([state], request))

    def test_cache_follows_topology_replacement(self):
        state = host('h', host_topology(8))
        request = spec(dedicated(6))
        self.assertEqual(['h'], self.names(self.filt.filter_all([state],
                                                                request)))
        # Nova replaces the topology object when usage changes.
        state.numa_topology = host_topology(8, pinned=range(0, 32))
        self.assertEqual([], self.filt.filter_all([state], request))

    def test_cache_keeps_a_stamped_host_nova_refreshed(self):
        state = host('h', host_topology(8))
        state.updated = datetime.datetime(2026, 1, 1, 12, 0, 0)
        request = spec(dedicated(6))
        self.assertEqual(['h'], self.names(self.filt.filter_all([state],
                                                                request)))
        with mock.patch.object(adapters, '_build',
                               side_effect=adapters._build) as build:
            # Nova's HostManager before each request: new, equal objects.
            state.numa_topology = state.numa_topology.obj_clone()
            state.updated = state.updated.replace()
            self.assertEqual(['h'], self.names(
                self.filt.filter_all([state], request)))
            self.assertEqual(0, build.call_count)
            # The compute node saved new usage: a new stamp.
            state.numa_topology = host_topology(8, pinned=range(0, 32))
            state.updated += datetime.timedelta(seconds=1)
            self.assertEqual([], self.filt.filter_all([state], request))
            self.assertEqual(1, build.call_count)
            # Saved again within the same second: the usage tells.
            state.numa_topology = host_topology(8)
            state.vcpus_used = 0
            state.free_ram_mb += 1024
            self.assertEqual(['h'], self.names(
                self.filt.filter_all([state], request)))
            self.assertEqual(2, build.call_count)

    def test_cache_notices_allocation_ratio_change(self):
        shared = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, cpuset={0, 1}, pcpuset=set(),
                                     memory=512)])
        topology = objects.NUMATopology(cells=[objects.NUMACell(
            id=0, cpuset={0, 1, 2, 3}, pcpuset=set(), memory=4096,
            cpu_usage=3, memory_usage=0, pinned_cpus=set(),
            siblings=[{0}, {1}, {2}, {3}],
            mempages=[], network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False))])
        state = host('h', topology)
        state.cpu_allocation_ratio = 1.0
        self.assertEqual([], self.filt.filter_all([state], spec(shared)))
        state.cpu_allocation_ratio = 4.0
        self.assertEqual(['h'], self.names(
            self.filt.filter_all([state], spec(shared))))

    def test_concurrent_requests_get_their_own_answers(self):
        hosts = [host('h%d' % i, host_topology(2 + i % 8))
                 for i in range(200)]
        expected = {}
        for cpus in range(1, 9):
            expected[cpus] = self.names(self.filt.filter_all(
                hosts, spec(dedicated(cpus))))
        errors = []

        def worker(cpus):
            for _ in range(20):
                got = self.names(self.filt.filter_all(hosts,
                                                      spec(dedicated(cpus))))
                if got != expected[cpus]:
                    errors.append((cpus, got))

        threads = [threading.Thread(target=worker, args=(c,))
                   for c in range(1, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([], errors)
        self.assertNotEqual(expected[1], expected[8])

    @settings(max_examples=base.hypothesis_examples(1 / 4, 50),
              deadline=None, derandomize=True,
              database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def test_same_hosts_as_numa_topology_filter(self, data):
        """NUMAFitFilter + NUMATopologyFilter keeps what Nova's alone keeps."""
        hosts = []
        for i in range(data.draw(st.integers(1, 6))):
            topology = data.draw(strategies.host_topologies(4))
            stats, _ = data.draw(strategies.pci_setups(topology))
            hosts.append(host('h%d' % i, topology, stats))
        instance = data.draw(strategies.instance_topologies(2))
        pci_requests = None
        if hosts[0].pci_stats is not None:
            _, pci_requests = data.draw(strategies.pci_setups(
                hosts[0].numa_topology))
        nova_only = [h.host for h in hosts
                     if self.nova.host_passes(h, spec(instance,
                                                      pci_requests))]
        ours = self.filt.filter_all(hosts, spec(instance, pci_requests))
        both = [h.host for h in ours
                if self.nova.host_passes(h, spec(instance, pci_requests))]
        self.assertEqual(nova_only, both)


class TestAdapters(base.TestCase):

    def test_host_without_siblings_is_unsupported(self):
        topology = host_topology(2)
        topology.cells[0].siblings = []
        self.assertEqual(engine.UNSUPPORTED_HOST,
                         adapters.host_model(topology, None, 1.0, 1.0))

    def test_socket_pci_policy_is_unsupported(self):
        request = objects.InstancePCIRequest(
            count=1, spec=[{'vendor_id': '8086'}], request_id=uuids.pci,
            numa_policy='socket')
        self.assertRaises(adapters.Unsupported,
                          adapters.request_from_topology, dedicated(1),
                          [request])


class TestHostsWithAbsurdValues(base.TestCase):
    """A host with absurd numbers is kept for Nova, with one warning.

    Issue 11: such a host made the filter log a traceback on every request
    and keep every host, fitting or not.
    """

    def setUp(self):
        super().setUp()
        self.filt = numa_fit.NUMAFitFilter()
        self.logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        self.useFixture(fixtures.MockPatchObject(
            adapters, '_BAD_HOSTS', adapters._WarnedHosts()))

    def assertKeptAsUnknown(self, name, value):
        bad = host('bad', host_topology(2))
        setattr(bad, name, value)
        hosts = [host('big', host_topology(8)),
                 host('small', host_topology(2)), bad]
        for _ in range(3):
            kept = self.filt.filter_all(hosts, spec(dedicated(4)))
            # The others are still checked; the unknown host is left to
            # NUMATopologyFilter.
            self.assertEqual(['big', 'bad'], [h.host for h in kept])
            self.assertTrue(self.filt.host_passes(bad, spec(dedicated(4))))
        self.assertNotIn('Traceback', self.logs.output)
        self.assertNotIn('could not check', self.logs.output)
        self.assertEqual(1, len([ln for ln in self.logs.output.splitlines()
                                 if 'bad' in ln and name in ln]))

    def test_infinite_cpu_allocation_ratio(self):
        self.assertKeptAsUnknown('cpu_allocation_ratio', float('inf'))

    def test_nan_cpu_allocation_ratio(self):
        self.assertKeptAsUnknown('cpu_allocation_ratio', float('nan'))

    def test_huge_cpu_allocation_ratio(self):
        self.assertKeptAsUnknown('cpu_allocation_ratio', 1e308)

    def test_negative_cpu_allocation_ratio(self):
        self.assertKeptAsUnknown('cpu_allocation_ratio', -1.0)

    def test_infinite_ram_allocation_ratio(self):
        self.assertKeptAsUnknown('ram_allocation_ratio', float('inf'))

    def test_negative_total_ram(self):
        self.assertKeptAsUnknown('total_usable_ram_mb', -1)

    def test_concurrent_requests_warn_once(self):
        def worker():
            for _ in range(20):
                # A new HostState each time: no cached model, every one
                # is built and meets the bad value; one warning in all.
                bad = host('bad', host_topology(2))
                bad.cpu_allocation_ratio = float('inf')
                self.filt.filter_all([bad], spec(dedicated(1)))

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(1, len(self.logs.output.splitlines()))


def cell_with(**values):
    """A one-cell host topology with some of its cell's values replaced."""
    pages = {'size_kb': 4, 'total': 1048576, 'used': 0, 'reserved': 0}
    fields = {'id': 0, 'cpuset': set(), 'pcpuset': {0, 1}, 'memory': 4096,
              'cpu_usage': 0, 'memory_usage': 0, 'pinned_cpus': set(),
              'siblings': [{0}, {1}]}
    for name, value in values.items():
        if name.startswith('page_'):
            pages[name[len('page_'):]] = value
        else:
            fields[name] = value
    return objects.NUMATopology(cells=[objects.NUMACell(
        mempages=[objects.NUMAPagesTopology(**pages)],
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False),
        **fields)])


class TestAbsurdHostValues(base.TestCase):
    """The adapters' bounds: what makes a host unknown, what does not."""

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        self.useFixture(fixtures.MockPatchObject(
            adapters, '_BAD_HOSTS', adapters._WarnedHosts()))

    def model(self, topology=None, **values):
        state = host('h', topology or host_topology(2))
        state.vcpus_total, state.total_usable_ram_mb = 4, 8192
        state.free_ram_mb = 8192
        for name, value in values.items():
            setattr(state, name, value)
        return adapters.prepared_host(state).model

    def test_absurd_host_values_make_the_host_unknown(self):
        cases = [
            {'cpu_allocation_ratio': float('inf')},
            {'cpu_allocation_ratio': float('-inf')},
            {'cpu_allocation_ratio': float('nan')},
            {'cpu_allocation_ratio': 1e308},
            {'cpu_allocation_ratio': 1e7},
            {'cpu_allocation_ratio': 10001},
            {'cpu_allocation_ratio': 0.0},
            {'cpu_allocation_ratio': -0.5},
            {'cpu_allocation_ratio': 10 ** 400},
            {'cpu_allocation_ratio': '16.0'},
            {'ram_allocation_ratio': float('nan')},
            {'ram_allocation_ratio': -1.0},
            {'vcpus_total': 1 << 62},
            {'vcpus_total': -4},
            {'vcpus_total': None},
            {'vcpus_used': -1},
            {'vcpus_used': 2.5},
            {'total_usable_ram_mb': 1 << 62},
            {'total_usable_ram_mb': float('inf')},
            {'free_ram_mb': float('nan')},
            {'free_ram_mb': -(1 << 62)},
            # sane alone, but the room placement would see is not
            {'total_usable_ram_mb': 1 << 37, 'free_ram_mb': 1 << 37,
             'ram_allocation_ratio': 16.0},
            {'topology': cell_with(cpu_usage=1 << 40)},
            {'topology': cell_with(cpu_usage=-1)},
            {'topology': cell_with(memory=1 << 62)},
            {'topology': cell_with(memory_usage=-1)},
            {'topology': cell_with(id=1 << 40)},
            {'topology': cell_with(page_total=1 << 62)},
            {'topology': cell_with(page_used=-1)},
            {'topology': cell_with(page_size_kb=1 << 62)},
            {'topology': cell_with(page_size_kb=0)},
        ]
        for values in cases:
            self.assertEqual(engine.UNSUPPORTED_HOST, self.model(**values),
                             values)
        self.assertNotIn('Traceback', self.logs.output)

    def test_sane_edge_values_are_kept(self):
        for values in [{'cpu_allocation_ratio': 0.01},
                       {'cpu_allocation_ratio': 10000.0},
                       {'ram_allocation_ratio': 1},
                       {'free_ram_mb': -4096},
                       {'vcpus_used': 64},
                       {'vcpus_total': 4.0}]:
            self.assertEqual(0, self.model(**values).status, values)
        self.assertEqual(0, self.model(topology=cell_with()).status)
        self.assertEqual('', self.logs.output)

    def test_host_model_rejects_absurd_ratios(self):
        # For callers that pass the ratios themselves (victim selection).
        for ratio in (float('inf'), float('nan'), 1e308, -1.0):
            self.assertEqual(
                engine.UNSUPPORTED_HOST,
                adapters.host_model(host_topology(2), None, ratio, 1.0))
            self.assertEqual(
                engine.UNSUPPORTED_HOST,
                adapters.host_model(host_topology(2), None, 1.0, ratio))

    def test_warned_again_after_a_sane_spell(self):
        state = host('h', host_topology(2))
        state.cpu_allocation_ratio = float('inf')
        adapters.prepared_host(state)
        state.cpu_allocation_ratio = 2.0
        self.assertEqual(0, adapters.prepared_host(state).model.status)
        state.cpu_allocation_ratio = float('inf')
        adapters.prepared_host(state)
        self.assertEqual(2, self.logs.output.count('cpu_allocation_ratio'))

    def test_warnings_kept_for_a_bounded_number_of_hosts(self):
        self.useFixture(fixtures.MockPatchObject(
            adapters, '_BAD_HOSTS', adapters._WarnedHosts(max_hosts=3)))
        for i in range(10):
            state = host('h%d' % i, host_topology(2))
            state.cpu_allocation_ratio = float('nan')
            adapters.prepared_host(state)
            self.assertLessEqual(len(adapters._BAD_HOSTS._warned), 3)
        self.assertEqual(10, self.logs.output.count('cpu_allocation_ratio'))
