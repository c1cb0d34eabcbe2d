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

"""Host NUMA topologies for the offline tools, from a few numbers per cell.

The one host factory of the tools: every tool that needs a compute host
(the simulator, the benchmarks, the in-process cloud harness) describes it
here, as a sequence of :class:`Cell` (CPUs, threads, memory, huge pages and
what is already in use), and gets it in the form it needs:

* :func:`numa_topology`: the ``objects.NUMATopology`` a compute node
  reports (the simulator, the benchmarks), built by the runtime's
  :mod:`nova_sched_ext.fit.host_topology` as the fake NUMA virt driver
  builds its own;
* :func:`libvirt_host_info`: the fake libvirt host that Nova's libvirt
  driver reads and turns into that topology itself (the in-process cloud
  harness);
* :func:`placement_resources`: the VCPU, PCPU and MEMORY_MB totals and
  usages its resource provider holds (the scale benchmark).

CPU numbering, the same for every tool: CPU ids run on from one cell to the
next, in cell order.  A cell's CPUs are ``threads`` per core, numbered the
way libvirt numbers them on x86: with ``n`` cores, thread ``t`` of core
``c`` is the cell's CPU ``c + t * n``, and each core is one set of
``siblings``.  Whole cores are shared or dedicated: the first
``shared // threads`` cores are the cell's ``cpuset`` (VCPU, floating
guests), the others its ``pcpuset`` (PCPU, pinned guests).

Memory is in 4 KiB pages except the huge pages named; usage is given per
cell (pinned cores, shared CPUs in use, memory and pages in use).  Nova's
objects are imported when a topology is built, not on import.
"""

import dataclasses

from nova_sched_ext.fit import host_topology
from nova_sched_ext_tools import loader

#: Page sizes, in KiB.
PAGE_4K = host_topology.PAGE_4K
PAGE_2M = 2048
PAGE_1G = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Cell:
    """One host NUMA cell.

    Capacity:

    :param memory_mb: memory of the cell in MiB, huge pages included.
    :param shared: CPUs for floating guests (``cpuset``); whole cores.
    :param dedicated: CPUs for pinned guests (``pcpuset``); whole cores.
    :param threads: hardware threads per core (1: no SMT).
    :param pages_2m: 2 MiB huge pages in the cell.
    :param pages_1g: 1 GiB huge pages in the cell.

    Usage, what instances already hold (all 0 on an empty host):

    :param pinned_cores: indexes (0 to cores - 1, in the cell) of cores
        whose threads are all pinned (``pinned_cpus``); dedicated cores only.
    :param cpu_usage: ``cpu_usage`` (shared CPUs in use, overcommit
        included).
    :param memory_usage_mb: ``memory_usage``.
    :param pages_used: ``((size_kb, pages in use), ...)``; a size not named
        has none in use.
    """

    memory_mb: int
    shared: int = 0
    dedicated: int = 0
    threads: int = 1
    pages_2m: int = 0
    pages_1g: int = 0
    pinned_cores: tuple = ()
    cpu_usage: int = 0
    memory_usage_mb: int = 0
    pages_used: tuple = ()

    def __post_init__(self):
        if self.threads < 1:
            raise ValueError('a core has at least one thread, not %d'
                             % self.threads)
        if self.shared < 0 or self.dedicated < 0 or \
                self.shared % self.threads or self.dedicated % self.threads:
            raise ValueError(
                '%d shared and %d dedicated CPUs are not whole cores of %d '
                'thread(s)' % (self.shared, self.dedicated, self.threads))
        if self.huge_pages_kb > self.memory_mb * 1024:
            raise ValueError('huge pages (%d KiB) exceed the memory of the '
                             'cell (%d MiB)'
                             % (self.huge_pages_kb, self.memory_mb))
        bad = [c for c in self.pinned_cores
               if not self.shared // self.threads <= c < self.cores]
        if bad:
            raise ValueError('cores %s are not dedicated cores of the cell'
                             % bad)
        sizes = dict(self.page_totals())
        for size_kb, used in self.pages_used:
            if not 0 <= used <= sizes.get(size_kb, 0):
                raise ValueError('%d pages of %d KiB in use, the cell has %d'
                                 % (used, size_kb, sizes.get(size_kb, 0)))

    @property
    def cpus(self):
        """CPUs in the cell, shared and dedicated."""
        return self.shared + self.dedicated

    @property
    def cores(self):
        return self.cpus // self.threads

    @property
    def huge_pages_kb(self):
        return self.pages_2m * PAGE_2M + self.pages_1g * PAGE_1G

    def page_totals(self):
        """``[(size_kb, total), ...]``: 4 KiB pages, then the huge ones."""
        small = (self.memory_mb * 1024 - self.huge_pages_kb) // PAGE_4K
        totals = [(PAGE_4K, small)]
        if self.pages_2m:
            totals.append((PAGE_2M, self.pages_2m))
        if self.pages_1g:
            totals.append((PAGE_1G, self.pages_1g))
        return totals

    def siblings(self, first_cpu):
        """The cell's cores, as sets of CPU ids, its first CPU given."""
        return host_topology.core_siblings(first_cpu, self.cores,
                                           self.threads)


def numa_topology(cells, socket=None):
    """The ``objects.NUMATopology`` of a host made of ``cells``.

    :param cells: :class:`Cell` objects, in cell id order (0, 1, ...).
    :param socket: the ``socket`` of every cell (None: not known).
    :returns: a ``NUMATopology`` as a compute node reports it: per cell the
        CPUs, siblings and pages described, no network metadata, and the
        usage given.
    """
    loader.load_nova()
    result = []
    first_cpu = 0
    for cell_id, cell in enumerate(cells):
        cores = cell.siblings(first_cpu)
        first_cpu += cell.cpus
        shared_cores = cell.shared // cell.threads
        used = dict(cell.pages_used)
        result.append(host_topology.numa_cell(
            cell_id, socket=socket,
            cpuset=set().union(*cores[:shared_cores]),
            pcpuset=set().union(*cores[shared_cores:]),
            siblings=cores,
            memory_mb=cell.memory_mb,
            pages=[(size_kb, total, used.get(size_kb, 0))
                   for size_kb, total in cell.page_totals()],
            cpu_usage=cell.cpu_usage,
            memory_usage_mb=cell.memory_usage_mb,
            pinned_cpus=set().union(*(cores[c] for c in cell.pinned_cores))))
    return host_topology.numa_topology(result)


def placement_resources(cells):
    """What placement holds for a host made of ``cells``.

    :returns: ``{resource class: (total, used)}`` for ``VCPU`` (the shared
        CPUs, and ``cpu_usage``: overcommitted vCPUs in use), ``PCPU`` (the
        dedicated CPUs, and the threads of the pinned cores) and
        ``MEMORY_MB`` (huge pages included, and ``memory_usage_mb``).  The
        allocation ratios are the caller's: ``VCPU``'s total is the CPUs
        before overcommit, its usage may exceed it.
    """
    cells = list(cells)
    return {
        'VCPU': (sum(c.shared for c in cells),
                 sum(c.cpu_usage for c in cells)),
        'PCPU': (sum(c.dedicated for c in cells),
                 sum(len(c.pinned_cores) * c.threads for c in cells)),
        'MEMORY_MB': (sum(c.memory_mb for c in cells),
                      sum(c.memory_usage_mb for c in cells)),
    }


def libvirt_host_info(cells):
    """The fake libvirt host of Nova's test fixtures, for ``cells``.

    Nova's libvirt driver builds the ``NUMATopology`` from it; which CPUs
    are shared and which dedicated is up to ``[compute] cpu_shared_set``
    and ``cpu_dedicated_set`` there, so only the number of CPUs per cell
    counts here.  Fake libvirt hosts have identical cells (CPUs, threads,
    memory); the huge pages may differ.  Usage is not libvirt's business
    and must be 0.

    :returns: ``nova.tests.fixtures.libvirt.HostInfo``
    """
    from nova.tests.fixtures import libvirt as fakelibvirt
    cells = list(cells)
    first = cells[0]
    for cell in cells:
        if (cell.cpus, cell.threads, cell.memory_mb) != \
                (first.cpus, first.threads, first.memory_mb):
            raise ValueError('the cells of a fake libvirt host have the '
                             'same CPUs, threads and memory: %s' % cells)
        if cell.pinned_cores or cell.cpu_usage or cell.memory_usage_mb or \
                any(used for _size, used in cell.pages_used):
            raise ValueError('a fake libvirt host starts empty: %s' % cell)
    return fakelibvirt.HostInfo(
        cpu_nodes=len(cells), cpu_sockets=1, cpu_cores=first.cores,
        cpu_threads=first.threads,
        kB_mem=first.memory_mb * 1024 * len(cells),
        mempages={cell_id: fakelibvirt.create_mempages(cell.page_totals())
                  for cell_id, cell in enumerate(cells)})
