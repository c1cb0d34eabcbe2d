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

"""Every console script of setup.cfg: ``--version`` and its options' help.

Each script runs in a process of its own (the scheduler and the capacity
commands choose Nova's concurrency mode when they are imported). There,
argparse's ``parse_known_args`` is wrapped: the first parser a script
parses with (its own, or oslo.config's) is walked, subcommands included,
for options without help text; then it parses ``--version``.
"""

import configparser
import json
import os
import subprocess
import sys

from nova_sched_ext import version
from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

PROBE = r'''
import argparse
import json
import sys
import warnings

prog, target = sys.argv[1], sys.argv[2]
module_name, function = target.split(':')
original = argparse.ArgumentParser.parse_known_args
report = {'walked': False, 'no_help': []}


def walk(parser, path):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                walk(sub, path + [name])
        elif action.option_strings and not action.help:
            report['no_help'].append(' '.join(path + [
                max(action.option_strings, key=len)]))


def probe(self, args=None, namespace=None):
    if not report['walked']:
        report['walked'] = True
        walk(self, [prog])
        sys.stderr.write('PROBE %s\n' % json.dumps(report))
        args = ['--version']
    return original(self, args, namespace)


sys.argv = [prog, '--version']
# Imported first: an import may parse sys.argv for a setting of its own
# (nova.monkey_patch looks for --config-file).
module = __import__(module_name, fromlist=[function])
argparse.ArgumentParser.parse_known_args = probe
sys.exit(getattr(module, function)())
'''


def console_scripts():
    """``{name: 'module:function'}`` of setup.cfg."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, 'setup.cfg'))
    scripts = {}
    for line in parser['entry_points']['console_scripts'].splitlines():
        if '=' in line:
            name, target = (part.strip() for part in line.split('=', 1))
            scripts[name] = target
    return scripts


class ConsoleScriptsTest(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.runs = {}
        for name, target in sorted(console_scripts().items()):
            cls.runs[name] = subprocess.run(
                [sys.executable, '-c', PROBE, name, target],
                capture_output=True, text=True, timeout=300, cwd=REPO)

    def test_there_are_scripts(self):
        self.assertIn('nova-sched-ext-scheduler', self.runs)
        self.assertGreaterEqual(len(self.runs), 8)

    def test_version_is_the_packages_and_novas(self):
        expected = version.version_string()
        self.assertRegex(expected,
                         r'^nova-sched-ext \S+ \(nova \d+\.\d+\.\d+\S*\)$')
        for name, done in self.runs.items():
            self.assertEqual(0, done.returncode, '%s: %s' % (name,
                                                             done.stderr))
            self.assertEqual(expected, done.stdout.strip(), name)

    def test_no_warning_before_the_output(self):
        for name, done in self.runs.items():
            lines = [line for line in done.stderr.splitlines()
                     if not line.startswith('PROBE ')]
            self.assertEqual([], lines, name)

    def test_every_option_has_help(self):
        for name, done in self.runs.items():
            [line] = [line for line in done.stderr.splitlines()
                      if line.startswith('PROBE ')]
            report = json.loads(line[len('PROBE '):])
            self.assertTrue(report['walked'], name)
            self.assertEqual([], report['no_help'], name)
