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

"""tools/release-constraints.py: its pure parts, and the files it wrote.

The resolution itself (pip against the package index) is not run here;
what is checked is what the script makes of pip's report, the file it
writes, and that the committed constraints files and the requirement files
agree with its table of releases.
"""

import importlib.util
import io
import os
import re
from unittest import mock

import fixtures

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _load():
    spec = importlib.util.spec_from_file_location(
        'release_constraints',
        os.path.join(REPO, 'tools', 'release-constraints.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rc = _load()


def _report(*items, version='1'):
    return {'version': version,
            'install': [{'metadata': {'name': name, 'version': v}}
                        for name, v in items]}


def _read(*parts):
    with open(os.path.join(REPO, *parts)) as f:
        return f.read()


class ReleasesTest(base.TestCase):

    def test_all_releases_by_default(self):
        self.assertEqual([31, 32, 33, 34], rc.parse_releases([]))

    def test_a_major_or_an_openstack_release(self):
        self.assertEqual([31, 32], rc.parse_releases(['2025.2', '31', '31']))

    def test_an_unknown_release_is_one_line_naming_the_supported(self):
        e = self.assertRaises(rc.Error, rc.parse_releases, ['30'])
        self.assertEqual("unknown release '30'; supported: 31 (2025.1), "
                         "32 (2025.2), 33 (2026.1), 34 (2026.2)", str(e))

    def test_requested_with_and_without_devstack_lite(self):
        self.assertEqual(
            ['nova==31.*', 'openstack-placement==13.*', 'keystone==27.*',
             'tempest==43.0.0', 'python-openstackclient>=7.0.0',
             'gunicorn>=25.1.0'],
            rc.requested(31))
        self.assertEqual(['nova==34.*', 'openstack-placement==16.*'],
                         rc.requested(34, devstack_lite=False))


class ReportTest(base.TestCase):

    def test_pins_by_canonical_name_without_the_installers(self):
        pins = rc.pins_from_report(_report(
            ('oslo.config', '10.7.0'), ('PyYAML', '6.0.3'), ('pip', '25.0'),
            ('setuptools', '80.0'), ('nova_sched_ext', '1.0'),
            ('nova', '31.3.1')))
        self.assertEqual({'oslo-config': 'oslo-config==10.7.0',
                          'pyyaml': 'pyyaml==6.0.3',
                          'nova': 'nova==31.3.1'}, pins)

    def test_another_report_version_is_refused(self):
        e = self.assertRaises(rc.Error, rc.pins_from_report,
                              _report(('nova', '31.3.1'), version='2'))
        self.assertIn("version '2'", str(e))


class RenderTest(base.TestCase):

    def _render(self, pins):
        return rc.render(31, pins, 'tools/release-constraints.py',
                         '2026-12-03 20:00 UTC', '3.11.7 (linux x86_64)',
                         '23.2.1', 'https://pypi.org/simple')

    def test_a_header_then_the_pins_sorted(self):
        text = self._render({'nova': 'nova==31.3.1', 'alembic':
                             'alembic==1.20.1'})
        lines = text.splitlines()
        header = [line for line in lines if line.startswith('#')]
        self.assertEqual(lines[:len(header)], header)
        self.assertEqual(['alembic==1.20.1', 'nova==31.3.1'],
                         lines[len(header):])
        self.assertIn('Nova 31 (OpenStack 2025.1)', header[0])
        self.assertIn('2026-12-03 20:00 UTC', text)
        self.assertIn('from https://pypi.org/simple only', text)
        self.assertIn('# Refresh: python3 tools/release-constraints.py 31',
                      header)

    def test_changes_between_two_files(self):
        old = self._render({'nova': 'nova==31.3.0', 'six': 'six==1.16.0',
                            'pbr': 'pbr==7.0.0'})
        new = self._render({'nova': 'nova==31.3.1', 'pbr': 'pbr==7.0.0',
                            'wrapt': 'wrapt==2.0.0'})
        self.assertEqual(['nova: 31.3.0 -> 31.3.1', 'six: 1.16.0 -> -',
                          'wrapt: - -> 2.0.0'], rc.changes(old, new))
        self.assertEqual([], rc.changes(new, new))

    def test_main_says_a_bad_release_in_one_line(self):
        err = io.StringIO()
        with mock.patch('sys.stderr', err):
            self.assertEqual(1, rc.main(['2024.2']))
        self.assertEqual(["release-constraints.py: error: unknown release "
                          "'2024.2'; supported: 31 (2025.1), 32 (2025.2), "
                          "33 (2026.1), 34 (2026.2)"],
                         err.getvalue().splitlines())


class UpperConstraintsTest(base.TestCase):
    """--upper-constraints: a stable branch's caps, minus the overridden."""

    def test_caps_kept_with_markers_and_the_overridden_left_out(self):
        text = ('# a comment\n'
                'oslo.policy===4.5.1\n'
                'gunicorn===23.0.0\n'
                'Tempest===43.0.0\n'
                'pywin32===306;sys_platform=="win32"  # windows\n'
                '\n')
        self.assertEqual(['oslo.policy===4.5.1',
                          'pywin32===306;sys_platform=="win32"'],
                         rc.upper_constraints(text))

    def test_a_line_that_is_no_pin_is_refused(self):
        error = self.assertRaises(rc.Error, rc.upper_constraints,
                                  'oslo.policy===4.5.1\n-e git+https://x\n')
        self.assertIn('line 2', str(error))
        self.assertRaises(rc.Error, rc.upper_constraints, '# nothing\n')

    def test_release_equals_file(self):
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'uc.txt')
        with open(path, 'w') as f:
            f.write('six===1.17.0\n')
        self.assertEqual({31: path}, rc.parse_caps(['2025.1=' + path]))
        self.assertEqual({32: path}, rc.parse_caps(['32=' + path]))
        for bad in ('2025.1', '2025.1=', '2024.2=' + path,
                    '2025.1=' + path + '.missing'):
            self.assertRaises(rc.Error, rc.parse_caps, [bad])

    def test_the_header_names_the_cap(self):
        text = rc.render(31, {'nova': 'nova==31.3.1'}, 'the script',
                         '2026-12-03 20:00 UTC', '3.11.7', '26.3',
                         'https://pypi.org/simple',
                         cap=('uc-2025.1.txt', '33cd019691433824'))
        self.assertIn('# Capped by uc-2025.1.txt (sha256 33cd019691433824)',
                      text)
        self.assertIn('stable/2025.1', text)
        self.assertIn('--upper-constraints 2025.1=FILE', text)


class CommittedFilesTest(base.TestCase):
    """The constraints files and the requirement files match the table."""

    def _pins(self, major):
        text = _read('tools', 'constraints', 'nova-%d.txt' % major)
        return dict(line.split('==', 1) for line in text.splitlines()
                    if line and not line.startswith('#'))

    def test_each_file_pins_its_release(self):
        for major, (release, placement, keystone, tempest) in sorted(
                rc.RELEASES.items()):
            pins = self._pins(major)
            self.assertTrue(pins['nova'].startswith('%d.' % major), major)
            self.assertTrue(pins['openstack-placement'].startswith(
                '%d.' % placement), major)
            self.assertTrue(pins['keystone'].startswith('%d.' % keystone),
                            major)
            self.assertEqual(tempest, pins['tempest'], major)
            header = _read('tools', 'constraints', 'nova-%d.txt' % major)
            self.assertIn('OpenStack %s' % release, header.splitlines()[0])

    def test_the_requirements_span_the_supported_releases(self):
        nova = re.search(r'^nova>=(\d+)\.0\.0,<(\d+) ',
                         _read('requirements.txt'), re.M)
        self.assertEqual((min(rc.RELEASES), max(rc.RELEASES) + 1),
                         (int(nova.group(1)), int(nova.group(2))))
        oldest_placement = rc.RELEASES[min(rc.RELEASES)][1]
        self.assertRegex(_read('test-requirements.txt'),
                         r'(?m)^openstack-placement>=%d\.0\.0 '
                         % oldest_placement)
        for line in _read('setup.cfg').splitlines():
            if 'openstack-placement' in line:
                self.assertEqual('openstack-placement>=%d.0.0'
                                 % oldest_placement, line.strip())
