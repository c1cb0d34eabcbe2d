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

"""Defragmentation honours a host's PCI devices as the scheduler does.

A move is fitted with Nova's fit with the filter's limits
(:func:`nova_sched_ext.fit.nova_fit.fit`), which is given the target's
``PciDeviceStats``: Nova's fit places an instance without PCI devices on
the host cells without devices first, so that a PCI flavor keeps its
cell.  Before, defragmentation fitted moves without the devices and
planned the instance onto the cell with them.
"""

import types

from nova import objects
from nova.objects import fields
from nova.pci import stats as pci_stats
from nova.virt import hardware

from nova_sched_ext.defrag import model
from nova_sched_ext.defrag import state as planning_state
from tests import base

PAGE_4K = 4


def _cell(cell_id):
    return objects.NUMACell(
        id=cell_id, cpuset={cell_id * 4 + i for i in range(4)},
        pcpuset=set(), memory=4096, cpu_usage=0, memory_usage=0,
        pinned_cpus=set(), siblings=[{cell_id * 4 + i} for i in range(4)],
        socket=0,
        mempages=[objects.NUMAPagesTopology(size_kb=PAGE_4K,
                                            total=4096 * 256, used=0,
                                            reserved=0)],
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


def _devices_on_cell_0(topology):
    stats = pci_stats.PciDeviceStats(topology)
    stats.pools = [{'vendor_id': '8086', 'product_id': '1111',
                    'numa_node': 0, 'dev_type': fields.PciDeviceType.STANDARD,
                    'count': 2, 'devices': []}]
    return stats


class TestMovesHonourPci(base.TestCase):

    def _state(self, pci):
        topology = objects.NUMATopology(cells=[_cell(0), _cell(1)])
        requested = hardware.numa_get_constraints(
            objects.Flavor(vcpus=2, memory_mb=1024,
                           extra_specs={'hw:numa_nodes': '1'}),
            objects.ImageMeta.from_dict({'properties': {}}))
        host = model.Host(name='h', numa_topology=topology, inventories={},
                          usages={}, pci_stats=(
                              _devices_on_cell_0(topology) if pci else None))
        state = planning_state.PlanningState.__new__(
            planning_state.PlanningState)
        state.cloud = types.SimpleNamespace(instances={
            'vm': types.SimpleNamespace(requested_topology=requested)})
        state.views = {'h': types.SimpleNamespace(topology=topology,
                                                  host=host)}
        return state

    def test_a_move_keeps_off_the_cell_with_pci_devices(self):
        fits, fitted = self._state(pci=True).nova_fit('vm', 'h')
        self.assertTrue(fits)
        self.assertEqual([1], [cell.id for cell in fitted.cells])

    def test_without_devices_the_first_cell_serves(self):
        fits, fitted = self._state(pci=False).nova_fit('vm', 'h')
        self.assertTrue(fits)
        self.assertEqual([0], [cell.id for cell in fitted.cells])

    def test_slots_are_counted_with_the_hosts_devices(self):
        state = self._state(pci=True)
        host = state.views['h'].host
        counted = planning_state.PlanningState._host_model(
            host, host.numa_topology, types.SimpleNamespace(model=None))
        self.assertIs(host.pci_stats, counted.pci_stats)
