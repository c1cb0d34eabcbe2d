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

"""The capacity API: routes, query parsing, errors, roles, the cache."""

import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading

import fixtures
from keystoneauth1 import exceptions as ks_exc
from oslo_db import exception as db_exc
import webob

from nova_sched_ext.capacity import api
from nova_sched_ext.capacity import errors
from nova_sched_ext.capacity import wsgi
from nova_sched_ext.compat import release
from nova_sched_ext.conf import capacity as capacity_conf
from tests import base
from tests.unit.capacity import api_fakes
from tests.unit.capacity import backend_fakes

GROUP = capacity_conf.GROUP_NAME
ADMIN = {'HTTP_X_IDENTITY_STATUS': 'Confirmed', 'HTTP_X_ROLES': 'reader,admin'}


class APITestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.core = self.useFixture(api_fakes.FakeCapacity())
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.capacity'))
        self.clock = api_fakes.FakeClock()
        self.contexts = []
        self.app = self.make_app()

    def make_app(self, check_roles=True, **overrides):
        return api.CapacityApp(api_fakes.make_conf(**overrides), self._context,
                               check_roles=check_roles, clock=self.clock)

    def _context(self):
        self.contexts.append(object())
        return self.contexts[-1]

    def get(self, path, app=None, headers=ADMIN, method='GET'):
        request = webob.Request.blank(path, environ=dict(headers),
                                      method=method)
        return request.get_response(app or self.app)

    def assert_error(self, response, status, detail_part):
        self.assertEqual(status, response.status_int, response.text)
        self.assertEqual('application/json', response.content_type)
        error, = response.json['errors']
        self.assertEqual(status, error['status'])
        self.assertIn(detail_part, error['detail'])
        return error


class TestRoutes(APITestCase):

    def test_version_document(self):
        response = self.get('/', headers={})
        self.assertEqual(200, response.status_int)
        self.assertEqual(
            {'versions': [{'id': 'v1', 'status': 'CURRENT', 'links': [
                {'rel': 'self', 'href': 'http://localhost/v1/'}]}]},
            response.json)

    def test_version_document_behind_a_prefix(self):
        request = webob.Request.blank('/v1', base_url=(
            'https://cloud.example/numa-capacity'))
        response = request.get_response(self.app)
        self.assertEqual(
            'https://cloud.example/numa-capacity/v1/',
            response.json['version']['links'][0]['href'])

    def test_unknown_path_is_404(self):
        self.assert_error(self.get('/v2/capacity'), 404, '/v2/capacity')

    def test_writing_is_405(self):
        response = self.get('/v1/capacity', method='POST')
        self.assert_error(response, 405, 'read-only')
        self.assertEqual('GET, HEAD', response.headers['Allow'])
        self.assertEqual([], self.core.calls)


class TestCapacity(APITestCase):

    def test_default_query(self):
        response = self.get('/v1/capacity')
        self.assertEqual(200, response.status_int)
        self.assertEqual('application/json', response.content_type)
        self.assertEqual(api_fakes.report('cloud'), response.json)
        self.assertEqual([{'context': self.contexts[0], 'flavors': None,
                           'by': 'cloud', 'az': None, 'aggregate': None,
                           'per_host': False}], self.core.calls)

    def test_every_parameter_reaches_the_count(self):
        response = self.get('/v1/capacity?flavor=m1.large&flavor=m1.small'
                            '&flavor=m1.large&by=az&az=nova&aggregate=ssd'
                            '&per_host=true')
        self.assertEqual(200, response.status_int, response.text)
        call, = self.core.calls
        self.assertEqual(['m1.large', 'm1.small'], call['flavors'])
        self.assertEqual(('az', 'nova', 'ssd', True),
                         (call['by'], call['az'], call['aggregate'],
                          call['per_host']))

    def test_each_scope_is_accepted(self):
        for by in capacity_conf.SCOPES:
            response = self.get('/v1/capacity?by=%s' % by)
            self.assertEqual(200, response.status_int, response.text)
            self.assertEqual(by, response.json['by'])

    def test_bad_queries_are_400_without_counting(self):
        for query, detail in (
                ('by=rack', "Invalid value 'rack' for by: use one of "
                            'cloud, az, aggregate, cell'),
                ('per_host=maybe', "Invalid value 'maybe' for per_host"),
                ('fresh=2', "Invalid value '2' for fresh"),
                ('flavour=m1.small', 'Unknown query parameter(s): flavour'),
                ('by=az&by=cell', 'by is given more than once'),
                ('flavor=', 'Empty flavor')):
            response = self.get('/v1/capacity?' + query)
            self.assert_error(response, 400, detail)
        self.assertEqual([], self.core.calls)

    def test_capacity_error_is_400_with_its_message(self):
        self.core.error = self.core.CapacityError(
            "Unknown flavor 'm9.huge'")
        response = self.get('/v1/capacity?flavor=m9.huge')
        self.assert_error(response, 400, "Unknown flavor 'm9.huge'")

    def test_the_counts_own_backend_error_is_503(self):
        self.core.error = errors.BackendUnavailable(
            'placement at http://placement:8778 is unreachable')
        response = self.get('/v1/capacity?fresh=true')
        error = self.assert_error(response, 503,
                                  'a database or placement cannot be reached')
        self.assertNotIn('8778', error['detail'])
        self.assertIn('placement at http://placement:8778 is unreachable',
                      self.log.output)
        self.assertEqual('30', response.headers['Retry-After'])

    def test_unreachable_backends_are_503_without_their_words(self):
        for error in (db_exc.DBConnectionError(
                "(2003, \"Can't connect to MySQL server on "
                "'db-7.internal'\")"),
                ks_exc.ConnectFailure('placement.internal refused'),
                ks_exc.EndpointNotFound('no placement endpoint')):
            self.core.error = error
            response = self.get('/v1/capacity?fresh=true')
            detail = self.assert_error(response, 503, 'try again later')[
                'detail']
            self.assertNotIn('internal', detail)
            self.assertNotIn('endpoint', detail)
            self.assertEqual('30', response.headers['Retry-After'])
            self.assertIn(str(error), self.log.output)
        self.assertIn('a backend is unreachable', self.log.output)

    def test_an_unexpected_error_is_500_and_logged(self):
        self.core.error = ZeroDivisionError('division by zero')
        response = self.get('/v1/capacity')
        error = self.assert_error(response, 500, 'the service log')
        self.assertNotIn('division', error['detail'])
        self.assertIn('Traceback', self.log.output)
        self.assertIn('division by zero', self.log.output)

    def test_the_services_configuration_is_500_without_its_words(self):
        self.core.error = errors.ConfigError(
            'cannot use the API database: (pymysql.err.OperationalError) '
            "Access denied for user 'nova'@'db-7.internal'")
        response = self.get('/v1/capacity')
        error = self.assert_error(response, 500, 'configuration')
        self.assertNotIn('db-7', error['detail'])
        self.assertIn("'nova'@'db-7.internal'", self.log.output)

    def test_a_query_string_that_is_not_utf8_is_400(self):
        for query in ('flavor=%FF', 'by=%C3%28', '%FF=1'):
            self.assert_error(self.get('/v1/capacity?' + query), 400,
                              'not valid UTF-8')
        self.assertEqual([], self.core.calls)

    def test_head(self):
        response = self.get('/v1/capacity', method='HEAD')
        self.assertEqual(200, response.status_int)
        self.assertEqual(b'', response.body)


class TestRoles(APITestCase):

    def test_admin_reads(self):
        self.assertEqual(200, self.get('/v1/capacity').status_int)

    def test_without_an_allowed_role_is_403(self):
        response = self.get('/v1/capacity', headers={
            'HTTP_X_IDENTITY_STATUS': 'Confirmed',
            'HTTP_X_ROLES': 'member,reader'})
        self.assert_error(response, 403, 'needs one of the roles admin')
        self.assertEqual([], self.core.calls)

    def test_allowed_roles_are_configurable_and_case_blind(self):
        app = self.make_app(allowed_roles=['Capacity_Reader', 'admin'])
        response = self.get('/v1/capacity', app=app, headers={
            'HTTP_X_IDENTITY_STATUS': 'Confirmed',
            'HTTP_X_ROLES': 'member, capacity_reader'})
        self.assertEqual(200, response.status_int, response.text)

    def test_an_unconfirmed_identity_is_401(self):
        response = self.get('/v1/capacity', headers={
            'HTTP_X_IDENTITY_STATUS': 'Invalid', 'HTTP_X_ROLES': 'admin'})
        self.assert_error(response, 401, 'valid keystone token')

    def test_no_role_check_without_auth(self):
        app = self.make_app(check_roles=False)
        self.assertEqual(
            200, self.get('/v1/capacity', app=app, headers={}).status_int)


class TestCache(APITestCase):

    def test_a_burst_counts_once(self):
        for _ in range(5):
            self.clock.now += 10
            response = self.get('/v1/capacity?by=az')
            self.assertEqual(200, response.status_int)
        self.assertEqual(1, len(self.core.calls))
        self.assertEqual('40', response.headers['Age'])

    def test_a_report_older_than_the_interval_is_counted_again(self):
        self.get('/v1/capacity')
        self.clock.now += 59.9
        self.get('/v1/capacity')
        self.assertEqual(1, len(self.core.calls))
        self.clock.now += 0.1
        response = self.get('/v1/capacity')
        self.assertEqual(2, len(self.core.calls))
        self.assertEqual('0', response.headers['Age'])

    def test_the_flavors_order_and_repetition_are_one_query(self):
        flavors = ['m1.small', 'm1.large', 'm1.tiny', 'm1.xlarge']
        for order in itertools.permutations(flavors):
            for repeat in ((), order[:1]):
                response = self.get('/v1/capacity?' + '&'.join(
                    'flavor=' + name for name in order + repeat))
                self.assertEqual(200, response.status_int, response.text)
        call, = self.core.calls
        self.assertEqual(sorted(flavors), call['flavors'])

    def test_queries_are_kept_apart(self):
        self.get('/v1/capacity?by=az')
        self.get('/v1/capacity?by=cell')
        self.get('/v1/capacity?by=az&flavor=m1.small')
        self.get('/v1/capacity?by=az')
        self.assertEqual(['az', 'cell', 'az'],
                         [call['by'] for call in self.core.calls])

    def test_the_least_recently_used_query_is_dropped(self):
        app = self.make_app(api_cache_size=2)
        for by in ('az', 'cell', 'az', 'aggregate', 'az', 'cell'):
            self.get('/v1/capacity?by=' + by, app=app)
        self.assertEqual(['az', 'cell', 'aggregate', 'cell'],
                         [call['by'] for call in self.core.calls])

    def test_fresh_counts_again(self):
        self.get('/v1/capacity')
        self.get('/v1/capacity?fresh=true')
        self.get('/v1/capacity')
        self.assertEqual(2, len(self.core.calls))

    def test_fresh_can_be_disabled(self):
        app = self.make_app(allow_fresh=False)
        self.assert_error(self.get('/v1/capacity?fresh=true', app=app),
                          400, 'allow_fresh')

    def test_a_failed_count_is_not_kept(self):
        self.core.error = db_exc.DBConnectionError('down')
        self.assertEqual(503, self.get('/v1/capacity').status_int)
        self.core.error = None
        self.assertEqual(200, self.get('/v1/capacity').status_int)
        self.assertEqual(2, len(self.core.calls))

    def _concurrently(self, count):
        self.core.gate = threading.Event()
        responses = [None] * count

        def request(index):
            responses[index] = self.get('/v1/capacity?by=cell')

        threads = [threading.Thread(target=request, args=(i,))
                   for i in range(count)]
        threads[0].start()
        self.assertTrue(self.core.started.wait(5))
        for thread in threads[1:]:
            thread.start()
        # Let the followers reach the count under way, then release it.
        self.wait_for_waiters(count - 1)
        self.core.gate.set()
        for thread in threads:
            thread.join(10)
        return responses

    def wait_for_waiters(self, count):
        flight = None
        for _ in range(500):
            flights = dict(self.app.cache._flights)
            if flights:
                flight, = flights.values()
                if len(flight._condition._waiters) >= count:
                    return
            threading.Event().wait(0.01)
        self.fail('the concurrent requests did not wait for the count')

    def test_concurrent_requests_share_one_count(self):
        responses = self._concurrently(4)
        self.assertEqual(1, len(self.core.calls))
        for response in responses:
            self.assertEqual(200, response.status_int)
            self.assertEqual(api_fakes.report('cell'), response.json)

    def test_concurrent_requests_share_one_failure(self):
        self.core.error = ks_exc.ConnectFailure('placement is down')
        responses = self._concurrently(3)
        self.assertEqual(1, len(self.core.calls))
        for response in responses:
            self.assert_error(response, 503, 'cannot be reached')

    def test_a_count_that_outlasts_the_answer_timeout_is_503_and_kept(self):
        app = self.make_app(api_answer_timeout=1)
        self.core.gate = threading.Event()
        response = self.get('/v1/capacity?by=cell', app=app)
        self.assert_error(response, 503, 'still being counted')
        self.assertEqual('10', response.headers['Retry-After'])
        self.assertIn('not counted within 1 s', self.log.output)
        # The count goes on in its own thread; its report is kept.
        self.core.gate.set()
        for _ in range(1000):
            if not app.cache._flights:
                break
            threading.Event().wait(0.01)
        response = self.get('/v1/capacity?by=cell', app=app)
        self.assertEqual(200, response.status_int, response.text)
        self.assertEqual(1, len(self.core.calls))


class FakeAuthToken:
    """keystonemiddleware's AuthProtocol: the X-Test-Roles header's roles."""

    instances = []

    def __init__(self, app, conf):
        self.app = app
        self.conf = conf
        self.calls = 0
        self.instances.append(self)

    def __call__(self, environ, start_response):
        self.calls += 1
        roles = environ.pop('HTTP_X_TEST_ROLES', None)
        if roles is None:
            start_response('401 Unauthorized', [])
            return [b'']
        environ['HTTP_X_IDENTITY_STATUS'] = 'Confirmed'
        environ['HTTP_X_ROLES'] = roles
        return self.app(environ, start_response)


class TestWSGI(APITestCase):

    def setUp(self):
        super().setUp()
        FakeAuthToken.instances = []
        self.useFixture(fixtures.MockPatch(
            'keystonemiddleware.auth_token.AuthProtocol', FakeAuthToken))

    def test_keystone_guards_all_but_the_version_document(self):
        conf = api_fakes.make_conf()
        app = wsgi.build_application(conf, self._context)
        auth, = FakeAuthToken.instances
        self.assertIs(conf, auth.conf['oslo_config_config'])

        self.assertEqual(200, self.get('/', app=app, headers={}).status_int)
        self.assertEqual(0, auth.calls)
        self.assertEqual(401, self.get('/v1/capacity', app=app,
                                       headers={}).status_int)
        response = self.get('/v1/capacity', app=app,
                            headers={'HTTP_X_TEST_ROLES': 'member'})
        error = self.assert_error(response, 403, 'admin')
        self.assertTrue(error['request_id'].startswith('req-'))
        self.assertEqual(error['request_id'],
                         response.headers['x-openstack-request-id'])
        response = self.get('/v1/capacity', app=app,
                            headers={'HTTP_X_TEST_ROLES': 'admin'})
        self.assertEqual(200, response.status_int)
        self.assertEqual(3, auth.calls)

    def test_noauth_checks_nothing(self):
        conf = api_fakes.make_conf(auth_strategy='noauth')
        app = wsgi.build_application(conf, self._context)
        self.assertEqual([], FakeAuthToken.instances)
        self.assertEqual(200, self.get('/v1/capacity', app=app,
                                       headers={}).status_int)
        self.assertIn('without authentication', self.log.output)

    def test_native_threads_whatever_the_environment_says(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_NOVA_DISABLE_EVENTLET_PATCHING', 'false'))
        self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.compat.release.monkey_patched',
            return_value=False))
        init = self.useFixture(fixtures.MockPatch(
            'oslo_service.backend.init_backend')).mock
        patch = self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.compat.release.monkey_patch')).mock
        wsgi.use_native_threads()
        from oslo_service import backend
        if release.oslo_service_threading():
            init.assert_called_once_with(backend.BackendType.THREADING)
        else:
            # 2025.1's oslo.service has no threading backend to choose.
            init.assert_not_called()
        patch.assert_not_called()
        self.assertIn('OS_NOVA_DISABLE_EVENTLET_PATCHING=false is ignored',
                      self.log.output)

    def test_config_files(self):
        self.assertEqual(['/etc/nova/nova.conf'],
                         wsgi.config_files({}))
        directory = self.useFixture(fixtures.TempDir()).path
        for name in wsgi.DEFAULT_CONFIG_FILES:
            open(os.path.join(directory, name), 'w').close()
        env = {wsgi.CONFIG_DIR_ENV: directory}
        self.assertEqual(
            [os.path.join(directory, name)
             for name in wsgi.DEFAULT_CONFIG_FILES],
            wsgi.config_files(env))
        env[wsgi.CONFIG_FILES_ENV] = 'a.conf; /etc/other/b.conf;'
        self.assertEqual([os.path.join(directory, 'a.conf'),
                          '/etc/other/b.conf'], wsgi.config_files(env))


class TestWSGIEntryPoint(base.TestCase):
    """``application`` of the WSGI module, in a process of its own.

    The module configures Nova's global state (native threads, CONF), so
    it runs in a child process, the way a WSGI server imports it.
    """

    SCRIPT = textwrap.dedent('''
        import json, sys
        import webob
        from nova_sched_ext.capacity import wsgi
        app = wsgi.application
        assert app is wsgi.application
        root = webob.Request.blank('/').get_response(app)
        capacity = webob.Request.blank('/v1/capacity?by=rack').get_response(
            app)
        print(json.dumps([root.status_int, root.json,
                          capacity.status_int, capacity.json]))
    ''')

    def test_application_is_built_from_the_configured_files(self):
        directory = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(directory, 'nova.conf'), 'w') as f:
            f.write('[DEFAULT]\nuse_stderr = False\n')
        with open(os.path.join(directory, 'capacity.conf'), 'w') as f:
            f.write('[nova_sched_ext_capacity]\nauth_strategy = noauth\n')
        env = dict(os.environ)
        env.update({wsgi.CONFIG_DIR_ENV: directory,
                    wsgi.CONFIG_FILES_ENV: 'nova.conf;capacity.conf',
                    'OS_NOVA_DISABLE_EVENTLET_PATCHING': ''})
        result = subprocess.run([sys.executable, '-c', self.SCRIPT],
                                env=env, capture_output=True, text=True,
                                timeout=120)
        self.assertEqual(0, result.returncode, result.stderr)
        root_status, root, status, body = json.loads(
            result.stdout.strip().splitlines()[-1])
        self.assertEqual(200, root_status)
        self.assertEqual('v1', root['versions'][0]['id'])
        # noauth came from the second file: no 401 before the check.
        self.assertEqual(400, status)
        self.assertIn("Invalid value 'rack' for by", body['errors'][0][
            'detail'])


class TestBadOptionAtLoad(base.TestCase):

    SCRIPT = textwrap.dedent('''
        from nova_sched_ext.capacity import errors, wsgi
        try:
            wsgi.application
        except errors.ConfigError as exc:
            print('refused: %s' % exc)
    ''')

    def test_an_option_out_of_bounds_is_refused_at_load(self):
        directory = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(directory, 'nova.conf'), 'w') as f:
            f.write('[DEFAULT]\nuse_stderr = False\n'
                    '[nova_sched_ext_capacity]\napi_answer_timeout = 0\n')
        env = dict(os.environ)
        env.update({wsgi.CONFIG_DIR_ENV: directory,
                    wsgi.CONFIG_FILES_ENV: 'nova.conf',
                    'OS_NOVA_DISABLE_EVENTLET_PATCHING': ''})
        result = subprocess.run([sys.executable, '-c', self.SCRIPT],
                                env=env, capture_output=True, text=True,
                                timeout=300, cwd=directory)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('refused: invalid value for [nova_sched_ext_capacity] '
                      'api_answer_timeout in %s' % os.path.join(
                          directory, 'nova.conf'), result.stdout)


class TestSilentDatabase(base.TestCase):
    """The real count on an API database that accepts and never answers.

    Two requests for different queries, the second sent while the first
    waits: each gets its 503 once backend_timeout has passed, none waits
    for ever (the process is given minutes: a missing bound fails, speed
    does not matter).
    """

    SCRIPT = textwrap.dedent('''
        import json, threading
        import webob
        from nova_sched_ext.capacity import wsgi
        app = wsgi.application
        answers = {}

        def get(query):
            response = webob.Request.blank(
                '/v1/capacity?' + query).get_response(app)
            answers[query] = [response.status_int,
                              response.headers.get('Retry-After'),
                              response.json['errors'][0]['detail']]

        threads = [threading.Thread(target=get, args=(query,))
                   for query in ('by=cloud', 'by=az&flavor=m1.small')]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps(answers))
    ''')

    def test_every_request_gets_its_503(self):
        silent = self.useFixture(backend_fakes.SilentServer())
        directory = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(directory, 'nova.conf'), 'w') as f:
            f.write(textwrap.dedent('''\
                [DEFAULT]
                use_stderr = False
                [api_database]
                connection = mysql+pymysql://nova@127.0.0.1:%(port)d/api
                [database]
                connection = mysql+pymysql://nova@127.0.0.1:%(port)d/nova
                [nova_sched_ext_capacity]
                auth_strategy = noauth
                backend_timeout = 1
                ''' % {'port': silent.port}))
        env = dict(os.environ)
        env.update({wsgi.CONFIG_DIR_ENV: directory,
                    wsgi.CONFIG_FILES_ENV: 'nova.conf',
                    'OS_NOVA_DISABLE_EVENTLET_PATCHING': ''})
        result = subprocess.run([sys.executable, '-c', self.SCRIPT],
                                env=env, capture_output=True, text=True,
                                timeout=300)
        self.assertEqual(0, result.returncode, result.stderr)
        answers = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(2, len(answers))
        for status, retry_after, detail in answers.values():
            self.assertEqual(503, status)
            self.assertEqual('30', retry_after)
            self.assertNotIn('127.0.0.1', detail)


class TestKeptState(APITestCase):
    """[nova_sched_ext_capacity] kept_state: reports from the kept count."""

    def make_kept_app(self, why=None):
        self.kept = api_fakes.FakeKept(why)
        return api.CapacityApp(api_fakes.make_conf(), self._context,
                               clock=self.clock, kept=self.kept)

    def test_a_usable_kept_state_answers_every_query(self):
        app = self.make_kept_app()
        for _ in range(2):
            response = self.get('/v1/capacity?by=az&flavor=m1.small',
                                app=app)
            self.assertEqual(200, response.status_int)
            self.assertEqual('kept', response.json['generated_at'])
            # the age of the state, not of a cached report
            self.assertEqual('3', response.headers['Age'])
        self.assertEqual([], self.core.calls)
        self.assertEqual(2, len(self.kept.calls))
        self.assertEqual({'flavors': ['m1.small'], 'by': 'az', 'az': None,
                          'aggregate': None, 'per_host': False},
                         self.kept.calls[0])
        self.assertEqual(2, self.kept.counts['kept'])
        # started by the serving process, at its requests (idempotent)
        self.assertEqual(2, self.kept.started)

    def test_fresh_counts_in_full(self):
        app = self.make_kept_app()
        response = self.get('/v1/capacity?fresh=true', app=app)
        self.assertEqual(200, response.status_int)
        self.assertEqual(1, len(self.core.calls))
        self.assertEqual([], self.kept.calls)

    def test_a_state_too_old_counts_in_full(self):
        app = self.make_kept_app(why=('too_old', 'the last poll started '
                                      '61.0 s ago'))
        response = self.get('/v1/capacity', app=app)
        self.assertEqual(200, response.status_int)
        self.assertNotEqual('kept', response.json['generated_at'])
        self.assertEqual(1, len(self.core.calls))
        self.assertEqual([], self.kept.calls)
        self.assertEqual(1, self.kept.counts['too_old'])

    def test_the_kept_report_errors_are_the_counts_errors(self):
        app = self.make_kept_app()
        self.kept.error = errors.UnknownFlavor("unknown flavor 'nope'")
        self.assert_error(self.get('/v1/capacity?flavor=nope', app=app),
                          400, "unknown flavor 'nope'")
        self.kept.error = errors.BackendUnavailable(
            'cannot read the API database: refused')
        self.assert_error(self.get('/v1/capacity', app=app), 503,
                          'cannot be counted now')

    def test_built_and_started_only_when_enabled(self):
        self.assertIsNone(wsgi.kept_count(api_fakes.make_conf(), object))
        started = []
        self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.capacity.kept.KeptCount',
            side_effect=lambda context: type('K', (), {
                'start': lambda self: started.append(context)})()))
        conf = api_fakes.make_conf(kept_state=True)
        context = object()
        self.assertIsNotNone(wsgi.kept_count(conf, lambda: context))
        self.assertEqual([context], started)
        # the API's is started by its first request, not when built
        self.assertIsNotNone(wsgi.kept_count(conf, lambda: context,
                                             start=False))
        self.assertEqual([context], started)
