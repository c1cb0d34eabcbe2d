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

"""nova-sched-ext-sim --broker on clouds small enough to know the answer."""

import io
import json
import os

import fixtures

from nova_sched_ext_tools.sim import broker
from nova_sched_ext_tools.sim import cli

from tests import base
from tests.unit.tools.sim import base as sim_base

host = sim_base.host
request = sim_base.request


class TestSplitAndShapes(base.TestCase):

    def test_racks_split_in_ascending_runs(self):
        hosts = [host('h%d' % i, str(rack), (4, 8))
                 for i, rack in enumerate((10, 2, 2, 1, 30, 11))]
        split = broker.split_by_racks(hosts, 2)
        # racks 1, 2, 10 | 11, 30
        self.assertEqual({'cluster-1': ['h0', 'h1', 'h2', 'h3'],
                          'cluster-2': ['h4', 'h5']},
                         {k: sorted(h.name for h in v)
                          for k, v in split.items()})
        self.assertRaises(ValueError, broker.split_by_racks, hosts, 6)

    def test_dual_numa_only_where_nova_splits_evenly(self):
        self.assertIsNone(broker.variant_shape(3, 4096, 'dual'))
        shape = broker.variant_shape(4, 4096, 'dual')
        self.assertEqual([(2, 2048), (2, 2048)],
                         [(c.cpus, c.memory) for c in shape.numa.cells])
        conf = broker.broker_config_for(
            ['cluster-1'], [request(0, 3, 4), request(1, 4, 8, numa=2)],
            'conversion')
        flavors = {name: [v.flavor for v in family.variants]
                   for name, family in conf.families.items()}
        self.assertEqual({'3c4g-1n': ['3c4g-1n'],
                          '4c8g-2n': ['4c8g-2n', '4c8g-1n']}, flavors)


class TestReplay(base.TestCase):

    def test_conversion_places_what_a_fixed_kind_cannot(self):
        # A dual-NUMA 8c32g needs two cells of 4c16g: none has them, b's
        # first cell takes it whole.  Then a single-NUMA 6c8g: fixed, it
        # takes b's first cell; converted, that cell is full and it goes
        # to a as two 3c4g halves.
        hosts = [host('a', '1', (4, 8), (4, 8)),
                 host('b', '2', (8, 32), (2, 4))]
        requests = [request(0, 8, 32, numa=2), request(1, 6, 8)]
        fixed = broker.replay('t', hosts, requests, 'fixed', 'most-capacity',
                              clusters=2)
        self.assertEqual((1, 6), (fixed.placed, fixed.placed_vcpus))
        converted = broker.replay('t', hosts, requests, 'conversion',
                                  'most-capacity', clusters=2)
        self.assertEqual((2, 14, 2), (converted.placed,
                                      converted.placed_vcpus,
                                      converted.converted))
        self.assertEqual({'cluster-1': 1, 'cluster-2': 1},
                         converted.by_cluster)

    def test_choice_by_capacity_in_turn_or_best_fit(self):
        # cluster-1 takes two 4c8g, cluster-2 four
        hosts = [host('a', '1', (8, 16)), host('b', '2', (16, 32))]
        requests = [request(i, 4, 8) for i in range(2)]
        for chooser, by_cluster in (
                ('most-capacity', {'cluster-1': 0, 'cluster-2': 2}),
                ('round-robin', {'cluster-1': 1, 'cluster-2': 1}),
                ('best-fit', {'cluster-1': 2, 'cluster-2': 0})):
            result = broker.replay('t', hosts, requests, 'fixed', chooser,
                                   clusters=2)
            self.assertEqual(by_cluster, result.by_cluster, chooser)
            self.assertEqual(2, result.placed)

    def test_most_room_converts_to_the_kind_with_more_room(self):
        # Two cells of 6c12g take two single-NUMA 4c8g (one a cell) but
        # three dual-NUMA ones (2c4g a cell): most-room takes the dual
        # kind although the single one fits, the seed's order does not.
        hosts = [host('a', '1', (6, 12), (6, 12))]
        for mode, converted in (('conversion', 0),
                                ('conversion-most-room', 1)):
            result = broker.replay('t', hosts, [request(0, 4, 8)], mode,
                                   'most-capacity', clusters=1)
            self.assertEqual((1, converted),
                             (result.placed, result.converted), mode)

    def test_the_capacity_follows_the_placements(self):
        hosts = [host('a', '1', (8, 16))]
        requests = [request(i, 2, 4) for i in range(5)]
        result = broker.replay('t', hosts, requests, 'fixed',
                               'most-capacity', clusters=1)
        self.assertEqual((4, 1), (result.placed, result.rejected))

    def test_stale_capacity_fails_a_boot_and_falls_back(self):
        hosts = [host('a', '1', (8, 16)), host('b', '2', (4, 8))]
        requests = [request(i, 2, 4) for i in range(5)]
        fresh = broker.replay('t', hosts, requests, 'fixed',
                              'most-capacity', clusters=2)
        self.assertEqual((5, 0), (fresh.placed, fresh.failed_boots))
        # read once: cluster-1 takes 4, cluster-2 2; the picture stays
        # "cluster-1 has the most" and the fifth boot there fails
        stale = broker.replay('t', hosts, requests, 'fixed',
                              'most-capacity', clusters=2, refresh=10)
        self.assertEqual((5, 1), (stale.placed, stale.failed_boots))
        self.assertEqual({'cluster-1': 4, 'cluster-2': 1}, stale.by_cluster)

    def test_an_uneven_variant_takes_what_the_even_split_cannot(self):
        # 12 free CPUs on one node, 4 on the other: an evenly split
        # 16c32g needs 8 + 8; the rule's 12 + 4 fits.  Then the host is
        # full: the leftover count says so for both splits.
        hosts = [host('a', '1', (12, 24), (4, 8))]
        requests = [request(0, 16, 32, numa=2)]
        sizes = broker.dual_sizes(requests)
        self.assertEqual([(16, 32768)], sizes)
        fixed = broker.replay('t', hosts, requests, 'fixed',
                              'most-capacity', clusters=1,
                              leftover_sizes=sizes)
        self.assertEqual((0, 0), (fixed.placed, fixed.uneven))
        self.assertEqual([('16c32g', 0, 1)], fixed.leftover)
        # the rejected request, placed at the end in what is left
        self.assertEqual((1, 16), fixed.end_fill)
        uneven = broker.replay('t', hosts, requests, 'fixed+uneven',
                               'most-capacity', clusters=1,
                               leftover_sizes=sizes)
        self.assertEqual((1, 16, 1, 0), (uneven.placed, uneven.placed_vcpus,
                                         uneven.uneven, uneven.converted))
        self.assertEqual([('16c32g', 0, 0)], uneven.leftover)
        self.assertEqual((0, 0), uneven.end_fill)
        # a share of 40 % leaves 16 vCPUs only 9 + 7: no room for it
        strict = broker.replay('t', hosts, requests, 'fixed+uneven',
                               'most-capacity', clusters=1, uneven=40,
                               leftover_sizes=sizes)
        self.assertEqual((0, 0), (strict.placed, strict.uneven))
        self.assertEqual((0, 0), strict.end_fill)

    def test_an_uneven_guest_takes_what_smaller_ones_would_use(self):
        # The trade the trace shows: placed online, the uneven 16c32g
        # fills the host and the eight 2c4g after it are refused (1
        # request); without uneven variants the eight take the same
        # room (8 requests, the same vCPUs) and nothing is left for the
        # end fill.  With no small requests coming, the end fill places
        # the 16c32g in the room the run left.
        hosts = [host('a', '1', (12, 24), (4, 8))]
        requests = ([request(0, 16, 32, numa=2)] +
                    [request(i, 2, 4) for i in range(1, 9)])
        sizes = broker.dual_sizes(requests)
        fixed = broker.replay('t', hosts, requests, 'fixed',
                              'most-capacity', clusters=1,
                              leftover_sizes=sizes)
        uneven = broker.replay('t', hosts, requests, 'fixed+uneven',
                               'most-capacity', clusters=1,
                               leftover_sizes=sizes)
        self.assertEqual((8, 16, (0, 0)),
                         (fixed.placed, fixed.placed_vcpus, fixed.end_fill))
        self.assertEqual((1, 16, 1), (uneven.placed, uneven.placed_vcpus,
                                      uneven.uneven))
        alone = broker.replay('t', hosts, requests[:1], 'fixed',
                              'most-capacity', clusters=1,
                              leftover_sizes=sizes)
        self.assertEqual((0, (1, 16)), (alone.placed, alone.end_fill))

    def test_uneven_variants_only_on_dual_variants_that_split(self):
        conf = broker.broker_config_for(
            ['cluster-1'], [request(0, 2, 4), request(1, 8, 16),
                            request(2, 16, 32, numa=2)], 'conversion', 25)
        flavors = {name: [v.flavor for v in family.variants]
                   for name, family in conf.families.items()}
        # 2 vCPUs make no uneven split; 8: 5 + 3 and 6 + 2
        self.assertEqual({
            '2c4g-1n': ['2c4g-1n', '2c4g-2n'],
            '8c16g-1n': ['8c16g-1n', '8c16g-2n', '8c16g-2n.u5-3',
                         '8c16g-2n.u6-2'],
            '16c32g-2n': ['16c32g-2n', '16c32g-2n.u9-7', '16c32g-2n.u10-6',
                          '16c32g-2n.u11-5', '16c32g-2n.u12-4',
                          '16c32g-1n']}, flavors)


class TestCommand(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(self.tmp, 'hosts.csv'), 'w') as f:
            f.write('host_id,rack_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,'
                    'numa1_ram_gb\nh0,0,4,8,4,8\nh1,1,8,16,8,16\n')
        with open(os.path.join(self.tmp, 'requests_C1.csv'), 'w') as f:
            f.write('seq,flavor_vcpus,flavor_ram,numa,strategy,group,'
                    'domain\n0,6,8,1,,,\n1,8,16,2,,,\n')
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))

    def test_json_side_by_side(self):
        rc, out = self.run_main(
            cli.main, '--broker', '--hosts',
            os.path.join(self.tmp, 'hosts.csv'), '--broker-clusters', '2',
            '--broker-passes', '2', '--broker-refresh', '3', '--json')
        self.assertEqual(0, rc, self.stderr.getvalue())
        report = json.loads(out)
        self.assertEqual((2, 2, 3), (report['clusters'], report['passes'],
                                     report['refresh']))
        runs = {(r['mode'], r['chooser']): r for r in report['runs']}
        self.assertEqual(set((m, c) for m in broker.MODES
                             for c in broker.CHOOSERS), set(runs))
        self.assertEqual(4, runs['fixed', 'most-capacity']['requests'])

    def test_uneven_runs_and_leftovers_in_json(self):
        rc, out = self.run_main(
            cli.main, '--broker', '--hosts',
            os.path.join(self.tmp, 'hosts.csv'), '--broker-clusters', '2',
            '--broker-uneven', '--json')
        self.assertEqual(0, rc, self.stderr.getvalue())
        report = json.loads(out)
        self.assertEqual(25, report['uneven_min_share'])
        runs = {(r['mode'], r['chooser']): r for r in report['runs']}
        self.assertEqual(set((m + s, c) for m in broker.MODES
                             for s in ('', broker.UNEVEN_SUFFIX)
                             for c in broker.CHOOSERS), set(runs))
        self.assertEqual(['8c16g'], [left['size'] for left in runs[
            'fixed+uneven', 'best-fit']['leftover']])
        self.assertEqual(['placed', 'placed_vcpus'], sorted(runs[
            'fixed', 'best-fit']['end_fill']))

    def test_options(self):
        hosts = os.path.join(self.tmp, 'hosts.csv')
        for argv, words in (
                (['--broker', '--capacity'], '--broker and --capacity'),
                (['--broker-clusters', '2'], '--broker-clusters needs '
                 '--broker'),
                (['--broker-uneven'], '--broker-uneven needs --broker'),
                (['--broker', '--broker-uneven', '50'], 'must be at most 49'),
                (['--broker', '--broker-clusters', '3', '--hosts', hosts],
                 '--broker-clusters 3: the hosts have 2 racks')):
            self.stderr.truncate(0)
            self.stderr.seek(0)
            try:
                rc = cli.main(argv)
            except SystemExit as exc:
                rc = exc.code
            self.assertEqual(2, rc)
            self.assertIn(words, self.stderr.getvalue())
