"""FastNUMATopologyFilter against Nova's NUMATopologyFilter as the oracle."""

import copy
import os
from unittest import mock

import fixtures
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from nova import exception
from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler.filters import numa_topology_filter
from nova.tests.unit.scheduler import fakes
from nova.virt import hardware
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import conf
from nova_sched_ext.filters import fast_numa_topology
from nova_sched_ext.filters import numa_fit
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model
from tests import base
from tests.unit.filters import test_numa_fit as helpers
from tests.unit.fit import strategies


#: ``NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES`` sets the property test's budget
#: (10,000 in ``tox -e fuzz``); ``NOVA_SCHED_EXT_HYPOTHESIS_RANDOM=1``
#: draws a fresh sample instead of the reproducible one.
EXAMPLES = int(os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES', '200'))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None,
    derandomize=os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_RANDOM') != '1',
    database=None, suppress_health_check=list(HealthCheck))

BACKENDS = ('c', 'python')


def spec(numa_topology, pci_requests=None, extra_specs=None,
         network_metadata=None):
    spec_obj = helpers.spec(numa_topology, pci_requests)
    vcpus = memory_mb = 1
    if numa_topology is not None:
        vcpus = sum(len(cell.cpuset) + len(cell.pcpuset)
                    for cell in numa_topology.cells)
        memory_mb = sum(cell.memory for cell in numa_topology.cells)
    # What the scheduler's consume_from_request reads besides the topology.
    spec_obj.flavor = objects.Flavor(
        vcpus=vcpus, memory_mb=memory_mb, root_gb=0, ephemeral_gb=0,
        extra_specs=extra_specs or {})
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


def allocation_candidates(count):
    """``count`` candidates, each from its own provider: told apart."""
    return [{'allocations': {'rp%d' % i: {'resources': {'VCPU': 1}}},
             'mappings': {}} for i in range(count)]


def filtered(filter_obj, hosts, spec_obj, index=0):
    """The hosts a filter passes, through Nova's own filter handler."""
    return nova_filters.HostFilterHandler().get_filtered_objects(
        [filter_obj], hosts, spec_obj, index)


def consumed(host_state, spec_obj):
    """The scheduler's consume_from_request on the host it chose.

    It fits the request once more (one run, from the request's own
    instance cells) and leaves the fitted topology, with the host's cell
    ids, in the request for the next round.  Returns what Nova made of it.
    """
    try:
        host_state.consume_from_request(spec_obj)
    except exception.NovaException as exc:
        return type(exc)
    topology = spec_obj.numa_topology
    return (host_state.numa_topology.obj_to_primitive(),
            topology and topology.obj_to_primitive())


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


@st.composite
def mirrored_hosts(draw, instance):
    """A host whose cells are as big as some of the instance's cells.

    Room for every CPU, so that memory decides; with asymmetric instance
    cells only some permutations fit, which is where the runs Nova makes
    for several candidates, each starting from the ids the last one left,
    part ways.
    """
    sizes = [cell.memory for cell in instance.cells]
    most = max(len(c.cpuset) + len(c.pcpuset) for c in instance.cells)
    if draw(st.integers(0, 2)):
        # The instance's cells in another order: Nova's issue-24 case.
        memories = draw(st.permutations(sizes))
    else:
        memories = [draw(st.sampled_from(sizes)) for _ in sizes]
    if draw(st.booleans()):
        memories.append(draw(st.sampled_from(sizes)))
    cells = []
    for i, memory in enumerate(memories):
        cpus = set(range(i * 64, i * 64 + most + draw(st.integers(0, 1))))
        pages = []
        if draw(st.booleans()):
            pages.append(objects.NUMAPagesTopology(
                size_kb=4, total=memory * 256, used=0, reserved=0))
        cells.append(objects.NUMACell(
            id=i, cpuset=set(cpus), pcpuset=set(cpus), memory=memory,
            cpu_usage=0, memory_usage=0, pinned_cpus=set(),
            siblings=[{c} for c in sorted(cpus)], socket=0, mempages=pages,
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False)))
    return objects.NUMATopology(cells=cells)


class TestFastNUMATopologyFilter(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        self.filt = fast_numa_topology.FastNUMATopologyFilter()
        self.nova = numa_topology_filter.NUMATopologyFilter()

    def use_backend(self, backend):
        self.conf.config(fit_backend=backend, group='nova_sched_ext')
        if backend == 'c' and engine.backend_name() != 'c':
            self.skipTest('the C fit helper is not built')

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

    def test_several_candidates_are_decided_without_nova(self):
        # A pinned flavor's hosts have two candidates (PCPU, then VCPU):
        # the engine replays both runs, and the host keeps those that
        # fit, as Nova's filter keeps them.
        def hosts():
            return [host('h%d' % i, helpers.host_topology(8),
                         candidates=allocation_candidates(2))
                    for i in range(3)]
        expected = filtered(self.nova, hosts(), spec(helpers.dedicated(4)))
        with mock.patch.object(numa_topology_filter.NUMATopologyFilter,
                               'host_passes') as nova:
            kept = self.filt.filter_all(hosts(), spec(helpers.dedicated(4)))
        nova.assert_not_called()
        self.assertEqual(
            [(h.host, h.allocation_candidates) for h in expected],
            [(h.host, h.allocation_candidates) for h in kept])
        self.assertEqual(3, len(kept))

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

    @SETTINGS
    @given(st.data())
    def test_same_outcome_as_numa_topology_filter(self, data):
        """Same hosts, limits and candidates as Nova's, round after round.

        Hosts with several allocation candidates, requests with asymmetric
        ``hw:numa_cpus.N`` / ``hw:numa_mem.N``, and a multi-create's rounds:
        the scheduler consumes the request on a host that passed, which
        leaves the request's instance cells with that host's cell ids, then
        filters the hosts that passed, with the candidates they kept, again.
        """
        backend = data.draw(st.sampled_from(BACKENDS))
        self.use_backend(backend)
        if data.draw(st.integers(0, 3)):
            specs, instance = data.draw(strategies.flavor_topologies(
                3, min_cells=data.draw(st.sampled_from([2, 1]))))
        else:
            specs, instance = {}, data.draw(
                strategies.instance_topologies(2))
        drawn = []
        for i in range(data.draw(st.integers(1, 6))):
            if data.draw(st.integers(0, 2)):
                topology = data.draw(mirrored_hosts(instance))
            else:
                topology = data.draw(strategies.host_topologies(
                    4, small=data.draw(st.booleans())))
            if data.draw(st.integers(0, 5)) == 0:
                topology = no_threads(topology)
            stats, _ = data.draw(strategies.pci_setups(topology))
            count = data.draw(st.sampled_from([2, 1, 3, 0, 4]))
            ratios = data.draw(st.sampled_from([(16.0, 1.5), (1.0, 1.0),
                                                (4.0, 1.0)]))
            drawn.append(('h%d' % i, topology, stats, count, ratios))
        pci_requests = None
        if drawn[0][2] is not None:
            _, pci_requests = data.draw(strategies.pci_setups(drawn[0][1]))

        def hosts():
            return [host(name, copy.deepcopy(topology),
                         copy.deepcopy(stats), allocation_candidates(count),
                         *ratios)
                    for name, topology, stats, count, ratios in drawn]

        def request():
            return spec(copy.deepcopy(instance), pci_requests, specs)

        theirs, ours = hosts(), hosts()
        their_spec, our_spec = request(), request()
        for index in range(data.draw(st.integers(1, 3))):
            theirs = filtered(self.nova, theirs, their_spec, index)
            ours = filtered(self.filt, ours, our_spec, index)
            self.assertEqual(outcome(theirs), outcome(ours),
                             'round %d, %s backend' % (index + 1, backend))
            if not theirs:
                break
            chosen = data.draw(st.integers(0, len(theirs) - 1))
            self.assertEqual(consumed(theirs[chosen], their_spec),
                             consumed(ours[chosen], our_spec))


def shared_cell(cell_id, cpus, memory_mb):
    """A host cell of shared CPUs and 4 KiB pages, nothing used."""
    cpuset = set(range(cell_id * 8, cell_id * 8 + cpus))
    return objects.NUMACell(
        id=cell_id, cpuset=cpuset, pcpuset=set(), memory=memory_mb,
        cpu_usage=0, memory_usage=0, pinned_cpus=set(),
        siblings=[{c} for c in sorted(cpuset)], socket=0,
        mempages=[objects.NUMAPagesTopology(
            size_kb=4, total=memory_mb * 256, used=0, reserved=0)],
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


def flavor_spec(vcpus, memory_mb, extra_specs):
    """A RequestSpec with the topology nova-api builds for the flavor."""
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=memory_mb, root_gb=0,
                            ephemeral_gb=0, extra_specs=extra_specs)
    image = objects.ImageMeta(properties=objects.ImageMetaProps())
    return objects.RequestSpec(
        numa_topology=hardware.numa_get_constraints(flavor, image),
        flavor=flavor, image=image, pci_requests=None,
        instance_uuid=uuids.instance)


class TestSeveralAllocationCandidates(base.TestCase):
    """Nova's filter runs the fit once per candidate on ONE request copy.

    Each run starts from the instance cell ids the run before left (an
    instance cell takes the id of the host cell it was tried on, and
    Nova's pair cache is keyed by those ids), so the runs of one host can
    answer differently, and Nova keeps only the candidates whose run fits.
    Through Nova's HostFilterHandler on both fit backends: the same hosts,
    limits and candidates as Nova's NUMATopologyFilter.
    """

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.nova = numa_topology_filter.NUMATopologyFilter()

    def assertSameAsNova(self, filter_class, make_hosts, make_spec):
        """Nova's outcome, after checking the filter's on both backends."""
        expected = outcome(filtered(self.nova, make_hosts(), make_spec()))
        for backend in BACKENDS:
            self.conf.config(fit_backend=backend, group='nova_sched_ext')
            if backend == 'c' and engine.backend_name() != 'c':
                self.skipTest('the C fit helper is not built')
            ours = outcome(filtered(filter_class(), make_hosts(),
                                    make_spec()))
            self.assertEqual(expected, ours, '%s backend' % backend)
        return expected

    def test_later_candidate_fails_where_the_first_fits(self):
        # Issue 24's case: the first run fits instance cell 0 (8 GiB) on
        # host cell 1 and cell 1 (16 GiB) on host cell 0, leaving their
        # ids swapped; from there the second run caches "host cell 1 does
        # not fit the cell of id 0" and fails.  Nova keeps candidate 0.
        def hosts():
            topology = objects.NUMATopology(cells=[
                shared_cell(0, 4, 16384), shared_cell(1, 4, 8192)])
            return [host('h', topology, candidates=allocation_candidates(2),
                         cpu_ratio=1.0, ram_ratio=1.0)]

        def request():
            return flavor_spec(4, 24576, {
                'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0,1',
                'hw:numa_cpus.1': '2,3', 'hw:numa_mem.0': '8192',
                'hw:numa_mem.1': '16384'})

        expected = self.assertSameAsNova(
            fast_numa_topology.FastNUMATopologyFilter, hosts, request)
        self.assertEqual([('h', mock.ANY, allocation_candidates(1))],
                         expected)

    def test_later_candidate_fits_where_the_first_fails(self):
        # Three 1 GiB cells cannot take a 2 GiB instance cell, and the
        # first run says so; it leaves both instance cells with id 1, and
        # the second run then finds "host cell 0, cell of id 1" in its fit
        # cache (put there by the 1 GiB cell) and passes.  Nova keeps the
        # host with candidate 1 only: the engine's NO must not reject it.
        def hosts():
            return [host('c%d' % count, objects.NUMATopology(cells=[
                shared_cell(i, 1, 1024) for i in range(3)]),
                candidates=allocation_candidates(count),
                cpu_ratio=1.0, ram_ratio=1.0) for count in (1, 2, 3)]

        def request():
            return flavor_spec(2, 3072, {
                'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0',
                'hw:numa_cpus.1': '1', 'hw:numa_mem.0': '1024',
                'hw:numa_mem.1': '2048'})

        expected = self.assertSameAsNova(
            fast_numa_topology.FastNUMATopologyFilter, hosts, request)
        self.assertEqual(
            [('c2', mock.ANY, allocation_candidates(2)[1:]),
             ('c3', mock.ANY, allocation_candidates(2)[1:])], expected)
        # NUMAFitFilter keeps every host Nova keeps, candidates untouched
        # (Nova's filter after it prunes them).
        for backend in BACKENDS:
            self.conf.config(fit_backend=backend, group='nova_sched_ext')
            kept = filtered(numa_fit.NUMAFitFilter(), hosts(), request())
            self.assertEqual(['c2', 'c3'], [h.host for h in kept])
