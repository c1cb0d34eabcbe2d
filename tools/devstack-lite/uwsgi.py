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


"""devstack-lite's ``uwsgi``: serve a uWSGI file with gunicorn.

The devstack plugin starts an API as devstack does, ``uwsgi
--procname-prefix NAME --ini FILE``; run.sh puts a ``uwsgi`` command on the
PATH that runs this script, so that the API is served the way devstack-lite
serves keystone, placement and nova-api (gunicorn, ``wsgi_app.py``)
without building uWSGI. It understands the ``[uwsgi]`` options that
functions.sh's ``write_uwsgi_config`` writes, with uWSGI's meaning:

``http-socket`` (or ``http``)
    The address to serve HTTP on.
``module``, or ``mount = PATH=MODULE`` with ``manage-script-name``
    The application (``package.module:attribute``), at the root or at the
    URL path (gunicorn's ``SCRIPT_NAME``).
``env`` (repeatable)
    ``NAME=VALUE`` for the application's environment.
``processes``, ``threads``
    gunicorn's workers and threads.

Other options are ignored; a file without an address or an application is
refused with a one-line error.
"""

import argparse
import os
import re
import sys

LITE_DIR = os.path.dirname(os.path.abspath(__file__))
_SECTION = re.compile(r'^\s*\[([^\]]+)\]\s*$')


def read_uwsgi_section(path):
    """``{option: [values]}`` of the file's ``[uwsgi]`` section."""
    options = {}
    section = None
    with open(path) as f:
        for line in f:
            match = _SECTION.match(line)
            if match:
                section = match.group(1).strip()
                continue
            stripped = line.strip()
            if (section != 'uwsgi' or not stripped or
                    stripped[0] in '#;' or '=' not in stripped):
                continue
            name, value = stripped.split('=', 1)
            options.setdefault(name.strip(), []).append(value.strip())
    return options


def _last(options, name, default=None):
    values = options.get(name)
    return values[-1] if values else default


def gunicorn_command(options, gunicorn, name=None):
    """``(argv, environment additions)`` that serve the file's application.

    :raises ValueError: the file lacks what serving needs
    """
    address = _last(options, 'http-socket') or _last(options, 'http')
    if not address:
        raise ValueError('no http-socket (devstack-lite serves HTTP only)')
    script_name = ''
    application = _last(options, 'module')
    mount = _last(options, 'mount')
    if mount:
        if '=' not in mount:
            raise ValueError('mount = %s is not PATH=MODULE' % mount)
        script_name, application = mount.split('=', 1)
        if _last(options, 'manage-script-name', 'false').lower() not in (
                'true', '1', 'yes', 'on'):
            raise ValueError('mount without manage-script-name = true')
        script_name = script_name.rstrip('/')
    if not application:
        raise ValueError('no module or mount')
    env = {}
    for item in options.get('env', ()):
        key, sep, value = item.partition('=')
        if not sep or not key:
            raise ValueError('env = %s is not NAME=VALUE' % item)
        env[key] = value
    if script_name:
        env['SCRIPT_NAME'] = script_name
    argv = [gunicorn, '-c', os.path.join(LITE_DIR, 'gunicorn_conf.py'),
            '--bind', address,
            '--workers', _last(options, 'processes', '1'),
            '--threads', _last(options, 'threads', '4')]
    if name:
        argv += ['--name', name]
    argv.append('wsgi_app:load(%r)' % application)
    return argv, env


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='uwsgi', description=__doc__.split('\n\n')[0])
    parser.add_argument('--ini', required=True)
    parser.add_argument('--procname-prefix', default=None)
    parser.add_argument('--gunicorn', required=True,
                        help='the gunicorn command of the lite virtualenv')
    args = parser.parse_args(argv)
    try:
        options = read_uwsgi_section(args.ini)
        command, env = gunicorn_command(options, args.gunicorn,
                                        args.procname_prefix)
    except (OSError, ValueError) as exc:
        sys.exit('uwsgi (devstack-lite): cannot serve %s: %s'
                 % (args.ini, exc))
    print('uwsgi (devstack-lite): %s serves %s with: %s'
          % (args.procname_prefix or 'uwsgi', args.ini, ' '.join(command)),
          flush=True)
    os.execve(command[0], command, dict(os.environ, **env))


if __name__ == '__main__':
    main()
