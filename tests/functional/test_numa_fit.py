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

"""NUMAFitFilter and FastNUMATopologyFilter inside a real nova-scheduler.

The same boot sequence runs twice on the same fake hosts: first with Nova's
filters alone, then, after nova-scheduler is restarted with NUMAFitFilter in
``enabled_filters``, with the package's filter in front of
NUMATopologyFilter.  Every server must land on the same host and NUMA cells,
every request that failed must fail the same way, and the hosts left after
filtering must be the same: the filter may only make scheduling cheaper.
FastNUMATopologyFilter, which replaces NUMATopologyFilter, is held to the
same rule, and the computes must accept the limits it records.
"""

from unittest import mock

from nova_sched_ext.fit import engine
from nova_sched_ext_tools.harness import cloud
from nova_sched_ext_tools.harness import scenarios
from tests.functional import base

NUMA_FIT = base.NUMA_FIT_FILTER
NUMA_TOPOLOGY = base.NUMA_TOPOLOGY_FILTER
FAST_NUMA = cloud.FAST_NUMA_FILTER


class NUMAFitFilterMixedHostsTest(base.NUMAFitTestBase):
    """2- and 4-cell hosts, 2M and 1G huge pages, a PCI device."""

    HOSTS = scenarios.MIXED.hosts
    # The reference run comes first; run_both_ways() turns the filter on.
    NUMA_FIT = False

    def test_same_scheduling_with_and_without_numa_fit_filter(self):
        boots = scenarios.MIXED.boots
        self.assertFilterNotLoaded(NUMA_FIT)

        reference, results = self.run_both_ways(boots)

        self.assertFilterLoaded(NUMA_FIT, 'nova_sched_ext.filters.numa_fit')
        # Nova alone places as the scenario says: the scenario is sound.
        self.assertBootsAsExpected(boots, reference)
        # The filter changes nothing a user or the weighers could see...
        self.assertSameScheduling(reference, results)
        self.assertBootsAsExpected(boots, results)

        reference_passes = [p for rs in reference for r in rs
                            for p in r.passes]
        passes = [p for rs in results for r in rs for p in r.passes]
        self.assertEqual(len(reference_passes), len(passes))
        # ...it did not run before it was enabled...
        self.assertFalse(any(p.ran(NUMA_FIT) for p in reference_passes))
        # ...and once enabled it ran in front of NUMATopologyFilter in every
        # pass that got that far...
        for p in passes:
            if p.ran(NUMA_TOPOLOGY):
                self.assertTrue(p.ran(NUMA_FIT), p.render())
                names = [name for name, _ in p.kept]
                self.assertLess(names.index(NUMA_FIT),
                                names.index(NUMA_TOPOLOGY))
        # ...and did all the rejecting Nova's filter did alone before: every
        # request here is inside the fit engine's subset (pinned and shared
        # CPUs, several NUMA nodes, huge pages, a PCI device), so Nova's slow
        # filter only ever sees hosts that fit.
        for ref, new in zip(reference_passes, passes):
            self.assertEqual(ref.rejected(NUMA_TOPOLOGY),
                             new.rejected(NUMA_FIT),
                             '%s / %s' % (ref.render(), new.render()))
            self.assertEqual(0, new.rejected(NUMA_TOPOLOGY), new.render())
        self.assertGreater(sum(p.rejected(NUMA_FIT) for p in passes), 10)


class FastNUMATopologyFilterTest(base.NUMAFitTestBase):
    """FastNUMATopologyFilter in place of NUMATopologyFilter, same hosts."""

    HOSTS = scenarios.MIXED.hosts
    NUMA_FIT = False

    def test_same_scheduling_as_numa_topology_filter(self):
        boots = scenarios.MIXED.boots
        reference, run = self.run_setups(
            boots, [scenarios.NOVA_FILTERS_ALONE, scenarios.WITH_FAST_NUMA])
        self.assertFilterLoaded(
            FAST_NUMA, 'nova_sched_ext.filters.fast_numa_topology')
        self.assertFilterNotLoaded(NUMA_TOPOLOGY)
        self.assertBootsAsExpected(boots, reference.results)
        # Same hosts and cells: the computes claimed with the limits the
        # filter recorded, as they do with Nova's.
        self.assertSameScheduling(reference.results, run.results)
        self.assertBootsAsExpected(boots, run.results)
        reference_passes = [p for rs in reference.results for r in rs
                            for p in r.passes]
        passes = [p for rs in run.results for r in rs for p in r.passes]
        self.assertEqual(len(reference_passes), len(passes))
        for ref, new in zip(reference_passes, passes):
            self.assertEqual(ref.ran(NUMA_TOPOLOGY), new.ran(FAST_NUMA))
            self.assertEqual(ref.rejected(NUMA_TOPOLOGY),
                             new.rejected(FAST_NUMA),
                             '%s / %s' % (ref.render(), new.render()))
        self.assertGreater(sum(p.rejected(FAST_NUMA) for p in passes), 10)


class NUMAFitFilterDecidesTest(base.NUMAFitTestBase):
    """On idle hosts: what fits lands, what fits nowhere fails early."""

    HOSTS = scenarios.MIXED.hosts
    NUMA_FIT = True
    BOOTS = tuple(b for b in scenarios.MIXED.boots
                  if b.server in ('pin4-a', 'pin6', 'shared2-12g',
                                  'pin2-pci'))

    def test_fitting_and_non_fitting_requests(self):
        self.assertFilterLoaded(NUMA_FIT, 'nova_sched_ext.filters.numa_fit')
        self.assertEqual(4, len(self.BOOTS))
        results, servers = self.run_boots(self.BOOTS)
        self.assertBootsAsExpected(self.BOOTS, results)

        for boot, (result,) in zip(self.BOOTS, results):
            (fpass,) = result.passes
            self.assertGreater(fpass.start, 0, fpass.render())
            if not boot.expects_no_valid_host:
                # Nova's filter confirms every host the fast one kept.
                self.assertGreater(fpass.count(NUMA_FIT), 0)
                self.assertEqual(fpass.count(NUMA_FIT),
                                 fpass.count(NUMA_TOPOLOGY), fpass.render())
                continue
            server, = [s for s in servers if s['name'] == boot.server]
            server = self.api.get_server(server['id'])
            self.assertEqual('ERROR', server['status'])
            self.assertIn('No valid host', server['fault']['message'])
            # Placement offered hosts; NUMAFitFilter turned them all down,
            # so Nova's own NUMA filter did not even run.
            self.assertEqual((NUMA_FIT, 0), fpass.kept[-1], fpass.render())
            self.assertFalse(fpass.ran(NUMA_TOPOLOGY), fpass.render())


class NUMAFitFilterPythonEngineTest(NUMAFitFilterDecidesTest):
    """The same with the pure-Python twin of the C fit engine."""

    EXTRA_FLAGS = (('nova_sched_ext', 'fit_backend', 'python'),)

    def test_fitting_and_non_fitting_requests(self):
        super().test_fitting_and_non_fitting_requests()
        self.assertEqual('python', engine.backend_name())


class ComparisonSelfTest(base.NUMAFitTestBase):
    """The identity check must catch a filter that rejects a fitting host.

    Without this, a comparison that silently compared nothing (or a trace
    that recorded nothing) would pass every time.
    """

    HOSTS = scenarios.MIXED.hosts[:3]
    NUMA_FIT = False

    def test_a_wrong_rejection_is_detected(self):
        boots = scenarios.MIXED.boots[:2]
        real = self.scheduler.manager.host_manager.filter_cls_map[NUMA_FIT]
        wrong_host = 'numa2-2m'

        def drop_one_host(filter_self, hosts, spec_obj):
            return [h for h in hosts if h.host != wrong_host]

        with mock.patch.object(real, 'filter_all', drop_one_host):
            reference, results = self.run_both_ways(boots)

        problems = cloud.compare_runs(reference, results)
        self.assertTrue(any(wrong_host in p for p in problems), problems)
        self.assertRaises(AssertionError, self.assertSameScheduling,
                          reference, results)


class KeptHostStateDecidesTest(base.KeptHostStateMixin,
                               NUMAFitFilterDecidesTest):
    """NUMAFitFilter's decisions with the host state kept."""
