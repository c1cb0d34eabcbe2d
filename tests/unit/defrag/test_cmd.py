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

"""nova-sched-ext-defrag's command line: plans on saved states, errors.

``plan --state`` runs the whole way (a replayed, fragmented state saved to
a file, the planner, the table or the plan document); the live path and
``apply`` run with the cloud reader and the Compute API replaced (the
functional test runs them for real).  Every input the command cannot use
is one line on stderr, exit status 2, and nothing moved.
"""

import importlib
import io
import json
import os
import subprocess
import sys
from unittest import mock

import fixtures

from nova_sched_ext import conf
from nova_sched_ext.defrag import executor
from nova_sched_ext.defrag import model
from nova_sched_ext_tools.sim import state as sim_state
from tests import base
from tests.unit.defrag import test_executor
from tests.unit.defrag import test_planner

PROG = 'nova-sched-ext-defrag'


def import_cmd():
    """The command's module, without its import-time concurrency choice.

    The test run has made that choice already (``tests/__init__.py``).
    """
    with mock.patch('nova_sched_ext.compat.release.monkey_patch'):
        return importlib.import_module('nova_sched_ext.defrag.cmd')


class CommandTestCase(base.OneLineErrors, test_planner.PlannerTestCase):

    prog = PROG

    def setUp(self):
        super().setUp()
        self.cmd = import_cmd()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.saved = self.saved(*test_planner.fragmented())
        # the flavor whose slots to recover, as --save-state records it
        self.saved['slot_flavors'] = [sim_state.flavor_dict(
            test_planner.LARGE)]
        self.state = os.path.join(self.dir, 'state.json')
        sim_state.save(self.state, self.saved)
        self.stdout = io.StringIO()
        self.stderr = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value
        # No default config file of this machine may count.
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_files', return_value=[]))
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_dirs', return_value=[]))

    def main(self, *args):
        return self.cmd.main([PROG] + list(args), stdout=self.stdout)

    def again(self):
        """Forget what the command wrote on stderr, for another run."""
        self.stderr.seek(0)
        self.stderr.truncate()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path


class TestPlanOnState(CommandTestCase):

    def test_json_is_the_plan_apply_reads(self):
        out = os.path.join(self.dir, 'plan.json')
        self.assertEqual(0, self.main('plan', '--state', self.state,
                                      '--json', '-o', out))
        document = json.loads(self.stdout.getvalue())
        self.assertEqual(2, len(document['moves']))
        self.assertEqual({test_planner.LARGE.name: 1},
                         document['slots_recovered'])
        with open(out) as f:
            self.assertEqual(document, json.load(f))
        moves = executor.load_plan(out)
        self.assertEqual([m['instance'] for m in document['moves']],
                         [m['instance'] for m in moves])
        # the moves hold when replayed on the state, in order
        compute = test_executor.FakeCompute(self.saved)
        outcome = executor.Executor(
            compute, test_executor.Reader(self.saved),
            sleep=lambda s: None).apply(moves)
        self.assertEqual(2, outcome.moved)

    def test_console_script_prints_only_the_plan(self):
        # The Watcher strategy runs the command and parses its stdout.
        done = subprocess.run(
            [sys.executable, '-m', 'nova_sched_ext.defrag.cmd', 'plan',
             '--json', '--state', self.state],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr)
        document = json.loads(done.stdout)
        self.assertEqual('nova-sched-ext-defrag-plan/1', document['format'])
        self.assertEqual(2, len(document['moves']))

    def test_table(self):
        self.assertEqual(0, self.main('plan', '--state', self.state))
        text = self.stdout.getvalue()
        self.assertIn('| Instance', text)
        self.assertIn('2 move(s)', text)
        name = test_planner.LARGE.name
        self.assertRegex(text, r'\| %s +\| +0 \| +1 \| +\+1 \|'
                         % name.replace('.', r'\.'))

    def test_budget_of_one_move_moves_nothing(self):
        # one move alone recovers nothing in this cloud
        self.assertEqual(0, self.main('plan', '--state', self.state,
                                      '--budget-moves', '1', '--json'))
        document = json.loads(self.stdout.getvalue())
        self.assertEqual([], document['moves'])
        self.assertEqual({'max_moves': 1, 'max_ram_mb': None,
                          'max_share': None}, document['budget'])

    def test_budget_share_in_percent(self):
        self.assertEqual(0, self.main('plan', '--state', self.state,
                                      '--budget-share', '50%', '--json'))
        document = json.loads(self.stdout.getvalue())
        self.assertEqual(0.5, document['budget']['max_share'])
        self.assertEqual(2, len(document['moves']))

    def test_scope_and_never_move(self):
        uuid = self.saved['instances'][0]['uuid']
        self.assertEqual(0, self.main(
            'plan', '--state', self.state, '--scope-hosts', 'h1,h2',
            '--never-move', uuid, '--json'))
        document = json.loads(self.stdout.getvalue())
        self.assertNotIn(uuid, [m['instance'] for m in document['moves']])
        self.assertIn({'instance': uuid,
                       'reason': 'it is on the never-move list'},
                      document['left_alone'])
        self.assertEqual(['h1', 'h2'], document['scope']['hosts'])


class TestPlanErrors(CommandTestCase):

    def test_negative_budgets(self):
        for option, value, words in (
                ('--budget-moves', '-1', 'max moves must not be negative'),
                ('--budget-ram-gb', '-0.5', 'must not be negative'),
                ('--budget-share', '-5', 'between 0 and 100')):
            self.stderr.seek(0)
            self.stderr.truncate()
            self.assertOneLineError(
                2, self.main('plan', '--state', self.state, option, value),
                words)

    def test_scopes_matching_nothing(self):
        for args, words in (
                (('--scope-hosts', 'h1,nowhere'), 'no compute host named '
                 'nowhere'),
                (('--scope-hosts', ','), 'list of hosts of the scope is '
                 'empty'),
                (('--scope-az', 'mars'), 'availability zone mars'),
                (('--scope-aggregate', 'agg'), 'aggregate named agg')):
            self.stderr.seek(0)
            self.stderr.truncate()
            self.assertOneLineError(
                2, self.main('plan', '--state', self.state, *args), words)

    def test_unknown_never_move_instance(self):
        self.assertOneLineError(
            2, self.main('plan', '--state', self.state, '--never-move',
                         'no-such-uuid'),
            '--never-move: no instance no-such-uuid')

    def test_bad_state_files(self):
        for text, words in (
                ('{not json', 'is not JSON'),
                ('{"format": "something-else"}', 'is not a saved state'),
                ('{"format": "nova-sched-ext-sim-state/1"}', 'is damaged')):
            self.stderr.seek(0)
            self.stderr.truncate()
            path = self.write('bad.json', text)
            self.assertOneLineError(
                2, self.main('plan', '--state', path), words)
        self.stderr.seek(0)
        self.stderr.truncate()
        self.assertOneLineError(
            2, self.main('plan', '--state', self.state + '.missing'),
            'cannot read state file')

    def test_command_line(self):
        self.assertOneLineError(2, self.main(), 'required')
        self.stderr.seek(0)
        self.stderr.truncate()
        self.assertOneLineError(2, self.main('plan', '--budget-moves', 'x'),
                                'invalid int value')
        self.stderr.seek(0)
        self.stderr.truncate()
        self.assertOneLineError(
            2, self.main('plan', '--state', self.state, '--flavor', 'big'),
            '--flavor is not for --state')

    def test_live_needs_a_configuration(self):
        self.assertOneLineError(2, self.main('plan'), 'no configuration file')


class TestInputBounds(CommandTestCase):
    """Inputs that used to end in "unexpected error" or a long parse."""

    def test_json_nested_too_deeply(self):
        deep = self.write('deep.json', '[' * 100000 + ']' * 100000)
        self.assertOneLineError(2, self.main('plan', '--state', deep),
                                'nested too deeply')
        self.again()
        with mock.patch.object(self.cmd, 'load_config'):
            self.assertOneLineError(
                2, self.main('apply', deep, '--dry-run'),
                'nested too deeply')

    def test_budget_ram_not_finite(self):
        for value, words in (('nan', 'not a finite number of GiB'),
                             ('inf', 'not a finite number of GiB'),
                             ('-inf', 'not a finite number of GiB'),
                             ('1e308', 'too large to count')):
            self.again()
            self.assertOneLineError(
                2, self.main('plan', '--state', self.state,
                             '--budget-ram-gb=' + value),
                words)

    def sparse(self, name, size):
        """A file of ``size`` bytes that takes no room on the disk."""
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as f:
            f.truncate(size)
        return path

    def test_configuration_is_checked_before_the_plan(self):
        huge = self.sparse('huge-plan.json', 80 * 1024 * 1024)
        with mock.patch.object(model, 'read_document') as read:
            self.assertOneLineError(2, self.main('apply', huge),
                                    'no configuration file')
        read.assert_not_called()

    def test_files_over_the_size_read_are_refused_unread(self):
        huge = self.sparse('huge.json', model.MAX_DOCUMENT_BYTES + 1)
        with mock.patch('json.loads') as loads:
            self.assertOneLineError(2, self.main('plan', '--state', huge),
                                    'error: state file %s is larger than '
                                    '64 MiB' % huge)
            self.again()
            with mock.patch.object(self.cmd, 'load_config'):
                self.assertOneLineError(
                    2, self.main('apply', huge, '--dry-run'),
                    'error: plan file %s is larger than 64 MiB' % huge)
        loads.assert_not_called()

    def test_service_credential_floats_must_be_finite(self):
        # A float in every supported release's keystoneauth (its timeout
        # is an integer in 2025.1's).
        conf.CONF.set_override('connect_retry_delay', float('nan'),
                               group='nova_sched_ext_defrag')
        self.addCleanup(conf.CONF.clear_override, 'connect_retry_delay',
                        group='nova_sched_ext_defrag')
        plan = self.write('plan.json', '{}')
        with mock.patch.object(self.cmd, 'load_config'), \
                mock.patch.object(model, 'read_document') as read:
            self.assertOneLineError(
                2, self.main('apply', plan, '--dry-run'),
                'invalid value of [nova_sched_ext_defrag] '
                'connect_retry_delay: nan is not a finite number')
        read.assert_not_called()

    def test_duplicate_instance_in_a_state(self):
        entry = self.saved['instances'][0]
        self.saved['instances'].append(dict(entry))
        sim_state.save(self.state, self.saved)
        self.assertOneLineError(
            2, self.main('plan', '--state', self.state),
            'has instance %s twice' % entry['uuid'])


class TestApply(CommandTestCase):
    """``apply`` on the saved state, the Compute API a fake over it."""

    def setUp(self):
        super().setUp()
        self.plan_file = os.path.join(self.dir, 'plan.json')
        self.assertEqual(0, self.main('plan', '--state', self.state,
                                      '-o', self.plan_file))
        self.stdout.seek(0)
        self.stdout.truncate()
        self.compute = test_executor.FakeCompute(self.saved)
        self.useFixture(fixtures.MockPatchObject(
            self.cmd, 'load_config'))
        self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.defrag.live.read_cloud',
            side_effect=lambda context, reader=None, hosts=None:
                test_executor.Reader(self.saved)(hosts)))
        self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.cloud.placement.PlacementReader'))
        self.useFixture(fixtures.MockPatchObject(
            self.cmd, '_compute', return_value=self.compute))
        self.useFixture(fixtures.MockPatch(
            'nova.context.get_admin_context'))
        self.conf.config(poll_interval=0.01,
                         group='nova_sched_ext_defrag')

    def test_apply_reports_each_move(self):
        self.assertEqual(0, self.main('apply', self.plan_file))
        lines = self.stdout.getvalue().splitlines()
        self.assertEqual(3, len(lines), lines)
        self.assertRegex(lines[0], r'^\[1/2\] \S+ h\d -> h\d: moved$')
        self.assertEqual('2 move(s): 2 moved.', lines[2])
        self.assertEqual(2, len(self.compute.calls))

    def test_parallel_moves_on_separate_hosts_only(self):
        self.assertEqual(0, self.main('apply', self.plan_file,
                                      '--parallel', '4'))
        self.assertEqual(2, len(self.compute.calls))

    def test_dry_run_moves_nothing(self):
        self.assertEqual(0, self.main('apply', self.plan_file, '--dry-run'))
        self.assertIn('2 would move', self.stdout.getvalue())
        self.assertEqual([], self.compute.calls)

    def test_failure_is_exit_1_with_earlier_moves_in_place(self):
        self.compute.fail_on = {2}
        self.assertEqual(1, self.main('apply', self.plan_file))
        text = self.stdout.getvalue()
        self.assertIn('Stopped at move 2 of 2', text)
        self.assertIn('1 failed, 1 moved', text)

    def test_dry_run_of_a_plan_given_three_times(self):
        with open(self.plan_file) as f:
            document = json.load(f)
        document['moves'] *= 3
        document['checksum'] = model.plan_checksum(document)
        thrice = self.write('thrice.json', json.dumps(document))
        self.assertEqual(0, self.main('apply', thrice, '--dry-run'))
        self.assertEqual('6 move(s): 4 already there, 2 would move.',
                         self.stdout.getvalue().splitlines()[-1])

    def test_a_plan_must_match_its_checksum(self):
        with open(self.plan_file) as f:
            document = json.load(f)
        # a never-move instance put into the plan by hand
        keep = document['moves'][1]['instance']
        document['never_move']['instances'] = [keep]
        edited = self.write('edited.json', json.dumps(document))
        self.assertOneLineError(
            2, self.main('apply', edited),
            'does not match its checksum: it was changed after '
            'nova-sched-ext-defrag plan wrote it; run plan again, or apply '
            'it as it is with --ignore-checksum')
        del document['checksum']
        unsigned = self.write('unsigned.json', json.dumps(document))
        self.again()
        self.assertOneLineError(2, self.main('apply', unsigned),
                                'has no checksum')
        self.assertEqual([], self.compute.calls)
        # applied as it is when asked: the never-move instance stays
        self.again()
        self.assertEqual(0, self.main(
            'apply', unsigned, '--ignore-checksum'))
        lines = self.stdout.getvalue().splitlines()
        self.assertRegex(lines[1], r'^\[2/2\] %s .*: skipped \(it is on the '
                         r'never-move list\)$' % keep)
        self.assertEqual(1, len(self.compute.calls))

    def test_never_move_given_to_apply(self):
        with open(self.plan_file) as f:
            keep = json.load(f)['moves'][0]['instance']
        self.assertEqual(0, self.main('apply', self.plan_file,
                                      '--never-move', keep))
        self.assertIn('skipped (it is on the never-move list)',
                      self.stdout.getvalue().splitlines()[0])

    def test_bad_plans(self):
        with open(self.plan_file) as f:
            document = json.load(f)
        document['moves'][0]['target'] = 'nowhere'
        document['checksum'] = model.plan_checksum(document)
        bad = self.write('bad-plan.json', json.dumps(document))
        for path, words in (
                (self.write('x.json', '[1, 2'), 'is not JSON'),
                (self.state, 'is not a plan of nova-sched-ext-defrag'),
                (bad, 'move 1: no host nowhere (its target)')):
            self.stderr.seek(0)
            self.stderr.truncate()
            self.assertOneLineError(2, self.main('apply', path), words)
        self.stderr.seek(0)
        self.stderr.truncate()
        self.assertOneLineError(
            2, self.main('apply', self.plan_file, '--parallel', '0'),
            '--parallel must be at least 1')
        self.assertEqual([], self.compute.calls)
