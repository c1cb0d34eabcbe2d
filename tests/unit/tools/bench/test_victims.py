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

"""nova-sched-ext-bench victims, at tiny sizes."""

import io
import json
import logging
from unittest import mock

import fixtures

from nova_sched_ext_tools.bench import cli as bench_cmd
from nova_sched_ext_tools.bench import victims as bench
from tests import base


class TestVictimsBench(base.TestCase):

    def setUp(self):
        super().setUp()
        # The bench quiets the root logger; give it back afterwards.
        root = logging.getLogger()
        self.addCleanup(root.setLevel, root.level)

    def run_bench(self, *args):
        out = self.useFixture(fixtures.MockPatch('sys.stdout',
                                                 new=io.StringIO())).mock
        code = bench_cmd.main(list(args) + [
            'victims', '--clusters', '6', '--hosts', '30', '--per-host', '6',
            '--repeats', '2', '--seed', '3'])
        return code, out.getvalue()

    def test_json(self):
        code, out = self.run_bench('--json')
        result = json.loads(out)
        for key in ('ratio_mean', 'ratio_max', 'random_ratio_mean',
                    'decision_ms_median', 'hosts', 'per_host',
                    'targets_met'):
            self.assertIn(key, result)
        self.assertEqual(30, result['hosts'])
        self.assertEqual(6, result['per_host'])
        self.assertGreater(result['clusters'], 0)
        self.assertGreaterEqual(result['ratio_mean'], 1.0)
        self.assertLessEqual(result['ratio_mean'], result['ratio_max'])
        self.assertGreaterEqual(result['random_ratio_mean'],
                                result['ratio_mean'])
        self.assertGreater(result['decision_ms_median'], 0)
        self.assertEqual(30 * 6, result['victims_total'])
        self.assertEqual(len(bench.DECISION_SHAPES),
                         len(result['decisions']))
        self.assertEqual(result['decision_ms_median'],
                         result['decisions'][0]['ms_median'])
        self.assertEqual(
            max(d['ms_median'] for d in result['decisions']),
            result['decision_ms_worst_median'])
        self.assertGreaterEqual(result['decisions'][0]['victims'], 1)
        self.assertEqual(0 if result['targets_met'] else 1, code)

    def test_table(self):
        code, out = self.run_bench()
        self.assertIn('minimal', out)
        self.assertIn('Decision time, 30 hosts x 6', out)
        self.assertIn('pinned vCPU', out)

    def test_every_request_counts_for_the_time_target(self):
        # Only the slowest request misses: the first alone would pass.
        real = bench.decision_time

        def slowest_misses(*args):
            result = real(*args)
            result['decisions'][-1]['ms_median'] = 1e6
            return result

        with mock.patch.object(bench, 'decision_time', slowest_misses), \
                mock.patch.object(bench, 'DECISION_MS_TARGET', 1e5):
            code, out = self.run_bench('--json')
        result = json.loads(out)
        self.assertLess(result['decision_ms_median'], 1e5)
        self.assertFalse(result['targets_met'])
        self.assertEqual(1, code)

    def test_missed_target_is_an_exit_code(self):
        with mock.patch.object(bench, 'DECISION_MS_TARGET', 0.0):
            code, out = self.run_bench('--json')
        self.assertEqual(1, code)
        self.assertFalse(json.loads(out)['targets_met'])
