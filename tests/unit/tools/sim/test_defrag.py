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

"""``nova-sched-ext-sim --defrag``, ``--save-state`` and ``--state``."""

import json
import os
import shutil
import tempfile

from nova_sched_ext_tools.sim import cli
from nova_sched_ext_tools.sim import state as sim_state
from nova_sched_ext_tools.sim import watcher_baseline
from tests.unit.tools.sim import base

HOSTS = ('host_id,rack_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,numa1_ram_gb\n'
         'host-0,0,8,16,8,16\n'
         'host-1,1,8,16,8,16\n'
         'host-2,2,8,16,8,16\n')
# Nova's weighers spread the small ones: no host is left for 16c32g
REQUESTS = ('seq,flavor_vcpus,flavor_ram,numa,strategy,group,domain\n'
            '0,4,8,1,,,\n'
            '1,4,8,1,,,\n'
            '2,4,8,1,,,\n'
            '3,4,8,1,anti-affinity,0,\n'
            '4,4,8,1,anti-affinity,0,\n'
            '5,16,32,2,,,\n')


class TestDefragCommand(base.SimTestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.hosts = self.write('hosts.csv', HOSTS)
        self.requests = self.write('requests_T.csv', REQUESTS)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def run_cli(self, *argv):
        import io
        out, err = io.StringIO(), io.StringIO()
        args = cli.parse_args(['--hosts', self.hosts, '--requests',
                               self.requests, '--policy', 'nova-default',
                               '--fast'] + list(argv))
        result = cli.run(args, stdout=out, stderr=err)
        return out.getvalue(), err.getvalue(), result

    def test_save_then_plan_on_the_state(self):
        path = os.path.join(self.dir, 'state.json')
        self.run_cli('--limit', '5', '--save-state', path)
        saved = sim_state.load(path)
        self.assertEqual(5, len(saved['instances']))
        self.assertEqual(['16c32g-2n', '4c8g-1n'],
                         [sim_state.flavor_of(f).name
                          for f in saved['slot_flavors']][:2])
        out, _err, report = self.run_cli('--defrag', '--state', path,
                                         '--budget', '20,100', '--json',
                                         '--no-watcher')
        figures = json.loads(out)
        rows = {(r['method'], r['budget_pct']): r for r in figures['rows']}
        self.assertEqual('yes', rows[('drain', 100.0)]['valid'])
        self.assertEqual('yes', rows[('greedy', 20.0)]['valid'])
        # one move is allowed at 20 % (of 5): not enough to free a host
        self.assertLessEqual(rows[('drain', 20.0)]['moves'], 1)
        self.assertGreater(rows[('drain', 100.0)]['slots_recovered']
                           ['16c32g-2n'], 0)
        self.assertGreaterEqual(
            rows[('repack (bound)', None)]['recovered_total'],
            rows[('drain', 100.0)]['recovered_total'])
        self.assertIn('repack (bound)', report.table())
        for budget in (20.0, 100.0):
            bound = rows[('move bound', budget)]
            self.assertEqual(int(5 * budget / 100), bound['moves'])
            self.assertGreaterEqual(bound['recovered_total'],
                                    rows[('drain', budget)]
                                    ['recovered_total'])
        self.assertIn('at most, any plan', report.table())

    def test_bad_state_file(self):
        path = self.write('bad.json', '{"format": "other"}')
        self.assertRaisesRegex(
            cli.UsageError, 'is not a state saved by nova-sched-ext-sim',
            self.run_cli, '--defrag', '--state', path)

    def test_budget_must_be_percentages(self):
        self.assertRaises(SystemExit, cli.parse_args,
                          ['--defrag', '--budget', '1,x'])
        self.assertRaises(SystemExit, cli.parse_args,
                          ['--defrag', '--budget', '-1'])
        self.assertRaises(SystemExit, cli.parse_args,
                          ['--state', 'x.json'])


class TestWatcherBaseline(base.SimTestCase):
    """Watcher's own strategy, run as the figures run it."""

    def test_runs_or_says_why(self):
        from nova_sched_ext_tools.sim import defrag
        from tests.unit.defrag import test_planner
        hosts, requests = test_planner.fragmented()
        _result, _placements, simulator = self.replay(hosts, requests)
        saved = sim_state.from_simulator(simulator, hosts, 'test')
        cloud = defrag.cloud_of(saved)
        try:
            moves = watcher_baseline.run_strategy(cloud)
        except watcher_baseline.WatcherUnavailable as exc:
            self.skipTest('python-watcher cannot run here: %s' % exc)
        # Watcher consolidates the four small instances onto one host
        self.assertTrue(moves)
        for uuid, source, destination in moves:
            self.assertIn(uuid, cloud.instances)
            self.assertNotEqual(source, destination)
        after, applied, refused = watcher_baseline.apply_moves(
            defrag.cloud_of(saved), defrag.reference_flavors(
                [test_planner.LARGE]), moves)
        self.assertEqual(len(moves), applied + refused)
