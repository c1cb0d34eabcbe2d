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

"""Host NUMA cells from numbers: numbering, default pages, usage."""

from nova import objects

from nova_sched_ext.fit import host_topology
from tests import base


class TestHostTopology(base.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()

    def test_core_siblings_are_numbered_as_libvirt_numbers_them(self):
        self.assertEqual([{8, 11}, {9, 12}, {10, 13}],
                         host_topology.core_siblings(8, cores=3, threads=2))
        self.assertEqual([{4}, {5}], host_topology.core_siblings(4, 2))

    def test_a_cell_in_4k_pages_by_default(self):
        cell = host_topology.numa_cell(
            1, cpuset={4, 5}, pcpuset={6, 7}, memory_mb=2048,
            siblings=host_topology.core_siblings(4, 4), socket=1)
        self.assertEqual((1, 1, 2048), (cell.id, cell.socket, cell.memory))
        self.assertEqual(({4, 5}, {6, 7}), (cell.cpuset, cell.pcpuset))
        self.assertEqual([{4}, {5}, {6}, {7}], cell.siblings)
        self.assertEqual([(4, 2048 * 256, 0, 0)],
                         [(p.size_kb, p.total, p.used, p.reserved)
                          for p in cell.mempages])
        self.assertEqual((0, 0, set()), (cell.cpu_usage, cell.memory_usage,
                                         cell.pinned_cpus))
        self.assertEqual(set(), cell.network_metadata.physnets)

    def test_pages_and_usage_as_given(self):
        cell = host_topology.numa_cell(
            0, cpuset=set(), pcpuset={0, 1}, siblings=[{0, 1}],
            memory_mb=4096, pages=[(4, 1024, 10), (2048, 1024, 3)],
            cpu_usage=1, memory_usage_mb=100, pinned_cpus={0, 1})
        self.assertIsNone(cell.socket)
        self.assertEqual([(4, 1024, 10), (2048, 1024, 3)],
                         [(p.size_kb, p.total, p.used)
                          for p in cell.mempages])
        self.assertEqual((1, 100, {0, 1}), (cell.cpu_usage,
                                            cell.memory_usage,
                                            cell.pinned_cpus))
        topology = host_topology.numa_topology([cell])
        self.assertIsInstance(topology, objects.NUMATopology)
        self.assertEqual([0], [c.id for c in topology.cells])
