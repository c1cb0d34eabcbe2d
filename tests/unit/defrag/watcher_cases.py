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

"""Watcher's side of :mod:`.test_watcher_strategy`, in a process without Nova.

Watcher and Nova cannot be imported in one process (both register ``host``
on oslo.config's global ``CONF``), and stestr imports every test module
of a run into each worker; so these cases sit in a module discovery skips
(its name does not start with ``test``) and :mod:`.test_watcher_strategy`
runs them with ``python -m testtools.run watcher_cases`` in a fresh
interpreter, this directory on its path: imported as
``tests.unit.defrag.watcher_cases`` it would import Nova first, through
``tests/__init__.py``.

They are built on Watcher's own strategy test base
(``watcher.tests.unit...strategies.test_base.TestBaseStrategy``: the
compute model given to the strategy, the audit scope mocked) and, for the
planner, on Watcher's database test base (``DbTestCase``, sqlite).

:class:`TestPlannedMoves` reads its scenario from the file named by
:data:`SCENARIO_ENV`, which the Nova side writes: Watcher's model of a
replayed cloud (the nodes and instances of its saved state), the state
file the real ``nova-sched-ext-defrag`` plans on, the audit's parameters
and the moves the planner itself gave for them.  The other cases need no
Nova: their planner is a small script that prints what a planner might.
"""

import json
import os
import shutil
import sys
import tempfile
from unittest import mock
import uuid as uuidlib

# Watcher's unit test package selects oslo.service's threading backend when
# it is imported; any other Watcher module imported before it selects
# eventlet, and the test package then refuses to load.
import watcher.tests.unit  # noqa: F401

from oslo_config import cfg  # noqa: H306
from watcher.applier.action_plan import default as action_plan_handler
from watcher.common import exception
from watcher.common import nova_helper
from watcher.common import utils
from watcher.decision_engine.loading import default as loading
from watcher.decision_engine.planner import weight
from watcher.decision_engine.scope import compute as compute_scope
from watcher.decision_engine.solution import default as default_solution
from watcher.decision_engine.strategy.strategies import base as base_strategy
from watcher import objects
from watcher.tests.unit.db import base as db_base
from watcher.tests.unit.db import utils as db_utils
from watcher.tests.unit.decision_engine.strategy.strategies import test_base

from nova_sched_ext.defrag import model as defrag_model
from nova_sched_ext.defrag import watcher_conf
from nova_sched_ext.defrag import watcher_engine
from nova_sched_ext.defrag import watcher_goal
from nova_sched_ext.defrag import watcher_planner
from nova_sched_ext.defrag import watcher_strategy
from nova_sched_ext_tools.sim import watcher_run

SCENARIO_ENV = 'NOVA_SCHED_EXT_WATCHER_SCENARIO'

NODES = ('node-a', 'node-b', 'node-c')
INSTANCES = tuple('00000000-0000-4000-8000-00000000000%d' % i
                  for i in range(4))
A, B, C, D = INSTANCES


def small_cloud():
    """Three nodes; A and B on node-a, C on node-b, D on node-c."""
    return {
        'hosts': [{'name': name, 'uuid': 'uuid-%s' % name, 'vcpus': 16,
                   'memory_mb': 32768, 'vcpu_ratio': 1.0,
                   'memory_ratio': 1.0} for name in NODES],
        'instances': [{'uuid': uuid, 'host': host, 'vcpus': 4,
                       'memory_mb': 8192}
                      for uuid, host in ((A, 'node-a'), (B, 'node-a'),
                                         (C, 'node-b'), (D, 'node-c'))],
    }


def plan_document(moves, slots_before=None, slots_recovered=None):
    return {
        'format': defrag_model.PLAN_FORMAT,
        'moves': [{'instance': uuid, 'source': source, 'target': target,
                   'memory_mb': 8192} for uuid, source, target in moves],
        'memory_moved_mb': 8192 * len(moves),
        'slots_before': slots_before or {'16c32g-2n': 0},
        'slots_after': {},
        'slots_recovered': slots_recovered or {'16c32g-2n': 0},
    }


def excluding(instances=(), nodes=()):
    """An audit scope excluding ``instances`` and compute ``nodes``."""
    rules = []
    if instances:
        rules.append({'instances': [{'uuid': uuid} for uuid in instances]})
    if nodes:
        rules.append({'compute_nodes': [{'name': name} for name in nodes]})
    return [{'compute': [{'exclude': rules}]}] if rules else None


def migrate(uuid, source, target):
    """A ``migrate`` action as the strategy should add it."""
    return {'action_type': 'migrate',
            'input_parameters': {'migration_type': 'live',
                                 'source_node': source,
                                 'destination_node': target,
                                 'resource_name': uuid,
                                 'resource_id': uuid}}


def scoped_model(cloud, scope=None):
    """Watcher's model of ``cloud``, cut to the audit ``scope``.

    The scope is applied by Watcher's own handler, as the decision engine
    does before the strategy runs.
    """
    model = watcher_run.watcher_model(cloud)
    if scope:
        # The handler asks Nova only for zones and aggregates; the
        # exclusions used here need no Nova API.
        with mock.patch.object(nova_helper, 'NovaHelper'):
            handler = compute_scope.ComputeScope(
                scope, mock.Mock(check_optimize_metadata=False))
        model = handler.get_scoped_model(model)
    return model


class PlannerScripts(object):
    """Planner commands written for a test (``self.dir`` holds them)."""

    def make_dir(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def script(self, body):
        """A planner command: ``body`` run by this Python."""
        path = os.path.join(self.dir, 'planner-%d.py' % len(
            os.listdir(self.dir)))
        with open(path, 'w') as f:
            f.write('import json, sys, time\n' + body + '\n')
        return [sys.executable, path]

    def printing(self, plan):
        """A planner command that prints ``plan`` and records its argv."""
        return self.script(
            'json.dump(sys.argv[1:], open(%r, "w"))\n'
            'json.dump(%r, sys.stdout)'
            % (os.path.join(self.dir, 'argv.json'), plan))

    def argv(self):
        with open(os.path.join(self.dir, 'argv.json')) as f:
            return json.load(f)


class StrategyTestCase(PlannerScripts, test_base.TestBaseStrategy):

    def setUp(self):
        super().setUp()
        self.make_dir()

    def defrag(self, cloud, parameters=None, scope=None, **config):
        """The strategy on Watcher's model of ``cloud``.

        ``scope``: an audit scope, applied to the model by Watcher's own
        handler, as the decision engine does before the strategy runs.
        """
        self.m_c_model.return_value = scoped_model(cloud, scope)
        options = {opt.dest: opt.default
                   for opt in watcher_conf.strategy_opts}
        options.update(nova_config_files=[])
        options.update(config)
        strategy = watcher_strategy.NUMADefragmentation(
            config=utils.Struct(options))
        strategy.input_parameters = utils.Struct(parameters or {})
        return strategy

    def assertFails(self, strategy, *words):
        error = self.assertRaises(watcher_strategy.DefragmentationFailed,
                                  strategy.execute)
        message = str(error)
        self.assertTrue(message.startswith('NUMA defragmentation: '),
                        message)
        self.assertNotIn('\n', message)
        for word in words:
            self.assertIn(word, message)
        self.assertEqual([], strategy.solution.actions)
        return message


class TestPlannedMoves(StrategyTestCase):
    """The real planner on a replayed cloud (the scenario of the Nova side)."""

    def test_scenario(self):
        with open(os.environ[SCENARIO_ENV]) as f:
            scenario = json.load(f)
        strategy = self.defrag(
            scenario['cloud'], scenario['parameters'],
            scope=excluding(instances=scenario.get('excluded')),
            planner_command=scenario['planner_command'],
            state_file=scenario['state_file'])
        if 'error' in scenario:
            self.assertFails(strategy, *scenario['error'])
            return
        solution = strategy.execute()
        self.assertEqual([migrate(*move) for move in scenario['moves']],
                         solution.actions)
        indicators = {i.name: i.value for i in solution.efficacy_indicators}
        self.assertEqual(scenario['indicators'], indicators)
        self.assertEqual(
            [('large_flavor_slots_recovered',
              scenario['indicators']['large_flavor_slots_recovered'])],
            [(i.name, i.value) for i in solution.global_efficacy])
        self.assertEqual(watcher_planner.PLANNER_NAME, strategy.planner)


class TestArguments(StrategyTestCase):

    def test_budget_scope_and_never_move(self):
        strategy = self.defrag(
            small_cloud(),
            {'budget_moves': 3, 'budget_share': 2.5, 'budget_ram_gb': 64,
             'never_move': [C]},
            scope=excluding(instances=[D]),
            planner_command=self.printing(plan_document([])),
            nova_config_files=['/etc/nova/nova.conf', '/etc/nova/cell.conf'],
            state_file='/tmp/state.json')
        solution = strategy.execute()
        self.assertEqual([], solution.actions)
        self.assertEqual(
            ['plan', '--json',
             '--config-file', '/etc/nova/nova.conf',
             '--config-file', '/etc/nova/cell.conf',
             '--state', '/tmp/state.json',
             '--budget-moves', '3', '--budget-share', '2.5',
             '--budget-ram-gb', '64',
             '--scope-hosts', 'node-a,node-b,node-c',
             '--never-move', ','.join(sorted([C, D]))], self.argv())

    def test_the_scope_is_the_model(self):
        # Watcher removes the nodes outside the audit scope from the model,
        # with their instances.
        strategy = self.defrag(
            small_cloud(), scope=excluding(nodes=['node-c']),
            planner_command=self.printing(plan_document([])))
        strategy.execute()
        self.assertEqual(['plan', '--json', '--scope-hosts',
                          'node-a,node-b'], self.argv())
        # A plan moving an instance to a node the scope took out fails.
        strategy = self.defrag(
            small_cloud(), scope=excluding(nodes=['node-c']),
            planner_command=self.printing(plan_document(
                [(A, 'node-a', 'node-c')])))
        self.assertFails(strategy, 'no compute node node-c (its target)')

    def test_moves_in_the_plans_order(self):
        moves = [(B, 'node-a', 'node-c'), (A, 'node-a', 'node-b'),
                 (D, 'node-c', 'node-b')]
        strategy = self.defrag(small_cloud(), planner_command=self.printing(
            plan_document(moves, {'16c32g-2n': 1, '8c64g-1n': 2},
                          {'16c32g-2n': 2, '8c64g-1n': 1})))
        solution = strategy.execute()
        self.assertEqual([migrate(*move) for move in moves],
                         solution.actions)
        self.assertEqual(
            {'instance_migrations_count': 3, 'large_flavor_slots_before': 3,
             'large_flavor_slots_recovered': 3, 'memory_moved_gb': 24.0},
            {i.name: i.value for i in solution.efficacy_indicators})
        self.assertEqual([3], [i.value for i in solution.global_efficacy])


class TestErrors(StrategyTestCase):

    def test_the_command_is_missing(self):
        strategy = self.defrag(
            small_cloud(), planner_command=['/nonexistent/bin/nova-sched-'
                                            'ext-defrag'])
        self.assertFails(strategy, 'cannot run the planner /nonexistent/bin/'
                         'nova-sched-ext-defrag: No such file or directory',
                         '[%s] planner_command' % watcher_conf.GROUP_NAME)

    def test_no_command(self):
        strategy = self.defrag(small_cloud(), planner_command=[])
        self.assertFails(strategy, '[%s] planner_command is empty'
                         % watcher_conf.GROUP_NAME)

    def test_the_planner_fails(self):
        strategy = self.defrag(small_cloud(), planner_command=self.script(
            'sys.stderr.write("a warning\\n\\n'
            'nova-sched-ext-defrag: the budget share must be between 0 and '
            '100 %\\n\\n")\nsys.exit(2)'))
        self.assertFails(strategy, 'failed: nova-sched-ext-defrag: the '
                         'budget share must be between 0 and 100 %')

    def test_the_planner_fails_silently(self):
        strategy = self.defrag(small_cloud(),
                               planner_command=self.script('sys.exit(3)'))
        self.assertFails(strategy, 'failed: exit status 3 and no message')

    def test_the_planner_hangs(self):
        strategy = self.defrag(
            small_cloud(), planner_timeout=1,
            planner_command=self.script('time.sleep(30)'))
        self.assertFails(strategy, 'did not finish in 1 s',
                         'planner_timeout')

    def test_output_not_a_plan(self):
        strategy = self.defrag(small_cloud(), planner_command=self.script(
            'print("id | instance")'))
        self.assertFails(strategy, 'printed no JSON plan')
        strategy = self.defrag(small_cloud(), planner_command=self.printing(
            {'format': 'nova-sched-ext-sim-state/1', 'moves': []}))
        self.assertFails(strategy, 'something other than a plan',
                         defrag_model.PLAN_FORMAT)
        plan = plan_document([])
        del plan['slots_recovered']
        strategy = self.defrag(small_cloud(),
                               planner_command=self.printing(plan))
        self.assertFails(strategy, 'has no slots_recovered')

    def test_unknown_instance(self):
        ghost = '00000000-0000-4000-8000-0000000000ff'
        strategy = self.defrag(small_cloud(), planner_command=self.printing(
            plan_document([(A, 'node-a', 'node-b'),
                           (ghost, 'node-a', 'node-b')])))
        self.assertFails(strategy, 'move 2 of the plan: no instance %s in '
                         "Watcher's model" % ghost)

    def test_unknown_node(self):
        strategy = self.defrag(small_cloud(), planner_command=self.printing(
            plan_document([(A, 'node-a', 'node-b'),
                           (B, 'node-a', 'node-z')])))
        self.assertFails(strategy, 'move 2 of the plan: no compute node '
                         'node-z (its target)')

    def test_instance_elsewhere_in_the_model(self):
        strategy = self.defrag(small_cloud(), planner_command=self.printing(
            plan_document([(C, 'node-a', 'node-c')])))
        self.assertFails(strategy, 'move 1 of the plan: instance %s is on '
                         "node-b in Watcher's model, not on node-a" % C,
                         'run the audit again')

    def test_move_without_a_target(self):
        plan = plan_document([(A, 'node-a', 'node-b')])
        del plan['moves'][0]['target']
        strategy = self.defrag(small_cloud(),
                               planner_command=self.printing(plan))
        self.assertFails(strategy, 'move 1 of the plan lacks an instance, '
                         'source or target')


class TestSequentialPlanner(db_base.DbTestCase):
    """The action plan runs the moves one at a time, in the plan's order."""

    def setUp(self):
        super().setUp()
        db_utils.create_test_goal(name='numa_defragmentation')
        self.strategy = db_utils.create_test_strategy(
            name=watcher_conf.STRATEGY_NAME)
        self.audit = db_utils.create_test_audit(
            uuid=utils.generate_uuid(), strategy_id=self.strategy.id)
        self.solution = default_solution.DefaultSolution(
            goal=mock.Mock(), strategy=self.strategy)
        self.moves = [(B, 'node-a', 'node-c'), (A, 'node-a', 'node-b'),
                      (D, 'node-c', 'node-b'), (C, 'node-b', 'node-c')]
        for move in self.moves:
            action = migrate(*move)
            parameters = dict(action['input_parameters'])
            self.solution.add_action(
                'migrate', resource_id=parameters.pop('resource_id'),
                input_parameters=parameters)

    def parents(self, planner):
        """``[(instance, [instances of its parents])]`` in plan order."""
        plan = planner.schedule(self.context, self.audit.id, self.solution)
        actions = objects.Action.list(
            self.context, filters={'action_plan_uuid': plan.uuid})
        instance_of = {a.uuid: a.input_parameters['resource_id']
                       for a in actions}
        return sorted(
            ((instance_of[a.uuid], sorted(instance_of[p] for p in a.parents))
             for a in actions),
            key=lambda entry: [m[0] for m in self.moves].index(entry[0]))

    def test_each_move_waits_for_the_one_before(self):
        self.assertEqual([(B, []), (A, [B]), (D, [A]), (C, [D])],
                         self.parents(watcher_planner.SequentialPlanner(
                             utils.Struct())))

    def test_watchers_weight_planner_would_run_two_at_once(self):
        # Why the strategy does not leave its moves to the default planner.
        planner = weight.WeightPlanner(utils.Struct(
            weights=weight.WeightPlanner.action_weights,
            parallelization=weight.WeightPlanner.parallelization))
        self.assertEqual([(B, []), (A, []), (D, sorted([A, B])),
                          (C, sorted([A, B]))], self.parents(planner))


class AuditTestCase(PlannerScripts, db_base.DbTestCase):
    """From an audit to its action plan, as the decision engine makes it.

    The strategy, its options and its planner are loaded by Watcher's
    loaders (the entry points, watcher.conf); the action plan and its
    actions are in Watcher's database (sqlite).
    """

    def setUp(self):
        super().setUp()
        self.make_dir()
        # Watcher's loader registers the options itself when it loads the
        # strategy; a test's override needs them registered before.
        cfg.CONF.register_opts(watcher_conf.strategy_opts,
                               group=watcher_conf.GROUP_NAME)

    def load_strategy(self, planner_command, **options):
        options.setdefault('nova_config_files', [])
        self.flags(planner_command=planner_command,
                   group=watcher_conf.GROUP_NAME, **options)
        return loading.DefaultStrategyLoader().load(
            watcher_conf.STRATEGY_NAME)

    def audit(self, strategy, cloud, parameters=None, scope=None):
        """``(solution, planner, action plan)`` of an audit of ``cloud``.

        An audit's ``parameters`` get the schema's defaults, as the
        decision engine gives them.
        """
        parameters = dict(parameters or {})
        utils.StrictDefaultValidatingDraft4Validator(
            strategy.get_schema()).validate(parameters)
        strategy.input_parameters.update(parameters)
        with mock.patch.object(
                base_strategy.BaseStrategy, 'compute_model',
                new_callable=mock.PropertyMock,
                return_value=scoped_model(cloud, scope)):
            solution = strategy.execute()
        goal = db_utils.create_test_goal(name=watcher_goal.GOAL_NAME)
        db_strategy = db_utils.create_test_strategy(
            name=watcher_conf.STRATEGY_NAME, goal_id=goal.id)
        audit = db_utils.create_test_audit(
            uuid=utils.generate_uuid(), goal_id=goal.id,
            strategy_id=db_strategy.id)
        # The decision engine's planner for this solution: the one the
        # strategy names, loaded by its entry point.
        planner = loading.DefaultPlannerLoader().load(strategy.planner)
        plan = planner.schedule(self.context, audit.id, solution)
        return solution, planner, plan

    def actions(self, plan):
        """The plan's actions by instance."""
        return {a.input_parameters['resource_id']: a
                for a in objects.Action.list(
                    self.context, filters={'action_plan_uuid': plan.uuid})}


class TestLoadedByWatcher(AuditTestCase):
    """As the decision engine loads it: entry points and watcher.conf."""

    def test_audit_to_action_plan(self):
        moves = [(B, 'node-a', 'node-c'), (A, 'node-a', 'node-b')]
        command = self.printing(plan_document(
            moves, {'16c32g-2n': 0}, {'16c32g-2n': 1}))
        strategy = self.load_strategy(command)
        self.assertEqual(command, strategy.config.planner_command)
        self.assertEqual(watcher_goal.GOAL_NAME, strategy.goal.name)
        solution, planner, plan = self.audit(strategy, small_cloud())
        self.assertEqual({'budget_share': 5, 'never_move': []},
                         dict(strategy.input_parameters))
        self.assertEqual(['plan', '--json', '--budget-share', '5',
                          '--scope-hosts', 'node-a,node-b,node-c'],
                         self.argv())
        self.assertIsInstance(planner, watcher_planner.SequentialPlanner)
        actions = self.actions(plan)
        self.assertEqual([], actions[B].parents)
        self.assertEqual([actions[B].uuid], actions[A].parents)
        self.assertEqual('node-c', actions[B].input_parameters[
            'destination_node'])
        indicators = {i.name: i.value for i in objects.EfficacyIndicator.list(
            self.context, filters={'action_plan_uuid': plan.uuid})}
        self.assertEqual({'instance_migrations_count': 2,
                          'large_flavor_slots_before': 0,
                          'large_flavor_slots_recovered': 1,
                          'memory_moved_gb': 16}, indicators)
        self.assertEqual([('large_flavor_slots_recovered', 1)],
                         [(i['name'], i['value'])
                          for i in plan.global_efficacy])


class FakeNova(object):
    """Watcher's Nova helper on a cloud of dicts, recording live migrations.

    It stands in for ``watcher.common.nova_helper.NovaHelper`` where
    Watcher's ``migrate`` action reaches Nova: ``find_instance`` and
    ``get_compute_node_by_hostname`` (its pre-condition) and
    ``live_migrate_instance`` (its execution, and its revert back to the
    source), answering with Watcher's own ``Server`` and ``Hypervisor``.
    A live migration moves the instance in the cloud, unless Nova is told
    to refuse the instance's move: then the instance stays where it is and
    the helper answers False, as Watcher's does when the instance did not
    reach the destination (Nova's scheduler refused it).  A ``disabled``
    node's compute service is disabled.
    """

    def __init__(self, cloud, refused=(), disabled=()):
        self.hosts = {entry['uuid']: entry['host']
                      for entry in cloud['instances']}
        self.nodes = {host['name'] for host in cloud['hosts']}
        self.refused = set(refused)
        self.disabled = set(disabled)
        #: ``(instance, its host then, destination)`` per live migration.
        self.migrations = []

    def __call__(self, *args, **kwargs):
        # The migrate action makes a NovaHelper per call to Nova.
        return self

    def find_instance(self, instance_id):
        if instance_id not in self.hosts:
            raise exception.ComputeResourceNotFound(name=instance_id)
        host = self.hosts[instance_id]
        return nova_helper.Server(
            uuid=instance_id, name=instance_id, created=None, host=host,
            vm_state='active', task_state=None, power_state=1,
            status='ACTIVE', flavor={}, tenant_id='fake_project',
            locked=False, metadata={}, availability_zone='nova',
            pinned_availability_zone=None, image=None,
            hypervisor_hostname=host)

    def get_compute_node_by_hostname(self, hostname):
        if hostname not in self.nodes:
            raise exception.ComputeNodeNotFound(name=hostname)
        return nova_helper.Hypervisor(
            uuid=str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, hostname)),
            hypervisor_hostname=hostname, hypervisor_type='QEMU',
            state='up',
            status='disabled' if hostname in self.disabled else 'enabled',
            vcpus=None, vcpus_used=None,
            memory_mb=None, memory_mb_used=None, local_gb=None,
            local_gb_used=None, service_host=hostname, service_id=None,
            service_disabled_reason=None, servers=[])

    def live_migrate_instance(self, instance_id, dest_hostname, retry=None,
                              interval=None):
        self.migrations.append(
            (instance_id, self.hosts[instance_id], dest_hostname))
        if instance_id in self.refused or dest_hostname not in self.nodes:
            return False
        self.hosts[instance_id] = dest_hostname
        return True


class ApplierTestCase(AuditTestCase):
    """An audit's action plan run by Watcher's applier on a fake Nova.

    The action plan handler, the workflow engine (loaded by
    ``[watcher_applier] workflow_engine``, taskflow underneath) and the
    ``migrate`` action are Watcher's; Nova is :class:`FakeNova`.  The
    workflow engine is the package's, as the documentation recommends,
    unless a test names Watcher's.
    """

    def apply(self, plan, nova, workflow_engine=watcher_engine.ENGINE_NAME,
              rollback=False):
        """Run ``plan`` as Watcher's applier does; its state after."""
        self.flags(workflow_engine=workflow_engine,
                   rollback_when_actionplan_failed=rollback,
                   group='watcher_applier')
        with mock.patch.object(nova_helper, 'NovaHelper', nova):
            action_plan_handler.DefaultActionPlanHandler(
                self.context, mock.Mock(), plan.uuid).execute()
        return objects.ActionPlan.get_by_uuid(self.context, plan.uuid).state

    def states(self, plan, moves):
        """The state of the action of each move."""
        actions = self.actions(plan)
        return [actions[instance].state for instance, _s, _t in moves]

    def assertApplied(self, cloud, plan, moves, refused=None,
                      **apply_kwargs):
        """``plan`` applied: ``moves`` in order, stopping at one refused.

        ``refused``: the index of a move Nova refuses.  The moves before
        it are made, it fails, and the ones after it are not started.
        """
        moves = [tuple(move) for move in moves]
        stop = len(moves) if refused is None else refused
        nova = FakeNova(cloud, refused=[m[0] for m in moves[stop:stop + 1]])
        state = self.apply(plan, nova, **apply_kwargs)
        self.assertEqual(moves[:stop + 1], nova.migrations)
        done = objects.action.State.SUCCEEDED
        self.assertEqual(
            [done] * stop + [objects.action.State.FAILED] * (
                stop < len(moves)) + [objects.action.State.PENDING] * (
                len(moves) - stop - 1),
            self.states(plan, moves))
        self.assertEqual(objects.action_plan.State.SUCCEEDED
                         if refused is None else
                         objects.action_plan.State.FAILED, state)
        self.assertEqual([target for _i, _s, target in moves[:stop]] +
                         [source for _i, source, _t in moves[stop:]],
                         [nova.hosts[instance] for instance, _s, _t in moves])
        return nova


class TestApplier(ApplierTestCase):
    """A printed plan, audited and applied (no Nova needed)."""

    moves = [(B, 'node-a', 'node-c'), (A, 'node-a', 'node-b'),
             (D, 'node-c', 'node-b'), (C, 'node-b', 'node-c')]

    def action_plan(self, moves):
        strategy = self.load_strategy(self.printing(plan_document(moves)))
        return self.audit(strategy, small_cloud())[2]

    def test_every_move_in_order(self):
        self.assertApplied(small_cloud(), self.action_plan(self.moves),
                           self.moves)

    def test_every_move_in_order_under_watchers_engine(self):
        self.assertApplied(small_cloud(), self.action_plan(self.moves),
                           self.moves, workflow_engine='taskflow')

    def test_a_refused_move_stops_the_plan(self):
        self.assertApplied(small_cloud(), self.action_plan(self.moves),
                           self.moves, refused=1)

    def test_watchers_engine_goes_on_after_a_failure(self):
        # Why the package has an engine of its own: Watcher's starts the
        # actions after a failed one.
        plan = self.action_plan(self.moves)
        nova = FakeNova(small_cloud(), refused=[A])
        self.assertEqual(objects.action_plan.State.FAILED,
                         self.apply(plan, nova, workflow_engine='taskflow'))
        self.assertEqual(self.moves, nova.migrations)
        self.assertEqual(['SUCCEEDED', 'FAILED', 'SUCCEEDED', 'SUCCEEDED'],
                         self.states(plan, self.moves))

    def test_a_failed_pre_condition_stops_the_plan(self):
        # Node-b's compute service was disabled after the audit: Watcher's
        # pre-condition fails the second move before it calls Nova (and
        # tells the engine nothing: its task's result is True).
        plan = self.action_plan(self.moves)
        nova = FakeNova(small_cloud(), disabled=['node-b'])
        self.assertEqual(objects.action_plan.State.FAILED,
                         self.apply(plan, nova))
        self.assertEqual(self.moves[:1], nova.migrations)
        self.assertEqual(['SUCCEEDED', 'FAILED', 'PENDING', 'PENDING'],
                         self.states(plan, self.moves))

    def test_a_skipped_move_does_not_stop_the_plan(self):
        # A deleted since the audit: Watcher skips its move, and the
        # others run.
        plan = self.action_plan(self.moves)
        nova = FakeNova(small_cloud())
        del nova.hosts[A]
        self.assertEqual(objects.action_plan.State.SUCCEEDED,
                         self.apply(plan, nova))
        self.assertEqual(self.moves[:1] + self.moves[2:], nova.migrations)
        self.assertEqual(['SUCCEEDED', 'SKIPPED', 'SUCCEEDED', 'SUCCEEDED'],
                         self.states(plan, self.moves))

    def test_rollback_moves_nothing_back(self):
        # [watcher_applier] rollback_when_actionplan_failed (deprecated in
        # Watcher 17, "does not work"): the failed action does not raise,
        # so taskflow reverts nothing; the moves before it stay.
        self.assertApplied(small_cloud(), self.action_plan(self.moves),
                           self.moves, refused=2, rollback=True)

    def test_other_strategies_run_as_under_watchers_engine(self):
        plan = self.action_plan(self.moves)
        other = db_utils.create_test_strategy(
            id=2, uuid=utils.generate_uuid(), name='server_consolidation')
        plan.strategy_id = other.id
        plan.save()
        nova = FakeNova(small_cloud(), refused=[A])
        self.assertEqual(objects.action_plan.State.FAILED,
                         self.apply(plan, nova))
        self.assertEqual(self.moves, nova.migrations)


class TestAppliedPlan(ApplierTestCase):
    """The real planner's plan of a replayed cloud, applied.

    The scenario of the Nova side (:class:`TestPlannedMoves`'s), with
    ``refused``, the index of a move Nova refuses, or None.
    """

    def test_scenario(self):
        with open(os.environ[SCENARIO_ENV]) as f:
            scenario = json.load(f)
        strategy = self.load_strategy(scenario['planner_command'],
                                      state_file=scenario['state_file'])
        solution, _planner, plan = self.audit(
            strategy, scenario['cloud'], scenario['parameters'],
            scope=excluding(instances=scenario.get('excluded')))
        moves = scenario['moves']
        self.assertEqual([migrate(*move) for move in moves],
                         solution.actions)
        self.assertApplied(scenario['cloud'], plan, moves,
                           refused=scenario.get('refused'))
