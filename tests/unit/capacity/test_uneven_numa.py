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


"""Uneven dual-NUMA variants (issue 28) are counted exactly.

A flavor with ``hw:numa_nodes=2`` and ``hw:numa_cpus.N`` /
``hw:numa_mem.N`` is an ordinary flavor to the count: Nova's
``numa_get_constraints`` gives its instance cells their own sizes, and
the fit engine takes cells of any size.  On a host with 12 and 4 free
pinned CPUs, the even 16-vCPU split counts 0 and the 12 + 4 split 1; so
does the 4 + 12 split, because Nova's ``numa_fit_instance_to_host`` tries
the instance cells against the host cells in every order
(``itertools.permutations`` of the host cells) and keeps the first order
that fits: the 4-CPU guest cell goes on host cell 1.  The counts are the
same with the C engine, its Python twin and Nova's fit, and they are the
oracle's (Nova booking one instance after the other).
"""

from nova import objects
from nova.virt import hardware
from oslo_config import cfg

from nova_sched_ext.capacity import count
from nova_sched_ext.fit import lowlevel
from tests import base
from tests.unit.capacity import test_count
from tests.unit.fit import oracle
from tests.unit.fit import strategies

CONF = cfg.CONF
RATIOS = (1.0, 1.0)
PAGE_2M = 2048


def cell(cell_id, pinned, memory=16384, pages_2m=0, used_2m=0):
    """A host cell of 16 dedicated CPUs, ``pinned`` of them pinned."""
    first = 16 * cell_id
    cpus = range(first, first + 16)
    result = test_count.cell(cell_id, [(c,) for c in cpus], cpus,
                             memory=memory, pinned=range(first,
                                                         first + pinned))
    if pages_2m:
        small = (memory - pages_2m * 2) * 256
        result.mempages = [
            objects.NUMAPagesTopology(size_kb=4, total=small, used=0,
                                      reserved=0),
            objects.NUMAPagesTopology(size_kb=PAGE_2M, total=pages_2m,
                                      used=used_2m, reserved=0)]
    return result


def flavor(vcpus, memory_mb, split=None, **specs):
    """A pinned 2-node flavor; ``split``: ``((cpus, MiB), (cpus, MiB))``."""
    specs = dict({'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2'},
                 **specs)
    if split:
        first = 0
        for node, (cpus, memory) in enumerate(split):
            specs['hw:numa_cpus.%d' % node] = '%d-%d' % (
                first, first + cpus - 1)
            specs['hw:numa_mem.%d' % node] = str(memory)
            first += cpus
    return specs, strategies.instance_topology(vcpus, memory_mb, specs)


EVEN = flavor(16, 8192)
UNEVEN = flavor(16, 8192, ((12, 6144), (4, 2048)))
MIRROR = flavor(16, 8192, ((4, 2048), (12, 6144)))


class TestUnevenDualNUMACount(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(CONF.clear_override, 'fit',
                        group='nova_sched_ext_capacity')
        self.addCleanup(CONF.clear_override, 'fit_backend',
                        group='nova_sched_ext')
        # 12 free pinned CPUs on cell 0, 4 on cell 1
        self.host = objects.NUMATopology(cells=[cell(0, 4), cell(1, 12)])

    def counts(self, host, flavor_):
        """The count each way, checked equal to Nova booking one by one."""
        specs, topology = flavor_
        expected = oracle.nova_count(host, topology, RATIOS, 40)
        ways = [('engine', 'python')]
        if lowlevel.available():
            ways.append(('engine', 'c'))
        ways.append(('nova', 'python'))
        for fit, backend in ways:
            CONF.set_override('fit', fit, group='nova_sched_ext_capacity')
            CONF.set_override('fit_backend', backend, group='nova_sched_ext')
            model, shape = test_count.models(host, specs, topology, RATIOS)
            result = count.count_host(model, shape, 40)
            self.assertEqual((expected, fit == 'nova'), result,
                             '%s / %s: %s' % (fit, backend, specs))
        return expected

    def test_the_even_split_counts_0_the_uneven_ones_1(self):
        self.assertEqual(0, self.counts(self.host, EVEN))
        self.assertEqual(1, self.counts(self.host, UNEVEN))
        self.assertEqual(1, self.counts(self.host, MIRROR))

    def test_nova_permutes_the_host_cells(self):
        # What the counts rest on: the first order of host cells that fits.
        limits = objects.NUMATopologyLimits(cpu_allocation_ratio=1.0,
                                            ram_allocation_ratio=1.0)

        def placed(flavor_):
            fitted = hardware.numa_fit_instance_to_host(
                self.host, flavor_[1].obj_clone(), None, limits=limits)
            return [(c.id, len(c.pcpuset), c.memory) for c in fitted.cells]

        # guest node 0 on host cell 0, in host cell order
        self.assertEqual([(0, 12, 6144), (1, 4, 2048)], placed(UNEVEN))
        # guest node 0 (4 CPUs) on host cell 1: the second order
        self.assertEqual([(1, 4, 2048), (0, 12, 6144)], placed(MIRROR))
        self.assertIsNone(hardware.numa_fit_instance_to_host(
            self.host, EVEN[1].obj_clone(), None, limits=limits))

    def test_smaller_uneven_variants_use_the_leftovers(self):
        # 6 + 2 twice on 12 + 4; the even 4 + 4 once (then 8 + 0 is left)
        self.assertEqual(2, self.counts(self.host, flavor(
            8, 4096, ((6, 3072), (2, 1024)))))
        self.assertEqual(1, self.counts(self.host, flavor(8, 4096)))

    def test_mirrors_fit_alike_but_count_apart(self):
        # One instance of 3:1 or 1:3 fits the same hosts, but copies do
        # not: Nova keeps the first order that fits, guest node 0 on host
        # cell 0 while it can, so 1:3 puts its 3-CPU node on the 4 free
        # CPUs of cell 1 at once and strands the rest of cell 0.
        self.assertEqual(4, self.counts(self.host, flavor(
            4, 1024, ((3, 768), (1, 256)))))
        self.assertEqual(2, self.counts(self.host, flavor(
            4, 1024, ((1, 256), (3, 768)))))
        self.assertEqual(2, self.counts(self.host, flavor(4, 1024)))
        # the room on cell 1: the other way round
        mirrored = objects.NUMATopology(cells=[cell(0, 12), cell(1, 4)])
        self.assertEqual(2, self.counts(mirrored, flavor(
            4, 1024, ((3, 768), (1, 256)))))
        self.assertEqual(4, self.counts(mirrored, flavor(
            4, 1024, ((1, 256), (3, 768)))))

    def test_memory_is_split_on_its_own(self):
        # 2M pages: 4 GiB free on cell 0 (12 free CPUs), 8 GiB on cell 1
        host = objects.NUMATopology(cells=[
            cell(0, 4, pages_2m=4096, used_2m=2048),
            cell(1, 12, pages_2m=4096)])
        page = {'hw:mem_page_size': '2MB'}
        # 6 GiB with the 12 CPUs: no host cell has both
        self.assertEqual(0, self.counts(host, flavor(
            16, 8192, ((12, 6144), (4, 2048)), **page)))
        # 2 GiB with the 12 CPUs, 6 GiB with the 4
        self.assertEqual(1, self.counts(host, flavor(
            16, 8192, ((12, 2048), (4, 6144)), **page)))
        self.assertEqual(1, self.counts(host, flavor(
            16, 8192, ((4, 6144), (12, 2048)), **page)))
        self.assertEqual(0, self.counts(host, flavor(16, 8192, **page)))
