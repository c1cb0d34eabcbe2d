"""Capacity counting: ``nse_place_counts`` against its twin and Nova.

``place_counts`` places copies of a shape on a host one after another, as
Nova places them, and counts them (the capacity count of
``nova_sched_ext.capacity``).  The C helper and ``pyfit.place_counts``
must give the same count for every host, shape and limit, including the
"cannot tell" answer (-1); and on the shapes whose accounting the engine
keeps as Nova does (no ``require`` policy with isolated emulator threads,
see ``capacity.count``), the count must be Nova's own: its
``numa_fit_instance_to_host`` then ``numa_usage_from_instance_numa`` until
one does not fit.  ``tests/unit/capacity/test_count.py`` checks the whole
count (with Nova's fit where the engine stands aside) the same way.
"""

import collections
import os

from hypothesis import assume
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from nova import objects

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
    max_examples=max(EXAMPLES // 2, 100), deadline=None,
    derandomize=os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_RANDOM') != '1',
    database=None, suppress_health_check=list(HealthCheck))
CAP = 40
#: a limit no drawn host reaches: booked to exhaustion (4 cells of at most
#: 8 GiB, instances of 2 cells or more with at least 128 MiB each)
EXHAUSTION = 4 * 8192 // 256 + 1
#: examples per outcome of the booking tests, for the report of a long
#: run (over-count and under-count stay 0: the tests assert so)
STATS = collections.Counter()
RATIOS = st.tuples(st.sampled_from([1.0, 2.0, 16.0]),
                   st.sampled_from([1.0, 1.5]))


def engine_shape(specs, instance_topology):
    vcpus = sum(len(c.cpuset) + len(c.pcpuset)
                for c in instance_topology.cells)
    memory = sum(c.memory for c in instance_topology.cells)
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=memory,
                            extra_specs=dict(specs))
    return adapters.shape_from_flavor(flavor)


def placed_before_unknown(host, shape, limit):
    """How many instances pyfit placed before it could not tell."""
    placed = 0
    while placed < limit:
        host = pyfit.place(host, shape)
        if host is None:
            break
        placed += 1
    return placed


def exact_in_engine(shape, host):
    """The shapes whose accounting the engine keeps as Nova's."""
    numa = shape.numa
    policies = {c.thread_policy for c in numa.cells
                if c.cpu_policy in (m.CPU_DEDICATED, m.CPU_MIXED)}
    if numa.emulator_threads_isolated and (
            policies & {m.THREAD_REQUIRE, m.THREAD_ISOLATE}):
        return False
    return not (m.THREAD_REQUIRE in policies and
                any(c.threads_per_core > 2 for c in host.cells))


class TestPlaceCounts(base.TestCase):

    def _both(self, hosts, shapes, limits):
        python = pyfit.place_counts(hosts, shapes, limits)
        if lowlevel.available():
            c = lowlevel.place_counts(
                [engine.prepare(h).packed for h in hosts],
                lowlevel.packed_shapes(shapes, [0.0] * len(shapes)), limits)
            self.assertEqual(python, list(c), 'C and Python counts differ')
        return python

    @SETTINGS
    @given(st.data())
    def test_against_nova_and_between_engines(self, data):
        host_topology = data.draw(strategies.host_topologies(
            4, small=data.draw(st.booleans())))
        specs, instance = data.draw(strategies.flavor_topologies(
            max_cells=min(2, len(host_topology.cells))))
        ratios = data.draw(RATIOS)
        host = adapters.host_model(host_topology, None, *ratios)
        try:
            shape = engine_shape(specs, instance)
        except adapters.Unsupported:
            assume(False)
        limit = data.draw(st.integers(1, CAP))
        if not all(c.mempages for c in host_topology.cells):
            # Nova's usage accounting needs page information, which every
            # libvirt compute node reports: the backends only.
            self._both([host], [shape], [limit])
            return
        self._check_booking(host_topology, instance, ratios, host, shape,
                            limit)

    @SETTINGS
    @given(st.data())
    def test_split_hosts_mixed_flavors_to_exhaustion(self, data):
        """Issue 31's family, booked until the host is full.

        Split shared/dedicated hosts of 3 or 4 cells
        (:func:`strategies.split_host_topologies`) and ``mixed`` flavors
        with ``hw:cpu_dedicated_mask`` on all their cells or all but one:
        where Nova's pair cache hands a cell the pinning of another host
        cell, and the claim refuses it, the engine must not count the
        instance.
        """
        host_topology = data.draw(strategies.split_host_topologies())
        n_cells = len(host_topology.cells)
        specs, instance = data.draw(strategies.flavor_topologies(
            min_cells=n_cells - 1, max_cells=n_cells, policies=['mixed'],
            max_node_cpus=2))
        ratios = data.draw(RATIOS)
        try:
            shape = engine_shape(specs, instance)
        except adapters.Unsupported:
            assume(False)
        host = adapters.host_model(host_topology, None, *ratios)
        self._check_booking(host_topology, instance, ratios, host, shape,
                            EXHAUSTION)

    @SETTINGS
    @given(st.data())
    def test_uneven_dual_numa_variants(self, data):
        """Issue 28: uneven splits booked on unevenly filled hosts.

        ``hw:numa_cpus.N`` / ``hw:numa_mem.N`` variants (pinned, shared,
        huge pages) copied onto hosts whose cells are filled to different
        shares until one does not fit (or :data:`EXHAUSTION`): the count
        of both backends is Nova's, and so is the count of the even split
        beside it.
        """
        host_topology = data.draw(strategies.uneven_host_topologies())
        specs, instance = data.draw(strategies.uneven_flavor_topologies())
        ratios = data.draw(RATIOS)
        host = adapters.host_model(host_topology, None, *ratios)
        twin_specs, twin = strategies.even_twin_topology(specs, instance)
        for specs, instance in ((specs, instance), (twin_specs, twin)):
            if instance is None:
                continue
            try:
                shape = engine_shape(specs, instance)
            except adapters.Unsupported:
                continue
            self._check_booking(host_topology, instance, ratios, host,
                                shape, EXHAUSTION)

    def _check_booking(self, host_topology, instance, ratios, host, shape,
                       limit):
        """The engine's count against Nova booking one by one.

        Both backends must agree; where the engine's accounting is Nova's
        (:func:`exact_in_engine`), its count must be the booking's, and
        where it cannot tell (-1: Nova's path counts), the instances it
        placed before must all be booked.
        """
        counted = self._both([host], [shape], [limit])[0]
        if host.status != m.HOST_OK or not exact_in_engine(shape, host):
            STATS['not exact'] += 1
            return
        booking = oracle.book(host_topology, instance, ratios, limit)
        STATS['claim refused'] += booking.refused is not None
        if limit > booking.count and booking.refused is None:
            STATS['to exhaustion'] += 1
        if counted == -1:
            STATS['cannot tell'] += 1
            placed = placed_before_unknown(host, shape, limit)
            # (not equal: where Nova's claim pins nothing, its booking
            # goes on)
            self.assertLessEqual(placed, booking.count,
                                 '%s on %s' % (shape, host))
            return
        STATS['over-count'] += counted > booking.count
        STATS['under-count'] += counted < booking.count
        self.assertEqual(booking.count, counted,
                         '%s on %s' % (shape, host))

    @SETTINGS
    @given(st.data())
    def test_many_hosts_and_shapes_in_one_call(self, data):
        hosts = [adapters.host_model(
            data.draw(strategies.host_topologies(3, small=True)), None,
            *data.draw(RATIOS)) for _ in range(data.draw(st.integers(1, 4)))]
        shapes = []
        for _ in range(data.draw(st.integers(1, 3))):
            specs, instance = data.draw(strategies.flavor_topologies(
                max_cells=2))
            try:
                shapes.append(engine_shape(specs, instance))
            except adapters.Unsupported:
                pass
        assume(shapes)
        limits = [data.draw(st.integers(0, CAP))
                  for _ in range(len(hosts) * len(shapes))]
        together = self._both(hosts, shapes, limits)
        one_by_one = [
            self._both([host], [shape], [limits[h * len(shapes) + k]])[0]
            for h, host in enumerate(hosts) for k, shape in enumerate(shapes)]
        self.assertEqual(one_by_one, together)


def one_cell_host(**cell_fields):
    cell = m.HostCell(
        id=0, cpus=8, pcpus=8, free_pcpus=8, cpu_usage=0, memory=8192,
        memory_usage=0, threads_per_core=2, free_sibling_sizes=(2, 2, 2, 2),
        pcpus_are_cpus=False, pages=(), pci_devices=0)
    return m.Host(cells=(cell._replace(**cell_fields),),
                  cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0)


def pinned_shape(pcpus, memory=1024):
    return m.Shape(vcpus=pcpus, memory_mb=memory, numa=m.Request(cells=(
        m.RequestCell(id=0, cpus=0, pcpus=pcpus, memory=memory,
                      pagesize=m.PAGESIZE_NONE,
                      cpu_policy=m.CPU_DEDICATED,
                      thread_policy=m.THREAD_PREFER),)))


class TestPlaceCountsEdges(base.TestCase):

    def _both(self, hosts, shapes, limits):
        return TestPlaceCounts._both(self, hosts, shapes, limits)

    def test_pinned_cpus_run_out(self):
        self.assertEqual([4, 2, 3],
                         self._both([one_cell_host()], [pinned_shape(2)] * 3,
                                    [10, 2, 3]))
        # memory runs out first
        self.assertEqual([2], self._both([one_cell_host(memory=2048)],
                                         [pinned_shape(1)], [10]))

    def test_a_shape_without_numa_is_counted_at_its_limit(self):
        self.assertEqual([7], self._both([one_cell_host()],
                                         [m.Shape(2, 1024)], [7]))

    def test_a_host_of_unknown_status_cannot_tell(self):
        unknown = m.Host(cells=(), status=m.HOST_UNSUPPORTED)
        self.assertEqual([-1, 0], self._both([unknown], [pinned_shape(1)] * 2,
                                             [5, 0]))

    def test_a_host_without_topology_takes_no_numa_guest(self):
        host = m.Host(cells=(), status=m.HOST_NO_TOPOLOGY)
        self.assertEqual([0, 3], self._both(
            [host], [pinned_shape(1), m.Shape(1, 512)], [5, 3]))

    def test_a_host_filled_beyond_the_bounds_cannot_tell(self):
        # Shared CPUs and no limits: every copy fits, and the CPU usage
        # grows past MAX_CPUS on the third.
        host = one_cell_host(cpus=m.MAX_CPUS, pcpus=0, free_pcpus=0,
                             free_sibling_sizes=(),
                             cpu_usage=m.MAX_CPUS - 1)._replace(
            cpu_allocation_ratio=None, ram_allocation_ratio=None)
        shape = m.Shape(vcpus=1, memory_mb=1, numa=m.Request(cells=(
            m.RequestCell(id=0, cpus=1, pcpus=0, memory=1,
                          pagesize=m.PAGESIZE_NONE,
                          cpu_policy=m.CPU_SHARED,
                          thread_policy=m.THREAD_PREFER),)))
        self.assertEqual([2, -1], self._both([host, host], [shape], [2, 5]))

    def test_pinning_of_another_cell_cannot_tell(self):
        # Issue 31: Nova's fit places the fourth instance with a cell that
        # its pair cache placed while the cell's pinning names CPUs of
        # another host cell; the claim's accounting refuses it.
        specs, topology = strategies.mixed_flavor_with_mask()
        host = adapters.host_model(strategies.split_host_with_four_cells(),
                                   None, 2.0, 1.0)
        shape = engine_shape(specs, topology)
        self.assertEqual([3, -1], self._both([host, host], [shape], [3, 4]))
        # the fit itself is Nova's answer: the filter still passes it
        for _ in range(3):
            host = pyfit.place(host, shape)
        self.assertEqual(m.YES, pyfit.fits(host, shape.numa))
        self.assertIsNone(pyfit.place(host, shape))
        # NUMASlotWeigher: the request is not placed there (-1 after),
        # the host weighs as the worst, on both backends
        roomy = adapters.host_model(strategies.split_host_with_four_cells(),
                                    None, 2.0, 1.0)
        python = pyfit.slot_weights([roomy, host], [shape], [1.0], shape)
        self.assertEqual([-1], python[1][1:])
        self.assertNotEqual(-1, python[1][0])
        self.assertEqual(min(python[2]), python[2][1])
        if lowlevel.available():
            c = lowlevel.slots(
                [engine.prepare(h).packed for h in (roomy, host)],
                lowlevel.packed_shapes([shape], [1.0]), shape)
            self.assertEqual(python, tuple(list(x) for x in c))

    def test_limits_out_of_range_are_refused(self):
        host = engine.prepare(one_cell_host())
        for limit in (-1, m.MAX_INSTANCES + 1):
            self.assertRaises(m.InvalidInput, pyfit.place_counts,
                              [host.model], [pinned_shape(1)], [limit])
            self.assertRaises(m.InvalidInput, engine.place_counts,
                              [host], [pinned_shape(1)], [limit])
            if lowlevel.available():
                error = self.assertRaises(
                    lowlevel.HelperError, lowlevel.place_counts,
                    [host.packed],
                    lowlevel.packed_shapes([pinned_shape(1)], [0.0]),
                    [limit])
                self.assertEqual('NSE_ERR_BAD_REQUEST', error.name)
        self.assertRaises(ValueError, lowlevel.place_counts, [host.packed],
                          lowlevel.packed_shapes([pinned_shape(1)], [0.0]),
                          [1, 1])
