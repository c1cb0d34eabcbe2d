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

"""The executor against a fake Compute API over a replayed cloud.

The fake applies a live migration as Nova would account it (Nova's fit on
the target) to the saved state the executor reads the cloud from, so the
executor's re-checks see what each move did.
"""

import collections
import json
import os
import shutil
import tempfile
import types

from nova_sched_ext.defrag import executor
from nova_sched_ext.defrag import model
from nova_sched_ext.defrag import planner
from nova_sched_ext.defrag import state as planning_state
from nova_sched_ext_tools.sim import defrag
from nova_sched_ext_tools.sim import state as sim_state
from nova_sched_ext_tools.sim import trace
from tests.unit.defrag import test_planner


class FakeCompute(object):

    def __init__(self, saved, fail_on=()):
        self.saved = saved
        self.fail_on = set(fail_on)
        self.calls = []

    def _entry(self, uuid):
        return next(e for e in self.saved['instances'] if e['uuid'] == uuid)

    def live_migrate_server(self, uuid, host=None, block_migration=None):
        self.calls.append((uuid, host))
        if len(self.calls) in self.fail_on:
            raise RuntimeError('No valid host was found.\n(fake)')
        cloud = defrag.cloud_of(self.saved)
        state = planning_state.PlanningState(cloud, ())
        fits, fitted = state.nova_fit(uuid, host)
        assert fits
        entry = self._entry(uuid)
        entry['host'] = host
        entry['cells'] = [{'host_cell': c['host_cell'], 'vcpus': c['vcpus'],
                           'memory_mb': c['memory_mb']}
                          for c in planner.fitted_cells(fitted)]

    def get_server(self, uuid):
        return types.SimpleNamespace(status='ACTIVE', task_state=None,
                                     compute_host=self._entry(uuid)['host'])

    def migrations(self, **query):
        # a cloud whose API lists no migration record: the server decides
        return []


class Reader(object):
    """``read_cloud`` over a saved state, counting what it reads.

    The whole cloud, or with ``hosts`` only those hosts and the instances
    on them (built from that part of the state alone, as a reader that
    asks only for them would).
    """

    def __init__(self, saved):
        self.saved = saved
        self.whole = 0
        self.parts = []

    def __call__(self, hosts=None):
        if hosts is None:
            self.whole += 1
            return defrag.cloud_of(self.saved)
        self.parts.append(sorted(hosts))
        wanted = set(hosts)
        part = dict(self.saved,
                    hosts=[h for h in self.saved['hosts']
                           if h['name'] in wanted],
                    instances=[e for e in self.saved['instances']
                               if e['host'] in wanted])
        return model.part_of(defrag.cloud_of(part), wanted)


class TestExecutor(test_planner.PlannerTestCase):

    def setUp(self):
        super().setUp()
        self.saved = self.saved(*test_planner.fragmented())
        self.plan_, self.references = self.plan(self.saved)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, 'plan.json')
        with open(self.path, 'w') as f:
            json.dump(self.plan_.to_dict(), f)

    def executor(self, compute, reader=None, **kwargs):
        return executor.Executor(compute, reader or Reader(self.saved),
                                 sleep=lambda s: None, **kwargs)

    def slots(self):
        return planning_state.PlanningState(
            defrag.cloud_of(self.saved), self.references).total_slots()

    def test_apply_frees_the_slot_and_resumes(self):
        compute = FakeCompute(self.saved)
        moves = executor.load_plan(self.path)
        outcome = self.executor(compute).apply(moves)
        self.assertIsNone(outcome.stopped_at)
        self.assertEqual(2, outcome.moved)
        self.assertEqual({test_planner.LARGE.name: 1}, self.slots())
        again = self.executor(compute).apply(moves)
        self.assertEqual([executor.ALREADY] * 2,
                         [s.status for s in again.steps])
        self.assertEqual(2, len(compute.calls))

    def test_dry_run_moves_nothing(self):
        compute = FakeCompute(self.saved)
        outcome = self.executor(compute).apply(
            executor.load_plan(self.path), dry_run=True)
        self.assertEqual([executor.WOULD] * 2,
                         [s.status for s in outcome.steps])
        self.assertEqual([], compute.calls)

    def test_target_filled_meanwhile_is_skipped(self):
        moves = executor.load_plan(self.path)
        target = moves[0]['target']
        # a new 8c16g instance fills the target's free cell meanwhile
        for entry in self.saved['instances']:
            if entry['host'] == target:
                entry['flavor']['vcpus'] = 8
                entry['flavor']['memory_mb'] = 16384
                entry['cells'][0]['vcpus'] = 8
                entry['cells'][0]['memory_mb'] = 16384
        compute = FakeCompute(self.saved)
        outcome = self.executor(compute).apply(moves)
        self.assertEqual(executor.SKIPPED, outcome.steps[0].status)
        self.assertIn('placement has no room', outcome.steps[0].reason)
        self.assertEqual([], compute.calls)

    def test_failure_stops_with_earlier_moves_in_place(self):
        compute = FakeCompute(self.saved, fail_on=[2])
        moves = executor.load_plan(self.path)
        outcome = self.executor(compute).apply(moves)
        self.assertEqual(2, outcome.stopped_at)
        self.assertEqual([executor.DONE, executor.FAILED],
                         [s.status for s in outcome.steps])
        self.assertEqual('the Compute API refused the live migration: No '
                         'valid host was found. (fake)',
                         outcome.steps[1].reason)
        first = compute._entry(moves[0]['instance'])
        self.assertEqual(moves[0]['target'], first['host'])

    def test_dry_run_plays_the_moves_in_order(self):
        # The plan three times over: a real run makes its two moves once,
        # and finds them made the second and third time; so must a dry run.
        moves = executor.load_plan(self.path) * 3
        compute = FakeCompute(self.saved)
        dry = self.executor(compute).apply(moves, dry_run=True)
        self.assertEqual([executor.WOULD] * 2 + [executor.ALREADY] * 4,
                         [s.status for s in dry.steps])
        self.assertEqual([], compute.calls)
        real = self.executor(compute).apply(moves)
        self.assertEqual([executor.DONE if s.status == executor.WOULD
                          else s.status for s in dry.steps],
                         [s.status for s in real.steps])
        self.assertEqual(2, len(compute.calls))

    def test_dry_run_checks_a_move_on_what_the_earlier_ones_leave(self):
        # There and back: the way back holds once the way there is made
        # (checked against the cloud of today, its instance is not on
        # its source).
        there = executor.load_plan(self.path)[0]
        back = dict(there, source=there['target'], target=there['source'])
        outcome = self.executor(FakeCompute(self.saved)).apply(
            [there, back], dry_run=True)
        self.assertEqual([executor.WOULD, executor.WOULD],
                         [s.status for s in outcome.steps])

    def test_reads_the_cloud_once_then_the_hosts_of_each_move(self):
        # 200 moves of one instance back and forth between two hosts
        moves = executor.load_plan(self.path)
        there = moves[0]
        back = dict(there, source=there['target'], target=there['source'])
        moves = [there, back] * 100
        reader = Reader(self.saved)
        compute = FakeCompute(self.saved)
        outcome = self.executor(compute, reader).apply(moves)
        self.assertEqual([executor.DONE] * 200,
                         [s.status for s in outcome.steps])
        self.assertEqual(1, reader.whole)
        self.assertEqual([sorted((there['source'], there['target']))] * 199,
                         reader.parts)
        # a dry run reads once, and nothing more
        reader = Reader(self.saved)
        self.executor(compute, reader).apply(moves, dry_run=True)
        self.assertEqual((1, []), (reader.whole, reader.parts))

    def test_target_filled_during_the_run_is_skipped(self):
        # Another boot fills the target after the first move: the second
        # move is checked on the target read again, and skipped.
        moves = executor.load_plan(self.path)
        target = moves[1]['target']
        saved = self.saved

        class Compute(FakeCompute):
            def live_migrate_server(self, uuid, host=None,
                                    block_migration=None):
                super().live_migrate_server(uuid, host, block_migration)
                used = collections.Counter()
                for entry in saved['instances']:
                    if entry['host'] == target:
                        for cell in entry['cells']:
                            used[cell['host_cell']] += cell['vcpus']
                free_cell = min((0, 1), key=lambda cell: used[cell])
                saved['instances'].append({
                    'uuid': 'other-boot', 'host': target,
                    'flavor': sim_state.flavor_dict(
                        trace.Flavor(4, 8 * test_planner.GB, 1)),
                    'cells': [{'host_cell': free_cell, 'vcpus': 4,
                               'memory_mb': 8 * test_planner.GB}]})
        compute = Compute(saved)
        outcome = self.executor(compute).apply(moves)
        self.assertEqual([executor.DONE, executor.SKIPPED],
                         [s.status for s in outcome.steps])
        self.assertIn('placement has no room', outcome.steps[1].reason)
        self.assertEqual(1, len(compute.calls))

    def test_never_move_is_checked_again(self):
        moves = executor.load_plan(self.path)
        keep = model.NeverMove(instances=frozenset([moves[1]['instance']]))
        compute = FakeCompute(self.saved)
        outcome = self.executor(compute, never_move=keep).apply(moves)
        self.assertEqual([executor.DONE, executor.SKIPPED],
                         [s.status for s in outcome.steps])
        self.assertEqual('it is on the never-move list',
                         outcome.steps[1].reason)

    def test_bad_plan_files(self):
        bad = os.path.join(self.dir, 'bad.json')
        with open(bad, 'w') as f:
            f.write('{not json')
        self.assertRaisesRegex(executor.PlanFileError,
                               '^plan file .* is not JSON', executor.load_plan,
                               bad)
        self.assertRaisesRegex(executor.PlanFileError, '^cannot read plan',
                               executor.load_plan, bad + '.missing')
        plan = self.plan_.to_dict()
        plan['moves'][1]['instance'] = 'no-such-instance'
        compute = FakeCompute(self.saved)
        self.assertRaisesRegex(
            executor.PlanFileError,
            '^move 2: no instance no-such-instance in the cloud$',
            self.executor(compute).apply, plan['moves'])
        plan['moves'][1] = dict(self.plan_.to_dict()['moves'][1],
                                target='nowhere')
        self.assertRaisesRegex(
            executor.PlanFileError, r'^move 2: no host nowhere \(its target\)',
            self.executor(compute).apply, plan['moves'])
        self.assertEqual([], compute.calls)


class TestParallel(test_planner.PlannerTestCase):
    """Batches of moves that share no host and no server group."""

    def setUp(self):
        super().setUp()
        instances = {
            name: model.Instance(uuid=name, host=host, flavor_name='f',
                                 vcpus=1, memory_mb=512, resources={},
                                 group=group)
            for name, host, group in (('a', 'h1', None), ('b', 'h3', None),
                                      ('c', 'h5', 'g'), ('d', 'h7', 'g'),
                                      ('e', 'h2', None))}
        self.cloud = model.Cloud(hosts={}, instances=instances)
        self.moves = [{'instance': name, 'source': source, 'target': target}
                      for name, source, target in (
                          ('a', 'h1', 'h2'), ('b', 'h3', 'h4'),
                          ('c', 'h5', 'h6'), ('d', 'h7', 'h8'),
                          ('e', 'h2', 'h9'))]

    def test_batches(self):
        self.assertEqual([1, 2, 3], [n for n, _m in executor._batch(
            self.moves, 0, 8, self.cloud)])
        # d is in c's group: a batch of its own, then with e
        self.assertEqual([4, 5], [n for n, _m in executor._batch(
            self.moves, 3, 8, self.cloud)])
        # e leaves the host a lands on
        self.assertEqual([1], [n for n, _m in executor._batch(
            [self.moves[0], self.moves[4]], 0, 8, self.cloud)])
        self.assertEqual([1, 2], [n for n, _m in executor._batch(
            self.moves, 0, 2, self.cloud)])

    def test_a_batch_migrates_at_once_and_stops_after_a_failure(self):
        events = []
        where = {name: i.host for name, i in self.cloud.instances.items()}

        class Compute(object):
            def live_migrate_server(self, uuid, host=None,
                                    block_migration=None):
                events.append(('start', uuid))
                if uuid == 'b':
                    raise RuntimeError('refused')
                where[uuid] = host

            def get_server(self, uuid):
                events.append(('poll', uuid))
                return types.SimpleNamespace(status='ACTIVE', task_state=None,
                                             compute_host=where[uuid])

            def migrations(self, **query):
                return []
        runner = executor.Executor(Compute(), lambda hosts=None: self.cloud,
                                   sleep=lambda s: None)
        runner.check_names = lambda moves, cloud: None
        runner.why_not_now = lambda move, state: None
        outcome = runner.apply(self.moves, parallel=3)
        self.assertEqual([('start', 'a'), ('start', 'b'), ('start', 'c'),
                          ('poll', 'a'), ('poll', 'c')], events)
        self.assertEqual(2, outcome.stopped_at)
        self.assertEqual([executor.DONE, executor.FAILED, executor.DONE],
                         [s.status for s in outcome.steps])
        self.assertRaises(model.PlanError, runner.apply, self.moves,
                          parallel=0)


class TestMigrationRecord(test_planner.PlannerTestCase):
    """A move is done once Nova's migration record is completed."""

    def run_move(self, statuses):
        """Apply one move while the record goes through ``statuses``."""
        cloud = model.Cloud(hosts={}, instances={'a': model.Instance(
            uuid='a', host='h1', flavor_name='f', vcpus=1, memory_mb=512,
            resources={})})
        seen = list(statuses)
        queries = []

        class Compute(object):
            def live_migrate_server(self, uuid, host=None,
                                    block_migration=None):
                pass

            def get_server(self, uuid):
                return types.SimpleNamespace(status='ACTIVE', task_state=None,
                                             compute_host='h2')

            def migrations(self, **query):
                queries.append(query)
                status = seen.pop(0) if len(seen) > 1 else seen[0]
                return [types.SimpleNamespace(id=1, status='completed',
                                              dest_compute='h9',
                                              server_id='a'),
                        types.SimpleNamespace(id=2, status=status,
                                              dest_compute='h2',
                                              server_id='a')]
        runner = executor.Executor(Compute(), lambda hosts=None: cloud,
                                   sleep=lambda s: None)
        runner.check_names = lambda moves, cloud: None
        runner.why_not_now = lambda move, state: None
        outcome = runner.apply([{'instance': 'a', 'source': 'h1',
                                 'target': 'h2'}])
        return outcome.steps[0], queries

    def test_waits_for_the_source_to_finish(self):
        step, queries = self.run_move(['running', 'post-migrating',
                                       'completed'])
        self.assertEqual(executor.DONE, step.status)
        self.assertEqual(3, len(queries))
        self.assertEqual({'server_id': 'a',
                          'migration_type': 'live-migration'}, queries[0])

    def test_a_record_that_ended_badly_fails_the_move(self):
        step, _queries = self.run_move(['error'])
        self.assertEqual(executor.FAILED, step.status)
        self.assertEqual('the server is on h2, but its migration ended error',
                         step.reason)
