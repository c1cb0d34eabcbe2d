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

"""Fake NUMA host layouts and flavor shapes for functional tests and the demo.

A :class:`HostLayout` describes one hypervisor the way an operator would
(NUMA cells, memory per cell, huge pages, PCI devices) and turns it into the
``fakelibvirt`` objects Nova's libvirt driver reads at start-up; its cells
are :class:`nova_sched_ext_tools.hosts.Cell` objects, the description
every offline tool builds its hosts from.

Every host has the same number of CPUs (:data:`CPUS_PER_HOST`) because
``[compute] cpu_dedicated_set`` / ``cpu_shared_set`` are process-wide options
and all fake computes share one process: the sets below are valid on every
layout and put shared and dedicated CPUs on every NUMA cell.  Hosts differ in
how those CPUs are split into cells, in memory, huge pages and PCI devices,
which is what NUMA fit is about.
"""

import dataclasses

from oslo_serialization import jsonutils

from nova.tests.fixtures import libvirt as fakelibvirt

from nova_sched_ext_tools import hosts

#: CPUs on every fake host (Nova's libvirt test base mocks 16 online CPUs).
CPUS_PER_HOST = 12
#: ``[compute] cpu_shared_set``: one or two CPUs in every cell (VCPU).
CPU_SHARED_SET = '0,3,6,9'
#: ``[compute] cpu_dedicated_set``: the rest, for pinned guests (PCPU).
CPU_DEDICATED_SET = '1-2,4-5,7-8,10-11'
SHARED_CPUS = frozenset((0, 3, 6, 9))
DEDICATED_CPUS = frozenset(range(CPUS_PER_HOST)) - SHARED_CPUS

PAGE_4K = hosts.PAGE_4K
PAGE_2M = hosts.PAGE_2M
PAGE_1G = hosts.PAGE_1G

#: Name of the ``[pci] alias`` matching every fake PCI device.
PCI_ALIAS_NAME = 'nic'
PCI_DEVICE_SPEC = jsonutils.dumps({
    'vendor_id': fakelibvirt.PCI_VEND_ID,
    'product_id': fakelibvirt.PCI_PROD_ID,
})
PCI_ALIAS = jsonutils.dumps({
    'vendor_id': fakelibvirt.PCI_VEND_ID,
    'product_id': fakelibvirt.PCI_PROD_ID,
    'name': PCI_ALIAS_NAME,
    'device_type': 'type-PCI',
})


@dataclasses.dataclass(frozen=True)
class HostLayout:
    """The hardware of one fake hypervisor.

    :param name: host name (also the compute service and node name).
    :param cells: NUMA cells; :data:`CPUS_PER_HOST` must divide evenly.
    :param mem_gib_per_cell: memory of each cell, huge pages included.
    :param pages_2m_per_cell: 2 MiB huge pages reserved in each cell.
    :param pages_1g_per_cell: 1 GiB huge pages reserved in each cell.
    :param pci_devices: passthrough PCI devices (alias :data:`PCI_ALIAS_NAME`).
    :param pci_numa_node: the cell all PCI devices hang off.
    """

    name: str
    cells: int
    mem_gib_per_cell: int
    pages_2m_per_cell: int = 0
    pages_1g_per_cell: int = 0
    pci_devices: int = 0
    pci_numa_node: int = 0

    def __post_init__(self):
        if self.cells < 1 or CPUS_PER_HOST % self.cells:
            raise ValueError('%s: %d CPUs cannot be split into %d cells'
                             % (self.name, CPUS_PER_HOST, self.cells))
        huge_kib = (self.pages_2m_per_cell * PAGE_2M +
                    self.pages_1g_per_cell * PAGE_1G)
        if huge_kib >= self.mem_gib_per_cell * PAGE_1G:
            raise ValueError('%s: huge pages exceed the memory of a cell'
                             % self.name)
        if self.pci_devices and not 0 <= self.pci_numa_node < self.cells:
            raise ValueError('%s: PCI devices on missing NUMA cell %d'
                             % (self.name, self.pci_numa_node))

    @property
    def cpus_per_cell(self):
        return CPUS_PER_HOST // self.cells

    def cell_cpus(self, cell):
        first = cell * self.cpus_per_cell
        return set(range(first, first + self.cpus_per_cell))

    def dedicated_cpus_per_cell(self):
        return [len(self.cell_cpus(c) & DEDICATED_CPUS)
                for c in range(self.cells)]

    def shared_cpus_per_cell(self):
        return [len(self.cell_cpus(c) & SHARED_CPUS)
                for c in range(self.cells)]

    def numa_cells(self):
        """The host's cells as :class:`~nova_sched_ext_tools.hosts.Cell`.

        The counts of shared and dedicated CPUs are those of
        :data:`CPU_SHARED_SET` and :data:`CPU_DEDICATED_SET` in each cell.
        """
        return [hosts.Cell(memory_mb=self.mem_gib_per_cell * 1024,
                           shared=shared, dedicated=dedicated,
                           pages_2m=self.pages_2m_per_cell,
                           pages_1g=self.pages_1g_per_cell)
                for shared, dedicated in zip(self.shared_cpus_per_cell(),
                                             self.dedicated_cpus_per_cell())]

    def host_info(self):
        """The ``fakelibvirt.HostInfo`` Nova's libvirt driver will read."""
        return hosts.libvirt_host_info(self.numa_cells())

    def pci_info(self):
        """The ``fakelibvirt.HostPCIDevicesInfo``, or None without PCI."""
        if not self.pci_devices:
            return None
        return fakelibvirt.HostPCIDevicesInfo(
            num_pci=self.pci_devices, num_pfs=0, num_vfs=0,
            numa_node=self.pci_numa_node)

    def describe(self):
        """One line for humans, e.g. ``2 cells x (4 pinned + 2 shared) ...``"""
        pinned = self.dedicated_cpus_per_cell()
        shared = self.shared_cpus_per_cell()
        if len(set(pinned)) == 1 and len(set(shared)) == 1:
            cpus = '%d pinned + %d shared CPUs' % (pinned[0], shared[0])
        else:
            cpus = 'pinned CPUs %s, shared %s' % (
                '/'.join(map(str, pinned)), '/'.join(map(str, shared)))
        parts = ['%d cells x (%s, %d GiB' % (
            self.cells, cpus, self.mem_gib_per_cell)]
        if self.pages_2m_per_cell:
            parts.append(', %d MiB in 2M pages' % (
                self.pages_2m_per_cell * 2))
        if self.pages_1g_per_cell:
            parts.append(', %d x 1G pages' % self.pages_1g_per_cell)
        parts.append(')')
        if self.pci_devices:
            parts.append(', %d PCI device%s on cell %d' % (
                self.pci_devices, 's' if self.pci_devices > 1 else '',
                self.pci_numa_node))
        return ''.join(parts)


@dataclasses.dataclass(frozen=True)
class FlavorShape:
    """A flavor: size and NUMA-related extra specs."""

    name: str
    vcpus: int
    ram_mb: int
    extra_specs: dict = dataclasses.field(default_factory=dict)
    disk_gb: int = 1

    def __hash__(self):
        return hash(self.name)

    def describe(self):
        """Short human summary of what the flavor asks for."""
        specs = self.extra_specs
        words = ['%d %s vCPU' % (
            self.vcpus,
            'pinned' if specs.get('hw:cpu_policy') == 'dedicated'
            else 'shared')]
        words.append('%g GiB' % (self.ram_mb / 1024))
        page = specs.get('hw:mem_page_size')
        nodes = int(specs.get('hw:numa_nodes', 0))
        if nodes:
            words.append('%d NUMA node%s' % (nodes, 's' if nodes > 1 else ''))
        elif page or specs.get('hw:cpu_policy') == 'dedicated':
            # Nova gives pinned or huge-page guests one NUMA node anyway.
            words.append('1 NUMA node')
        else:
            words.append('no NUMA topology')
        if page:
            words.append('%s pages' % page)
        alias = specs.get('pci_passthrough:alias')
        if alias:
            words.append('PCI %s' % alias)
        return ', '.join(words)


def pinned(name, vcpus, ram_mb, numa_nodes=None, page_size=None, pci=0):
    """A flavor with ``hw:cpu_policy=dedicated`` and optional NUMA specs."""
    specs = {'hw:cpu_policy': 'dedicated'}
    return shaped(name, vcpus, ram_mb, specs, numa_nodes, page_size, pci)


def shared(name, vcpus, ram_mb, numa_nodes=None, page_size=None, pci=0):
    """A flavor on shared (floating) CPUs with optional NUMA specs."""
    return shaped(name, vcpus, ram_mb, {}, numa_nodes, page_size, pci)


def shaped(name, vcpus, ram_mb, specs, numa_nodes=None, page_size=None,
           pci=0):
    specs = dict(specs)
    if numa_nodes:
        specs['hw:numa_nodes'] = str(numa_nodes)
    if page_size:
        specs['hw:mem_page_size'] = page_size
    if pci:
        specs['pci_passthrough:alias'] = '%s:%d' % (PCI_ALIAS_NAME, pci)
    return FlavorShape(name, vcpus, ram_mb, specs)
