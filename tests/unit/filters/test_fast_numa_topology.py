"""FastNUMATopologyFilter against Nova's NUMATopologyFilter as the oracle."""

import copy
from unittest import mock

import fixtures
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from nova import objects
from nova.scheduler.filters import numa_topology_filter
from nova.tests.unit.scheduler import fakes
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import conf
from nova_sched_ext.filters import fast_numa_topology
from nova_sched_ext.filters import numa_fit
from nova_sched_ext.fit import model
from tests import base
from tests.unit.filters import test_numa_fit as helpers
from tests.unit.fit import strategies


def spec(numa_topology, pci_requests=None, extra_specs=None,
         network_metadata=None):
    spec_obj = helpers.spec(numa_topology, pci_requests)
    spec_obj.flavor = objects.Flavor(extra_specs=extra_specs or {})
    if network_metadata is not None:
        spec_obj.network_metadata = network_metadata
    return spec_obj


def host(name, topology, pci_stats=None, candidates=None, cpu_ratio=16.0,
         ram_ratio=1.5):
    if candidates is None:
        candidates = [{'mappings': {}}]
    return fakes.FakeHostState(name, name, {
        'numa_topology': topology, 'pci_stats': pci_stats,
        'cpu_allocation_ratio': cpu_ratio, 'ram_allocation_ratio': ram_ratio,
        'allocation_candidates': candidates})


def outcome(hosts):
    """What a NUMA filter leaves behind, for comparison."""
    result = []
    for h in hosts:
        limits = h.limits.get('numa_topology')
        result.append((h.host, limits and limits.obj_to_primitive(),
                       h.allocation_candidates))
    return result


def no_threads(topology):
    for cell in topology.cells:
        cell.siblings = [{c} for c in sorted(cell.pcpuset | cell.cpuset)]
    return topology


class TestFastNUMATopologyFilter(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        self.filt = fast_numa_topology.FastNUMATopologyFilter()
        self.nova = numa_topology_filter.NUMATopologyFilter()

    def test_fits_and_records_nova_limits(self):
        hosts = [host('full', helpers.host_topology(2)),
                 host('roomy', helpers.host_topology(8), cpu_ratio=4.0,
                      ram_ratio=1.0)]
        kept = self.filt.filter_all(hosts, spec(helpers.dedicated(4)))
        self.assertEqual(['roomy'], [h.host for h in kept])
        limits = kept[0].limits['numa_topology']
        self.assertEqual((4.0, 1.0), (limits.cpu_allocation_ratio,
                                      limits.ram_allocation_ratio))
        self.assertNotIn('numa_topology', hosts[0].limits)

    def test_decides_without_nova_when_the_engine_knows(self):
        hosts = [host('h%d' % i, helpers.host_topology(8)) for i in range(3)]
        with mock.patch.object(numa_topology_filter.NUMATopologyFilter,
                               'host_passes') as nova:
            kept = self.filt.filter_all(hosts, spec(helpers.dedicated(4)))
        self.assertEqual(3, len(kept))
        nova.assert_not_called()

    def test_network_metadata_reaches_the_limits(self):
        metadata = objects.NetworkMetadata(physnets=set(), tunneled=False)
        kept = self.filt.filter_all(
            [host('h', helpers.host_topology(8))],
            spec(helpers.dedicated(2), network_metadata=metadata))
        self.assertIs(metadata,
                      kept[0].limits['numa_topology'].network_metadata)

    def test_request_without_numa_passes_without_copying_the_spec(self):
        spec_obj = spec(None)
        hosts = [host('a', helpers.host_topology(0)), host('b', None)]
        with mock.patch.object(spec_obj, 'obj_clone') as clone:
            kept = self.filt.filter_all(hosts, spec_obj)
        self.assertEqual(['a', 'b'], [h.host for h in kept])
        clone.assert_not_called()
        self.assertEqual({}, hosts[0].limits)

    def test_require_threads_on_a_host_without_them_is_rejected(self):
        topology = no_threads(helpers.host_topology(8))
        request = helpers.dedicated(2)
        request.cells[0].cpu_thread_policy = 'require'
        specs = {'hw:cpu_policy': 'dedicated',
                 'hw:cpu_thread_policy': 'require'}
        # Even if the engine said yes, Nova's own check comes first.
        with mock.patch.object(numa_fit, 'engine_answers',
                               return_value=[model.YES]):
            kept = self.filt.filter_all([host('h', topology)],
                                        spec(request, extra_specs=specs))
        self.assertEqual([], kept)

    def test_unknown_goes_to_nova(self):
        hosts = [host('a', helpers.host_topology(8)),
                 host('b', helpers.host_topology(8))]
        with mock.patch.object(numa_fit, 'engine_answers',
                               return_value=[model.UNKNOWN, model.YES]), \
                mock.patch.object(numa_topology_filter.NUMATopologyFilter,
                                  'host_passes',
                                  return_value=False) as nova:
            kept = self.filt.filter_all(hosts, spec(helpers.dedicated(2)))
        self.assertEqual(['b'], [h.host for h in kept])
        self.assertEqual([mock.call(hosts[0], mock.ANY)], nova.call_args_list)

    def test_engine_failure_leaves_every_host_to_nova(self):
        hosts = [host('a', helpers.host_topology(2)),
                 host('b', helpers.host_topology(8))]
        with mock.patch.object(numa_fit, 'engine_answers',
                               side_effect=RuntimeError('boom')):
            kept = self.filt.filter_all(hosts, spec(helpers.dedicated(4)))
        self.assertEqual(['b'], [h.host for h in kept])
        self.assertIn('could not ask the fit engine', self.logs.output)

    def test_nova_failure_rejects_the_host_and_never_raises(self):
        with mock.patch.object(numa_fit, 'engine_answers',
                               return_value=None), \
                mock.patch.object(numa_topology_filter.NUMATopologyFilter,
                                  'host_passes',
                                  side_effect=KeyError('cells')):
            kept = self.filt.filter_all([host('a', helpers.host_topology(8))],
                                        spec(helpers.dedicated(2)))
        self.assertEqual([], kept)
        self.assertIn('rejecting the host', self.logs.output)

    def test_pci_request_with_several_candidates_goes_to_nova(self):
        candidates = [{'mappings': {uuids.a: [uuids.rp1]}},
                      {'mappings': {uuids.a: [uuids.rp2]}}]
        hosts = [host('h', helpers.host_topology(8), candidates=candidates)]
        pci = objects.InstancePCIRequest(count=1, spec=[{}])
        with mock.patch.object(numa_fit, 'engine_answers',
                               return_value=[model.YES]), \
                mock.patch.object(numa_topology_filter.NUMATopologyFilter,
                                  'host_passes', return_value=True) as nova:
            self.filt.filter_all(hosts, spec(helpers.dedicated(2), [pci]))
        nova.assert_called_once()

    def test_host_without_candidates_is_rejected_like_nova(self):
        hosts = [host('h', helpers.host_topology(8), candidates=[])]
        self.assertEqual([], self.filt.filter_all(
            hosts, spec(helpers.dedicated(2))))
        self.assertFalse(self.nova.host_passes(
            host('h', helpers.host_topology(8), candidates=[]),
            spec(helpers.dedicated(2))))

    def test_rebuild_passes_every_host(self):
        spec_obj = helpers.spec(helpers.dedicated(64), rebuild=True)
        hosts = [host('h', helpers.host_topology(2))]
        self.assertEqual(hosts, self.filt.filter_all(hosts, spec_obj))

    def test_warns_when_the_filters_it_replaces_are_enabled(self):
        self.conf.config(
            enabled_filters=['NUMAFitFilter', 'NUMATopologyFilter',
                             'FastNUMATopologyFilter'],
            group='filter_scheduler')
        fast_numa_topology.FastNUMATopologyFilter()
        self.assertIn('only repeats its work', self.logs.output)

    @settings(max_examples=200, deadline=None, derandomize=True,
              database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def test_same_outcome_as_numa_topology_filter(self, data):
        """Same hosts, same limits, same allocation candidates as Nova's."""
        drawn = []
        for i in range(data.draw(st.integers(1, 6))):
            topology = data.draw(strategies.host_topologies(4))
            if data.draw(st.integers(0, 5)) == 0:
                topology = no_threads(topology)
            stats, _ = data.draw(strategies.pci_setups(topology))
            count = data.draw(st.sampled_from([1, 1, 1, 0, 2]))
            candidates = [{'mappings': {}}] * count
            ratios = data.draw(st.sampled_from([(16.0, 1.5), (1.0, 1.0),
                                                (4.0, 1.0)]))
            drawn.append(('h%d' % i, topology, stats, candidates, ratios))
        if data.draw(st.booleans()):
            specs, instance = data.draw(strategies.flavor_topologies(2))
        else:
            specs, instance = {}, data.draw(
                strategies.instance_topologies(2))
        pci_requests = None
        if drawn[0][2] is not None:
            _, pci_requests = data.draw(strategies.pci_setups(drawn[0][1]))

        def hosts():
            return [host(name, copy.deepcopy(topology),
                         copy.deepcopy(stats), list(candidates), *ratios)
                    for name, topology, stats, candidates, ratios in drawn]

        def request():
            return spec(copy.deepcopy(instance), pci_requests, specs)

        expected = [h for h in hosts() if self.nova.host_passes(h, request())]
        ours = self.filt.filter_all(hosts(), request())
        self.assertEqual(outcome(expected), outcome(ours))
