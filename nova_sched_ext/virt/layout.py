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


"""The NUMA layout of a fake test host, as a string and as a trait.

A layout is written ``CELLSxCPUSxMIB``: the number of NUMA cells, the CPUs
of each cell and the memory of each cell in MiB. ``2x4x4096`` is a host with
two cells of four CPUs and 4 GiB each. All cells of a host are alike.

The fake NUMA driver publishes its layout on its compute node resource
provider as the trait ``CUSTOM_NSE_NUMA_<CELLS>CELLS_<CPUS>CPUS_<MIB>MB``, so
that tests can see each host's cells through the placement API without any
per-host configuration. An operator can set the same trait on real hosts to
let the tempest plugin reason about them.

This module imports nothing from Nova: the tempest plugin uses it too.
"""

import dataclasses
import re

TRAIT_PREFIX = 'CUSTOM_NSE_NUMA_'

_SPEC = re.compile(r'^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*$', re.IGNORECASE)
_TRAIT = re.compile(r'^%s(\d+)CELLS_(\d+)CPUS_(\d+)MB$' % TRAIT_PREFIX)


@dataclasses.dataclass(frozen=True)
class Layout:
    """A host of ``cells`` alike NUMA cells."""

    cells: int
    cpus_per_cell: int
    memory_mb_per_cell: int

    def __post_init__(self):
        for name in ('cells', 'cpus_per_cell', 'memory_mb_per_cell'):
            if getattr(self, name) < 1:
                raise ValueError('%s must be at least 1, not %d'
                                 % (name, getattr(self, name)))

    @property
    def cpus(self):
        return self.cells * self.cpus_per_cell

    @property
    def memory_mb(self):
        return self.cells * self.memory_mb_per_cell

    def cell_cpus(self, cell):
        """The host CPU numbers of one cell; cells are numbered from 0."""
        first = cell * self.cpus_per_cell
        return set(range(first, first + self.cpus_per_cell))

    @property
    def spec(self):
        return '%dx%dx%d' % (self.cells, self.cpus_per_cell,
                             self.memory_mb_per_cell)

    @property
    def trait(self):
        return '%s%dCELLS_%dCPUS_%dMB' % (TRAIT_PREFIX, self.cells,
                                          self.cpus_per_cell,
                                          self.memory_mb_per_cell)

    def fits_empty(self, vcpus, memory_mb, numa_nodes):
        """Whether an evenly split NUMA guest fits this host when it is empty.

        Nova splits a flavor with ``hw:numa_nodes=N`` evenly over N guest
        cells and needs N distinct host cells, each with at least as many
        CPUs and as much memory as one guest cell.
        """
        if numa_nodes < 1 or numa_nodes > self.cells:
            return False
        return (vcpus <= numa_nodes * self.cpus_per_cell and
                -(-vcpus // numa_nodes) <= self.cpus_per_cell and
                -(-memory_mb // numa_nodes) <= self.memory_mb_per_cell)

    def __str__(self):
        return self.spec


def parse(spec):
    """Parse ``CELLSxCPUSxMIB``; raise ValueError with the reason if bad."""
    match = _SPEC.match(spec or '')
    if not match:
        raise ValueError('%r is not a NUMA layout: write CELLSxCPUSxMIB, '
                         'e.g. 2x4x4096 for two cells of 4 CPUs and 4096 MiB'
                         % (spec,))
    return Layout(*(int(group) for group in match.groups()))


def from_trait(trait):
    """The layout a trait names, or None if it is not a layout trait."""
    match = _TRAIT.match(trait)
    if not match:
        return None
    return Layout(*(int(group) for group in match.groups()))
