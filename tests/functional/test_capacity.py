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


"""The capacity count against a real Nova: N boots succeed, the next fails.

For each host layout and flavor, :func:`nova_sched_ext.capacity.compute`
runs in this process against the test's Nova (cell database, API database,
placement fixture) and says how many instances of the flavor each host
takes; then the flavor is booted that many times, one server after the
other, through the API and the real scheduler, and

* every boot succeeds, and the servers land on the hosts exactly as many
  times as the count said per host (no over-count, and no per-host error
  another host makes up for);
* one more boot ends in NoValidHost (no under-count);
* the count then says 0.

Every case is also counted with ``[nova_sched_ext_capacity] fit = nova``
(Nova's own fit for every host) and must give the same figures.  The
servers of a case are deleted before the next case, so that each case
starts from the state the test set up.
"""

import argparse
import collections
import importlib
import io
import json
from unittest import mock

from nova import context as nova_context
from nova.tests.fixtures import libvirt as fakelibvirt

from nova_sched_ext import capacity
from nova_sched_ext_tools.harness import cloud
from nova_sched_ext_tools.harness import fake_hosts as fh
from tests.functional import base

GIB = 1024
PREFERRED = {'hw:pci_numa_affinity_policy': 'preferred'}
REQUIRED = {'hw:pci_numa_affinity_policy': 'required'}


def import_cmd():
    """The command's module, without its import-time concurrency choice.

    The test run has made that choice already (see ``tests/__init__.py``).
    """
    with mock.patch('nova_sched_ext.compat.release.monkey_patch'):
        return importlib.import_module('nova_sched_ext.capacity.cmd')


def flavor(name, vcpus, ram_mb, **specs):
    return fh.FlavorShape(name, vcpus, ram_mb, dict(specs))


def with_specs(shape, specs):
    merged = dict(shape.extra_specs)
    merged.update(specs)
    return fh.FlavorShape(shape.name, shape.vcpus, shape.ram_mb, merged,
                          shape.disk_gb)


class CapacityTestBase(base.NUMAFitTestBase):
    """Count, then boot until NoValidHost, and compare."""

    def count(self, flavors=None, **kwargs):
        return capacity.compute(nova_context.get_admin_context(),
                                flavors=flavors, **kwargs).to_dict()

    def per_host(self, shape):
        """{host: count} of one flavor, and the whole report."""
        report = self.count([shape.name], by='host')
        return ({s['name']: s['capacity'][shape.name]
                 for s in report['scopes']}, report)

    def assertExactCapacity(self, shape, total=None):
        """Count ``shape``, boot it until NoValidHost, compare per host.

        :param total: the count expected, when the case is meant to show a
            particular figure (None: whatever the count says, proven by the
            boots)
        :returns: the count's report (by host) from before the boots
        """
        self.flavor_id(shape)
        counts, report = self.per_host(shape)
        # Nova's own fit on every host gives the same figures.
        self.flags(fit='nova', group='nova_sched_ext_capacity')
        nova_counts, nova_report = self.per_host(shape)
        self.flags(fit='engine', group='nova_sched_ext_capacity')
        self.assertEqual(counts, nova_counts, 'engine vs Nova fit')
        self.assertEqual(report['hosts_counted'],
                         nova_report['hosts_counted'])
        expected = sum(counts.values())

        servers, landed = [], collections.Counter()
        for index in range(expected):
            results, booted = self.boot('%s-%d' % (shape.name, index), shape)
            servers.extend(booted)
            (result,) = results
            if result.host is None:
                self.fail('over-count: %s boot %d of %d failed (%s); '
                          'count per host %s, landed so far %s' % (
                              shape.name, index + 1, expected, result.fault,
                              counts, dict(landed)))
            landed[result.host] += 1
        results, booted = self.boot('%s-over' % shape.name, shape)
        servers.extend(booted)
        (result,) = results
        self.assertTrue(
            result.no_valid_host,
            'under-count: %s boot %d (count %d) landed on %s; count per '
            'host %s, landed %s' % (shape.name, expected + 1, expected,
                                    result.host, counts, dict(landed)))
        self.assertEqual({h: n for h, n in counts.items() if n},
                         dict(landed), 'count per host vs where the '
                         'servers landed')
        after = self.count([shape.name])
        self.assertEqual({shape.name: 0}, after['scopes'][0]['capacity'])
        self.delete_servers(servers)
        if total is not None:
            # what the case is meant to show (the boots proved the count)
            self.assertEqual(total, expected, counts)
        return report


class MixedHostsCapacityTest(CapacityTestBase):
    """4K, 2M huge pages, PCI on cell 0, four cells: each flavor exact."""

    HOSTS = (
        fh.HostLayout('cap-4k', cells=2, mem_gib_per_cell=8),
        fh.HostLayout('cap-2m', cells=2, mem_gib_per_cell=8,
                      pages_2m_per_cell=1024),
        fh.HostLayout('cap-pci', cells=2, mem_gib_per_cell=8,
                      pci_devices=2, pci_numa_node=0),
        fh.HostLayout('cap-4cell', cells=4, mem_gib_per_cell=4),
    )

    def test_pinned_cpus(self):
        # One per cell of 8 GiB by memory; the 4 GiB cells take none,
        # though placement sees 15.5 GiB of RAM there.
        shape = fh.pinned('cap-pin2-6g', 2, 6 * GIB)
        report = self.assertExactCapacity(shape, total=6)
        self.assertGreater(sum(s['placement_only'][shape.name]
                               for s in report['scopes']), 6)
        self.assertEqual(0, report['engine_fallbacks'])

    def test_huge_pages(self):
        shape = fh.shared('cap-2m-1g', 1, GIB, page_size='2MB')
        report = self.assertExactCapacity(shape, total=4)
        by_host = {s['name']: s for s in report['scopes']}
        self.assertEqual(4, by_host['cap-2m']['capacity'][shape.name])
        self.assertGreater(by_host['cap-4k']['placement_only'][shape.name],
                           0)

    def test_two_cell_flavor(self):
        shape = fh.shared('cap-numa2', 2, 5 * GIB, numa_nodes=2)
        report = self.assertExactCapacity(shape, total=11)
        by_host = {s['name']: s for s in report['scopes']}
        # 2.5 GiB per guest cell: one per 4 GiB host cell, two guests,
        # where placement alone sees room for more.
        four = by_host['cap-4cell']
        self.assertEqual(2, four['capacity'][shape.name])
        self.assertGreater(four['placement_only'][shape.name], 2)

    def test_pci_required_numa_affinity(self):
        # The devices hang off cell 0, and a guest cell of 5 GiB leaves no
        # room for a second one there.
        shape = with_specs(fh.shared('cap-pci-req', 1, 5 * GIB, numa_nodes=1,
                                     pci=1), REQUIRED)
        report = self.assertExactCapacity(shape, total=1)
        self.assertGreater(report['engine_fallbacks'], 0)

    def test_pci_preferred_numa_affinity(self):
        # Preferred lets the guest on cell 1 take a device of cell 0.
        shape = with_specs(fh.shared('cap-pci-pref', 1, 5 * GIB,
                                     numa_nodes=1, pci=1), PREFERRED)
        self.assertExactCapacity(shape, total=2)

    def test_fragmented_hosts(self):
        # Pinned guests of one CPU on every host first, then a flavor that
        # needs a whole cell's pinned CPUs.
        filler = fh.pinned('cap-filler', 1, GIB)
        fillers = []
        for host in ('cap-4k', 'cap-2m', 'cap-pci', 'cap-4cell'):
            results, booted = self.boot('filler-%s' % host, filler)
            fillers.extend(booted)
            self.assertIsNotNone(results[0].host)
        report = self.assertExactCapacity(fh.pinned('cap-pin4', 4, GIB),
                                          total=3)
        self.assertGreater(sum(s['fragmentation']['vcpus']
                               for s in report['scopes']), 0)
        self.delete_servers(fillers)

    def test_every_scope_adds_up(self):
        shapes = [fh.pinned('cap-sum-pin', 2, 2 * GIB),
                  fh.shared('cap-sum-shared', 2, 4 * GIB)]
        for shape in shapes:
            self.flavor_id(shape)
        names = [s.name for s in shapes]
        hosts = self.count(names, by='host')
        totals = {n: sum(s['capacity'][n] for s in hosts['scopes'])
                  for n in names}
        for by in ('cloud', 'az', 'cell', 'host'):
            report = self.count(names, by=by)
            self.assertEqual(totals, {n: sum(s['capacity'][n]
                                             for s in report['scopes'])
                                      for n in names}, by)
            self.assertEqual(4, report['hosts_counted'])
        # per_host adds one host scope per host to the requested ones
        report = self.count(names, by='cloud', per_host=True)
        self.assertEqual(['cloud'] + ['host'] * 4,
                         [s['scope'] for s in report['scopes']])


class ThreadSiblingsCapacityTest(CapacityTestBase):
    """Hosts with two threads per core: pinning by core."""

    HOSTS = ()
    #: one core of each cell shared, two cores of each cell dedicated
    SHARED_SET = '0-1,6-7'
    DEDICATED_SET = '2-5,8-11'

    def setUp(self):
        super().setUp()
        self.flags(cpu_shared_set=self.SHARED_SET,
                   cpu_dedicated_set=self.DEDICATED_SET, group='compute')
        cell_kib = 8 * GIB * 1024
        for name in ('ht-a', 'ht-b'):
            self.start_compute(hostname=name, host_info=fakelibvirt.HostInfo(
                cpu_nodes=2, cpu_sockets=1, cpu_cores=3, cpu_threads=2,
                kB_mem=2 * cell_kib,
                mempages={cell: fakelibvirt.create_mempages(
                    [(fh.PAGE_4K, cell_kib // fh.PAGE_4K)])
                    for cell in range(2)}))

    def _boot_filler(self):
        # One pinned CPU on each host: a core of cell 0 is half used.
        filler = fh.pinned('ht-filler', 1, GIB)
        fillers = []
        for host in ('ht-a', 'ht-b'):
            results, booted = self.boot('ht-filler-%s' % host, filler)
            fillers.extend(booted)
            self.assertIsNotNone(results[0].host)
        return fillers

    def test_require_thread_policy(self):
        shape = with_specs(fh.pinned('ht-require2', 2, GIB),
                           {'hw:cpu_thread_policy': 'require'})
        self.assertExactCapacity(shape, total=8)
        fillers = self._boot_filler()
        # the half used core is lost to 'require'
        self.assertExactCapacity(shape, total=6)
        self.delete_servers(fillers)

    def test_prefer_thread_policy(self):
        shape = fh.pinned('ht-prefer3', 3, GIB)
        self.assertExactCapacity(shape, total=4)
        fillers = self._boot_filler()
        self.assertExactCapacity(shape, total=4)
        self.delete_servers(fillers)

    def test_emulator_threads_isolated(self):
        # Counted with Nova's fit: the reserved emulator CPU is a
        # particular CPU the engine does not track.
        shape = with_specs(fh.pinned('ht-emu', 1, GIB), {
            'hw:cpu_thread_policy': 'require',
            'hw:emulator_threads_policy': 'isolate'})
        report = self.assertExactCapacity(shape, total=8)
        self.assertGreater(report['engine_fallbacks'], 0)

    def test_isolate_forbids_hyperthreading_hosts(self):
        # The isolate policy forbids the trait HW_CPU_HYPERTHREADING, which
        # both hosts have: placement offers neither.
        shape = with_specs(fh.pinned('ht-isolate', 1, GIB),
                           {'hw:cpu_thread_policy': 'isolate'})
        report = self.assertExactCapacity(shape, total=0)
        self.assertTrue(all(s['placement_only'][shape.name] > 0
                            for s in report['scopes']))


class TraitsAndScopesCapacityTest(CapacityTestBase):
    """Traits, aggregates, availability zones, a disabled service."""

    HOSTS = tuple(fh.HostLayout(name, cells=2, mem_gib_per_cell=8)
                  for name in ('sc-gold', 'sc-plain', 'sc-spare'))
    GOLD_TRAIT = 'CUSTOM_CAPACITY_GOLD'
    EXTRA_SPECS_FILTER = 'AggregateInstanceExtraSpecsFilter'

    def _configure_scheduler(self, numa_fit, weight_classes=None):
        super()._configure_scheduler(numa_fit, weight_classes)
        self.flags(enabled_filters=cloud.enabled_filters(numa_fit) +
                   [self.EXTRA_SPECS_FILTER], group='filter_scheduler')

    def setUp(self):
        super().setUp()
        rp_uuid = self.compute_rp_uuids['sc-gold']
        traits = self._get_provider_traits(rp_uuid)
        self._create_trait(self.GOLD_TRAIT)
        self._set_provider_traits(rp_uuid, traits + [self.GOLD_TRAIT])
        self.gold_agg = self._create_aggregate('agg-gold',
                                               availability_zone='zone-gold')
        self.admin_api.add_host_to_aggregate(self.gold_agg, 'sc-gold')
        self.admin_api.post_aggregate_action(self.gold_agg, {
            'set_metadata': {'metadata': {'pool': 'gold'}}})
        self.pool_agg = self._create_aggregate('agg-pool')
        for host in ('sc-plain', 'sc-spare'):
            self.admin_api.add_host_to_aggregate(self.pool_agg, host)
        self.admin_api.post_aggregate_action(self.pool_agg, {
            'set_metadata': {'metadata': {'pool': 'plain'}}})

    def test_required_trait(self):
        shape = flavor('sc-trait', 2, 4 * GIB,
                       **{'trait:%s' % self.GOLD_TRAIT: 'required'})
        report = self.assertExactCapacity(shape, total=8)
        by_host = {s['name']: s['capacity'][shape.name]
                   for s in report['scopes']}
        self.assertGreater(by_host['sc-gold'], 0)
        self.assertEqual(0, by_host['sc-plain'] + by_host['sc-spare'])

    def test_forbidden_trait(self):
        shape = with_specs(fh.pinned('sc-no-gold', 4, GIB), {
            'trait:%s' % self.GOLD_TRAIT: 'forbidden'})
        report = self.assertExactCapacity(shape, total=4)
        by_host = {s['name']: s['capacity'][shape.name]
                   for s in report['scopes']}
        self.assertEqual(0, by_host['sc-gold'])

    def test_aggregate_extra_specs(self):
        shape = with_specs(fh.pinned('sc-pool-plain', 4, GIB), {
            'aggregate_instance_extra_specs:pool': 'plain'})
        report = self.assertExactCapacity(shape, total=4)
        by_host = {s['name']: s['capacity'][shape.name]
                   for s in report['scopes']}
        self.assertEqual(0, by_host['sc-gold'])

    def test_scopes_and_a_disabled_service(self):
        shape = fh.pinned('sc-scope', 4, GIB)
        self.flavor_id(shape)
        name = shape.name
        cloud_report = self.count([name])
        self.assertEqual(6, cloud_report['scopes'][0]['capacity'][name])

        by_az = self.count([name], by='az')
        self.assertEqual({'nova': 4, 'zone-gold': 2},
                         {s['name']: s['capacity'][name]
                          for s in by_az['scopes']})
        gold = self.count([name], by='az', az='zone-gold')
        self.assertEqual([('zone-gold', 2, 1)],
                         [(s['name'], s['capacity'][name], s['hosts'])
                          for s in gold['scopes']])
        by_agg = self.count([name], by='aggregate')
        self.assertEqual({'agg-gold': 2, 'agg-pool': 4},
                         {s['name']: s['capacity'][name]
                          for s in by_agg['scopes']})
        only_pool = self.count([name], by='cloud', aggregate='agg-pool')
        self.assertEqual(4, only_pool['scopes'][0]['capacity'][name])
        self.assertEqual(2, only_pool['hosts_counted'])
        self.assertRaises(capacity.UnknownScope, self.count, [name],
                          az='no-such-zone')
        self.assertRaises(capacity.UnknownScope, self.count, [name],
                          aggregate='no-such-aggregate')
        self.assertRaises(capacity.UnknownFlavor, self.count,
                          ['no-such-flavor'])

        # A disabled compute service: not counted, and not booted to.
        service = self.admin_api.get_services(binary='nova-compute',
                                              host='sc-spare')[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})
        report = self.assertExactCapacity(shape, total=4)
        self.assertEqual({'service_disabled': 1}, report['hosts_skipped'])
        self.assertEqual(2, report['hosts_counted'])

    def test_command_output(self):
        shape = fh.pinned('sc-cli', 4, GIB)
        self.flavor_id(shape)
        args = argparse.Namespace(flavors=[shape.name], by='az', az=None,
                                  aggregate=None, per_host=True)
        cmd = import_cmd()
        report = cmd.run(args)
        expected = self.count([shape.name], by='az', per_host=True)
        report.pop('generated_at'), expected.pop('generated_at')
        self.assertEqual(expected, report)
        out = io.StringIO()
        cmd.output(report | {'generated_at': 'now'}, True, out)
        self.assertEqual(report, {k: v for k, v in json.loads(
            out.getvalue()).items() if k != 'generated_at'})
        out = io.StringIO()
        cmd.output(report | {'generated_at': 'now'}, False, out)
        table = out.getvalue()
        self.assertIn('zone-gold', table)
        self.assertIn('sc-cli', table)
        self.assertIn('Placement only', table)


class KeptHostStateMixedHostsCapacityTest(base.KeptHostStateMixin,
                                          MixedHostsCapacityTest):
    """Booting until NoValidHost on kept host state: exactly the count."""

    VARIANT_TESTS = ('test_two_cell_flavor',)
