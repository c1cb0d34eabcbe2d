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


"""A configuration file oslo.config cannot read is one line and exit 2.

A directory passed as ``--config-file`` or a file that is not UTF-8 escaped
oslo.config as a bare ``IsADirectoryError`` or ``UnicodeDecodeError``: a
traceback of 40-odd lines from every console script that reads
``nova.conf``.  Each command is run through its ``main()`` here (the
scheduler's in ``test_scheduler_cli.py``, in a fresh interpreter too, for
the concurrency choice it makes on import).
"""

import io
import os
import threading
from unittest import mock

import fixtures

from nova_sched_ext.cli import config_files
from tests import base
from tests.unit.capacity import test_cmd as capacity_test_cmd

#: what a Latin-1 editor leaves in a file that oslo.config reads as UTF-8
NOT_UTF8 = b'[DEFAULT]\n# caf\xe9\ndebug = true\n'


class ConfigFilesTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        # No default config file of this machine may count.
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_files', return_value=[]))
        self.useFixture(fixtures.MockPatch(
            'oslo_config.cfg.find_config_dirs', return_value=[]))
        self.directory = os.path.join(self.dir, 'nova.conf')
        os.mkdir(self.directory)
        self.not_utf8 = os.path.join(self.dir, 'latin1.conf')
        with open(self.not_utf8, 'wb') as f:
            f.write(NOT_UTF8)


class TestCheckReadable(ConfigFilesTestCase):

    def assertUnreadable(self, words, *args, **kwargs):
        exc = self.assertRaises(config_files.UnreadableConfigFile,
                                config_files.check_readable, *args, **kwargs)
        self.assertIn(words, str(exc))

    def test_a_directory(self):
        self.assertUnreadable(
            'config file %s is a directory' % self.directory,
            [self.directory])

    def test_not_utf8(self):
        self.assertUnreadable(
            'config file %s is not UTF-8 text (byte 0xe9 on line 2)'
            % self.not_utf8, [self.not_utf8])

    def test_the_files_of_a_config_dir(self):
        # In oslo.config's order: latin1.conf before nova.conf.
        self.assertUnreadable(self.not_utf8, [], [self.dir])

    def test_good_and_missing_files_are_left_to_oslo_config(self):
        good = os.path.join(self.dir, 'good.conf')
        with open(good, 'w', encoding='utf-8') as f:
            f.write('[DEFAULT]\n# caf\u00e9\n')
        config_files.check_readable(
            [good, os.path.join(self.dir, 'missing.conf')])

    def test_the_command_line(self):
        self.assertRaises(config_files.UnreadableConfigFile,
                          config_files.check_command_line,
                          ['plan', '--config-file=%s' % self.not_utf8])
        self.assertRaises(config_files.UnreadableConfigFile,
                          config_files.check_command_line,
                          ['--debug', '--config-dir', self.dir])
        config_files.check_command_line(['--config-file'])

    def test_the_default_files_without_a_command_line(self):
        with mock.patch('oslo_config.cfg.find_config_files',
                        return_value=[self.not_utf8]) as find:
            self.assertRaises(config_files.UnreadableConfigFile,
                              config_files.check_command_line, [],
                              prog='nova-x')
        find.assert_called_once_with(project='nova', prog='nova-x')


class TestChooseNativeThreads(base.TestCase):

    def test_an_unreadable_file_still_gives_native_threads(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_NOVA_DISABLE_EVENTLET_PATCHING'))
        with mock.patch('nova_sched_ext.compat.release.monkey_patch',
                        side_effect=[
                UnicodeDecodeError('utf-8', b'\xe9', 0, 1, 'invalid'),
                None]) as patch:
            config_files.choose_native_threads()
        self.assertEqual([mock.call('threading')] * 2,
                         patch.call_args_list)
        self.assertEqual('true',
                         os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'])


class CommandsTestCase(base.OneLineErrors, ConfigFilesTestCase):
    """Every console script that reads nova.conf, through its main()."""

    def setUp(self):
        super().setUp()
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stdout', self.stdout))
        self.useFixture(fixtures.MockPatch('sys.stderr', self.stderr))

    def check(self, run):
        for path, words in ((self.directory, 'is a directory'),
                            (self.not_utf8, 'is not UTF-8 text')):
            self.stdout.seek(0)
            self.stdout.truncate()
            self.stderr.seek(0)
            self.stderr.truncate()
            self.assertOneLineError(2, run(path), path, words)


class TestCapacityCommand(CommandsTestCase):
    prog = 'nova-sched-ext-capacity'

    def test_unreadable_config_files(self):
        cmd = capacity_test_cmd.import_cmd()
        self.check(lambda path: cmd.main(
            [self.prog, '--config-file', path]))


class TestDefragCommand(CommandsTestCase):
    prog = 'nova-sched-ext-defrag'

    def test_unreadable_config_files(self):
        capacity_test_cmd.import_cmd()
        from nova_sched_ext.defrag import cmd
        self.check(lambda path: cmd.main(
            [self.prog, 'plan', '--config-file', path]))


class TestExporter(CommandsTestCase):
    prog = 'nova-sched-ext-capacity-exporter'

    def test_unreadable_config_files(self):
        from nova_sched_ext.capacity import exporter
        self.check(lambda path: exporter.main(
            ['--config-file', path], stop=threading.Event()))


class TestSimulator(CommandsTestCase):
    prog = 'nova-sched-ext-sim'

    def assertOneLineError(self, code, result, *words):
        # The simulator's lines have no "error:" after its name.
        self.assertEqual(code, result)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertTrue(lines[0].startswith(self.prog + ': '), lines)
        for word in words:
            self.assertIn(word, lines[0])

    def test_unreadable_config_files(self):
        from nova_sched_ext_tools.sim import cli
        self.check(lambda path: cli.main(['--config-file', path]))
