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

"""The capacity services' bounds on the databases and placement.

Against backends of the tests' own at 127.0.0.1 that never answer, with a
one-second ``backend_timeout``; each case runs in a thread (or a process)
given minutes, so that a missing bound fails the test instead of hanging
it, and nothing depends on how fast the machine is.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading
import types

import fixtures
import sqlalchemy

from nova_sched_ext.capacity import backends
from tests import base
from tests.unit.capacity import backend_fakes


def mysql_dialect(driver='pymysql'):
    return types.SimpleNamespace(name='mysql', driver=driver)


class TestMySQLBounds(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(setattr, backends, '_mysql_timeout',
                        backends._mysql_timeout)

    def test_timeouts_the_url_does_not_set(self):
        backends.bound_mysql_connections(4)
        params = {'read_timeout': 60}
        backends._bound_mysql_connect(mysql_dialect(), None, [], params)
        self.assertEqual({'connect_timeout': 4, 'read_timeout': 60,
                          'write_timeout': 4}, params)

    def test_other_databases_are_left_alone(self):
        backends.bound_mysql_connections(4)
        for dialect in (types.SimpleNamespace(name='sqlite',
                                              driver='pysqlite'),
                        mysql_dialect('mysqlconnector')):
            params = {}
            backends._bound_mysql_connect(dialect, None, [], params)
            self.assertEqual({}, params)

    def test_a_silent_database_times_out(self):
        silent = self.useFixture(backend_fakes.SilentServer())
        backends.bound_mysql_connections(1)
        engine = sqlalchemy.create_engine(
            'mysql+pymysql://nova@127.0.0.1:%d/nova' % silent.port)
        self.addCleanup(engine.dispose)
        failures = []

        def connect():
            try:
                engine.connect().close()
            except Exception as exc:
                failures.append(exc)

        thread = threading.Thread(target=connect, daemon=True)
        thread.start()
        thread.join(120)
        self.assertFalse(thread.is_alive(), 'the connection never gave up')
        failure, = failures
        self.assertIn('timed out', str(failure))


class TestPlacementBound(base.TestCase):
    """A placement that never answers, in a process of its own."""

    SCRIPT = textwrap.dedent('''
        import json, sys
        from nova_sched_ext.compat import release
        release.monkey_patch('threading')
        import nova.conf
        from nova import config, context, objects
        from nova_sched_ext.capacity import backends
        from nova_sched_ext.cloud import placement
        config.parse_args(['test', '--config-file', sys.argv[1]],
                          init_rpc=False, configure_db=False)
        objects.register_all()
        backends.bound(nova.conf.CONF)
        try:
            placement.PlacementReader(context.get_admin_context()).trees(
                ['root'])
            print(json.dumps(['answered', '']))
        except Exception as exc:
            print(json.dumps([type(exc).__name__, str(exc)]))
    ''')

    def test_a_silent_placement_is_unavailable(self):
        silent = self.useFixture(backend_fakes.SilentServer())
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[placement]\nauth_type = none\n'
                    'endpoint_override = http://127.0.0.1:%d\n'
                    '[nova_sched_ext_capacity]\nbackend_timeout = 1\n'
                    % silent.port)
        env = dict(os.environ)
        env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
        result = subprocess.run([sys.executable, '-c', self.SCRIPT, path],
                                capture_output=True, text=True, env=env,
                                timeout=300)
        self.assertEqual(0, result.returncode, result.stderr)
        kind, message = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual('BackendUnavailable', kind, message)
        self.assertIn('cannot reach placement', message)
