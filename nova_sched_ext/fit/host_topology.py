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

"""Nova's host NUMA cell objects, built from numbers instead of a hypervisor.

A host made up rather than read from libvirt is built here: by the fake NUMA
virt driver that devstack-lite's computes run
(:mod:`nova_sched_ext.virt.fake_numa`) and by the offline tools' host
factory (``nova_sched_ext_tools.hosts``, which describes hosts by shared and
dedicated cores, threads, huge pages and usage, and builds them through
this module).  One place decides what such a cell carries: its CPU sets and
sibling cores, memory pages (by default all memory in 4 KiB pages), usage,
its socket, and no network metadata.

CPU numbering (:func:`core_siblings`): with ``n`` cores of ``t`` threads
from CPU ``first``, thread ``k`` of core ``c`` is CPU ``first + c + k * n``,
as libvirt numbers them on x86; each core is one set of siblings.

Nova's objects are imported when a cell is built, not on import.
"""

#: The base page size, in KiB.
PAGE_4K = 4


def core_siblings(first_cpu, cores, threads=1):
    """The cores of a cell, as sets of CPU ids, from ``first_cpu`` on.

    :returns: ``cores`` sets of ``threads`` CPU ids each, in core order.
    """
    return [{first_cpu + core + thread * cores for thread in range(threads)}
            for core in range(cores)]


def numa_cell(cell_id, cpuset, pcpuset, siblings, memory_mb, pages=None,
              socket=None, cpu_usage=0, memory_usage_mb=0, pinned_cpus=()):
    """The ``objects.NUMACell`` a compute node reports for one cell.

    :param cpuset: CPUs for floating guests (``VCPU``).
    :param pcpuset: CPUs for pinned guests (``PCPU``).
    :param siblings: the cell's cores, as sets of CPU ids.
    :param memory_mb: memory of the cell, huge pages included.
    :param pages: ``[(size_kb, total, used), ...]``; None: the whole
        memory in 4 KiB pages, none used.
    :param socket: the cell's socket (None: not known).
    :param cpu_usage: shared CPUs in use (overcommit included).
    :param memory_usage_mb: memory in use.
    :param pinned_cpus: CPUs pinned by guests.
    """
    from nova import objects
    if pages is None:
        pages = [(PAGE_4K, memory_mb * 1024 // PAGE_4K, 0)]
    return objects.NUMACell(
        id=cell_id, socket=socket,
        cpuset=set(cpuset), pcpuset=set(pcpuset),
        memory=memory_mb, cpu_usage=cpu_usage,
        memory_usage=memory_usage_mb,
        pinned_cpus=set(pinned_cpus),
        siblings=[set(core) for core in siblings],
        mempages=[objects.NUMAPagesTopology(
            size_kb=size_kb, total=total, used=used, reserved=0)
            for size_kb, total, used in pages],
        network_metadata=objects.NetworkMetadata(
            physnets=set(), tunneled=False))


def numa_topology(cells):
    """The ``objects.NUMATopology`` of ``objects.NUMACell`` objects."""
    from nova import objects
    return objects.NUMATopology(cells=list(cells))
