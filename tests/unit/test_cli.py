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

"""The console scripts' toolkit: parser, one-line errors, exit codes, tables.

Each console script's own tests pin its messages and tables; these pin
the rules the scripts share, on a small command of their own.
"""

import importlib
import io
import sys
import warnings

import fixtures

from nova_sched_ext import cli
from nova_sched_ext.cli import table
from nova_sched_ext import exception
from tests import base

PROG = 'nova-sched-ext-example'


def parser(**kwargs):
    """A command with ``--json`` on one subcommand of two."""
    top = cli.Parser(prog=PROG, **kwargs)
    top.add_argument('--debug', action='store_true', help='debug')
    commands = top.add_subparsers(dest='command', parser_class=cli.Parser)
    commands.required = True
    show = commands.add_parser('show', help='show')
    show.add_argument('--json', action='store_true', help='as JSON')
    show.add_argument('name', nargs='?', help='a name')
    commands.add_parser('apply', help='apply')
    return top


class TestParser(base.TestCase):

    def test_json_anywhere(self):
        for argv in (['show', '--json'], ['--json', 'show'],
                     ['--json', '--debug', 'show', 'x'],
                     ['show', 'x', '--json']):
            args = parser().parse_args(argv)
            self.assertTrue(args.json, argv)
        self.assertFalse(parser().parse_args(['show']).json)

    def test_json_after_double_dash_is_an_argument(self):
        args = parser().parse_args(['show', '--', '--json'])
        self.assertFalse(args.json)
        self.assertEqual('--json', args.name)

    def test_json_where_no_parser_defines_it_is_refused(self):
        exc = self.assertRaises(cli.UsageError, parser().parse_args,
                                ['--json', 'apply'])
        self.assertEqual('unrecognized arguments: --json (see --help)',
                         str(exc))

    def test_errors_are_one_usage_error_line(self):
        exc = self.assertRaises(cli.UsageError, parser().parse_args,
                                ['--bogus', 'show'])
        self.assertEqual(2, exc.exit_code)
        self.assertNotIn('\n', str(exc))
        self.assertIn('unrecognized arguments: --bogus', str(exc))

    def test_subcommands_point_to_the_same_help(self):
        exc = self.assertRaises(
            cli.UsageError, parser(help_hint=PROG + ' --help').parse_args,
            ['show', 'a', 'b'])
        self.assertEqual('unrecognized arguments: b (see %s --help)' % PROG,
                         str(exc))
        exc = self.assertRaises(cli.UsageError, parser().parse_args, [])
        self.assertTrue(str(exc).endswith(' (see --help)'), str(exc))

    def test_a_parser_that_exits_writes_the_line_itself(self):
        # The offline tools parse outside cli.run: the parser writes the
        # line and exits 2, in the subcommands too.
        stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        exc = self.assertRaises(
            SystemExit, parser(help_hint=PROG + ' --help', exits=True,
                               label='').parse_args, ['show', 'a', 'b'])
        self.assertEqual(2, exc.code)
        self.assertEqual('%s: unrecognized arguments: b (see %s --help)\n'
                         % (PROG, PROG), stderr.getvalue())


class TestRun(base.TestCase):

    def setUp(self):
        super().setUp()
        self.stderr = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value

    def fail_with(self, exc, **kwargs):
        def body():
            raise exc
        return cli.run(PROG, body, **kwargs)

    def test_the_body_exit_status(self):
        self.assertEqual(0, cli.run(PROG, lambda: 0))
        self.assertEqual(1, cli.run(PROG, lambda: 1))
        self.assertEqual('', self.stderr.getvalue())

    def test_a_user_facing_error_is_one_line_with_its_exit_code(self):
        class Down(exception.UserFacingError):
            exit_code = 1
        self.assertEqual(2, self.fail_with(cli.UsageError('bad\n  input')))
        self.assertEqual(1, self.fail_with(Down('a database is down')))
        self.assertEqual('%s: error: bad input\n%s: error: a database is '
                         'down\n' % (PROG, PROG), self.stderr.getvalue())

    def test_a_label_of_its_own(self):
        self.assertEqual(2, self.fail_with(cli.UsageError('bad'),
                                           label=''))
        self.assertEqual('%s: bad\n' % PROG, self.stderr.getvalue())

    def test_more_handled_errors(self):
        self.assertEqual(2, self.fail_with(KeyError('k'),
                                           handled=(KeyError,)))
        self.assertEqual("%s: error: 'k'\n" % PROG, self.stderr.getvalue())

    def test_unexpected_errors(self):
        logged = []
        self.assertEqual(1, self.fail_with(
            RuntimeError('boom'), unexpected=cli.unexpected_error,
            log_unexpected=lambda: logged.append(sys.exc_info()[1])))
        self.assertEqual(
            '%s: error: unexpected error: RuntimeError: boom (run with '
            '--debug for details)\n' % PROG, self.stderr.getvalue())
        self.assertEqual(['boom'], [str(e) for e in logged])
        # Without a mapping, the traceback is the caller's.
        self.assertRaises(RuntimeError, self.fail_with, RuntimeError('x'))

    def test_unreachable_backends_are_exit_1(self):
        from keystoneauth1 import exceptions as ks_exc
        from oslo_db import exception as db_exc
        self.assertEqual(('cannot read a database: gone', 1),
                         cli.unexpected_error(db_exc.DBError('gone')))
        self.assertEqual(
            ('cannot reach placement: no route', 1),
            cli.unexpected_error(ks_exc.ConnectFailure('no route')))


class TestTable(base.TestCase):

    def test_framed_aligned_columns(self):
        self.assertEqual(
            '+------+-------+\n'
            '| Host | Slots |\n'
            '+------+-------+\n'
            '| h1   |     3 |\n'
            '| h10  |       |\n'
            '+------+-------+',
            table.render([('h1', 3), ('h10', None)], ('Host', 'Slots'),
                         ['l', 'r']))

    def test_empty_cells_and_no_rows(self):
        self.assertEqual(
            '+---+\n| A |\n+---+\n| - |\n+---+',
            table.render([(None,)], ('A',), empty='-'))
        self.assertEqual('+---+\n| A |\n+---+\n+---+',
                         table.render([], ('A',)))


class TestConfigFilesOldPath(base.TestCase):

    def test_old_path_is_the_module_and_warns(self):
        from nova_sched_ext.cli import config_files
        sys.modules.pop('nova_sched_ext.cmd.config_files', None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            old = importlib.import_module('nova_sched_ext.cmd.config_files')
        self.assertIs(config_files, old)
        self.assertEqual([DeprecationWarning],
                         [w.category for w in caught])
        self.assertIn('nova_sched_ext.cli.config_files',
                      str(caught[0].message))
