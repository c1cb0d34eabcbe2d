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

"""The Prometheus exporter: series, refreshes, failures, the command."""

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import fixtures
from keystoneauth1 import exceptions as ks_exc
import nova.conf
import prometheus_client
from prometheus_client import parser as prom_parser

from nova_sched_ext.capacity import exporter
from nova_sched_ext.conf import capacity as capacity_conf
from tests import base
from tests.unit.capacity import api_fakes
from tests.unit.capacity import backend_fakes

GROUP = capacity_conf.GROUP_NAME


def samples(registry):
    """{(name, sorted labels): value} of a registry's exposition."""
    text = prometheus_client.generate_latest(registry).decode('utf-8')
    found = {}
    for family in prom_parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = (
                sample.value)
    return found, text


class ExporterTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.core = self.useFixture(api_fakes.FakeCapacity())
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.capacity', level=logging.INFO))
        self.clock = api_fakes.FakeClock(500.0)

    def make_exporter(self, **overrides):
        self.registry = prometheus_client.CollectorRegistry()
        return exporter.CapacityExporter(
            api_fakes.make_conf(**overrides), object, registry=self.registry,
            clock=self.clock, wall_clock=lambda: 1767225600.0)


class TestSeries(ExporterTestCase):

    def test_before_the_first_refresh(self):
        self.make_exporter()
        self.clock.now += 200
        found, text = samples(self.registry)
        self.assertEqual(
            0, found[('nova_sched_ext_capacity_refresh_errors_total', ())])
        self.assertNotIn('nova_sched_ext_capacity_instances{', text)
        # A first refresh that hangs must be seen: not up, and figures as
        # old as the exporter, so that "age > 180" fires.
        self.assertEqual(0, found[('nova_sched_ext_capacity_up', ())])
        self.assertEqual(200, found[(
            'nova_sched_ext_capacity_last_refresh_age_seconds', ())])
        self.assertNotIn(('nova_sched_ext_capacity_last_refresh_'
                          'timestamp_seconds', ()), found)
        # Registering and scraping never count.
        self.assertEqual([], self.core.calls)

    def test_figures_of_every_scope(self):
        exp = self.make_exporter()
        self.assertTrue(exp.refresh())
        self.assertEqual(['cloud', 'az', 'aggregate', 'cell'],
                         [call['by'] for call in self.core.calls])
        self.assertEqual([None] * 4,
                         [call['flavors'] for call in self.core.calls])
        self.clock.now += 42
        found, text = samples(self.registry)

        def value(metric, **labels):
            return found[('nova_sched_ext_capacity_' + metric,
                          tuple(sorted(labels.items())))]

        for by in ('cloud', 'az', 'aggregate', 'cell'):
            self.assertEqual(40, value('instances', flavor='m1.small',
                                       scope=by, name='nova'))
            self.assertEqual(9, value('placement_only_instances',
                                      flavor='m1.large', scope=by,
                                      name='nova'))
            self.assertEqual(0, value('instances', flavor='m1.large',
                                      scope=by, name='zone2'))
            self.assertEqual(3, value('fragmentation_vcpus', scope=by,
                                      name='nova'))
            self.assertEqual(1024 * 1024 * 1024,
                             value('fragmentation_memory_bytes', scope=by,
                                   name='nova'))
            self.assertEqual(1, value('hosts', scope=by, name='zone2'))
        self.assertEqual(1, value('hosts_skipped', reason='no_numa_topology'))
        self.assertEqual(0, value('engine_fallbacks'))
        self.assertEqual(42, value('last_refresh_age_seconds'))
        self.assertEqual(1767225600.0, value('last_refresh_timestamp_seconds'))
        self.assertEqual(0, value('last_refresh_duration_seconds'))
        self.assertEqual(0, value('refresh_errors_total'))
        self.assertEqual(1, value('up'))
        self.assertNotIn('fragmentation_memory_mb', text)
        self.assertNotIn('scope="host"', text)
        self.assertIn('# TYPE nova_sched_ext_capacity_instances gauge', text)
        self.assertIn('# TYPE nova_sched_ext_capacity_refresh_errors_total '
                      'counter', text)
        # Scrapes read the figures; they do not count.
        samples(self.registry)
        self.assertEqual(4, len(self.core.calls))

    def test_configured_scopes(self):
        exp = self.make_exporter(exporter_scopes=['az', 'az'])
        exp.refresh()
        self.assertEqual(['az'], [call['by'] for call in self.core.calls])

    def test_per_host_figures_behind_an_option(self):
        exp = self.make_exporter(export_per_host=True)
        exp.refresh()
        self.assertEqual([True, False, False, False],
                         [call['per_host'] for call in self.core.calls])
        found, _text = samples(self.registry)
        self.assertEqual(8, found[(
            'nova_sched_ext_capacity_instances',
            (('flavor', 'm1.small'), ('name', 'cpu1'), ('scope', 'host')))])

    def test_a_scope_reported_twice_is_exported_once(self):
        self.core.reports['az'] = api_fakes.report('cloud')
        exp = self.make_exporter(exporter_scopes=['cloud', 'az'])
        exp.refresh()
        _found, text = samples(self.registry)
        self.assertEqual(1, text.count(
            'nova_sched_ext_capacity_hosts{name="nova",scope="cloud"}'))


class TestFailures(ExporterTestCase):

    def test_a_failed_refresh_keeps_the_last_figures(self):
        exp = self.make_exporter()
        exp.refresh()
        self.clock.now += 60
        self.core.error = ks_exc.ConnectFailure(
            'Unable to establish connection to placement\nmore detail')
        self.assertFalse(exp.refresh())
        self.assertFalse(exp.refresh())
        self.clock.now += 10
        found, _text = samples(self.registry)
        self.assertEqual(2, found[(
            'nova_sched_ext_capacity_refresh_errors_total', ())])
        self.assertEqual(70, found[(
            'nova_sched_ext_capacity_last_refresh_age_seconds', ())])
        self.assertEqual(0, found[('nova_sched_ext_capacity_up', ())])
        self.assertEqual(40, found[(
            'nova_sched_ext_capacity_instances',
            (('flavor', 'm1.small'), ('name', 'nova'), ('scope', 'az')))])
        failures = [line for line in self.log.output.splitlines()
                    if 'refresh failed' in line]
        self.assertEqual(
            ['Capacity refresh failed, keeping the figures of 60 s ago: '
             'ConnectFailure: Unable to establish connection to placement'
             ] * 2, failures)
        self.assertNotIn('Traceback', self.log.output)

    def test_failures_before_any_figures(self):
        exp = self.make_exporter()
        self.core.error = self.core.CapacityError('No compute hosts')
        exp.refresh()
        self.assertIn('Capacity refresh failed, no figures yet: '
                      'No compute hosts', self.log.output.replace(
                          'FakeCapacityError: ', '').replace(
                          'CapacityError: ', ''))
        found, text = samples(self.registry)
        self.assertEqual(1, found[(
            'nova_sched_ext_capacity_refresh_errors_total', ())])
        self.assertNotIn('nova_sched_ext_capacity_instances{', text)


class TestHungRefresh(ExporterTestCase):

    def test_a_refresh_that_outlasts_its_timeout_is_a_failure(self):
        self.core.gate = threading.Event()
        self.addCleanup(self.core.gate.set)
        exp = self.make_exporter(exporter_refresh_timeout=1,
                                 exporter_port=0, exporter_scopes=['cloud'])
        stop = threading.Event()
        thread = threading.Thread(target=exp.serve, args=(stop,))
        thread.start()
        self.addCleanup(thread.join, 30)
        self.addCleanup(stop.set)
        for _ in range(3000):
            found, _text = samples(self.registry)
            if found[('nova_sched_ext_capacity_refresh_errors_total', ())]:
                break
            time.sleep(0.01)
        self.assertEqual(1, found[(
            'nova_sched_ext_capacity_refresh_errors_total', ())])
        self.assertEqual(0, found[('nova_sched_ext_capacity_up', ())])
        self.assertIn('Capacity refresh did not finish within 1 s',
                      self.log.output)
        # Still the one refresh: the next starts when this one ends.
        self.assertEqual(1, len(self.core.calls))
        stop.set()
        thread.join(30)
        self.assertFalse(thread.is_alive())
        # The hung refresh ends, within this test.
        self.core.gate.set()
        exp.refresh_thread.join(30)
        self.assertFalse(exp.refresh_thread.is_alive())


class TestSignals(base.TestCase):
    """The exporter process stops on SIGTERM while a refresh hangs."""

    def test_sigterm_stops_it_during_a_hung_refresh(self):
        silent = self.useFixture(backend_fakes.SilentServer())
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, 'nova.conf')
        with open(path, 'w') as f:
            # The database never answers, and the bound is long: only the
            # signal can end this refresh before the test's patience does.
            f.write(textwrap.dedent('''\
                [DEFAULT]
                use_stderr = False
                [api_database]
                connection = mysql+pymysql://nova@127.0.0.1:%(port)d/api
                [database]
                connection = mysql+pymysql://nova@127.0.0.1:%(port)d/nova
                [nova_sched_ext_capacity]
                backend_timeout = 300
                exporter_port = 0
                ''' % {'port': silent.port}))
        env = dict(os.environ)
        env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
        log = self.useFixture(fixtures.TempDir()).join('stderr')
        log = open(log, 'w+')
        self.addCleanup(log.close)
        process = subprocess.Popen(
            [sys.executable, '-c',
             'import sys; from nova_sched_ext.capacity import exporter; '
             'sys.exit(exporter.main())', '--config-file', path],
            env=env, stdout=subprocess.DEVNULL, stderr=log)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        for _ in range(12000):
            if silent.connections or process.poll() is not None:
                break
            time.sleep(0.01)
        self.assertIsNone(process.poll(), 'the exporter stopped at once')
        self.assertTrue(silent.connections, 'the refresh never connected')
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.fail('the exporter did not stop on SIGTERM')
        log.seek(0)
        self.assertEqual(0, process.returncode, log.read())


class TestMain(ExporterTestCase):
    """nova-sched-ext-capacity-exporter --config-file ..., over HTTP."""

    def setUp(self):
        super().setUp()
        # Nova's process-wide set-up is the test runner's already.
        self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.capacity.wsgi.use_native_threads'))
        self.useFixture(fixtures.MockPatch('oslo_log.log.setup'))
        self.useFixture(fixtures.MockPatch('nova.db.main.api.configure'))
        self.useFixture(fixtures.MockPatch('nova.db.api.api.configure'))
        self.addCleanup(nova.conf.CONF.reset)
        # Nova's parse_args gives the root logger a handler.
        root = logging.getLogger()
        self.addCleanup(setattr, root, 'handlers', list(root.handlers))
        self.servers = []
        real_start = prometheus_client.start_http_server

        def start(*args, **kwargs):
            started = real_start(*args, **kwargs)
            self.servers.append(started[0])
            return started

        self.useFixture(fixtures.MockPatch(
            'prometheus_client.start_http_server', side_effect=start))

    def test_main_serves_the_figures(self):
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, 'capacity.conf')
        with open(path, 'w') as f:
            f.write('[nova_sched_ext_capacity]\nexporter_port = 0\n'
                    'exporter_scopes = az\nrefresh_interval = 3600\n')
        stop = threading.Event()
        result = []
        thread = threading.Thread(target=lambda: result.append(
            exporter.main(['--config-file', path], stop=stop)))
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(stop.set)
        for _ in range(500):
            if self.servers and self.core.calls:
                break
            time.sleep(0.01)
        server, = self.servers
        self.assertEqual('127.0.0.1', server.server_address[0])
        url = 'http://127.0.0.1:%d/metrics' % server.server_port
        for _ in range(500):
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode('utf-8')
            if 'nova_sched_ext_capacity_instances{' in text:
                break
            time.sleep(0.01)
        self.assertIn('nova_sched_ext_capacity_instances{flavor="m1.small",'
                      'name="nova",scope="az"} 40.0', text)
        self.assertIn('process_', text)
        self.assertEqual(['az'], [call['by'] for call in self.core.calls])
        stop.set()
        thread.join(10)
        self.assertEqual([0], result)
        self.assertIn('Capacity exporter stopped', self.log.output)

    def test_a_port_in_use_is_a_clear_error(self):
        self.useFixture(fixtures.MockPatch(
            'prometheus_client.start_http_server',
            side_effect=OSError(98, 'Address already in use')))
        self.assertEqual(1, exporter.main([], stop=threading.Event()))
        self.assertIn('Cannot listen on 127.0.0.1:9736', self.log.output)

    def test_an_option_out_of_bounds_is_one_line(self):
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, 'capacity.conf')
        with open(path, 'w') as f:
            f.write('[nova_sched_ext_capacity]\nplacement_workers = 0\n')
        stderr = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        self.assertEqual(2, exporter.main(['--config-file', path],
                                          stop=threading.Event()))
        stderr.seek(0)
        self.assertEqual(
            ['nova-sched-ext-capacity-exporter: error: invalid value for '
             '[nova_sched_ext_capacity] placement_workers in %s: Should be '
             'greater than or equal to 1' % path],
            stderr.read().splitlines())
        self.assertEqual([], self.core.calls)


class TestKeptState(ExporterTestCase):

    def test_refreshes_from_the_kept_state_while_usable(self):
        kept = api_fakes.FakeKept()
        exp = exporter.CapacityExporter(
            api_fakes.make_conf(exporter_scopes=['cloud', 'az']), object,
            registry=prometheus_client.CollectorRegistry(), clock=self.clock,
            kept=kept)
        self.assertTrue(exp.refresh())
        self.assertEqual(['cloud', 'az'], [c['by'] for c in kept.calls])
        self.assertEqual([], self.core.calls)
        kept.why = ('not_ready', 'no poll has completed')
        self.assertTrue(exp.refresh())
        self.assertEqual(2, len(self.core.calls))
        self.assertEqual(2, kept.counts['not_ready'])
