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

"""The Watcher strategy, end to end, on a replayed cloud.

This side has Nova: it replays a small cloud with the simulator, saves its
end state (the ``--state FILE`` of ``nova-sched-ext-defrag plan``), plans
on it in this process with the planner's own API, and describes Watcher's
model of the same cloud (the nodes and instances,
:func:`nova_sched_ext_tools.sim.watcher_baseline.cloud_description`).
Watcher's side (:mod:`watcher_cases`, on Watcher's strategy test base)
runs in a fresh interpreter, as Watcher and Nova cannot share one: the
strategy there runs the real ``nova-sched-ext-defrag`` on the state file,
and its ``migrate`` actions must be the moves planned here, in order.

Skipped where python-watcher (and WebTest, which Watcher's test base
needs) is not installed: ``tox -e watcher`` installs both.
"""

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from nova_sched_ext.defrag import model
from nova_sched_ext.defrag import planner
from nova_sched_ext_tools.sim import defrag
from nova_sched_ext_tools.sim import state as sim_state
from nova_sched_ext_tools.sim import watcher_baseline
from tests.unit.defrag import test_planner
from tests.unit.tools.sim import base

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, 'watcher_cases.py')
SCENARIO_ENV = 'NOVA_SCHED_EXT_WATCHER_SCENARIO'
#: The planner command of this environment (a console script beside its
#: Python, as in a virtualenv or tox env).
PLANNER_COMMAND = os.path.join(os.path.dirname(sys.executable),
                               'nova-sched-ext-defrag')
LARGE = test_planner.LARGE
GB = base.GB


def why_skipped():
    if importlib.util.find_spec('watcher') is None:
        return ('python-watcher is not installed (the [watcher] extra); '
                'tox -e watcher runs these tests')
    if importlib.util.find_spec('webtest') is None:
        return ("Watcher's test base needs WebTest; tox -e watcher "
                'installs it')
    return None


def case_count(class_names):
    """How many tests the classes of :mod:`watcher_cases` hold."""
    with open(CASES) as f:
        tree = ast.parse(f.read())
    return sum(1 for node in tree.body
               if isinstance(node, ast.ClassDef) and node.name in class_names
               for item in node.body
               if isinstance(item, ast.FunctionDef) and
               item.name.startswith('test_'))


class WatcherTestCase(test_planner.PlannerTestCase):

    def setUp(self):
        super().setUp()
        reason = why_skipped()
        if reason:
            self.skipTest(reason)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def run_cases(self, class_names, scenario=None):
        """Run classes of :mod:`watcher_cases` in a fresh interpreter."""
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(
            [HERE] + [p for p in [env.get('PYTHONPATH')] if p])
        if scenario is not None:
            path = os.path.join(self.dir, 'scenario.json')
            with open(path, 'w') as f:
                json.dump(scenario, f)
            env[SCENARIO_ENV] = path
        done = subprocess.run(
            [sys.executable, '-m', 'testtools.run'] +
            ['watcher_cases.%s' % name for name in class_names],
            cwd=self.dir, env=env, capture_output=True, text=True,
            timeout=600)
        output = done.stdout + done.stderr
        self.assertEqual(0, done.returncode, output)
        ran = re.search(r'^Ran (\d+) tests? ', output, re.M)
        self.assertIsNotNone(ran, output)
        self.assertEqual(case_count(class_names), int(ran.group(1)), output)


class TestWatcherCases(WatcherTestCase):

    def test_watchers_side(self):
        # The arguments, the errors, the sequential planner, the plugins
        # loaded by Watcher's loaders with watcher.conf's options: no Nova
        # needed, so one interpreter (Watcher takes seconds to import).
        self.run_cases(['TestArguments', 'TestErrors',
                        'TestSequentialPlanner', 'TestLoadedByWatcher',
                        'TestApplier'])


def spread(hosts):
    """``hosts`` hosts of two 8-vCPU/16 GB cells, two 4c8g on each.

    Nova's weighers spread them, so the 16c32g two-cell flavor fits
    nowhere; draining a host takes two moves.
    """
    return ([base.host('h%d' % n, str(n), (8, 16), (8, 16))
             for n in range(hosts)],
            [base.request(i, 4, 8) for i in range(2 * hosts)])


class TestStrategyEndToEnd(WatcherTestCase):

    def scenario(self, saved, parameters=None, excluded=(), **plan_kwargs):
        """The scenario of ``watcher_cases.TestPlannedMoves``.

        The moves and indicators expected are those of the planner run
        here on the same state with ``plan_kwargs``.
        """
        saved['slot_flavors'] = [sim_state.flavor_dict(LARGE)]
        state_file = os.path.join(self.dir, 'state.json')
        sim_state.save(state_file, saved)
        cloud = defrag.cloud_of(saved)
        expected = planner.Planner(cloud, defrag.reference_flavors([LARGE]),
                                   **plan_kwargs).plan()
        self.assertEqual([], defrag.check_plan(
            saved, defrag.reference_flavors([LARGE]), expected))
        scenario = {
            'cloud': watcher_baseline.cloud_description(cloud),
            'state_file': state_file,
            'planner_command': [PLANNER_COMMAND],
            'parameters': parameters or {},
            'excluded': sorted(excluded),
            'moves': [[m.instance, m.source, m.target]
                      for m in expected.moves],
            'indicators': {
                'instance_migrations_count': len(expected.moves),
                'large_flavor_slots_before': sum(
                    expected.slots_before.values()),
                'large_flavor_slots_recovered': sum(
                    expected.slots_recovered.values()),
                'memory_moved_gb': expected.memory_moved_mb / 1024.0,
            },
        }
        return scenario, expected

    def test_moves_become_migrate_actions_in_order(self):
        saved = self.saved(*spread(4))
        scenario, expected = self.scenario(saved)
        # Two hosts drained, two moves each: an order to keep.
        self.assertEqual(4, len(expected.moves))
        self.assertEqual({LARGE.name: 2}, expected.slots_recovered)
        self.run_cases(['TestPlannedMoves'], scenario)

    def applied_scenario(self):
        """Four moves in order, for :class:`watcher_cases.TestAppliedPlan`.

        The audit gets the schema's defaults there (a budget of 5 % of the
        instances: none of eight), so it names a share.
        """
        saved = self.saved(*spread(4))
        scenario, expected = self.scenario(
            saved, {'budget_share': 100}, budget=model.Budget(max_share=1.0))
        self.assertEqual(4, len(expected.moves))
        return scenario

    def test_watchers_applier_runs_the_plan(self):
        # The action plan of that audit, run by Watcher's applier: each
        # move live-migrated to its target, one after another in order.
        self.run_cases(['TestAppliedPlan'], self.applied_scenario())

    def test_a_refused_move_stops_watchers_applier(self):
        # Nova refuses the third move: the two before it are made, the
        # fourth is not started and the action plan fails.
        scenario = self.applied_scenario()
        scenario['refused'] = 2
        self.run_cases(['TestAppliedPlan'], scenario)

    def test_budget_reaches_the_planner(self):
        saved = self.saved(*spread(4))
        scenario, expected = self.scenario(
            saved, {'budget_moves': 2}, budget=model.Budget(max_moves=2))
        self.assertEqual(2, len(expected.moves))
        self.run_cases(['TestPlannedMoves'], scenario)
        # A share of the instances: 25 % of 8 is two moves as well.
        scenario, expected = self.scenario(
            saved, {'budget_share': 25}, budget=model.Budget(max_share=0.25))
        self.assertEqual(2, len(expected.moves))
        self.run_cases(['TestPlannedMoves'], scenario)

    def test_excluded_instances_stay(self):
        saved = self.saved(*test_planner.fragmented())
        unbounded, _refs = self.plan(saved)
        drained = {m.source for m in unbounded.moves}
        self.assertEqual(1, len(drained))
        # What Watcher's audit scope excludes the planner must not move:
        # the other host is drained instead.
        keep = frozenset(e['uuid'] for e in saved['instances']
                         if e['host'] in drained)
        scenario, expected = self.scenario(
            saved, excluded=keep,
            never_move=model.NeverMove(instances=keep))
        self.assertEqual(2, len(expected.moves))
        self.assertFalse({m.source for m in expected.moves} & drained)
        self.run_cases(['TestPlannedMoves'], scenario)

    def test_the_planners_error_fails_the_audit(self):
        saved = self.saved(*test_planner.fragmented())
        scenario, _expected = self.scenario(saved)
        scenario['state_file'] = os.path.join(self.dir, 'missing.json')
        # The planner's own line, as the audit's failure.
        scenario['error'] = [
            'the planner %s failed: nova-sched-ext-defrag: error: cannot '
            'read state file %s: No such file or directory'
            % (PLANNER_COMMAND, scenario['state_file'])]
        self.run_cases(['TestPlannedMoves'], scenario)
