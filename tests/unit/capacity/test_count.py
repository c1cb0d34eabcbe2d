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


"""count_host: instances placed one after another, as Nova places them.

The oracle is Nova itself: ``numa_fit_instance_to_host`` for the next
instance, ``numa_usage_from_instance_numa`` to account it, until one does
not fit.  On random hosts and flavors (the fit engine's own strategies),
:func:`count.count_host` must give exactly the oracle's count, whichever
way it counts (the engine, or Nova's fit where the engine's accounting is
not Nova's), and say which way it took.
"""

import copy
import os

from hypothesis import assume
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from nova import exception as nova_exc
from nova import objects
from nova.objects import fields
from nova.virt import hardware
from oslo_config import cfg

from nova_sched_ext.capacity import count
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import lowlevel
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import pyfit
from tests import base
from tests.unit.fit import oracle
from tests.unit.fit import strategies

CONF = cfg.CONF
EXAMPLES = int(os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES', '600'))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None,
    derandomize=os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_RANDOM') != '1',
    database=None, suppress_health_check=list(HealthCheck))
RATIOS = st.one_of(st.none(), st.tuples(
    st.sampled_from([1.0, 1.5, 2.0, 16.0]), st.sampled_from([1.0, 1.5])))
#: counts stop here (both the oracle and count_host)
CAP = 40


def nova_count(host_topology, instance_topology, ratios, limit=CAP,
               pci_stats=None, pci_requests=None):
    return oracle.nova_count(host_topology, instance_topology, ratios, limit,
                             pci_stats=pci_stats, pci_requests=pci_requests)


def models(host_topology, specs, instance_topology, ratios, pci_stats=None,
           pci_requests=None):
    cpu_ratio, ram_ratio = ratios if ratios else (None, None)
    host = count.HostModel(
        engine=adapters.host_model(host_topology, pci_stats, cpu_ratio,
                                   ram_ratio),
        numa_topology=host_topology, pci_stats=pci_stats,
        cpu_allocation_ratio=cpu_ratio, ram_allocation_ratio=ram_ratio,
        name='host')
    vcpus = sum(len(c.cpuset) + len(c.pcpuset)
                for c in instance_topology.cells)
    memory = sum(c.memory for c in instance_topology.cells)
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=memory,
                            extra_specs=dict(specs))
    try:
        engine_shape = adapters.shape_from_flavor(flavor)
    except adapters.Unsupported:
        engine_shape = None
    shape = count.FlavorShape(engine=engine_shape,
                              instance_topology=instance_topology,
                              pci_requests=pci_requests, name='flavor')
    return host, shape


def cell(cell_id, siblings, pcpus, memory=4096, pinned=()):
    cpus = set().union(*siblings)
    return objects.NUMACell(
        id=cell_id, cpuset=cpus - set(pcpus), pcpuset=set(pcpus),
        memory=memory, cpu_usage=0, memory_usage=0,
        pinned_cpus=set(pinned), siblings=[set(s) for s in siblings],
        socket=0,
        mempages=[objects.NUMAPagesTopology(size_kb=4, total=memory * 256,
                                            used=0, reserved=0)],
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


def pinned_flavor(vcpus, **specs):
    specs = dict({'hw:cpu_policy': 'dedicated'}, **specs)
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=256, extra_specs=specs)
    topology = hardware.numa_get_constraints(
        flavor, objects.ImageMeta.from_dict({'properties': {}}))
    return specs, topology


class TestCountHostAgainstNova(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(CONF.clear_override, 'fit',
                        group='nova_sched_ext_capacity')

    def _check(self, host_topology, specs, instance, ratios):
        if not all(c.mempages for c in host_topology.cells):
            # every libvirt compute node reports its pages; Nova's
            # accounting needs them
            return None
        expected = nova_count(host_topology, instance, ratios)
        host, shape = models(host_topology, specs, instance, ratios)
        result = count.count_host(host, shape, CAP)
        self.assertEqual(expected, result.instances,
                         'specs %s on %s' % (specs, host.engine))
        return result

    @SETTINGS
    @given(st.data())
    def test_random_hosts_and_flavors(self, data):
        host_topology = data.draw(strategies.host_topologies(
            4, small=data.draw(st.booleans())))
        specs, instance = data.draw(strategies.flavor_topologies(
            max_cells=min(2, len(host_topology.cells))))
        self._check(host_topology, specs, instance, data.draw(RATIOS))

    @SETTINGS
    @given(st.data())
    def test_random_pinned_flavors(self, data):
        host_topology = data.draw(strategies.host_topologies(
            3, small=data.draw(st.booleans())))
        specs, instance = data.draw(strategies.flavor_topologies(
            max_cells=min(2, len(host_topology.cells)),
            policies=['dedicated', 'mixed']))
        self._check(host_topology, specs, instance, data.draw(RATIOS))

    @settings(max_examples=max(EXAMPLES // 6, 50), deadline=None,
              derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def test_random_pci(self, data):
        host_topology = data.draw(strategies.host_topologies(3))
        if not all(c.mempages for c in host_topology.cells):
            return
        specs, instance = data.draw(strategies.flavor_topologies(
            max_cells=min(2, len(host_topology.cells))))
        pci_stats, requests = data.draw(strategies.pci_setups(host_topology))
        assume(pci_stats is not None and requests)
        ratios = data.draw(RATIOS)
        expected = nova_count(host_topology, instance, ratios,
                              pci_stats=copy.deepcopy(pci_stats),
                              pci_requests=requests)
        host, shape = models(host_topology, specs, instance, ratios,
                             pci_stats=pci_stats, pci_requests=requests)
        result = count.count_host(host, shape, CAP)
        self.assertEqual(expected, result.instances)
        self.assertTrue(result.fallback)

    @SETTINGS
    @given(st.data())
    def test_nova_fit_everywhere_counts_the_same(self, data):
        host_topology = data.draw(strategies.host_topologies(3))
        specs, instance = data.draw(strategies.flavor_topologies(
            max_cells=min(2, len(host_topology.cells))))
        CONF.set_override('fit', 'nova', group='nova_sched_ext_capacity')
        result = self._check(host_topology, specs, instance,
                             data.draw(RATIOS))
        if result is not None and result.instances:
            self.assertTrue(result.fallback)


class TestCountHost(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(CONF.clear_override, 'fit',
                        group='nova_sched_ext_capacity')
        # two cells, three cores of two threads each, all dedicated
        self.host = objects.NUMATopology(cells=[
            cell(0, [(0, 1), (2, 3), (4, 5)], range(6)),
            cell(1, [(6, 7), (8, 9), (10, 11)], range(6, 12))])

    def _count(self, specs, topology, host=None, ratios=(4.0, 1.0),
               limit=CAP):
        host, shape = models(host or self.host, specs, topology, ratios)
        return count.count_host(host, shape, limit)

    def test_engine_counts_pinned_cores(self):
        specs, topology = pinned_flavor(2, **{
            'hw:cpu_thread_policy': 'require'})
        result = self._count(specs, topology)
        self.assertEqual((6, False), result)
        self.assertEqual(6, nova_count(self.host, topology, (4.0, 1.0)))

    def test_limit_is_the_most(self):
        specs, topology = pinned_flavor(1)
        self.assertEqual(12, self._count(specs, topology).instances)
        self.assertEqual(5, self._count(specs, topology,
                                        limit=5).instances)
        self.assertEqual((0, False), self._count(specs, topology, limit=0))

    def test_without_numa_topology_placement_decides(self):
        shape = count.FlavorShape(engine=m.Shape(2, 1024),
                                  instance_topology=None)
        host, _ = models(self.host, {}, pinned_flavor(1)[1], (4.0, 1.0))
        self.assertEqual((7, False), count.count_host(host, shape, 7))

    def test_emulator_threads_isolated_with_require_is_nova_fit(self):
        specs, topology = pinned_flavor(1, **{
            'hw:cpu_thread_policy': 'require',
            'hw:emulator_threads_policy': 'isolate'})
        result = self._count(specs, topology)
        self.assertTrue(result.fallback)
        self.assertEqual(nova_count(self.host, topology, (4.0, 1.0)),
                         result.instances)

    def test_emulator_threads_isolated_with_prefer_is_the_engine(self):
        specs, topology = pinned_flavor(1, **{
            'hw:emulator_threads_policy': 'isolate'})
        result = self._count(specs, topology)
        self.assertFalse(result.fallback)
        self.assertEqual(nova_count(self.host, topology, (4.0, 1.0)),
                         result.instances)

    def test_why_the_engine_stands_aside(self):
        # Four threads per core, one CPU free in each of three cores and
        # three in a fourth.  Nova pins the guest on the roomy core and
        # takes the emulator CPU from the first core with a free CPU; the
        # engine, which knows sizes only, would take both from the roomy
        # core and count one guest fewer.
        host = objects.NUMATopology(cells=[cell(
            0, [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11),
                (12, 13, 14, 15)], range(16),
            pinned={0, 1, 3, 4, 5, 7, 8, 9, 11, 12})])
        specs, topology = pinned_flavor(1, **{
            'hw:cpu_thread_policy': 'require',
            'hw:emulator_threads_policy': 'isolate'})
        expected = nova_count(host, topology, (1.0, 1.0))
        host_model, shape = models(host, specs, topology, (1.0, 1.0))
        naive, engine_host = 0, host_model.engine
        while True:
            engine_host = pyfit.place(engine_host, shape.engine)
            if engine_host is None:
                break
            naive += 1
        self.assertNotEqual(expected, naive)
        self.assertEqual((expected, True),
                         count.count_host(host_model, shape, CAP))

    def test_require_on_four_threads_per_core_is_nova_fit(self):
        host = objects.NUMATopology(cells=[cell(
            0, [(0, 1, 2, 3), (4, 5, 6, 7)], range(8))])
        specs, topology = pinned_flavor(3, **{
            'hw:cpu_thread_policy': 'require'})
        result = self._count(specs, topology, host=host)
        self.assertEqual((nova_count(host, topology, (4.0, 1.0)), True),
                         result)

    def test_nova_fit_option(self):
        specs, topology = pinned_flavor(2)
        CONF.set_override('fit', 'nova', group='nova_sched_ext_capacity')
        self.assertEqual((6, True), self._count(specs, topology))

    def test_unsupported_host_is_nova_fit(self):
        specs, topology = pinned_flavor(2)
        host, shape = models(self.host, specs, topology, (4.0, 1.0))
        host = host._replace(engine=m.Host(cells=(),
                                           status=m.HOST_UNSUPPORTED))
        self.assertEqual((6, True), count.count_host(host, shape, CAP))

    def test_host_without_topology_takes_no_numa_guest(self):
        specs, topology = pinned_flavor(2)
        host, shape = models(self.host, specs, topology, (4.0, 1.0))
        host = host._replace(
            engine=m.Host(cells=(), status=m.HOST_NO_TOPOLOGY),
            numa_topology=None)
        self.assertEqual((0, False), count.count_host(host, shape, CAP))
        CONF.set_override('fit', 'nova', group='nova_sched_ext_capacity')
        self.assertEqual((0, True), count.count_host(host, shape, CAP))

    def test_mixed_policy_shares_cpus(self):
        flavor = objects.Flavor(vcpus=4, memory_mb=512, extra_specs={
            'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '0-1'})
        topology = hardware.numa_get_constraints(
            flavor, objects.ImageMeta.from_dict({'properties': {}}))
        self.assertEqual(fields.CPUAllocationPolicy.MIXED,
                         topology.cells[0].cpu_policy)
        host = objects.NUMATopology(cells=[
            cell(0, [(0, 1), (2, 3), (4, 5)], range(4)),
            cell(1, [(6, 7), (8, 9), (10, 11)], range(6, 10))])
        result = self._count(flavor.extra_specs, topology, host=host,
                             ratios=(1.0, 1.0))
        self.assertEqual(nova_count(host, topology, (1.0, 1.0)),
                         result.instances)
        self.assertFalse(result.fallback)


class TestCountFollowsTheClaim(base.TestCase):
    """The count is what the compute's claim accounts, not only the fit."""

    def setUp(self):
        super().setUp()
        self.addCleanup(CONF.clear_override, 'fit',
                        group='nova_sched_ext_capacity')
        self.addCleanup(CONF.clear_override, 'fit_backend',
                        group='nova_sched_ext')
        self.host = strategies.split_host_with_four_cells()
        self.specs, self.topology = strategies.mixed_flavor_with_mask()
        self.ratios = (2.0, 1.0)

    def test_the_fourth_claim_fails(self):
        # Nova's fit places a fourth; the claim's accounting refuses it
        booking = oracle.book(self.host, self.topology, self.ratios, 4)
        self.assertEqual(3, booking.count)
        self.assertIsInstance(booking.refused, nova_exc.CPUPinningUnknown)
        for backend in ('python', 'c'):
            if backend == 'c' and not lowlevel.available():
                continue
            CONF.set_override('fit_backend', backend, group='nova_sched_ext')
            host, shape = models(self.host, self.specs, self.topology,
                                 self.ratios)
            self.assertEqual((3, True), count.count_host(host, shape, 4),
                             backend)
        CONF.set_override('fit', 'nova', group='nova_sched_ext_capacity')
        host, shape = models(self.host, self.specs, self.topology,
                             self.ratios)
        self.assertEqual((3, True), count.count_host(host, shape, 4))
