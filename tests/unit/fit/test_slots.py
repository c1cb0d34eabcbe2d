"""Slot counting: C vs Python twin, and both vs Nova placing one by one.

The oracle places copies of a shape on a host with Nova's own
``numa_fit_instance_to_host`` and ``numa_usage_from_instance_numa`` until
no more fit.  For single-cell shapes the greedy count is the maximum, so the
engine must match it exactly; for multi-cell shapes Nova's greedy choice can
fall short of the maximum the engine reports, so the engine must be at
least the greedy count, and equal on hosts with as many cells as the shape.
So can Nova's for a ``large`` or ``any`` page size on hosts with more
than one page size to pick from (:func:`page_size_sticks`).
"""

import os

from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import note
from hypothesis import settings
from hypothesis import strategies as st
from nova import objects
from nova.objects import fields

from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import lowlevel
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import pyfit
from tests import base
from tests.unit.fit import oracle
from tests.unit.fit import strategies

EXAMPLES = int(os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES', '600'))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 3, 100), deadline=None,
    derandomize=os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_RANDOM') != '1',
    database=None, suppress_health_check=list(HealthCheck))
GREEDY_CAP = 48


@st.composite
def shapes(draw, max_cells):
    """Symmetric shapes without the approximate 'require' policy."""
    cells = draw(st.integers(1, max_cells))
    policy = draw(st.sampled_from([None, 'shared', 'dedicated', 'dedicated',
                                   'mixed']))
    thread = None
    if policy in ('dedicated', 'mixed'):
        thread = draw(st.sampled_from([None, 'prefer', 'isolate']))
    shared = draw(st.integers(1, 3)) if policy != 'dedicated' else 0
    dedicated = draw(st.integers(1, 3)) if policy in ('dedicated',
                                                      'mixed') else 0
    memory = draw(st.sampled_from([128, 256, 512, 1024]))
    pagesize = draw(st.sampled_from([None, None, -1, -2, -3, 2048]))
    vcpu = 0
    instance_cells = []
    for i in range(cells):
        cpuset = set(range(vcpu, vcpu + shared))
        vcpu += shared
        pcpuset = set(range(vcpu, vcpu + dedicated))
        vcpu += dedicated
        instance_cells.append(objects.InstanceNUMACell(
            id=i, cpuset=cpuset, pcpuset=pcpuset, memory=memory,
            pagesize=pagesize, cpu_policy=policy, cpu_thread_policy=thread))
    return objects.InstanceNUMATopology(cells=instance_cells)


def nova_greedy(host_topology, instance_topology, ratios):
    """Nova's count one by one, None when it reaches GREEDY_CAP."""
    count = oracle.nova_count(host_topology, instance_topology, ratios,
                              GREEDY_CAP)
    return None if count == GREEDY_CAP else count


def describe(host_topology, instance_topology, ratios):
    """The example in full, for a failing run's report."""
    lines = ['ratios %s' % (ratios,)]
    for cell in host_topology.cells:
        lines.append(
            'host cell %d: cpuset %s pcpuset %s cpu_usage %d pinned %s '
            'siblings %s memory %d memory_usage %d pages %s' % (
                cell.id, sorted(cell.cpuset), sorted(cell.pcpuset),
                cell.cpu_usage, sorted(cell.pinned_cpus),
                [sorted(s) for s in cell.siblings], cell.memory,
                cell.memory_usage,
                [(p.size_kb, p.total, p.used, p.reserved)
                 for p in cell.mempages]))
    for cell in instance_topology.cells:
        lines.append(
            'instance cell %d: cpuset %s pcpuset %s memory %d pagesize %s '
            'policy %s thread %s' % (
                cell.id, sorted(cell.cpuset), sorted(cell.pcpuset),
                cell.memory, cell.pagesize, cell.cpu_policy,
                cell.cpu_thread_policy))
    return '\n'.join(lines)


def page_size_sticks(host_topology, instance_topology):
    """Whether Nova's booking can stop before the slot count.

    For ``hw:mem_page_size`` ``large`` or ``any``, Nova's fit writes the
    page size it picks on a host cell into the request and keeps it when
    that cell then fails (on CPU, say): the next host cells are tried
    with that page size.  Where the host has more than one page size
    such a request can take (pages of it in some cell), a cell that
    would fit with another size is then refused, so Nova's one-by-one
    booking can stop while the cells still hold copies of the shape.
    The slot count counts those copies.
    """
    requested = {cell.pagesize for cell in instance_topology.cells}
    if not requested & {-2, -3}:
        return False
    smallest = -3 in requested
    sizes = {page.size_kb for cell in host_topology.cells
             for page in cell.mempages
             if page.total and (smallest or page.size_kb > 4)}
    return len(sizes) > 1


def to_shape(instance_topology):
    return m.Shape(vcpus=0, memory_mb=0,
                   numa=adapters.request_from_topology(instance_topology))


class TestSlots(base.TestCase):

    def _both(self, host, shape):
        c, _, _ = engine.slot_weights([engine.prepare(host)], [shape], [1.0])
        python = pyfit.slots(host, shape)
        self.assertEqual(python, c[0], 'C and Python slot counts differ')
        return python

    @SETTINGS
    @given(st.data())
    def test_against_nova_placing_one_by_one(self, data):
        host_topology = data.draw(strategies.host_topologies(4))
        instance = data.draw(shapes(min(2, len(host_topology.cells))))
        ratios = data.draw(st.tuples(st.sampled_from([1.0, 2.0, 16.0]),
                                     st.sampled_from([1.0, 1.5])))
        host = adapters.host_model(host_topology, None, *ratios)
        # Nova's usage accounting needs page information, which every
        # libvirt compute node reports.
        if host.status != m.HOST_OK or not all(c.mempages
                                               for c in host_topology.cells):
            return
        note(describe(host_topology, instance, ratios))
        counted = self._both(host, to_shape(instance))
        greedy = nova_greedy(host_topology, instance, ratios)
        if greedy is None:
            self.assertGreaterEqual(counted, GREEDY_CAP)
            return
        k, n = len(instance.cells), len(host_topology.cells)
        sticks = page_size_sticks(host_topology, instance)
        if (k == 1 or k == n) and not sticks:
            self.assertEqual(greedy, counted)
        else:
            self.assertGreaterEqual(counted, greedy)

    def test_a_page_size_that_sticks_stops_nova_early(self):
        # hw:mem_page_size=any on three cells, only the first with 2 MiB
        # pages and its CPU overcommitted.  Nova sorts that cell first
        # once the others are as used, picks 2 MiB pages for the request
        # there, fails on CPU, and keeps the 2 MiB choice in the request
        # for the other cells, which have no such pages: it books 2.  The
        # slot count (the most that fit) is 3; the capacity count books
        # one by one as Nova does: 2.
        def cell(cell_id, cpus, usage, pages):
            return objects.NUMACell(
                id=cell_id, cpuset=set(cpus), pcpuset=set(),
                cpu_usage=usage, memory=1024, memory_usage=0,
                pinned_cpus=set(), siblings=[{c} for c in cpus],
                mempages=[objects.NUMAPagesTopology(
                    size_kb=size, total=total, used=0, reserved=0)
                    for size, total in pages],
                network_metadata=objects.NetworkMetadata(
                    physnets=set(), tunneled=False), socket=0)
        host_topology = objects.NUMATopology(cells=[
            cell(0, [0], 2, [(4, 262144), (2048, 512)]),
            cell(1, [64, 65, 66], 0, [(4, 262144)]),
            cell(2, [128], 2, [(4, 262144)])])
        instance = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, cpuset={0}, pcpuset=set(),
                                     memory=128, pagesize=-3)])
        self.assertTrue(page_size_sticks(host_topology, instance))
        self.assertEqual(2, nova_greedy(host_topology, instance, (1.0, 1.0)))
        host = adapters.host_model(host_topology, None, 1.0, 1.0)
        self.assertEqual(3, self._both(host, to_shape(instance)))
        roomy = host._replace(total_vcpus=64, free_vcpus=64,
                              total_memory_mb=4096, free_memory_mb=4096)
        shape = to_shape(instance)._replace(vcpus=1, memory_mb=128)
        self.assertEqual([2], engine.place_counts(
            [engine.prepare(roomy)], [shape], [GREEDY_CAP]))

    @SETTINGS
    @given(st.data())
    def test_weights_c_equal_python(self, data):
        host_topology = data.draw(strategies.host_topologies(4))
        ratios = (16.0, 1.5)
        host = adapters.host_model(host_topology, None, *ratios)._replace(
            total_vcpus=64, free_vcpus=data.draw(st.integers(0, 64)),
            total_memory_mb=65536,
            free_memory_mb=data.draw(st.integers(0, 65536)))
        reference = [to_shape(data.draw(shapes(2))) for _ in range(3)]
        weights = [float(data.draw(st.integers(1, 32))) for _ in reference]
        request = to_shape(data.draw(shapes(2)))._replace(vcpus=2,
                                                          memory_mb=1024)
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built')
        c = lowlevel.slots([engine.prepare(host).packed],
                           lowlevel.packed_shapes(reference, weights),
                           request)
        python = pyfit.slot_weights([host], reference, weights, request)
        self.assertEqual(python[0], list(c[0]))
        self.assertEqual(python[1], list(c[1]))
        self.assertAlmostEqual(python[2][0], c[2][0], places=9)

    @SETTINGS
    @given(st.data())
    def test_room_weights_c_equal_python(self, data):
        hosts = []
        for _ in range(data.draw(st.integers(1, 3))):
            host = adapters.host_model(data.draw(
                strategies.host_topologies(4)), None, 16.0, 1.5)
            hosts.append(host._replace(
                total_vcpus=64, free_vcpus=data.draw(st.integers(0, 64)),
                total_memory_mb=65536,
                free_memory_mb=data.draw(st.integers(0, 65536))))
        reference = [to_shape(data.draw(shapes(2))) for _ in range(3)]
        weights = [float(data.draw(st.integers(1, 32))) for _ in reference]
        request = to_shape(data.draw(shapes(2)))._replace(vcpus=2,
                                                          memory_mb=1024)
        cap = data.draw(st.sampled_from([0, 1, 3]))
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built')
        c = engine._room_weights_c([engine.prepare(h).packed for h in hosts],
                                   lowlevel.packed_shapes(reference, weights),
                                   request, cap)
        python = pyfit.slot_weights(hosts, reference, weights, request, cap)
        self.assertEqual(python[2], list(c))

    def test_two_cell_shape_uses_distinct_cells(self):
        cell = m.HostCell(id=0, cpus=0, pcpus=16, free_pcpus=16,
                          cpu_usage=0, memory=65536, memory_usage=0,
                          threads_per_core=1, pcpus_are_cpus=False,
                          free_sibling_sizes=(1,) * 16, pages=(),
                          pci_devices=0)
        host = m.Host(cells=(cell, cell._replace(id=1, free_pcpus=4,
                                                 free_sibling_sizes=(1,) * 4
                                                 + (0,) * 12)),
                      cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0)
        one = m.RequestCell(id=0, cpus=0, pcpus=4, memory=1024, pagesize=0,
                            cpu_policy=m.CPU_DEDICATED,
                            thread_policy=m.THREAD_PREFER)
        single = m.Shape(0, 0, m.Request(cells=(one,)))
        double = m.Shape(0, 0, m.Request(cells=(one, one._replace(id=1))))
        self.assertEqual(5, self._both(host, single))
        # Only one cell pair exists and the second cell has room for one.
        self.assertEqual(1, self._both(host, double))

    def test_host_level_cap(self):
        host = m.Host(cells=(), status=m.HOST_NO_TOPOLOGY, total_vcpus=8,
                      free_vcpus=5, total_memory_mb=8192,
                      free_memory_mb=4096)
        self.assertEqual(2, self._both(host, m.Shape(2, 2048)))
        self.assertEqual(0, self._both(host, m.Shape(
            2, 2048, adapters.request_from_topology(
                objects.InstanceNUMATopology(cells=[
                    objects.InstanceNUMACell(
                        id=0, cpuset={0}, pcpuset=set(), memory=512,
                        cpu_policy=fields.CPUAllocationPolicy.SHARED)])))))

    def test_an_unknown_host_weighs_as_the_worst_for_every_request(self):
        # Before: a request without a NUMA topology cost nothing on a host
        # of unknown status (weight 0, the best); now it cannot be placed
        # there, in both engines, and weighs as the worst host.
        known = [m.Host(cells=(), status=m.HOST_NO_TOPOLOGY, total_vcpus=8,
                        free_vcpus=free, total_memory_mb=8192,
                        free_memory_mb=4096) for free in (8, 5)]
        unknown = m.Host(cells=(), status=m.HOST_UNSUPPORTED)
        hosts = [known[0], unknown, known[1]]
        reference = [m.Shape(4, 2048), m.Shape(2, 1024)]
        numa = to_shape(objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(
                id=0, cpuset={0}, pcpuset=set(), memory=512,
                cpu_policy=fields.CPUAllocationPolicy.SHARED)]))
        for request in (m.Shape(2, 1024), numa._replace(vcpus=1,
                                                        memory_mb=512)):
            for room_cap in (None, 0):
                python = pyfit.slot_weights(hosts, reference, [4.0, 2.0],
                                            request, room_cap)
                c = engine.slot_weights([engine.prepare(h) for h in hosts],
                                        reference, [4.0, 2.0], request,
                                        room_cap=room_cap)
                self.assertEqual(list(python[:2]), [list(c[0]), list(c[1])])
                self.assertEqual([-1, -1], python[1][2:4])
                weights = python[2]
                self.assertEqual(min(weights[0], weights[2]), weights[1],
                                 (request, room_cap))
                for mine, twin in zip(c[2], weights):
                    self.assertAlmostEqual(twin, mine, places=9)
