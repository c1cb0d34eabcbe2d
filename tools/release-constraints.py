#!/usr/bin/env python3
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

"""Write the pip constraints file of each supported Nova release.

For each release (31 = 2025.1, 32 = 2025.2, 33 = 2026.1, 34 = 2026.2)
pip's own resolver picks, from the package index only, one version of
every distribution that the following need together:

* that Nova release (``nova==NN.*``);
* the placement release of the same OpenStack release (the functional
  tests run placement in process);
* what devstack-lite runs besides (``--no-devstack-lite`` leaves them
  out): the keystone release of the same OpenStack release, the tempest
  tag made for it (tempest is branchless), python-openstackclient and
  gunicorn;
* this package's ``requirements.txt`` and ``test-requirements.txt``.

The result is ``tools/constraints/nova-NN.txt``: ``name==version`` lines
under a header that says how and when it was made.  The tox envs
``py3-novaNN``, ``functional-novaNN`` and ``fuzz-novaNN`` and
``tools/release-check.sh NN`` install with ``-c`` that file, so a test run
downloads nothing it did not pin.

The resolution is ``pip install --dry-run --ignore-installed --report``
run by this interpreter's pip with ``--isolated`` (no pip configuration
file and no ``PIP_*`` variable: no local wheel directory, no extra index,
no machine-wide constraints) against ``--index-url`` (default: the
``PIP_INDEX_URL`` of the environment, else PyPI).  Environment markers
are evaluated for the interpreter that runs this script, so run it with
the Python the tests use (3.11 here).

The newest versions a release's own requirements allow are not always
versions it works with: a library may since have dropped what that
release still uses (placement 13 and Nova 31's test fixtures set
``[oslo_policy] enforce_scope``, which oslo.policy 6.0 removed).  OpenStack
caps each stable branch's libraries with its ``upper-constraints.txt``
(openstack/requirements, branch ``stable/2025.1`` ...); give that file
with ``--upper-constraints 2025.1=FILE`` and the resolution stays under
it, except for the distributions this package or devstack-lite need
newer than any stable branch had (``UC_OVERRIDDEN``).  The file's name and
checksum go in the header; it is not kept in this tree.

  python3 tools/release-constraints.py            # all four releases
  python3 tools/release-constraints.py 31 33      # some of them
  python3 tools/release-constraints.py --check    # resolve, write nothing,
                                                  # say what would change
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYPI = 'https://pypi.org/simple'

# Nova major -> (OpenStack release, placement major, keystone major,
# tempest version).  The majors are those of the coordinated release
# (releases.openstack.org); ``pip index versions`` shows each of them on the
# index.  Tempest is tagged once per release ("tag Tempest for 2025.1").
RELEASES = {
    31: ('2025.1', 13, 27, '43.0.0'),
    32: ('2025.2', 14, 28, '45.0.0'),
    33: ('2026.1', 15, 29, '46.2.0'),
    34: ('2026.2', 16, 30, '47.0.0'),
}
# What devstack-lite installs besides keystone and tempest (the lower bounds
# of tools/devstack-lite/requirements.txt).
DEVSTACK_LITE = ('python-openstackclient>=7.0.0', 'gunicorn>=25.1.0')
# The files that name this package's own requirements, from the top of the
# tree.
REQUIREMENT_FILES = ('requirements.txt', 'test-requirements.txt')
# Never pinned: the installers themselves and this package.
UNPINNED = frozenset(('pip', 'setuptools', 'wheel', 'nova-sched-ext'))
# Lines of an upper-constraints file that are left out: what this tree
# needs newer than the stable branches pin (devstack-lite's gunicorn, for
# its uWSGI stand-in) and the distributions resolved here by release.
UC_OVERRIDDEN = frozenset(('gunicorn', 'nova', 'openstack-placement',
                           'keystone', 'tempest', 'nova-sched-ext'))


class Error(Exception):
    """A failure the user is told about in one line."""


def canonical(name):
    """A distribution name as PEP 503 compares it."""
    return re.sub(r'[-_.]+', '-', name).lower()


def parse_releases(words):
    """The Nova majors named by ``words`` (all of them if none), sorted.

    Each word is a major (``31``) or an OpenStack release (``2025.1``).
    """
    if not words:
        return sorted(RELEASES)
    by_name = {entry[0]: major for major, entry in RELEASES.items()}
    majors = set()
    for word in words:
        if word in by_name:
            majors.add(by_name[word])
        elif word.isdigit() and int(word) in RELEASES:
            majors.add(int(word))
        else:
            known = ', '.join('%d (%s)' % (major, RELEASES[major][0])
                              for major in sorted(RELEASES))
            raise Error('unknown release %r; supported: %s' % (word, known))
    return sorted(majors)


def requested(major, devstack_lite=True):
    """The requirements resolved for Nova ``major``.

    They come besides the package's requirement files.
    """
    _, placement, keystone, tempest = RELEASES[major]
    wanted = ['nova==%d.*' % major, 'openstack-placement==%d.*' % placement]
    if devstack_lite:
        wanted.append('keystone==%d.*' % keystone)
        wanted.append('tempest==%s' % tempest)
        wanted.extend(DEVSTACK_LITE)
    return wanted


def upper_constraints(text):
    """The lines of an upper-constraints file that cap the resolution.

    ``name===version`` lines (markers kept), without comments and without
    the distributions of ``UC_OVERRIDDEN``.
    """
    kept = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        match = re.match(r'([A-Za-z0-9][A-Za-z0-9._-]*)\s*===?', line)
        if not match:
            raise Error('upper-constraints line %d is not name===version: '
                        '%r' % (number, line))
        if canonical(match.group(1)) not in UC_OVERRIDDEN:
            kept.append(line)
    if not kept:
        raise Error('the upper-constraints file pins nothing')
    return kept


def parse_caps(values):
    """``{major: path}`` from ``--upper-constraints RELEASE=FILE`` values."""
    caps = {}
    for value in values:
        release, sep, path = value.partition('=')
        if not sep or not path:
            raise Error('--upper-constraints wants RELEASE=FILE, got %r'
                        % value)
        (major,) = parse_releases([release])
        if not os.path.isfile(path):
            raise Error('--upper-constraints %s: no such file %s'
                        % (release, path))
        caps[major] = path
    return caps


def pins_from_report(report):
    """``{canonical name: 'name==version'}`` from a pip report.

    The report is ``pip install --report``'s (version 1); the ``UNPINNED``
    distributions are left out.
    """
    if report.get('version') != '1':
        raise Error('pip wrote a report of version %r; this script reads '
                    'version 1' % report.get('version'))
    pins = {}
    for item in report.get('install', []):
        metadata = item['metadata']
        name = canonical(metadata['name'])
        if name in UNPINNED:
            continue
        pins[name] = '%s==%s' % (name, metadata['version'])
    return pins


def render(major, pins, made_by, when, python, pip_version, index_url,
           devstack_lite=True, cap=None):
    """The text of ``tools/constraints/nova-NN.txt``."""
    release = RELEASES[major][0]
    lines = [
        '# pip constraints for Nova %d (OpenStack %s): one version of every'
        % (major, release),
        '# distribution that this package (requirements.txt and '
        'test-requirements.txt)',
    ]
    wanted = ', '.join(requested(major, devstack_lite))
    lines.extend(textwrap.wrap(
        'needs together with %s.' % wanted,
        width=77, initial_indent='# ', subsequent_indent='# ',
        break_on_hyphens=False))
    lines += [
        '# Made by %s on %s' % (made_by, when),
        '# with pip %s on Python %s, from %s only.' % (
            pip_version, python, index_url),
    ]
    if cap:
        lines.append('# Capped by %s (sha256 %s), the' % cap)
        lines.append('# upper-constraints.txt of openstack/requirements '
                     'stable/%s.' % release)
    lines += [
        '# Refresh: python3 tools/release-constraints.py %d%s' % (
            major, ' --upper-constraints %s=FILE' % release if cap else ''),
        '# Used by tox -e py3-nova%d,functional-nova%d,fuzz-nova%d and'
        % (major, major, major),
        '# tools/release-check.sh %d.' % major,
    ]
    lines.extend(pins[name] for name in sorted(pins))
    return '\n'.join(lines) + '\n'


def changes(old_text, new_text):
    """The pins that differ between two constraints files.

    One line ``name: old -> new`` each (``-`` where one side has none).
    """
    def read(text):
        pins = {}
        for line in text.splitlines():
            line = line.split('#', 1)[0].strip()
            if '==' in line:
                name, version = line.split('==', 1)
                pins[canonical(name)] = version.strip()
        return pins
    old, new = read(old_text), read(new_text)
    return ['%s: %s -> %s' % (name, old.get(name, '-'), new.get(name, '-'))
            for name in sorted(set(old) | set(new))
            if old.get(name) != new.get(name)]


def pip_version():
    out = subprocess.run([sys.executable, '-m', 'pip', '--version'],
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise Error('%s has no working pip' % sys.executable)
    return out.stdout.split()[1]


def resolve(major, index_url, devstack_lite, log_dir, cap_lines=()):
    """Run pip's resolver for Nova ``major``; return the pins.

    ``cap_lines``: upper-constraints lines the resolution must stay under.
    """
    report_path = os.path.join(log_dir, 'nova-%d.json' % major)
    log_path = os.path.join(log_dir, 'nova-%d.log' % major)
    cmd = [sys.executable, '-m', 'pip', '--isolated', 'install',
           '--dry-run', '--ignore-installed', '--quiet',
           '--index-url', index_url, '--report', report_path]
    cert = os.environ.get('PIP_CERT')
    if cert:
        cmd += ['--cert', cert]
    for name in REQUIREMENT_FILES:
        cmd += ['-r', os.path.join(ROOT, name)]
    if cap_lines:
        cap_path = os.path.join(log_dir, 'upper-constraints-%d.txt' % major)
        with open(cap_path, 'w') as f:
            f.write('\n'.join(cap_lines) + '\n')
        cmd += ['-c', cap_path]
    cmd += requested(major, devstack_lite)
    with open(log_path, 'w') as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                              check=False)
    if done.returncode:
        with open(log_path) as log:
            lines = [line.strip() for line in log if line.strip()]
        last = next((line for line in reversed(lines)
                     if line.startswith('ERROR')), lines[-1] if lines else '')
        raise Error('pip could not resolve Nova %d: %s (full output: %s)'
                    % (major, last, log_path))
    with open(report_path) as f:
        return pins_from_report(json.load(f))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='release-constraints.py',
        description='Resolve and write tools/constraints/nova-NN.txt, the '
                    'pip constraints of each supported Nova release (the '
                    'Nova, placement, keystone and tempest of that OpenStack '
                    'release '
                    'with this package\'s requirements and test '
                    'requirements), with pip\'s resolver against the '
                    'package index only.',
        epilog='Supported: %s.' % ', '.join(
            '%d = %s (placement %d, keystone %d, tempest %s)'
            % ((major,) + RELEASES[major])
            for major in sorted(RELEASES)))
    parser.add_argument('releases', nargs='*', metavar='RELEASE',
                        help='a Nova major (31) or an OpenStack release '
                             '(2025.1); default: all')
    parser.add_argument('--output-dir', default=os.path.join(HERE,
                                                             'constraints'),
                        help='where the files go (default: %(default)s)')
    parser.add_argument('--index-url',
                        default=os.environ.get('PIP_INDEX_URL') or PYPI,
                        help='the package index (default: PIP_INDEX_URL, '
                             'else %s)' % PYPI)
    parser.add_argument('--no-devstack-lite', action='store_true',
                        help='leave out what only devstack-lite runs '
                             '(keystone, tempest, python-openstackclient, '
                             'gunicorn)')
    parser.add_argument('--upper-constraints', action='append', default=[],
                        metavar='RELEASE=FILE',
                        help='cap RELEASE (2025.1 or 31) by FILE, the '
                             'upper-constraints.txt of openstack/requirements'
                             "' stable branch (repeatable)")
    parser.add_argument('--check', action='store_true',
                        help='resolve and print what would change; write '
                             'nothing; exit 1 if anything would')
    args = parser.parse_args(argv)
    try:
        majors = parse_releases(args.releases)
        caps = parse_caps(args.upper_constraints)
        version = pip_version()
        python = '%s (%s %s)' % (platform.python_version(),
                                 sys.platform, platform.machine())
        when = datetime.datetime.now(datetime.timezone.utc).strftime(
            '%Y-%m-%d %H:%M UTC')
        differs = False
        with tempfile.TemporaryDirectory(prefix='release-constraints-') as tmp:
            for major in majors:
                print('resolving Nova %d (%s) ...' % (major,
                                                      RELEASES[major][0]),
                      flush=True)
                cap = cap_lines = None
                if major in caps:
                    with open(caps[major], 'rb') as f:
                        raw = f.read()
                    cap_lines = upper_constraints(raw.decode('utf-8'))
                    cap = (os.path.basename(caps[major]),
                           hashlib.sha256(raw).hexdigest()[:16])
                pins = resolve(major, args.index_url,
                               not args.no_devstack_lite, tmp,
                               cap_lines or ())
                text = render(major, pins, 'tools/release-constraints.py',
                              when, python, version, args.index_url,
                              devstack_lite=not args.no_devstack_lite,
                              cap=cap)
                path = os.path.join(args.output_dir, 'nova-%d.txt' % major)
                old = ''
                if os.path.exists(path):
                    with open(path) as f:
                        old = f.read()
                diff = changes(old, text)
                if args.check:
                    differs = differs or bool(diff)
                    print('%s: %s' % (path, '%d pins would change' % len(diff)
                                      if diff else 'up to date'))
                    for line in diff:
                        print('  ' + line)
                    continue
                os.makedirs(args.output_dir, exist_ok=True)
                with open(path, 'w') as f:
                    f.write(text)
                print('wrote %s: %d pins (%s, %d changed)' % (
                    path, len(pins), pins.get('nova', '?'), len(diff)))
        return 1 if differs else 0
    except Error as e:
        print('release-constraints.py: error: %s' % e, file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError) as e:
        print('release-constraints.py: error: %s: %s'
              % (type(e).__name__, e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('release-constraints.py: interrupted', file=sys.stderr)
        return 130


if __name__ == '__main__':
    sys.exit(main())
