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

"""Boot sequences on fake NUMA hosts, with the outcome each boot must have.

A :class:`Scenario` is plain data: the hosts to start and the servers to
boot, in order.  Each :class:`Boot` names the hosts the server may land on
(any of them is acceptable: which one is the weighers' business) or none,
meaning the request must end in NoValidHost.

A scenario runs under its :class:`Setup` (what ``nova.conf`` says about
filters and weighers) and, to compare, first under a reference setup on the
same hosts with the same boots:

* a plugin that only saves work (``NUMAFitFilter``) is compared with Nova's
  filters alone, and both runs must schedule identically
  (``same_as_reference``); the expectations follow from the NUMA shapes
  alone, as Nova's ``NUMATopologyFilter`` decides them;
* a plugin that changes the choice (``NUMASlotWeigher``) is compared with
  Nova's weighers alone, and each run has its own expectations
  (``Boot.reference_expect`` for the reference run).

The functional tests and the demo run these scenarios.  Later features add
scenarios to :data:`DEMO_SCENARIOS`.
"""

import dataclasses

from nova_sched_ext_tools.harness import fake_hosts as fh

#: ``Boot.expect`` value for a request that no host can take.
NO_VALID_HOST = ()


@dataclasses.dataclass(frozen=True)
class Boot:
    """One server create request and where it may end up."""

    server: str
    flavor: fh.FlavorShape
    expect: tuple
    #: why it lands there (or nowhere), for humans reading the demo
    why: str = ''
    #: servers created by this one request (``min_count``/``max_count``)
    count: int = 1
    #: where it may land in the reference run, if not in ``expect`` (only
    #: for scenarios whose runs may differ: ``same_as_reference=False``)
    reference_expect: tuple = None

    def expected(self, reference=False):
        """The acceptable hosts (empty: NoValidHost) in one of the runs."""
        if reference and self.reference_expect is not None:
            return self.reference_expect
        return self.expect

    @property
    def expects_no_valid_host(self):
        return not self.expect

    def expected_text(self, reference=False):
        expect = self.expected(reference)
        return ' or '.join(expect) if expect else 'NoValidHost'

    def accepts(self, result, reference=False):
        """Whether one server's ``cloud.BootResult`` is as expected."""
        expect = self.expected(reference)
        if expect:
            return result.host in expect
        return result.no_valid_host

    def check(self, results, reference=False):
        """What is wrong with ``results`` (``cloud.BootResult`` list)."""
        problems = []
        if len(results) != self.count:
            problems.append('%s: expected %d server(s), got %d' % (
                self.server, self.count, len(results)))
        for result in results:
            if self.accepts(result, reference):
                continue
            problems.append('%s: expected %s, got %s' % (
                result.server, self.expected_text(reference),
                result.host or 'ERROR (%s)' % result.fault))
        return problems


#: ``[filter_scheduler] weight_classes`` entries.
NOVA_WEIGHERS = 'nova.scheduler.weights.all_weighers'
PACKAGE_WEIGHERS = 'nova_sched_ext.weighers.all_weighers'
#: Ranks otherwise equal hosts by name, so every run is reproducible (a test
#: helper, see :mod:`nova_sched_ext_tools.harness.weighers`).
TIE_BREAKER = 'nova_sched_ext_tools.harness.weighers.HostNameTieBreaker'
STOCK_WEIGHT_CLASSES = (NOVA_WEIGHERS, TIE_BREAKER)
SLOT_WEIGHT_CLASSES = (NOVA_WEIGHERS, PACKAGE_WEIGHERS, TIE_BREAKER)


@dataclasses.dataclass(frozen=True)
class Setup:
    """What ``nova.conf`` says about scheduling in one run of a scenario.

    Switching setups is what an operator does: edit ``[filter_scheduler]
    enabled_filters`` / ``weight_classes`` and restart nova-scheduler.
    """

    #: for humans: "Nova's filters alone", "with NUMASlotWeigher"...
    label: str
    #: True: NUMAFitFilter in ``enabled_filters`` (before
    #: NUMATopologyFilter); :data:`FAST_NUMA`: FastNUMATopologyFilter in
    #: place of NUMATopologyFilter; False: Nova's filters alone
    numa_fit: object = True
    #: ``[filter_scheduler] weight_classes``
    weight_classes: tuple = STOCK_WEIGHT_CLASSES


#: ``Setup.numa_fit``: FastNUMATopologyFilter replaces NUMATopologyFilter
FAST_NUMA = 'fast'

NOVA_FILTERS_ALONE = Setup("Nova's filters alone", numa_fit=False)
WITH_NUMA_FIT = Setup('with NUMAFitFilter')
WITH_FAST_NUMA = Setup('with FastNUMATopologyFilter', numa_fit=FAST_NUMA)
NOVA_WEIGHERS_ALONE = Setup("Nova's weighers alone")
WITH_SLOT_WEIGHER = Setup('with NUMASlotWeigher',
                          weight_classes=SLOT_WEIGHT_CLASSES)


@dataclasses.dataclass(frozen=True)
class Scenario:
    """Hosts to start and servers to boot, in order.

    ``flags`` holds extra ``nova.conf`` settings as ``(group, option,
    value)`` triples, applied before the services start and kept in every
    run (a weigher's own options, for example: they do nothing while the
    weigher is not in ``weight_classes``).
    """

    name: str
    title: str
    hosts: tuple
    boots: tuple
    flags: tuple = ()
    #: the run whose expectations are ``Boot.expect``
    setup: Setup = WITH_NUMA_FIT
    #: the run it is compared with (it goes first), or None
    reference: Setup = NOVA_FILTERS_ALONE
    #: True: the reference run must schedule exactly alike; False: it has
    #: its own expectations (``Boot.reference_expect``)
    same_as_reference: bool = True

    def setups(self, compare=True):
        """The setups to run, in order."""
        if compare and self.reference is not None:
            return (self.reference, self.setup)
        return (self.setup,)

    def host(self, name):
        for layout in self.hosts:
            if layout.name == name:
                return layout
        raise KeyError(name)

    def flavors(self):
        """The distinct flavors of the boots, in first-use order."""
        seen = {}
        for boot in self.boots:
            seen.setdefault(boot.flavor.name, boot.flavor)
        return list(seen.values())

    def uses_pci(self):
        return any(layout.pci_devices for layout in self.hosts)


# --- hosts -----------------------------------------------------------------

NUMA2_4K = fh.HostLayout('numa2-4k', cells=2, mem_gib_per_cell=8)
NUMA2_2M = fh.HostLayout('numa2-2m', cells=2, mem_gib_per_cell=8,
                         pages_2m_per_cell=2048)
NUMA2_PCI = fh.HostLayout('numa2-pci', cells=2, mem_gib_per_cell=8,
                          pci_devices=2, pci_numa_node=1)
NUMA4_1G = fh.HostLayout('numa4-1g', cells=4, mem_gib_per_cell=4,
                         pages_1g_per_cell=2)
NUMA4_4K = fh.HostLayout('numa4-4k', cells=4, mem_gib_per_cell=4)

MIXED_HOSTS = (NUMA2_4K, NUMA2_2M, NUMA2_PCI, NUMA4_1G, NUMA4_4K)
TWO_CELL_HOSTS = ('numa2-4k', 'numa2-2m', 'numa2-pci')
ALL_HOSTS = tuple(layout.name for layout in MIXED_HOSTS)

# --- flavors ---------------------------------------------------------------

PIN4 = fh.pinned('pin4', vcpus=4, ram_mb=2048)
PIN4_2NODE = fh.pinned('pin4.2node', vcpus=4, ram_mb=4096, numa_nodes=2)
PIN2_LARGE = fh.pinned('pin2.large', vcpus=2, ram_mb=2048,
                       page_size='large')
PIN4_2NODE_LARGE = fh.pinned('pin4.2node.large', vcpus=4, ram_mb=4096,
                             numa_nodes=2, page_size='large')
SHARED1_1G = fh.shared('shared1.1g', vcpus=1, ram_mb=2048, page_size='1GB')
SHARED4_2NODE = fh.shared('shared4.2node', vcpus=4, ram_mb=4096,
                          numa_nodes=2)
PIN2_PCI = fh.pinned('pin2.pci', vcpus=2, ram_mb=2048, pci=1)
PIN6 = fh.pinned('pin6', vcpus=6, ram_mb=2048)
SHARED2_12G = fh.shared('shared2.12g', vcpus=2, ram_mb=12288, numa_nodes=1)
SHARED2 = fh.shared('shared2', vcpus=2, ram_mb=2048)

MIXED = Scenario(
    name='mixed-numa',
    title='NUMA flavors on 2- and 4-cell hosts, until the big ones no '
          'longer fit',
    hosts=MIXED_HOSTS,
    boots=(
        Boot('pin4-a', PIN4, TWO_CELL_HOSTS,
             '4 pinned CPUs in one cell: only 2-cell hosts have 4 per cell'),
        Boot('pin4x2', PIN4_2NODE, ALL_HOSTS,
             '2 pinned CPUs in each of 2 cells: every host'),
        Boot('pin2-large', PIN2_LARGE, ('numa2-2m', 'numa4-1g'),
             'huge pages: only the hosts that have them'),
        Boot('pin4x2-large', PIN4_2NODE_LARGE, ('numa4-1g',),
             'huge pages in 2 cells with 2 free pinned CPUs each'),
        Boot('shared1-1g', SHARED1_1G, ('numa4-1g',),
             '1G pages: one host, one cell left with them'),
        Boot('shared4x2', SHARED4_2NODE, TWO_CELL_HOSTS,
             '2 shared CPUs per cell: 4-cell hosts have only 1'),
        Boot('pin2-pci', PIN2_PCI, ('numa2-pci',),
             'the PCI device is on cell 1: CPUs must be pinned there'),
        Boot('pin6', PIN6, NO_VALID_HOST,
             '6 pinned CPUs in one cell: no cell has more than 4'),
        Boot('shared2-12g', SHARED2_12G, NO_VALID_HOST,
             '12 GiB in one cell: no cell has more than 8 GiB'),
        Boot('pin4-b', PIN4, ('numa2-2m', 'numa2-pci'),
             'two at once: the last two cells with 4 free pinned CPUs',
             count=2),
        Boot('pin4-c', PIN4, NO_VALID_HOST,
             'placement still sees free pinned CPUs, but no cell has 4'),
        Boot('shared2', SHARED2, ALL_HOSTS,
             'no NUMA constraint: NUMA filters let every host through'),
    ),
)

# --- NUMASlotWeigher against fragmentation --------------------------------
#
# Three identical 2-cell hosts, each with 4 pinned CPUs per cell (8 in all).
# Three small pinned servers arrive, then one that needs a whole host.
#
# Nova's RAMWeigher, CPUWeigher and DiskWeigher spread: after the first
# small server, the emptiest host wins every time, so the three land on
# three hosts and no host keeps 8 free pinned CPUs: the big server gets
# NoValidHost while 18 of 24 pinned CPUs are free.
#
# NUMASlotWeigher (reference flavor: the big one) sees that numa2-a has
# already lost its only big slot and the other hosts would lose theirs, so
# it sends the second and third small servers to numa2-a as well.  Its
# multiplier must outweigh the spreading weighers: after Nova's
# normalisation each contributes at most its multiplier (RAM, CPU and disk
# 1.0 each; I/O ops -1.0 while a host still counts a build), 4.0 together,
# against 10.0 here.  With the default multiplier of 1.0 the spreading
# weighers win and the big flavor is stranded as without the weigher.
#
# Nothing is left to chance: equal hosts are ranked by name
# (HostNameTieBreaker), host_subset_size is 1, and each server is a request
# of its own, scheduled after the previous one is ACTIVE.

SLOT_HOST_NAMES = ('numa2-a', 'numa2-b', 'numa2-c')
SLOT_HOSTS = tuple(fh.HostLayout(name, cells=2, mem_gib_per_cell=8)
                   for name in SLOT_HOST_NAMES)

PIN2 = fh.pinned('pin2', vcpus=2, ram_mb=2048)
PIN8_2NODE = fh.pinned('pin8.2node', vcpus=8, ram_mb=8192, numa_nodes=2)

#: ``[nova_sched_ext]`` options of the scenario, the same in both runs.
SLOT_WEIGHER_FLAGS = (
    ('nova_sched_ext', 'numa_slot_reference_flavors', [PIN8_2NODE.name]),
    ('nova_sched_ext', 'numa_slot_weight_multiplier', 10.0),
)

NUMA_SLOT = Scenario(
    name='numa-slot',
    title="Small pinned servers, then a big dual-NUMA one: Nova's weighers "
          'strand it, NUMASlotWeigher keeps room',
    hosts=SLOT_HOSTS,
    boots=(
        Boot('small-1', PIN2, ('numa2-a',),
             'all hosts empty and equal for every weigher: the first by '
             'name', reference_expect=('numa2-a',)),
        Boot('small-2', PIN2, ('numa2-a',),
             "Nova's weighers: an empty host (most free RAM, CPU, disk). "
             'NUMASlotWeigher: numa2-a has no 8-CPU slot left to lose, an '
             'empty host would lose its only one',
             reference_expect=('numa2-b',)),
        Boot('small-3', PIN2, ('numa2-a',),
             "the same again: Nova's weighers take the last empty host, "
             'NUMASlotWeigher fills numa2-a',
             reference_expect=('numa2-c',)),
        Boot('big', PIN8_2NODE, ('numa2-b', 'numa2-c'),
             'all 8 pinned CPUs of one host, 4 in each cell. Spread, no '
             'host has 8 free (6 each); packed, two hosts still do',
             reference_expect=NO_VALID_HOST),
    ),
    flags=SLOT_WEIGHER_FLAGS,
    setup=WITH_SLOT_WEIGHER,
    reference=NOVA_WEIGHERS_ALONE,
    same_as_reference=False,
)

#: What ``nova-sched-ext-demo`` runs, in order.
DEMO_SCENARIOS = (MIXED, NUMA_SLOT)
