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

"""NUMASlotWeigher inside a real nova-scheduler keeps room for a big flavor.

Three identical 2-cell hosts (4 pinned CPUs per cell), three small pinned
servers, then a dual-NUMA server that needs all 8 pinned CPUs of one host
(:data:`nova_sched_ext_tools.harness.scenarios.NUMA_SLOT`).  The boot
sequence runs twice on the same hosts; the runs differ in one option,
``[filter_scheduler] weight_classes``:

* Nova's weighers alone spread the small servers over all three hosts, and
  the big one gets NoValidHost although 18 of 24 pinned CPUs are free;
* with ``nova_sched_ext.weighers.all_weighers`` added, NUMASlotWeigher packs
  the small servers onto one host and the big one is ACTIVE.

The ``[nova_sched_ext]`` options are set in both runs (they do nothing while
the weigher is not loaded).  Two more runs pin the cause down: automatic
reference flavors give the same packing, and the weigher loaded with a
multiplier of 0 spreads like Nova's weighers alone.
"""

from nova_sched_ext_tools.harness import scenarios
from tests.functional import base

SCENARIO = scenarios.NUMA_SLOT
SMALL = scenarios.PIN2.name
BIG = scenarios.PIN8_2NODE.name
WEIGHER = 'NUMASlotWeigher'


class NUMASlotWeigherTestBase(base.NUMAFitTestBase):

    HOSTS = SCENARIO.hosts
    EXTRA_FLAGS = SCENARIO.flags
    WEIGHT_CLASSES = SCENARIO.setup.weight_classes

    def assertBootsAsExpected(self, boots, results, reference=False):
        problems = []
        for boot, boot_results in zip(boots, results):
            problems.extend(boot.check(boot_results, reference))
        self.assertEqual(len(boots), len(results))
        if problems:
            self.fail('Unexpected scheduling:\n  ' + '\n  '.join(problems))

    def assertPacked(self, run):
        """Small servers on one host; the big one ACTIVE on an empty one."""
        small_hosts = run.hosts_of(SMALL)
        self.assertEqual(['numa2-a'] * 3, small_hosts)
        (big,) = run.results[-1]
        self.assertEqual(BIG, big.flavor)
        self.assertIsNotNone(big.host, big.fault)
        self.assertNotIn(big.host, small_hosts)
        self.assertEqual((0, 1), big.cells)
        # The third host is still empty: room for another big server.
        (empty,) = set(scenarios.SLOT_HOST_NAMES) - {'numa2-a', big.host}
        self.assertEqual({'numa2-a': 2, big.host: 0, empty: 8},
                         {host: sum(cells)
                          for host, cells in run.free_pinned.items()})

    def assertSpread(self, run):
        """One small server per host; the big one NoValidHost."""
        small_hosts = run.hosts_of(SMALL)
        self.assertEqual(sorted(scenarios.SLOT_HOST_NAMES),
                         sorted(small_hosts))
        (big,) = run.results[-1]
        self.assertTrue(big.no_valid_host, big.where())
        # Not for lack of capacity: 18 of 24 pinned CPUs are free, but no
        # host has the 8 the big flavor needs.
        free = {host: sum(cells) for host, cells in run.free_pinned.items()}
        self.assertEqual({'numa2-a': 6, 'numa2-b': 6, 'numa2-c': 6}, free)


class NUMASlotWeigherKeepsRoomTest(NUMASlotWeigherTestBase):
    """Nova's weighers strand the big flavor; NUMASlotWeigher does not."""

    # The reference run comes first; run_setups() restarts nova-scheduler
    # with the package's weighers added.
    WEIGHT_CLASSES = SCENARIO.reference.weight_classes

    def test_big_flavor_fits_only_with_the_slot_weigher(self):
        boots = SCENARIO.boots
        setups = SCENARIO.setups()
        self.assertEqual(
            [scenarios.NOVA_WEIGHERS_ALONE, scenarios.WITH_SLOT_WEIGHER],
            list(setups))
        # The runs differ in weight_classes, and only there.
        self.assertEqual(setups[0].numa_fit, setups[1].numa_fit)
        self.assertEqual(
            [scenarios.PACKAGE_WEIGHERS],
            [c for c in setups[1].weight_classes
             if c not in setups[0].weight_classes])
        self.assertEqual(
            [], [c for c in setups[0].weight_classes
                 if c not in setups[1].weight_classes])

        stock, slot = self.run_setups(boots, setups)

        # What nova-scheduler actually ran, loaded from nova.conf.
        self.assertNotIn(WEIGHER, stock.weighers)
        self.assertIn(WEIGHER, slot.weighers)
        self.assertEqual(
            'nova_sched_ext.weighers.numa_slot',
            type(self.loaded_weigher(WEIGHER)).__module__)
        self.assertIn('RAMWeigher', slot.weighers)
        self.assertEqual(stock.enabled_filters, slot.enabled_filters)
        self.assertEqual(len(stock.weighers) + 1, len(slot.weighers))

        self.assertBootsAsExpected(boots, stock.results, reference=True)
        self.assertBootsAsExpected(boots, slot.results)
        self.assertSpread(stock)
        self.assertPacked(slot)

        # The weigher protected the flavor it was told to protect.
        _shapes, _weights, names = self.loaded_weigher(
            WEIGHER).references.get()
        self.assertEqual((BIG,), names)

        # The big server is really there, on both cells of its host.
        (big,) = slot.results[-1]
        server = self._get_server_by_name(big.server)
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual(big.host, server['OS-EXT-SRV-ATTR:host'])

    def _get_server_by_name(self, name):
        servers = self.api.get_servers(search_opts={'name': '^%s$' % name})
        self.assertEqual(1, len(servers), servers)
        return self.api.get_server(servers[0]['id'])


class NUMASlotWeigherAutomaticReferenceTest(NUMASlotWeigherTestBase):
    """No flavor named: the weigher protects the largest flavors itself."""

    EXTRA_FLAGS = SCENARIO.flags + (
        ('nova_sched_ext', 'numa_slot_reference_flavors', []),)

    def test_packs_with_automatic_reference_flavors(self):
        self.assertIn(WEIGHER, self.loaded_weighers())
        (run,) = self.run_setups(SCENARIO.boots, [SCENARIO.setup])

        self.assertBootsAsExpected(SCENARIO.boots, run.results)
        self.assertPacked(run)
        # The largest flavors in the database: the scenario's and Nova's
        # m1.* test flavors (those without a NUMA topology count per host).
        _shapes, weights, names = self.loaded_weigher(
            WEIGHER).references.get()
        self.assertEqual(8, len(names), names)
        self.assertIn(BIG, names)
        self.assertEqual(8.0, weights[names.index(BIG)])


class NUMASlotWeigherDisabledTest(NUMASlotWeigherTestBase):
    """Loaded with multiplier 0, the weigher changes nothing.

    So the packing above comes from its weights, not from loading it.
    """

    EXTRA_FLAGS = SCENARIO.flags + (
        ('nova_sched_ext', 'numa_slot_weight_multiplier', 0.0),)

    def test_multiplier_zero_spreads_like_nova(self):
        self.assertIn(WEIGHER, self.loaded_weighers())
        (run,) = self.run_setups(SCENARIO.boots, [SCENARIO.setup])

        self.assertBootsAsExpected(SCENARIO.boots, run.results,
                                   reference=True)
        self.assertSpread(run)


class KeptHostStateKeepsRoomTest(base.KeptHostStateMixin,
                                 NUMASlotWeigherKeepsRoomTest):
    """The weigher's slots found again on the kept hosts' request copies."""
