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


"""devstack-lite's stand-ins for devstack's services and uWSGI functions.

The plugin's capacity phases run against them for real in devstack-lite;
these tests pin what they write and the command that serves the result.
"""

import importlib.util
import os
import subprocess

import fixtures

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
LITE = os.path.join(REPO, 'tools', 'devstack-lite')


def _load_uwsgi():
    spec = importlib.util.spec_from_file_location(
        'lite_uwsgi', os.path.join(LITE, 'uwsgi.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


uwsgi = _load_uwsgi()


class LiteFunctionsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf = os.path.join(self.dir, 'api-uwsgi.ini')

    def _bash(self, commands, check=True):
        script = ('LITE_DIR=%s VENV=/nonexistent LOGDIR=/tmp PIDDIR=/tmp\n'
                  'source %s/functions.sh\n'
                  'SERVICE_HOST=127.0.0.1:35354\n%s\n'
                  % (LITE, LITE, commands.replace('CONF', self.conf)))
        return subprocess.run(['bash', '-c', script], capture_output=True,
                              text=True, check=check, timeout=60)

    def _ini(self):
        return uwsgi.read_uwsgi_section(self.conf)

    def test_enable_and_disable_service(self):
        out = self._bash('ENABLED_SERVICES=key,n-api\n'
                         'enable_service nse-capacity-api n-api\n'
                         'echo "$ENABLED_SERVICES"\n'
                         'disable_service n-api\n'
                         'echo "$ENABLED_SERVICES"\n'
                         'is_service_enabled nse-capacity-api && echo on\n')
        self.assertEqual(['key,n-api,nse-capacity-api',
                          'key,nse-capacity-api', 'on'],
                         out.stdout.split())

    def test_an_api_behind_apache_is_mounted_at_its_path(self):
        self._bash('write_uwsgi_config CONF pkg.wsgi:application /numa '
                   '"" nse-api\n'
                   'iniset CONF uwsgi env NAME=value')
        options = self._ini()
        self.assertEqual(['127.0.0.1:35354'], options['http-socket'])
        self.assertEqual(['/numa=pkg.wsgi:application'], options['mount'])
        self.assertEqual(['true'], options['manage-script-name'])
        self.assertNotIn('module', options)
        argv, env = uwsgi.gunicorn_command(options, '/venv/bin/gunicorn',
                                           'nse-api')
        self.assertEqual({'NAME': 'value', 'SCRIPT_NAME': '/numa'}, env)
        self.assertEqual(['/venv/bin/gunicorn', '--bind', '127.0.0.1:35354'],
                         argv[:3])
        self.assertEqual(['--name', 'nse-api',
                          "wsgi_app:load('pkg.wsgi:application')"],
                         argv[-3:])

    def test_an_api_with_an_http_address_serves_at_the_root(self):
        self._bash('write_uwsgi_config CONF pkg.wsgi:app "" 127.0.0.1:9 x')
        options = self._ini()
        self.assertEqual(['127.0.0.1:9'], options['http-socket'])
        self.assertEqual(['pkg.wsgi:app'], options['module'])
        argv, env = uwsgi.gunicorn_command(options, 'gunicorn')
        self.assertEqual({}, env)
        self.assertEqual("wsgi_app:load('pkg.wsgi:app')", argv[-1])

    def test_two_apis_cannot_share_the_address(self):
        result = self._bash(
            'write_uwsgi_config CONF a.wsgi:app /a "" api-a\n'
            'write_uwsgi_config CONF.b b.wsgi:app /b "" api-b\n',
            check=False)
        self.assertEqual(1, result.returncode)
        self.assertIn('api-b and api-a would both listen on 127.0.0.1:35354',
                      result.stderr)

    def test_a_wsgi_script_is_refused(self):
        result = self._bash('write_uwsgi_config CONF /usr/bin/api /a "" a',
                            check=False)
        self.assertEqual(1, result.returncode)
        self.assertIn('not \'/usr/bin/api\'', result.stderr)

    def test_remove_uwsgi_config(self):
        self._bash('write_uwsgi_config CONF a.wsgi:app /a "" api-a\n'
                   'remove_uwsgi_config CONF api-a\n'
                   'write_uwsgi_config CONF.b b.wsgi:app /b "" api-b\n')
        self.assertFalse(os.path.exists(self.conf))

    def test_a_file_without_address_or_application_is_refused(self):
        with open(self.conf, 'w') as f:
            f.write('[uwsgi]\nmodule = a:b\n')
        self.assertRaises(ValueError, uwsgi.gunicorn_command,
                          self._ini(), 'gunicorn')
        with open(self.conf, 'w') as f:
            f.write('[uwsgi]\nhttp-socket = :1\nmount = /a=a:b\n')
        self.assertRaises(ValueError, uwsgi.gunicorn_command,
                          self._ini(), 'gunicorn')
