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

"""Claims that race on one provider never exceed its capacity.

The guarantee the kept candidates rest on (placement refuses a claim that
no longer fits, so a stale picture costs a refused claim, never an
over-commit) holds only with placement's ``[placement]
allocation_conflict_retry_count = 1``, which the devstack plugin writes
(tests/unit/test_devstack_plugin.py): placement's own default retries a
generation conflict inside the claim's transaction and admits claims past
the capacity.  This runs ``nova-sched-ext-bench placement-claims``
(placement on MariaDB, claims from six threads at once through Nova's
report client) with the plugin's value; with placement's default the same
run over-commits (the bench's documented figures).
"""

import json
import os
import subprocess
import sys

from testtools import content

from nova_sched_ext_tools.bench import scale
from tests import base

ROUNDS = 3
ROOM = 3


class PlacementClaimsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        problem = _mariadb_problem()
        if problem:
            self.skipTest('needs the MariaDB/MySQL server at %s: %s'
                          % (scale.DEFAULT_DB_URL, problem))

    def test_racing_claims_stay_within_capacity(self):
        done = subprocess.run(
            [sys.executable, '-m', 'nova_sched_ext_tools.bench.cli',
             'placement-claims', '--json', '--conflict-retries', '1',
             '--rounds', str(ROUNDS), '--room', str(ROOM)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, PYTHONHASHSEED='0'), timeout=600,
            check=False)
        self.addDetail('stderr', content.text_content(
            done.stderr.decode('utf-8', 'replace')))
        self.assertEqual(0, done.returncode)
        (row,) = json.loads(done.stdout)['rows']
        self.assertEqual(1, row['allocation_conflict_retry_count'])
        self.assertEqual(ROUNDS, row['rounds'])
        self.assertEqual(0, row['over_committed_rounds'])
        self.assertLessEqual(row['highest_usage_pct'], 100.0)
        # every round admitted some of its twelve claims, and no more than
        # there was room for
        self.assertGreaterEqual(row['admitted'], ROUNDS)
        self.assertLessEqual(row['admitted'], ROUNDS * ROOM)


def _mariadb_problem():
    try:
        import pymysql  # noqa: F401
        import sqlalchemy as sa
    except ImportError as exc:
        return str(exc)
    try:
        engine = sa.create_engine(scale.DEFAULT_DB_URL)
        try:
            with engine.connect() as conn:
                conn.execute(sa.text('SELECT 1'))
        finally:
            engine.dispose()
    except Exception as exc:
        return str(exc).splitlines()[0]
    return None
