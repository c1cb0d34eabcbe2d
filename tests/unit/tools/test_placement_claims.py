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

"""``nova-sched-ext-bench placement-claims``: its errors and its table.

The run itself needs MariaDB: tests/functional/test_placement_claims.py.
"""

from nova_sched_ext_tools.bench import cli as bench
from nova_sched_ext_tools.bench import placement_claims
from tests import base


class PlacementClaimsBenchTest(base.TestCase):

    def test_bad_values_are_one_line(self):
        for option, value, words in (
                ('--conflict-retries', '1,x',
                 '--conflict-retries must be positive whole numbers'),
                ('--conflict-retries', '0',
                 '--conflict-retries must be positive whole numbers'),
                ('--rounds', '0', '--rounds must be at least 1'),
                ('--room', '-1', '--room must be at least 1')):
            error = self.assertRaises(SystemExit, self.run_main, bench.main,
                                      'placement-claims', option, value)
            self.assertIn('nova-sched-ext-bench placement-claims: ' + words,
                          str(error))
            self.assertNotIn('\n', str(error))

    def test_the_table(self):
        text = placement_claims.render({
            'database': 'MariaDB/MySQL 10.11', 'claims_per_round': 12,
            'clients': 6, 'room_per_round': 3,
            'rows': [{'allocation_conflict_retry_count': 1, 'rounds': 4,
                      'over_committed_rounds': 0, 'admitted': 12,
                      'highest_usage_pct': 100.0},
                     {'allocation_conflict_retry_count': 10, 'rounds': 4,
                      'over_committed_rounds': 4, 'admitted': 22,
                      'highest_usage_pct': 200.0}]})
        lines = text.splitlines()
        self.assertEqual('Claims that race on one provider (MariaDB/MySQL '
                         '10.11): 12 claims a round from 6 threads, room '
                         'for 3', lines[0])
        self.assertEqual(['1', '4', '0', '12', '100%'], lines[2].split())
        self.assertEqual(['10', '4', '4', '22', '200%'], lines[3].split())
