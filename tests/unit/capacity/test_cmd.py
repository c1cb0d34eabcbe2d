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


"""nova-sched-ext-capacity's command line: output and one-line errors.

A command line, configuration file, flavor, zone or aggregate the command
cannot use is one line on stderr and exit status 2; a database or
placement it cannot reach is one line and exit status 1; never a
traceback.  The cases that need the real configuration parsing run the
command in a fresh interpreter; the others call ``main()``.
"""

import importlib
import io
import json
import os
import subprocess
import sys
import textwrap
from unittest import mock

import fixtures
from keystoneauth1 import exceptions as ks_exc
from oslo_db import exception as db_exc

from nova_sched_ext.capacity import errors
from tests import base
from tests.unit.capacity import backend_fakes

PROG = 'nova-sched-ext-capacity'


def import_cmd():
    """The command's module, without its import-time concurrency choice.

    The test run has made that choice already (see ``tests/__init__.py``),
    as the console script never meets it.
    """
    with mock.patch('nova_sched_ext.compat.release.monkey_patch') as patch:
        module = importlib.import_module('nova_sched_ext.capacity.cmd')
    if patch.called:
        patch.assert_called_once_with('threading')
    return module


def report():
    return {
        'by': 'az', 'generated_at': '2026-01-01T00:00:00Z',
        'flavors': [
            {'id': '1', 'name': 'small', 'vcpus': 1, 'ram': 512,
             'disk': 1},
            {'id': '2', 'name': 'pinned.large', 'vcpus': 8, 'ram': 16384,
             'disk': 20}],
        'scopes': [
            {'scope': 'az', 'name': 'nova',
             'capacity': {'small': 40, 'pinned.large': 2},
             'placement_only': {'small': 48, 'pinned.large': 5},
             'largest_flavor': 'pinned.large',
             'fragmentation': {'vcpus': 6, 'memory_mb': 2048}, 'hosts': 3},
            {'scope': 'az', 'name': 'zone-b',
             'capacity': {'small': 4, 'pinned.large': 0},
             'placement_only': {'small': 4, 'pinned.large': 1},
             'largest_flavor': 'small',
             'fragmentation': {'vcpus': 0, 'memory_mb': 0}, 'hosts': 1}],
        'hosts_counted': 4, 'hosts_skipped': {'service_down': 1},
        'engine_fallbacks': 2}


class CommandTestCase(base.OneLineErrors, base.TestCase):

    prog = PROG

    def setUp(self):
        super().setUp()
        self.cmd = import_cmd()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf = self.write('nova.conf', '[DEFAULT]\n')
        # No default config file of this machine may count.
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_files', return_value=[]))
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_dirs', return_value=[]))
        self.parse = self.useFixture(fixtures.MockPatch(
            'nova.config.parse_args')).mock
        # the defaults main() sets would outlive the test
        self.set_default = self.useFixture(fixtures.MockPatch(
            'nova.conf.CONF.set_default')).mock
        self.run_ = self.useFixture(fixtures.MockPatchObject(
            self.cmd, 'run', return_value=report())).mock
        self.stdout = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        self.stderr = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def main(self, *args):
        return self.cmd.main([PROG] + list(args))


class TestArguments(CommandTestCase):

    def test_options_reach_compute(self):
        self.assertEqual(0, self.main(
            '--config-file', self.conf, '--flavor', 'a', '--flavor', 'b',
            '--by', 'az', '--az', 'nova', '--aggregate', 'agg',
            '--per-host'))
        (args,), _ = self.run_.call_args
        self.assertEqual((['a', 'b'], 'az', 'nova', 'agg', True),
                         (args.flavors, args.by, args.az, args.aggregate,
                          args.per_host))
        (argv,), kwargs = self.parse.call_args
        self.assertEqual([PROG, '--config-file', self.conf], argv)
        self.assertFalse(kwargs['init_rpc'])
        # an interactive command does not wait for a database that is down
        self.set_default.assert_any_call('max_retries', 0,
                                         group='api_database')

    def test_defaults(self):
        self.assertEqual(0, self.main('--config-file', self.conf))
        (args,), _ = self.run_.call_args
        self.assertEqual((None, 'cloud', None, None, False),
                         (args.flavors, args.by, args.az, args.aggregate,
                          args.per_host))

    def test_several_config_files_in_order(self):
        other = self.write('more.conf', '')
        self.main('--config-file', self.conf, '--config-file', other,
                  '--config-dir', self.dir)
        (argv,), _ = self.parse.call_args
        self.assertEqual([PROG, '--config-file', self.conf,
                          '--config-file', other, '--config-dir', self.dir],
                         argv)

    def test_help(self):
        exc = self.assertRaises(SystemExit, self.main, '--help')
        self.assertEqual(0, exc.code)
        for option in ('--config-file', '--flavor', '--by', '--az',
                       '--aggregate', '--per-host', '--json'):
            self.assertIn(option, self.stdout.getvalue())

    def test_bad_arguments(self):
        self.assertOneLineError(2, self.main('--by', 'rack'), 'rack')
        self.stderr.seek(0), self.stderr.truncate()
        self.assertOneLineError(2, self.main('--bogus'), '--bogus')

    def test_missing_config_file(self):
        self.assertOneLineError(
            2, self.main('--config-file', os.path.join(self.dir, 'no.conf')),
            'no.conf', 'does not exist')
        self.parse.assert_not_called()

    def test_config_dir_that_does_not_exist(self):
        self.assertOneLineError(
            2, self.main('--config-dir', os.path.join(self.dir, 'nowhere')),
            'nowhere')

    def test_no_config_at_all(self):
        self.assertOneLineError(2, self.main(), 'no configuration file',
                                '--config-file')

    def test_unreadable_config_file(self):
        with mock.patch('os.access', return_value=False):
            self.assertOneLineError(
                2, self.main('--config-file', self.conf), 'cannot be read')


class TestErrors(CommandTestCase):

    def _fails(self, error, code, *words):
        self.run_.side_effect = error
        self.assertOneLineError(code, self.main('--config-file', self.conf),
                                *words)
        self.assertNotIn('Traceback', self.stderr.getvalue())

    def test_unknown_flavor(self):
        self._fails(errors.UnknownFlavor("unknown flavor 'x'"), 2, "'x'")

    def test_unknown_zone(self):
        self._fails(errors.UnknownScope("unknown availability zone 'z'"), 2)

    def test_database_unreachable(self):
        self._fails(errors.BackendUnavailable(
            'cannot read the API database (cell mappings): refused'), 1,
            'API database')

    def test_placement_unreachable(self):
        self._fails(errors.BackendUnavailable(
            'cannot reach placement: Connection refused'), 1, 'placement')

    def test_bad_placement_credentials(self):
        self._fails(errors.ConfigError('placement refused the credentials'),
                    2)

    def test_errors_the_count_did_not_wrap(self):
        self._fails(db_exc.DBConnectionError('gone\naway'), 1, 'database',
                    'gone away')
        self.stderr.seek(0), self.stderr.truncate()
        self._fails(ks_exc.ConnectFailure('refused'), 1, 'placement')
        self.stderr.seek(0), self.stderr.truncate()
        self._fails(RuntimeError('boom'), 1, 'unexpected error', 'boom',
                    '--debug')


class TestOutput(CommandTestCase):

    def test_json(self):
        self.assertEqual(0, self.main('--config-file', self.conf, '--json'))
        self.assertEqual(report(), json.loads(self.stdout.getvalue()))

    def test_table(self):
        self.assertEqual(0, self.main('--config-file', self.conf))
        out = self.stdout.getvalue()
        lines = out.splitlines()
        self.assertIn('| Availability zone | Flavor       | vCPUs | '
                      'RAM (MiB) | Capacity | Placement only |', lines)
        self.assertIn('| nova              | pinned.large |     8 |     '
                      '16384 |        2 |              5 |', lines)
        self.assertIn('service_down 1', out)
        self.assertIn("2 host/flavor pair(s) counted with Nova's own fit",
                      out)
        self.assertIn('| zone-b            |     1 | small', out)

    def test_render_table(self):
        self.assertEqual(textwrap.dedent('''\
            +----+-----+
            | a  |   b |
            +----+-----+
            | xy |   1 |
            |    | 100 |
            +----+-----+'''), self.cmd.render_table(
            [('xy', 1), (None, 100)], ('a', 'b'), ['l', 'r']))


class TestFreshInterpreter(base.TestCase):
    """What only a fresh process shows: the real configuration parsing."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def run_command(self, *args):
        env = dict(os.environ)
        env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
        result = subprocess.run(
            [sys.executable, '-m', 'nova_sched_ext.capacity.cmd'] +
            list(args), capture_output=True, text=True, env=env,
            cwd=self.dir, timeout=300)
        return result

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def assertOneLine(self, result, code, *words):
        self.assertEqual(code, result.returncode, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith(PROG + ': error: '), lines)
        for word in words:
            self.assertIn(word, lines[0])
        self.assertEqual('', result.stdout)

    def test_a_file_that_does_not_parse(self):
        path = self.write('broken.conf', '[DEFAULT\nfoo =\n')
        self.assertOneLine(self.run_command('--config-file', path), 2,
                           'broken.conf')

    def test_an_unreachable_database(self):
        missing = os.path.join(self.dir, 'no-such-dir')
        path = self.write('nova.conf', textwrap.dedent('''\
            [api_database]
            connection = sqlite:///%s/api.sqlite
            [database]
            connection = sqlite:///%s/main.sqlite
            ''' % (missing, missing)))
        result = self.run_command('--config-file', path, '--json')
        self.assertOneLine(result, 1, 'API database',
                           'unable to open database file')
        self.assertNotIn('sqlalche.me', result.stderr)

    def _mysql_conf(self, port, extra=''):
        return self.write('nova.conf', textwrap.dedent('''\
            [api_database]
            connection = mysql+pymysql://nova@127.0.0.1:%d/nova_api
            [database]
            connection = mysql+pymysql://nova@127.0.0.1:%d/nova
            [nova_sched_ext_capacity]
            backend_timeout = 1
            ''' % (port, port)) + extra)

    def test_a_silent_database(self):
        # Accepts the connection and never greets: without a bound the
        # command waited for ever.
        silent = self.useFixture(backend_fakes.SilentServer())
        result = self.run_command('--config-file',
                                  self._mysql_conf(silent.port))
        self.assertOneLine(result, 1, 'API database', 'timed out')

    def test_a_database_that_refuses(self):
        refusing = self.useFixture(backend_fakes.RefusingPort())
        result = self.run_command('--config-file',
                                  self._mysql_conf(refusing.port))
        self.assertOneLine(result, 1, 'API database')
        # The socket's words: eventlet's green socket (2025.1, where the
        # command runs monkey patched) names the errno, the native one
        # says it.
        self.assertRegex(result.stderr, 'Connection refused|ECONNREFUSED')
        self.assertNotIn('attempts left', result.stderr)

    def test_out_of_bounds_options_are_one_line(self):
        for line, words in (
                ('placement_workers = 0',
                 ('[nova_sched_ext_capacity] placement_workers',
                  'greater than or equal to 1')),
                ('fit = bogus', ('[nova_sched_ext_capacity] fit', 'bogus')),
                ('backend_timeout = 0', ('backend_timeout',))):
            path = self.write('nova.conf',
                              '[nova_sched_ext_capacity]\n%s\n' % line)
            self.assertOneLine(self.run_command('--config-file', path), 2,
                               'nova.conf', *words)
