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

"""The host factory of the offline tools: numbering, pages, usage."""

from unittest import mock

from nova import objects
from nova.virt import hardware
from oslo_config import fixture as config_fixture

from nova_sched_ext.virt import fake_numa
from nova_sched_ext_tools.bench import cli as bench_cli
from nova_sched_ext_tools.bench import victims
from nova_sched_ext_tools import hosts
from nova_sched_ext_tools.sim import cloud
from tests import base

GIB_MB = 1024


class TestNumaTopology(base.TestCase):

    def test_cpus_run_on_across_cells_shared_first(self):
        topology = hosts.numa_topology(
            [hosts.Cell(memory_mb=4 * GIB_MB, shared=2, dedicated=4)] * 2)
        first, second = topology.cells
        self.assertEqual((0, 1), (first.id, second.id))
        self.assertEqual({0, 1}, first.cpuset)
        self.assertEqual({2, 3, 4, 5}, first.pcpuset)
        self.assertEqual({6, 7}, second.cpuset)
        self.assertEqual({8, 9, 10, 11}, second.pcpuset)
        self.assertEqual([{6}, {7}, {8}, {9}, {10}, {11}], second.siblings)
        self.assertIsNone(first.socket)
        self.assertEqual(set(), first.pinned_cpus)
        self.assertEqual((0, 0), (first.cpu_usage, first.memory_usage))

    def test_threads_are_numbered_as_libvirt_numbers_them(self):
        # 2 shared + 6 dedicated CPUs, 2 threads: 4 cores, the first shared
        cell = hosts.Cell(memory_mb=GIB_MB, shared=2, dedicated=6, threads=2,
                          pinned_cores=(1, 3))
        [numa_cell] = hosts.numa_topology([cell], socket=0).cells
        self.assertEqual([{0, 4}, {1, 5}, {2, 6}, {3, 7}], numa_cell.siblings)
        self.assertEqual({0, 4}, numa_cell.cpuset)
        self.assertEqual({1, 2, 3, 5, 6, 7}, numa_cell.pcpuset)
        self.assertEqual({1, 5, 3, 7}, numa_cell.pinned_cpus)
        self.assertEqual(0, numa_cell.socket)

    def test_pages_and_usage(self):
        cell = hosts.Cell(memory_mb=8 * GIB_MB, dedicated=4, pages_2m=1024,
                          pages_1g=2, memory_usage_mb=3000, cpu_usage=1,
                          pages_used=((hosts.PAGE_2M, 10),
                                      (hosts.PAGE_1G, 1)))
        [numa_cell] = hosts.numa_topology([cell]).cells
        pages = {p.size_kb: (p.total, p.used) for p in numa_cell.mempages}
        # 8 GiB - 2 GiB in 2M pages - 2 GiB in 1G pages, in 4K pages
        self.assertEqual({hosts.PAGE_4K: (4 * 1024 * 256, 0),
                          hosts.PAGE_2M: (1024, 10),
                          hosts.PAGE_1G: (2, 1)}, pages)
        self.assertEqual((3000, 1), (numa_cell.memory_usage,
                                     numa_cell.cpu_usage))

    def test_nova_fits_instances_on_it(self):
        topology = hosts.numa_topology(
            [hosts.Cell(memory_mb=4 * GIB_MB, dedicated=4, threads=2,
                        pinned_cores=(0,))] * 2)
        limits = objects.NUMATopologyLimits(cpu_allocation_ratio=1.0,
                                            ram_allocation_ratio=1.0)

        def pinned(cpus):
            return objects.InstanceNUMATopology(cells=[
                objects.InstanceNUMACell(id=0, cpuset=set(),
                                         pcpuset=set(range(cpus)),
                                         memory=1024,
                                         cpu_policy='dedicated')])
        # one core of each cell is pinned: two CPUs left per cell
        self.assertIsNotNone(hardware.numa_fit_instance_to_host(
            topology, pinned(2), None, limits=limits))
        self.assertIsNone(hardware.numa_fit_instance_to_host(
            topology, pinned(3), None, limits=limits))

    def test_bad_cells_are_refused(self):
        for kwargs, words in (
                (dict(shared=1, threads=2), 'whole cores'),
                (dict(dedicated=-2), 'whole cores'),
                (dict(threads=0), 'at least one thread'),
                (dict(pages_1g=2), 'exceed the memory'),
                (dict(shared=2, dedicated=2, pinned_cores=(0,)),
                 'not dedicated cores'),
                (dict(dedicated=2, pinned_cores=(2,)), 'not dedicated'),
                (dict(pages_used=((hosts.PAGE_2M, 1),)), '1 pages of 2048'),
        ):
            error = self.assertRaises(ValueError, hosts.Cell,
                                      memory_mb=GIB_MB, **kwargs)
            self.assertIn(words, str(error))

    def test_the_tools_build_their_hosts_here(self):
        # The simulator: a trace host's free capacity, shared CPUs only.
        self.assertEqual(
            hosts.numa_topology([hosts.Cell(memory_mb=2048, shared=8),
                                 hosts.Cell(memory_mb=0)]).obj_to_primitive(),
            cloud.host_topology(((8, 2048), (0, 0))).obj_to_primitive())
        # The victims benchmark: shared + dedicated CPUs, socket 0.
        self.assertEqual(
            hosts.numa_topology(
                [hosts.Cell(memory_mb=8192, shared=2, dedicated=4)] * 2,
                socket=0).obj_to_primitive(),
            victims.host_topology().obj_to_primitive())
        # The fit, filter and weigher benchmarks: dedicated cores with
        # SMT siblings, half the memory in 2M pages, some of it in use.
        self.assertEqual(
            hosts.numa_topology(
                [hosts.Cell(memory_mb=4096, dedicated=8, threads=2,
                            pages_2m=1024, pinned_cores=pinned,
                            memory_usage_mb=2048,
                            pages_used=((hosts.PAGE_4K, 262144),
                                        (hosts.PAGE_2M, 512)))
                 for pinned in ((1,), (0, 2))]).obj_to_primitive(),
            bench_cli.host_topology(
                objects, 2, cores=4, memory_mb=4096, pinned_share=0.5,
                used_share=0.5,
                rng=mock.Mock(random=mock.Mock(side_effect=[
                    0.9, 0.1, 0.9, 0.9, 0.1, 0.9, 0.1, 0.9]))
            ).obj_to_primitive())

    def test_the_fake_virt_driver_builds_the_same_host(self):
        # nova_sched_ext.virt.fake_numa may not import the tools: both
        # build through nova_sched_ext.fit.host_topology.  For a layout of
        # shared CPUs only, the driver's host is the factory's with one
        # socket per cell.
        flags = self.useFixture(config_fixture.Config(fake_numa.CONF))
        flags.config(numa_topology='2x4x4096', group=fake_numa.GROUP_NAME)
        driver = fake_numa.FakeNUMADriver(None)
        expected = [
            hosts.numa_topology([hosts.Cell(memory_mb=4096, shared=4)] * 2,
                                socket=socket).cells[cell_id]
            for cell_id, socket in enumerate((0, 1))]
        self.assertEqual(
            [c.obj_to_primitive() for c in expected],
            [c.obj_to_primitive()
             for c in driver.host_numa_topology().cells])


class TestLibvirtHostInfo(base.TestCase):

    def test_host_info(self):
        cells = [hosts.Cell(memory_mb=8 * GIB_MB, shared=2, dedicated=4,
                            pages_2m=512),
                 hosts.Cell(memory_mb=8 * GIB_MB, shared=2, dedicated=4,
                            pages_1g=2)]
        info = hosts.libvirt_host_info(cells)
        self.assertEqual((2, 1, 6, 1, 12),
                         (info.cpu_nodes, info.cpu_sockets, info.cpu_cores,
                          info.cpu_threads, info.cpus))
        self.assertEqual(16 * GIB_MB * 1024, info.kB_mem)
        xml = info.numa_topology.to_xml()
        self.assertIn('<pages size="2048" unit="KiB">512</pages>', xml)
        self.assertIn('<pages size="1048576" unit="KiB">2</pages>', xml)
        # cell 0: 8 GiB - 1 GiB in 2M pages, in 4K pages; cell 1: - 2 GiB
        self.assertIn('<pages size="4" unit="KiB">1835008</pages>', xml)
        self.assertIn('<pages size="4" unit="KiB">1572864</pages>', xml)

    def test_cells_must_be_alike_and_empty(self):
        small = hosts.Cell(memory_mb=GIB_MB, dedicated=2)
        self.assertRaises(ValueError, hosts.libvirt_host_info,
                          [small, hosts.Cell(memory_mb=GIB_MB, dedicated=4)])
        self.assertRaises(ValueError, hosts.libvirt_host_info,
                          [hosts.Cell(memory_mb=GIB_MB, dedicated=2,
                                      pinned_cores=(0,))])


class TestPlacementResources(base.TestCase):

    def test_totals_and_usage_per_resource_class(self):
        cells = [
            hosts.Cell(memory_mb=8 * GIB_MB, shared=4, dedicated=8,
                       threads=2, pinned_cores=(2, 4), cpu_usage=10,
                       memory_usage_mb=3 * GIB_MB),
            hosts.Cell(memory_mb=8 * GIB_MB, shared=4, dedicated=8,
                       threads=2, pages_2m=1024, pinned_cores=(5,),
                       cpu_usage=3, memory_usage_mb=GIB_MB),
        ]
        self.assertEqual({'VCPU': (8, 13), 'PCPU': (16, 6),
                          'MEMORY_MB': (16 * GIB_MB, 4 * GIB_MB)},
                         hosts.placement_resources(cells))
