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

"""nova-sched-ext-scheduler's command line: --help, and bad configuration.

A command line or configuration the service cannot start with is one line
on stderr and exit status 2, never a traceback.  The cases that go through
the import-time concurrency choice (which reads the config files too) run
the command in a fresh interpreter; the others call ``main()``.
"""

import io
import os
import subprocess
import sys
import textwrap
from unittest import mock

import fixtures
from testtools import content

from nova_sched_ext import coordination
from tests import base
from tests.unit.test_manager import import_scheduler_cmd

PROG = 'nova-sched-ext-scheduler'

#: a nova.conf saved by a Latin-1 editor; oslo.config reads UTF-8
NOT_UTF8 = b'[DEFAULT]\n# caf\xe9\n'

#: runs the console script's ``main`` under its own name
SCRIPT = textwrap.dedent('''
    import sys
    from nova_sched_ext.cmd.scheduler import main
    sys.argv[0] = %r
    main()
''' % PROG)


class SchedulerCommandLineTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.cmd = import_scheduler_cmd()
        self.dir = self.useFixture(fixtures.TempDir()).path
        # No default config file of this machine may count.
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_files', return_value=[]))
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_dirs', return_value=[]))
        self.nova_parse_args = self.useFixture(fixtures.MockPatchObject(
            self.cmd.nova_compat, 'parse_args')).mock

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def assertUsageError(self, expected, *args):
        stderr = io.StringIO()
        with mock.patch('sys.stderr', stderr):
            exc = self.assertRaises(SystemExit, self.cmd.main,
                                    [PROG] + list(args))
        self.assertEqual(2, exc.code)
        lines = stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines), stderr.getvalue())
        self.assertTrue(lines[0].startswith(PROG + ': error: '), lines[0])
        self.assertIn(expected, lines[0])
        self.nova_parse_args.assert_not_called()
        return lines[0]

    def test_no_config_file_at_all(self):
        line = self.assertUsageError('no configuration file')
        self.assertIn('pass --config-file', line)

    def test_a_config_file_that_does_not_exist(self):
        missing = os.path.join(self.dir, 'nova.conf')
        self.assertUsageError('Failed to find some config files: ' + missing,
                              '--config-file', missing)

    def test_a_config_dir_that_does_not_exist(self):
        missing = os.path.join(self.dir, 'nova.conf.d')
        self.assertUsageError(missing, '--config-dir', missing)

    def test_a_config_file_that_cannot_be_parsed(self):
        path = self.write('nova.conf', '[DEFAULT]\nno assignment here\n')
        self.assertUsageError('Failed to parse %s' % path,
                              '--config-file', path)

    def test_a_config_file_that_is_a_directory(self):
        self.assertUsageError('config file %s is a directory' % self.dir,
                              '--config-file', self.dir)

    def test_a_config_file_that_is_not_utf8(self):
        path = os.path.join(self.dir, 'nova.conf')
        with open(path, 'wb') as f:
            f.write(NOT_UTF8)
        self.assertUsageError('config file %s is not UTF-8 text' % path,
                              '--config-file', path)
        self.assertUsageError(path, '--config-dir', self.dir)

    def test_a_good_command_line_is_parsed_by_nova(self):
        path = self.write('nova.conf', '[scheduler]\nworkers = 2\n')
        argv = [PROG, '--config-file', path]
        self.cmd.parse_args(argv, PROG)
        self.nova_parse_args.assert_called_once_with(argv, prog=PROG)

    def test_a_config_dir_is_enough(self):
        self.write('nova.conf', '')
        argv = [PROG, '--config-dir', self.dir]
        self.cmd.parse_args(argv, PROG)
        self.nova_parse_args.assert_called_once_with(argv, prog=PROG)

    def test_prog_name(self):
        self.assertEqual(PROG, self.cmd.prog_name(['/usr/bin/' + PROG]))
        self.assertEqual('scheduler', self.cmd.prog_name(['x/scheduler.py']))
        self.assertEqual('nova-scheduler', self.cmd.prog_name([]))


class SchedulerCommandProcessTest(base.TestCase):
    """The command in a fresh interpreter, as a deployer runs it."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def run_command(self, *args):
        # HOME: no ~/.nova/nova.conf of this machine.
        env = dict(os.environ, HOME=self.dir)
        result = subprocess.run(
            [sys.executable, '-c', SCRIPT] + list(args), env=env,
            capture_output=True, text=True, timeout=300)
        self.addDetail('command stderr', content.text_content(
            result.stderr))
        return result

    def assertUsageError(self, expected, *args):
        result = self.run_command(*args)
        self.assertEqual(2, result.returncode, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith(PROG + ': error: '), lines[0])
        self.assertIn(expected, lines[0])

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_help_says_what_the_command_is(self):
        result = self.run_command('--help')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertTrue(result.stdout.startswith('usage: ' + PROG),
                        result.stdout)
        help_text = ' '.join(result.stdout.split())
        self.assertIn("nova-scheduler running nova-sched-ext's scheduler "
                      "manager", help_text)
        self.assertIn('[nova_sched_ext] scheduler_driver', help_text)
        self.assertIn('--config-file', help_text)

    def test_a_config_file_that_does_not_exist(self):
        missing = os.path.join(self.dir, 'nova.conf')
        self.assertUsageError('Failed to find some config files: ' + missing,
                              '--config-file', missing)

    def test_a_config_file_that_cannot_be_parsed(self):
        path = self.write('nova.conf', '[DEFAULT]\nno assignment here\n')
        self.assertUsageError('Failed to parse %s' % path,
                              '--config-file', path)

    def test_config_files_that_cannot_be_read(self):
        # Read first by the concurrency choice, on import.
        self.assertUsageError('config file %s is a directory' % self.dir,
                              '--config-file', self.dir)
        path = os.path.join(self.dir, 'nova.conf')
        with open(path, 'wb') as f:
            f.write(NOT_UTF8)
        self.assertUsageError('config file %s is not UTF-8 text' % path,
                              '--config-file', path)

    def test_a_value_of_the_wrong_type(self):
        path = self.write('nova.conf', '[scheduler]\nworkers = many\n')
        self.assertUsageError('workers', '--config-file', path)


class SchedulerOptionValuesTest(base.TestCase):
    """Every option of the package is checked at start, through main().

    Nova's parse is replaced by the parse of the files alone (no RPC, no
    database); the service is never created for a refused value.
    """

    #: (option = value, words of the one line)
    BAD_VALUES = [
        ('deployment_set_lock_timeout = -1', 'greater than or equal to 1'),
        ('host_state_full_refresh_interval = -5',
         'greater than or equal to 0'),
        ('numa_slot_reference_refresh_interval = -1',
         'greater than or equal to 0'),
        ('deployment_set_max_size = 0', 'greater than or equal to 1'),
        ('fit_backend = gpu', 'gpu'),
        ('placement_results_max = -1', 'greater than or equal to 0'),
        ('numa_slot_weight_multiplier = nan', 'not a finite number'),
        ('preemption_poll_interval = inf', 'not a finite number'),
        ('preemptible_max_per_az = -2', 'greater than or equal to -1'),
    ]

    def setUp(self):
        super().setUp()
        self.cmd = import_scheduler_cmd()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_files', return_value=[]))
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_dirs', return_value=[]))
        conf = self.cmd.CONF
        self.addCleanup(conf.clear)
        self.useFixture(fixtures.MockPatchObject(
            self.cmd.nova_compat, 'parse_args',
            side_effect=lambda argv, prog: conf(argv[1:], project='nova',
                                                prog=prog)))
        self.useFixture(fixtures.MockPatchObject(self.cmd.logging, 'setup'))
        self.useFixture(fixtures.MockPatchObject(
            self.cmd.gmr.TextGuruMeditation, 'setup_autorun'))
        self.create = self.useFixture(fixtures.MockPatchObject(
            self.cmd, 'create_service')).mock
        self.serve = self.useFixture(fixtures.MockPatchObject(
            self.cmd.service, 'serve')).mock
        self.useFixture(fixtures.MockPatchObject(self.cmd.service, 'wait'))

    def main(self, *lines):
        path = os.path.join(self.dir, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[nova_sched_ext]\n%s\n' % '\n'.join(lines))
        stderr = io.StringIO()
        # Once per process in real life: the parse of the last run goes.
        self.cmd.CONF.clear()
        with mock.patch('sys.stderr', stderr):
            try:
                self.cmd.main([PROG, '--config-file', path])
            except SystemExit as exc:
                return exc.code, stderr.getvalue()
        return None, stderr.getvalue()

    def test_each_bad_value_is_one_line_before_the_service_starts(self):
        for line, words in self.BAD_VALUES:
            code, stderr = self.main(line)
            self.assertEqual(2, code, '%s: %s' % (line, stderr))
            lines = stderr.splitlines()
            self.assertEqual(1, len(lines), stderr)
            option = line.split(' = ')[0]
            self.assertIn('%s: error: invalid value of [nova_sched_ext] %s: '
                          % (PROG, option), lines[0])
            self.assertIn(words, lines[0])
        self.create.assert_not_called()

    def test_library_floats_of_the_evictor_must_be_finite(self):
        # keystoneauth's options, in the preemption driver's section; a
        # float in every supported release (its timeout is an integer in
        # 2025.1's keystoneauth 5.10).
        code, stderr = self.main('[nova_sched_ext_evictor]',
                                 'connect_retry_delay = nan')
        self.assertEqual(2, code, stderr)
        self.assertEqual(
            '%s: error: invalid value of [nova_sched_ext_evictor] '
            'connect_retry_delay: nan is not a finite number\n' % PROG,
            stderr)
        self.create.assert_not_called()

    def test_good_values_start_the_service(self):
        code, stderr = self.main('deployment_set_lock_timeout = 1',
                                 'numa_slot_weight_multiplier = -2.5',
                                 'fit_backend = python')
        self.assertIsNone(code, stderr)
        self.serve.assert_called_once_with(self.create.return_value,
                                           workers=mock.ANY)

    def test_a_lock_url_of_no_backend_is_one_line(self):
        class Manager(object):
            pass

        holder = Manager()
        coordination.for_manager(holder)
        self.create.return_value = mock.Mock(manager=holder)
        code, stderr = self.main(
            'deployment_set_lock_url = redis//127.0.0.1:6379')
        self.assertEqual(2, code, stderr)
        lines = stderr.splitlines()
        self.assertEqual(1, len(lines), stderr)
        self.assertIn('%s: error: [nova_sched_ext] coordination_url = '
                      'redis//127.0.0.1:6379 names no coordination backend'
                      % PROG, lines[0])
        self.serve.assert_not_called()
