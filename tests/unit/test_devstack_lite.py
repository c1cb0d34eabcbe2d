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

import http.client
import http.server
import importlib.util
import json
import os
import re
import runpy
import signal
import socket
import subprocess
import threading
import types
from unittest import mock

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

    def test_the_ini_helpers_do_not_look_python3_up_again(self):
        # Resolved once when functions.sh is sourced: a python3 on PATH
        # that is a version manager's shim costs a second a call under
        # load. A python3 that fails, put first on PATH afterwards, is
        # not what the helpers run.
        bad = os.path.join(self.dir, 'bin')
        os.mkdir(bad)
        with open(os.path.join(bad, 'python3'), 'w') as shim:
            shim.write('#!/bin/sh\nexit 3\n')
        os.chmod(os.path.join(bad, 'python3'), 0o755)
        done = self._bash('PATH=%s:$PATH\n'
                          'iniset CONF DEFAULT debug True\n'
                          'iniget CONF DEFAULT debug' % bad)
        self.assertEqual('True', done.stdout.strip(), done.stderr)

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
        self.assertEqual(['/venv/bin/gunicorn', '-c',
                          os.path.join(LITE, 'gunicorn_conf.py'),
                          '--bind', '127.0.0.1:35354'], argv[:5])
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


class GunicornSettingsTest(base.TestCase):
    """gunicorn_conf.py names only settings gunicorn knows."""

    def test_every_name_is_a_gunicorn_setting(self):
        try:
            from gunicorn import config as gunicorn_config
        except ImportError:
            self.skipTest('gunicorn is not installed here (devstack-lite '
                          'installs it in its own virtualenv)')
        settings = gunicorn_config.Config().settings
        namespace = runpy.run_path(os.path.join(LITE, 'gunicorn_conf.py'))
        names = {name for name, value in namespace.items()
                 if not name.startswith('_')
                 and not isinstance(value, types.ModuleType)}
        self.assertEqual(set(), names - set(settings))
        # The reason the file exists: kept-alive connections outlive the
        # 2 s polls of the clients.
        self.assertGreater(namespace['keepalive'], 10)


class LiteServicesTest(base.TestCase):
    """services.sh: the ports check before start, the report of an exit."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def _bash(self, commands):
        script = ('LITE_DIR=%s VENV=/nonexistent LOGDIR=%s PIDDIR=%s\n'
                  'source %s/functions.sh\nsource %s/services.sh\n%s\n'
                  % (LITE, self.dir, self.dir, LITE, LITE, commands))
        return subprocess.run(['bash', '-c', script], capture_output=True,
                              text=True, timeout=60)

    def _free_port(self):
        with socket.socket() as probe:
            probe.bind(('127.0.0.1', 0))
            return probe.getsockname()[1]

    @staticmethod
    def _first_free(ports):
        for port in ports:
            try:
                with socket.socket() as probe:
                    probe.bind(('127.0.0.1', port))
            except OSError:
                continue
            return port
        return None

    def test_free_ports_pass(self):
        port = self._free_port()
        done = self._bash('require_ports_free "pick others" %d && echo ok'
                          % port)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertEqual('ok', done.stdout.strip())

    def test_a_listening_port_is_refused(self):
        with socket.socket() as server:
            server.bind(('127.0.0.1', 0))
            server.listen()
            port = server.getsockname()[1]
            done = self._bash('require_ports_free "pick others" %d; '
                              'echo not reached' % port)
        self.assertEqual(1, done.returncode)
        self.assertNotIn('not reached', done.stdout)
        self.assertIn('port %d cannot be bound (Address already in use); '
                      'pick others' % port, done.stderr)

    def test_a_client_socket_on_the_port_is_refused(self):
        # What failed CI once: an outgoing connection held the port as its
        # local port, so a connect test found it free and keystone's bind
        # failed.  The check binds as the services do.
        with socket.socket() as server, socket.socket() as client:
            server.bind(('127.0.0.1', 0))
            server.listen()
            client.bind(('127.0.0.1', 0))
            client.connect(server.getsockname())
            port = client.getsockname()[1]
            self.assertFalse(self._bash('port_in_use %d' % port).returncode
                             == 0, 'a connect test sees the port as taken')
            done = self._bash('require_ports_free "pick others" %d' % port)
        self.assertEqual(1, done.returncode)
        self.assertIn('port %d cannot be bound' % port, done.stderr)

    def test_ports_in_the_ephemeral_range_warn(self):
        with open('/proc/sys/net/ipv4/ip_local_port_range') as ranges:
            low, high = (int(value) for value in ranges.read().split())
        inside = self._first_free(range(low, min(high, low + 200)))
        outside = self._first_free(range(low - 1, max(1024, low - 200), -1))
        if inside is None or outside is None:
            self.skipTest('no free port on either side of %d' % low)
        done = self._bash('require_ports_free "pick others" %d %d'
                          % (outside, inside))
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('[WARNING] %d in the ephemeral range %d-%d'
                      % (inside, low, high), done.stderr)
        self.assertNotIn(str(outside) + ',', done.stderr)
        done = self._bash('require_ports_free "pick others" %d' % outside)
        self.assertEqual('', done.stderr)

    def test_background_jobs_and_their_commands_are_stopped(self):
        # teardown's first step: a schema build still running in the
        # background (a subshell and the command it waits for) stops
        # before the databases are dropped
        started = os.path.join(self.dir, 'started')
        done = self._bash(
            '( sleep 300 & echo $! > %(f)s.tmp; mv %(f)s.tmp %(f)s; wait ) &\n'
            'job=$!\n'
            'for i in $(seq 1 600); do [[ -e %(f)s ]] && break; '
            'sleep 0.1; done\n'
            'stop_background_jobs\n'
            # running: in /proc and not a zombie left to a parent gone
            'function running { [[ "$(cut -d" " -f3 /proc/$1/stat '
            '2> /dev/null)" =~ ^[RSD]$ ]]; }\n'
            'running $job && echo job alive\n'
            'running $(cat %(f)s) && echo command alive\n'
            'echo done' % {'f': started})
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertEqual('done', done.stdout.strip())

    def test_a_failed_run_shows_the_last_lines_of_its_logs(self):
        # teardown's show_logs on failure: how a CI run, which keeps no
        # logs, says why a service exited
        with open(os.path.join(self.dir, 'key.log'), 'w') as log:
            log.write('\n'.join('line %d' % n for n in range(30)))
            log.write('\n[ERROR] Connection in use: (127.0.0.1, 28370)\n')
        open(os.path.join(self.dir, 'empty.log'), 'w').close()
        done = self._bash('show_logs')
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('Connection in use: (127.0.0.1, 28370)', done.stdout)
        self.assertIn('line 29', done.stdout)
        self.assertNotIn('line 5\n', done.stdout)
        self.assertIn('----- last lines of %s/key.log' % self.dir,
                      done.stdout)
        self.assertNotIn('empty.log', done.stdout)


def _load(name):
    spec = importlib.util.spec_from_file_location(
        'lite_' + name, os.path.join(LITE, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launcher = _load('scheduler_launcher')
fault_proxy = _load('fault_proxy')


class SchedulerLauncherTest(base.TestCase):
    """The kill hook: one scheduler dies, at the point named, and says so."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.kill = self.useFixture(fixtures.MockPatchObject(
            launcher.os, 'killpg')).mock
        self.hook = launcher.kill_hook(self.dir)

    def _arm(self, point):
        with open(os.path.join(self.dir, 'kill-at'), 'w') as f:
            f.write(point + '\n')

    def test_nothing_armed_kills_nothing(self):
        self.hook('reserved')
        self.kill.assert_not_called()

    def test_another_point_kills_nothing(self):
        self._arm('gone')
        self.hook('reserved')
        self.hook('evicted', victim='v1')
        self.kill.assert_not_called()
        self.assertTrue(os.path.exists(os.path.join(self.dir, 'kill-at')))

    def test_the_point_kills_once(self):
        self._arm('evicted')
        self.hook('evicted', victim='v1')
        self.kill.assert_called_once_with(os.getpgid(0), signal.SIGKILL)
        with open(os.path.join(self.dir, 'killed')) as f:
            self.assertEqual('evicted %d v1\n' % os.getpid(), f.read())
        # The file is taken: another scheduler at the same point lives.
        launcher.kill_hook(self.dir)('evicted', victim='v2')
        self.assertEqual(1, self.kill.call_count)

    def test_only_the_scheduler_command(self):
        self.assertRaises(SystemExit, launcher.parse,
                          ['--faults', self.dir, '--', '/bin/sh', '-c', 'x'])
        self.assertRaises(SystemExit, launcher.parse,
                          ['--faults', self.dir, 'nova-sched-ext-scheduler'])
        args, command = launcher.parse(
            ['--faults', self.dir, '--config-file', 'a.conf', '--',
             '/venv/bin/nova-sched-ext-scheduler', '--config-file', 'n'])
        self.assertEqual(['a.conf'], args.config_file)
        self.assertEqual(['/venv/bin/nova-sched-ext-scheduler',
                          '--config-file', 'n'], command)


class FaultProxyTest(base.TestCase):
    """Rules fail the requests they match, as often as they say."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.rules_path = os.path.join(self.dir, 'rules.json')
        self.rules = fault_proxy.Rules(self.rules_path)

    def _write(self, rules):
        with open(self.rules_path, 'w') as f:
            json.dump(rules, f)

    def test_no_file_no_fault(self):
        self.assertIsNone(self.rules.take('POST', '/allocations'))

    def test_a_rule_counts_down(self):
        self._write([{'method': 'POST', 'path': '/allocations',
                      'status': 409, 'count': 2}])
        self.assertIsNone(self.rules.take('GET', '/allocations'))
        self.assertIsNone(self.rules.take('POST', '/allocations/x'))
        self.assertEqual(409, self.rules.take('POST', '/allocations'))
        self.assertEqual(409, self.rules.take('POST', '/allocations'))
        self.assertIsNone(self.rules.take('POST', '/allocations'))

    def test_a_prefix_rule(self):
        self._write([{'method': 'DELETE', 'path_prefix': '/v2.1/servers/',
                      'status': 500}])
        self.assertIsNone(self.rules.take('DELETE', '/v2.1/flavors/1'))
        self.assertEqual(500, self.rules.take('DELETE', '/v2.1/servers/a'))
        self.assertIsNone(self.rules.take('DELETE', '/v2.1/servers/a'))

    def test_the_proxy_forwards_and_fails(self):
        class Target(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers['Content-Length'])
                body = self.rfile.read(length)
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        target = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Target)
        proxy = http.server.ThreadingHTTPServer(
            ('127.0.0.1', 0), fault_proxy.make_handler(
                'http://127.0.0.1:%d' % target.server_port, self.rules))
        proxy.RequestHandlerClass.log_message = lambda *args: None
        for server in (target, proxy):
            threading.Thread(target=server.serve_forever,
                             daemon=True).start()
            self.addCleanup(server.server_close)
            self.addCleanup(server.shutdown)
        self._write([{'method': 'POST', 'path': '/allocations',
                      'status': 409}])

        def post():
            connection = http.client.HTTPConnection(
                '127.0.0.1', proxy.server_port, timeout=10)
            connection.request('POST', '/allocations?x=1', body=b'{"a": 1}',
                               headers={'Content-Type': 'application/json'})
            response = connection.getresponse()
            result = response.status, json.loads(response.read())
            connection.close()
            return result

        status, body = post()
        self.assertEqual(409, status)
        self.assertEqual('placement.concurrent_update',
                         body['errors'][0]['code'])
        self.assertEqual((200, {'a': 1}), post())


multisched = _load('multisched')


class _Response(object):

    def __init__(self, body, status=200):
        self.body, self.status_code = body, status

    def json(self):
        return self.body


class _FakeAPI(object):
    """GETs answered from a dict of path -> body."""

    def __init__(self, routes):
        self.routes = routes

    def get(self, path, params=None, raise_exc=True):
        return _Response(self.routes[path])


class InvariantsTest(base.TestCase):
    """multisched.py's checks find the violations they name."""

    HOSTS = {'h1': 'rp-1', 'h2': 'rp-2'}

    def _cloud(self, servers, allocations, aggregates=()):
        compute = _FakeAPI({
            '/servers/detail': {'servers': servers},
            '/os-aggregates': {'aggregates': list(aggregates)},
            '/os-hypervisors/detail': {'hypervisors': [
                {'id': rp, 'state': 'up', 'service': {'host': host}}
                for host, rp in self.HOSTS.items()]}})
        placement = _FakeAPI({
            '/resource_providers/%s/allocations' % rp: {
                'allocations': allocations.get(host, {})}
            for host, rp in self.HOSTS.items()})
        cloud = multisched.Cloud(compute, placement)
        cloud.max_per_host = 1
        return cloud

    @staticmethod
    def _server(server_id, host, status='ACTIVE', preemptible=False):
        return {'id': server_id, 'status': status,
                'OS-EXT-SRV-ATTR:host': host,
                'OS-EXT-STS:task_state': None,
                'flavor': {'extra_specs': {
                    multisched.PREEMPTIBLE_KEY: 'true'}
                    if preemptible else {}}}

    def _track(self, cloud, server_id, group=None, preemptible=False):
        boot = multisched.Boot(server_id, {'preemptible': preemptible},
                               group, 'z')
        boot.status = 'ACTIVE'
        cloud.servers[server_id] = boot

    def _violations(self, cloud):
        lines = []
        self.useFixture(fixtures.MockPatchObject(
            multisched, 'log', side_effect=lambda m, *a: lines.append(
                m % a)))
        total = cloud.check('t', wait_stray=False)
        counts = {}
        for line in lines:
            match = re.match(r't: invariant (\S+): (\d+) violation', line)
            counts[match.group(1)] = int(match.group(2))
        return total, {k: v for k, v in counts.items() if v}

    def test_a_clean_cloud(self):
        cloud = self._cloud([self._server('a', 'h1'),
                             self._server('b', 'h2')],
                            {'h1': {'a': {}}, 'h2': {'b': {}}})
        cloud.groups['g'] = {'strategy': 'host', 'max_size': 2}
        self._track(cloud, 'a', 'g')
        self._track(cloud, 'b', 'g')
        self.assertEqual((0, {}), self._violations(cloud))

    def test_each_violation_is_counted(self):
        cloud = self._cloud(
            [self._server('a', 'h1'), self._server('b', 'h1'),
             self._server('p1', 'h2', preemptible=True),
             self._server('p2', 'h2', preemptible=True)],
            {'h1': {'a': {}, 'b': {}, 'ghost': {}},
             'h2': {'p1': {}}})
        cloud.groups['g'] = {'strategy': 'host', 'max_size': 1}
        self._track(cloud, 'a', 'g')
        self._track(cloud, 'b', 'g')
        self._track(cloud, 'gone')
        total, found = self._violations(cloud)
        self.assertEqual({'set-spread': 1, 'set-cap': 1, 'host-cap': 1,
                          'non-preemptible-deleted': 1,
                          'stray-allocation': 1, 'missing-allocation': 1},
                         found)
        self.assertEqual(6, total)

    def test_failure_domains(self):
        cloud = self._cloud(
            [self._server('a', 'h1'), self._server('b', 'h2')],
            {'h1': {'a': {}}, 'h2': {'b': {}}},
            aggregates=[{'hosts': ['h1', 'h2'],
                         'metadata': {'failure_domain': 'rack-1'}}])
        cloud.groups['g'] = {'strategy': 'domain', 'max_size': None}
        self._track(cloud, 'a', 'g')
        self._track(cloud, 'b', 'g')
        self.assertEqual({'set-spread': 1}, self._violations(cloud)[1])


class RunProcessTest(base.TestCase):
    """A service killed on purpose leaves no "Killed" line of bash's."""

    def test_a_killed_service_is_not_reported_by_bash(self):
        work = self.useFixture(fixtures.TempDir()).path
        # The fault rounds' kill -9 of a service run_process started,
        # then more commands of the same shell (bash reports a dead job
        # at the next one).
        script = ('LITE_DIR=%s VENV=/nonexistent LOGDIR=%s PIDDIR=%s\n'
                  'source %s/functions.sh\n'
                  'ENABLED_SERVICES=nse-test\n'
                  'run_process nse-test "sleep 60"\n'
                  'read -r pid _ < %s/nse-test.pid\n'
                  # the group exists once the child has called setsid: a
                  # kill before that finds none (seen on a loaded machine)
                  'until kill -0 -- "-$pid" 2>/dev/null; do sleep 0.05; '
                  'done\n'
                  'kill -KILL -- "-$pid"\n'
                  'while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done\n'
                  'sleep 0.2\n'
                  'echo done\n' % (LITE, work, work, LITE, work))
        done = subprocess.run(['bash', '-c', script], capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('done', done.stdout)
        self.assertNotIn('Killed', done.stderr)
        self.assertNotIn('Killed', done.stdout)


class FaultRoundMessagesTest(base.TestCase):
    """What multisched.py prints says which failures a round expects."""

    def test_a_long_reason_ends_on_a_word(self):
        reason = ('The lock of the server group could not be taken: the '
                  'coordination backend is down')
        short = multisched.shorten(reason, 40)
        self.assertEqual('The lock of the server group could not\u2026',
                         short)
        self.assertLessEqual(len(short), 40)
        self.assertEqual('short one', multisched.shorten('short  one\n', 40))
        # one word longer than the width: cut, still marked
        self.assertEqual('abcd\u2026', multisched.shorten('abcdefgh', 5))

    def _boot(self, status, fault=''):
        boot = multisched.Boot('0123456789abcdef', {}, None, 'z')
        boot.status, boot.fault = status, fault
        return boot

    def test_an_expected_error_says_so(self):
        boot = self._boot('ERROR', 'MessagingTimeout: Timed out waiting for '
                                   'a reply to message ID 1234567890abcdef '
                                   'from the scheduler service')
        text = multisched.as_expected(
            boot, 'ERROR', multisched.EXPECTED_FAILURE['kill-reserved'])
        self.assertTrue(text.startswith(
            'ERROR, as expected: its scheduler was killed'), text)
        self.assertTrue(text.endswith('\u2026)'), text)
        self.assertNotIn('as expected',
                         multisched.as_expected(self._boot('ACTIVE'),
                                                'ERROR'))
        self.assertEqual('ACTIVE, not ERROR', multisched.as_expected(
            self._boot('ACTIVE'), 'ERROR'))

    def test_the_killed_scheduler_is_named(self):
        line = multisched.killed_line(
            'kill-between', 'evicted 30563 victim-1',
            {'n-sch': {100, 101}, 'n-sch-2': {30560, 30563}})
        self.assertEqual('round kill-between: scheduler n-sch-2 (pid 30563) '
                         'killed at evicted (expected: fault round '
                         'kill-between)', line)
        self.assertIn('scheduler ? (pid 7)', multisched.killed_line(
            'kill-gone', 'gone 7 -', {}))


lite = _load('lite')


class ReleaseTest(base.TestCase):
    """NSE_LITE_NOVA_VERSION: the release's services, pins and devstack."""

    def _requirements(self):
        with open(os.path.join(LITE, 'requirements.txt')) as f:
            return f.readlines()

    def _pinned(self, major, constraints=None):
        return lite.release_requirements(self._requirements(), major,
                                         constraints)

    def test_2025_1_installs_its_own_services(self):
        lines = self._pinned(31)
        for pin in ('keystone==27.*', 'openstack-placement==13.*',
                    'nova==31.*', 'tempest==43.0.0'):
            self.assertEqual(1, sum(line.startswith(pin + ' ')
                                    or line == pin for line in lines), pin)
        text = '\n'.join(lines)
        self.assertNotIn('nova>=34', text)
        self.assertNotIn('keystone>=30', text)
        # The other requirements stay as they are.
        for line in self._requirements():
            name = lite._requirement_name(line)
            if name and name not in lite.release_pins(31):
                self.assertIn(line.rstrip('\n'), lines)

    def test_every_release_pins_the_four_services_once(self):
        for major in lite.RELEASES:
            lines = self._pinned(major)
            names = [lite._requirement_name(line) for line in lines]
            for name in ('keystone', 'openstack-placement', 'nova',
                         'tempest'):
                self.assertEqual(1, names.count(name), (major, name))
            self.assertIn('nova==%d.*' % major, '\n'.join(lines))

    def test_a_missing_service_line_is_added(self):
        lines = lite.release_requirements(['gunicorn>=1 # MIT\n'], 32)
        self.assertEqual(['gunicorn>=1 # MIT', 'keystone==28.*',
                          'nova==32.*', 'openstack-placement==14.*',
                          'tempest==45.0.0'], lines)

    def test_the_default_is_the_newest_release(self):
        self.assertEqual(34, lite.nova_version(''))
        self.assertEqual(34, max(lite.RELEASES))
        # requirements.txt names the default release's services.
        text = ''.join(self._requirements())
        self.assertIn('nova>=34.0.0,<35', text)
        self.assertIn('openstack-placement>=16.0.0,<17', text)
        self.assertIn('keystone>=30.0.0,<31', text)

    def test_an_unsupported_release_is_one_line(self):
        for value in ('30', '35', 'epoxy', '31.1'):
            error = self.assertRaises(SystemExit, lite.nova_version, value)
            self.assertIn('must be one of 31 (2025.1), 32 (2025.2), '
                          '33 (2026.1), 34 (2026.2), not %r' % value,
                          str(error.code))
            self.assertNotIn('\n', str(error.code))

    def test_the_constraints_file_goes_first_when_the_repo_has_it(self):
        repo = self.useFixture(fixtures.TempDir()).path
        self.assertIsNone(lite.constraints_file(repo, 31))
        os.makedirs(os.path.join(repo, 'tools', 'constraints'))
        path = os.path.join(repo, 'tools', 'constraints', 'nova-31.txt')
        open(path, 'w').close()
        self.assertEqual(path, lite.constraints_file(repo, 31))
        self.assertIsNone(lite.constraints_file(repo, 32))
        self.assertEqual('-c %s' % path, self._pinned(31, path)[0])

    def test_devstack_branches_run_the_fake_computes_differently(self):
        # stable/2025.1 and 2025.2: fake.FakeDriver, one state_path;
        # stable/2026.1 and master: a state_path of each compute's own.
        def info(major):
            out = subprocess.run(
                ['python3', os.path.join(LITE, 'lite.py'), 'release-info',
                 '--nova-version', str(major)],
                capture_output=True, text=True, check=True).stdout
            return dict(line.split('=', 1) for line in out.splitlines())
        old, new = info(31), info(34)
        self.assertEqual({'NSE_LITE_RELEASE': '2025.1',
                          'NSE_LITE_DEVSTACK': 'stable/2025.1',
                          'NSE_LITE_FAKE_DRIVER': 'fake.FakeDriver',
                          'NSE_LITE_FAKE_STATE_PATHS': '0',
                          'NSE_LITE_API_ENV':
                              'OS_NOVA_DISABLE_EVENTLET_PATCHING=1'}, old)
        self.assertEqual({'NSE_LITE_RELEASE': '2026.2',
                          'NSE_LITE_DEVSTACK': 'master',
                          'NSE_LITE_FAKE_DRIVER':
                              'fake.FakeDriverWithoutFakeNodes',
                          'NSE_LITE_FAKE_STATE_PATHS': '1',
                          'NSE_LITE_API_ENV': ''}, new)
        self.assertEqual('fake.FakeDriver',
                         info(32)['NSE_LITE_FAKE_DRIVER'])
        self.assertEqual('1', info(33)['NSE_LITE_FAKE_STATE_PATHS'])

    def test_the_package_installs_under_the_release_pins(self):
        work = self.useFixture(fixtures.TempDir()).path
        argv = os.path.join(work, 'argv')
        os.makedirs(os.path.join(work, 'bin'))
        python = os.path.join(work, 'bin', 'python')
        with open(python, 'w') as f:
            f.write('#!/bin/sh\necho "$@" > %s\n' % argv)
        os.chmod(python, 0o755)
        script = ('LITE_DIR=%s VENV=%s LOGDIR=%s PIDDIR=%s\n'
                  'source %s/functions.sh\n'
                  'echo_summary() { :; }\n'
                  'LITE_CONSTRAINTS=%s/requirements.txt setup_develop /repo\n'
                  % (LITE, work, work, work, LITE, work))
        subprocess.run(['bash', '-c', script], check=True, timeout=60)
        with open(argv) as f:
            self.assertEqual('-m pip install --quiet --no-input -e /repo -c '
                             '%s/requirements.txt' % work, f.read().strip())


class StalenessLogTest(base.TestCase):
    """multisched.py reads the kept state's polls from the schedulers' logs.

    The lines are what nova_sched_ext.kept_candidates logs, formatted as
    oslo.log formats them in devstack-lite (the logger's own message,
    checked against the module so that the two cannot drift apart).
    """

    P1 = '11e299fe-9c18-5550-8559-0df8ecd8231a'
    P2 = '6b52ccfa-89c4-5a9b-b583-c59c75ae2128'

    def line(self, stamp, added=(), changed=(), removed=()):
        from nova_sched_ext import kept_candidates
        message = ('Kept provider state: added %s; read again %s; '
                   'removed %s.' % (kept_candidates._uuids(added),
                                    kept_candidates._uuids(changed),
                                    kept_candidates._uuids(removed)))
        return ('%s 24858 DEBUG nova_sched_ext.kept_candidates [None '
                'req-1 - - - - - -] %s _run kept_candidates.py:192\n'
                % (stamp, message))

    def test_the_first_read_after_a_change_is_found(self):
        lines = [
            self.line('2026-12-04 15:48:54.125', added=[self.P1, self.P2]),
            'an unrelated line\n',
            self.line('2026-12-04 15:49:07.052', changed=[self.P2]),
            self.line('2026-12-04 15:49:08.552', changed=[self.P1],
                      removed=[self.P2]),
        ]
        reads = multisched.kept_reads(lines)
        self.assertEqual(4, len(reads))
        since = multisched._log_time('2026-12-04 15:49:06.552')
        self.assertAlmostEqual(
            0.5, multisched.seen_after(reads, self.P2, since), places=3)
        self.assertAlmostEqual(
            2.0, multisched.seen_after(reads, self.P1, since), places=3)
        # a removal is no read; nothing after the change: None
        self.assertIsNone(multisched.seen_after(
            reads, self.P2, multisched._log_time('2026-12-04 15:49:08.000')))

    def test_a_claim_counted_before_placement_was_looked_at(self):
        counted = ('2026-12-04 15:49:07.010 1 DEBUG nova_sched_ext.'
                   'kept_candidates [-] Kept provider state: counted a '
                   'claim of another scheduler on %s.\n' % self.P1)
        lines = [
            self.line('2026-12-04 15:49:07.000', changed=[self.P1]),
            counted,
            self.line('2026-12-04 15:49:08.000', changed=[self.P1]),
        ]
        reads = multisched.kept_reads(lines)
        written_after = multisched._log_time('2026-12-04 15:49:06.990')
        since = multisched._log_time('2026-12-04 15:49:07.040')
        # the claim was written between the two looks at placement: the
        # cast counted 30 ms before the second is 0 s stale, the poll
        # 40 ms before it is not a read of the change
        self.assertEqual(0.0, multisched.seen_after(
            reads, self.P1, since, written_after))
        self.assertAlmostEqual(0.96, multisched.seen_after(
            reads, self.P1, since), places=3)
        self.assertAlmostEqual(0.96, multisched.seen_after(
            [read for read in reads if len(read) == 2], self.P1, since,
            written_after), places=3)

    def test_the_kept_state_logs_the_claims_it_counts(self):
        import logging

        import fixtures

        from nova_sched_ext import kept_candidates
        log = self.useFixture(fixtures.FakeLogger(
            name=kept_candidates.__name__, level=logging.DEBUG,
            format='2026-12-04 15:49:07.052 1 DEBUG %(name)s [-] '
                   '%(message)s'))
        kept = kept_candidates.KeptCandidates(lambda: None)
        kept._state = kept_candidates.provider_state.ProviderState(None)
        kept.claimed({'allocations': {self.P1: {'resources': {}}}})
        kept.claimed_elsewhere({self.P2: {'resources': {}}})
        at = multisched._log_time('2026-12-04 15:49:07.052')
        self.assertEqual([(at, self.P1, 'counted'), (at, self.P2, 'counted')],
                         multisched.kept_reads(log.output.splitlines()))

    def test_the_kept_state_logs_what_multisched_reads(self):
        # the poller's own line, through logging, parsed back
        import logging

        import fixtures

        from nova_sched_ext import kept_candidates
        log = self.useFixture(fixtures.FakeLogger(
            name=kept_candidates.__name__, level=logging.DEBUG,
            format='2026-12-04 15:49:07.052 1 DEBUG %(name)s [-] '
                   '%(message)s'))
        kept = kept_candidates.KeptCandidates(lambda: None)
        changes = kept_candidates.provider_state.Changes(
            added=frozenset(), changed=frozenset([self.P1]),
            removed=frozenset())
        kept.poll = lambda: (kept._poller.stopping.set(), changes)[1]
        kept._poller.run()
        self.assertEqual([(multisched._log_time('2026-12-04 15:49:07.052'),
                           self.P1)],
                         multisched.kept_reads(log.output.splitlines()))

    def test_the_kept_capacity_logs_what_multisched_reads(self):
        import logging

        import fixtures

        from nova_sched_ext.capacity import kept
        log = self.useFixture(fixtures.FakeLogger(
            name=kept.__name__, level=logging.DEBUG,
            format='2026-12-04 15:49:07.052 1 DEBUG %(name)s [-] '
                   '%(message)s'))
        kept.KeptCount._log_poll((frozenset([self.P1]),
                                  frozenset([self.P1, self.P2])))
        kept.KeptCount._log_poll((frozenset(), frozenset()))
        at = multisched._log_time('2026-12-04 15:49:07.052')
        self.assertEqual(sorted([(at, self.P1), (at, self.P1),
                                 (at, self.P2)]),
                         sorted(multisched.capacity_reads(
                             log.output.splitlines())))

    def test_every_command_parses(self):
        # main() parses before it reaches the cloud; each command's
        # arguments must not trip over another's.
        for argv in (['burst'], ['faults'], ['soak', '--requests', '3'],
                     ['staleness', '--changes', '2']):
            with mock.patch.object(multisched, 'Cloud') as cloud, \
                    mock.patch.object(multisched, argv[0] if argv[0] !=
                                      'faults' else 'faults_command',
                                      return_value=0) as command:
                self.assertEqual(0, multisched.main(argv))
            command.assert_called_once()
            cloud.return_value.cleanup.assert_called_once_with()
