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

"""``nova-sched-ext-bench placement-read`` runs and reports its shape."""

import json

from nova_sched_ext_tools.bench import cli as bench
from nova_sched_ext_tools.bench import placement_read
from tests import base


class TestPlacementReadBench(base.TestCase):

    def test_tiny_run_json(self):
        rc, out = self.run_main(bench.main, 'placement-read', '--hosts',
                                '8,4', '--repeats', '2', '--json')
        self.assertEqual(0, rc)
        sizes = json.loads(out)['sizes']
        self.assertEqual([8, 4], [s['hosts'] for s in sizes])
        for size in sizes:
            self.assertEqual(sorted(placement_read.PHASES),
                             sorted(size['ms']))
            self.assertTrue(all(ms > 0 for ms in size['ms'].values()),
                            size['ms'])
            # one in four computes is disabled; the others have room
            self.assertEqual(size['hosts'] * 3 // 4, size['candidates'])
            # the listing, the sharing providers' listing, then three
            # reads per provider
            self.assertEqual(2 + 3 * size['hosts'], size['reader_calls'])
            # the kept state's first poll reads every provider; from the
            # file, the one claimed on behind its back (one in 100)
            self.assertEqual(1 + 4 * size['hosts'], size['first_poll_calls'])
            self.assertEqual(1 + 4, size['first_poll_from_snapshot_calls'])
            self.assertGreater(size['snapshot_bytes'], 100 * size['hosts'])

    def test_bad_arguments_are_one_line(self):
        for argv, words in ((['--hosts', 'ten'], '--hosts must be'),
                            (['--repeats', '0'], '--repeats must be')):
            error = self.assertRaises(SystemExit, self.run_main, bench.main,
                                      'placement-read', *argv)
            self.assertIn(words, str(error))
            self.assertTrue(str(error).startswith(
                'nova-sched-ext-bench placement-read: '), str(error))
