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

"""``nova-sched-ext-bench scale`` runs end to end and reports its shape."""

import gc
import importlib.util
import json
import os
import socket
import subprocess
import sys
from unittest import mock

from testtools import content

from nova_sched_ext_tools.bench import burst
from nova_sched_ext_tools.bench import cli as bench
from nova_sched_ext_tools.bench import scale
from tests import base

HOSTS = 20
REQUESTS = 5


#: configures Nova as the bench does, without the schemas and RPC
CONFIGURE_NOVA = """
from unittest import mock
from nova_sched_ext_tools.bench import scale
with mock.patch('nova.db.migration.db_sync'), mock.patch('nova.rpc.init'):
    conf = scale.configure_nova({'api': 'sqlite://', 'cell': 'sqlite://'})
print(conf.profiler.enabled)
"""


class TestConfigureNova(base.TestCase):

    def test_with_osprofiler_importable(self):
        # osprofiler is in many OpenStack environments; with it, Nova's
        # database code reads [profiler], which only Nova's start-up
        # registers.
        if importlib.util.find_spec('osprofiler') is None:
            self.skipTest('osprofiler is not installed')
        # In a process of its own: Nova's global options.
        done = subprocess.run(
            [sys.executable, '-c', CONFIGURE_NOVA], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, timeout=300, check=False)
        self.addDetail('stderr', content.text_content(
            done.stderr.decode('utf-8', 'replace')))
        self.assertEqual(0, done.returncode)
        self.assertEqual(b'False\n', done.stdout)


class TestScaleBenchRun(base.TestCase):
    """A tiny run on sqlite: placement, both schedulers, the figures."""

    def test_tiny_run_json(self):
        # In a process of its own: the bench configures Nova's global
        # options and database engines, which must not leak into the
        # other tests of this worker.
        env = dict(os.environ, PYTHONHASHSEED='0')
        done = subprocess.run(
            [sys.executable, '-m', 'nova_sched_ext_tools.bench.cli',
             'scale', '--json', '--hosts', str(HOSTS), '--requests',
             str(REQUESTS), '--db', 'sqlite'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            timeout=900, check=False)
        self.addDetail('stderr', content.text_content(
            done.stderr.decode('utf-8', 'replace')))
        self.assertEqual(0, done.returncode)
        result = json.loads(done.stdout)
        self.assertEqual(['runs', 'wall_s'], sorted(result))
        (run,) = result['runs']
        self.assertEqual((HOSTS, REQUESTS), (run['hosts'], run['requests']))
        self.assertEqual('sqlite', run['database'])
        self.assertEqual(REQUESTS, len(run['per_request']))
        self.assertEqual(sorted(scale.SIDES), sorted(run['sides']))
        for side in scale.SIDES:
            figures = run['sides'][side]
            self.assertEqual(sorted(scale.PHASES),
                             sorted(figures['phases_ms']))
            for phase, values in figures['phases_ms'].items():
                self.assertEqual(['p50', 'p95', 'p99'], sorted(values),
                                 phase)
                self.assertLessEqual(values['p50'], values['p99'], phase)
            for phase in ('total', 'placement', 'refresh', 'filters',
                          'weighers', 'claims'):
                self.assertGreater(figures['phases_ms'][phase]['p50'], 0.0,
                                   (side, phase))
            self.assertEqual(REQUESTS, figures['placed'] + figures['refused'])
            self.assertGreater(figures['placed'], 0, side)
        package, nova = run['sides']['package'], run['sides']['nova']
        self.assertIn('NUMATopologyFilter', nova['filters'])
        self.assertIn('FastNUMATopologyFilter', package['filters'])
        self.assertNotIn('NUMATopologyFilter', package['filters'])
        self.assertNotIn('FastNUMATopologyFilter', nova['filters'])
        self.assertEqual('fast', run['package_numa_filter'])
        self.assertIn('NUMASlotWeigher', package['weighers'])
        self.assertIn('FastNUMATopologyFilter',
                      package['filters_by_name_ms'])
        # The same state for both on every request: the package's filter
        # keeps what Nova's would, so both place the same requests.
        self.assertEqual(run['sides']['nova']['placed'],
                         run['sides']['package']['placed'])
        self.assertEqual(run['sides']['nova']['placed'], run['both_placed'])
        self.assertEqual((0, 0), (run['only_nova_placed'],
                                  run['only_package_placed']))
        for row in run['per_request']:
            self.assertEqual(row['nova_host'] is None,
                             row['package_host'] is None, row)


RABBIT_ADDRESS = ('127.0.0.1', 5672)
RABBIT = 'rabbit://guest:guest@%s:%d/' % RABBIT_ADDRESS


def _reachable(address):
    try:
        socket.create_connection(address, timeout=2).close()
    except OSError:
        return False
    return True


class TestScaleBenchKeptRun(base.TestCase):
    """A tiny run: kept candidates, schedulers at once, kept capacity."""

    def test_kept_candidates_and_several_schedulers(self):
        env = dict(os.environ, PYTHONHASHSEED='0')
        # The schedulers cast their claims to each other over RabbitMQ
        # when it runs here (it does on the project's machines).
        casts = RABBIT if _reachable(RABBIT_ADDRESS) else None
        if casts is None:
            self.addDetail('claim casts', content.text_content(
                'RabbitMQ does not answer at %s:%d: the burst runs without '
                'claim casts' % RABBIT_ADDRESS))
        done = subprocess.run(
            [sys.executable, '-m', 'nova_sched_ext_tools.bench.cli',
             'scale', '--json', '--hosts', '12', '--requests', '4',
             '--db', 'sqlite', '--package-candidates', 'kept',
             '--schedulers', '2', '--burst-seconds', '4',
             '--burst-window', '2', '--burst-from-snapshot',
             '--burst-resync-max-rate', '2.5',
             '--capacity-flavors', '3'] +
            (['--burst-claim-casts', casts] if casts else []),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            timeout=900, check=False)
        self.addDetail('stderr', content.text_content(
            done.stderr.decode('utf-8', 'replace')))
        self.assertEqual(0, done.returncode)
        (run,) = json.loads(done.stdout)['runs']
        self.assertEqual('kept', run['package_candidates'])
        package = run['sides']['package']
        # every query of a request that placed answered from kept state
        self.assertEqual(0, package['placement_queries']['p50'])
        self.assertGreaterEqual(package['kept_answers']['p50'], 1)
        self.assertGreater(package['phases_ms']['kept']['p50'], 0.0)
        self.assertGreater(run['kept_state']['answers']['kept'], 0)
        # each request's query asked of placement too, with every
        # candidate: the same answer
        self.assertEqual(4, run['kept_state']['checked_against_placement'])
        self.assertEqual([], run['kept_state']['differences'])
        self.assertGreaterEqual(run['kept_state']['host_state_warm_up_s'],
                                0.0)
        burst = run['several_schedulers']
        self.assertEqual(2, burst['schedulers'])
        # each scheduler in a process of its own, each handing in
        # figures
        self.assertEqual(2, burst['processes'])
        # the processes' option, as asked
        self.assertEqual(2.5, burst['resync_max_rate'])
        self.assertGreater(burst['requests'], 0)
        # two whole windows of 2 s; the tail after the deadline (requests
        # in flight) counts in the total only
        self.assertEqual(2, len(burst['requests_per_second_by_window']))
        self.assertLessEqual(
            sum(burst['requests_per_second_by_window']) * 2,
            burst['requests'])
        self.assertEqual(min(burst['requests_per_second_by_window']),
                         burst['lowest_window_rate'])
        self.assertEqual(2, len(burst['first_read_s']))
        # from the replay's state, saved to a snapshot file
        self.assertTrue(burst['first_read_from_snapshot'])
        self.assertEqual(burst['requests'],
                         burst['placed'] + burst['no_valid_host'])
        self.assertEqual([], burst['over_commits'])
        self.assertEqual(0, burst['error_count'])
        self.assertGreaterEqual(burst['claims'], burst['placed'])
        self.assertEqual(2, len(burst['answers']))
        self.assertEqual(2, len(burst['placement_gets']))
        if casts is None:
            self.assertEqual([None, None], burst['claim_casts'])
        else:
            # each process counted the other's claims, none of its own,
            # and never more than the other sent
            first, second = burst['claim_casts']
            self.assertEqual(0, first.get('failed', 0) +
                             second.get('failed', 0))
            self.assertGreater(first.get('counted', 0) +
                               second.get('counted', 0), 0)
            self.assertLessEqual(first.get('counted', 0),
                                 second.get('sent', 0))
            self.assertLessEqual(second.get('counted', 0),
                                 first.get('sent', 0))
            self.assertLessEqual(first.get('own', 0), first.get('sent', 0))
        # the capacity from kept state: an answer after each request, and
        # a full count equal to it at the start and the end
        capacity = run['kept_capacity']
        self.assertEqual(3, capacity['flavors'])
        self.assertEqual(4, capacity['answers'])
        self.assertEqual(['start', 'end'],
                         [c['at'] for c in capacity['checks']])
        self.assertEqual(12, capacity['checks'][0]['hosts_counted'])
        self.assertEqual([], capacity['differences'])


class TestBurstHelpers(base.TestCase):

    def test_rates_by_whole_window(self):
        went = 1000.0
        ends = [went + t for t in (0.1, 0.5, 1.9, 2.0, 3.0, 3.99, 4.0, 4.5,
                                   -0.1)]
        # windows [0, 2) and [2, 4): 3 and 3 requests; 4.0 and 4.5 are
        # the tail (the last window, [4, 5), is not whole), -0.1 before
        self.assertEqual([1.5, 1.5],
                         burst.rates_by_window(ends, went, 5, 2))
        self.assertEqual([2.0, 1.0, 0.0, 0.0],
                         burst.rates_by_window(ends[:3], went, 4, 1))
        self.assertEqual([], burst.rates_by_window(ends, went, 1, 2))

    def test_bad_burst_options_are_one_line(self):
        for options, words in (
                (('--burst-window', '0'), 'and --burst-window at least 1'),
                (('--burst-poll-interval', '0.01'),
                 '--burst-poll-interval must be at least 0.05'),
                (('--burst-resync-max-rate', '-1'),
                 '--burst-resync-max-rate must be a finite number, 0 or '
                 'more'),
                (('--burst-resync-max-rate', 'inf'),
                 '--burst-resync-max-rate must be a finite number'),
                (('--schedulers', '2', '--burst-from-snapshot'),
                 '--burst-from-snapshot needs --schedulers and '
                 '--package-candidates kept')):
            error = self.assertRaises(SystemExit, self.run_main, bench.main,
                                      'scale', *options)
            self.assertIn(words, str(error))
            self.assertNotIn('\n', str(error))

    def _process(self, code):
        process = burst._Process.__new__(burst._Process)
        process.number = 7
        process.child = subprocess.Popen(
            [sys.executable, '-c', code], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        self.addCleanup(process.end)
        return process

    def test_a_process_that_dies_is_one_line(self):
        process = self._process('import sys; sys.exit(3)')
        error = self.assertRaises(scale.BenchError, process.expect, 'ready',
                                  60)
        self.assertEqual('scheduler process 7 ended with exit status 3 '
                         'before it said \'ready\' (its stderr is above)',
                         str(error))

    def test_a_process_that_says_something_else(self):
        process = self._process('print("Traceback: boom", flush=True)')
        error = self.assertRaises(scale.BenchError, process.expect, 'ready',
                                  60)
        self.assertIn("wrote 'Traceback: boom' before it said 'ready'",
                      str(error))

    def test_what_follows_the_word(self):
        process = self._process('print("result {\\"a\\": 1}", flush=True)')
        self.assertEqual('{"a": 1}', process.expect('result', 60))


class TestScaleBenchHelpers(base.TestCase):

    def test_percentiles_by_nearest_rank(self):
        values = list(range(1, 101))
        self.assertEqual({'p50': 50, 'p95': 95, 'p99': 99},
                         scale.summary(values))
        self.assertEqual({'p50': 2, 'p95': 3, 'p99': 3},
                         scale.summary([3, 1, 2]))
        self.assertIsNone(scale.percentile([], 50))

    def test_derived_phases(self):
        phases = scale._net_phases({
            'total': 10.0, 'placement': 2.0, 'refresh': 3.0,
            'refresh_db': 1.0, 'candidate_copy': 0.5, 'filters': 2.5,
            'weighers': 1.0, 'claims': 0.5})
        self.assertEqual(2.0, phases['filters'])
        self.assertEqual(3.5, phases['refresh'])
        self.assertEqual(2.0, phases['refresh_objects'])
        self.assertEqual(7.0, phases['own'])
        self.assertEqual(1.0, phases['other'])

    def test_the_clock_times_collections_while_it_runs(self):
        clock = scale.Clock()
        self.addCleanup(clock.close)
        gc.collect()
        self.assertIsNone(clock.current)
        clock.start()
        cycles = [[] for _ in range(20000)]
        for cycle in cycles:
            cycle.append(cycle)
        del cycles
        gc.collect()
        phases, _names = clock.stop()
        self.assertGreater(phases['gc'], 0.0)
        # not running: nothing is added; closed: no longer called
        gc.collect()
        self.assertIsNone(clock.current)
        clock.close()
        self.assertNotIn(clock._gc_callback, gc.callbacks)

    def test_the_bench_polls_until_the_host_state_is_warm(self):
        manager = mock.Mock()
        manager.host_manager.warm_up_pending = 3
        kept = mock.Mock()

        def poll():
            host_manager = manager.host_manager
            host_manager.warm_up_pending = max(
                host_manager.warm_up_pending - 1, 0)

        kept.poll.side_effect = poll
        self.assertGreaterEqual(scale.polled_warm(kept, manager), 0.0)
        self.assertEqual(3, kept.poll.call_count)
        # Nova's host manager (the state reloaded): one poll
        manager.host_manager = object()
        kept.poll.reset_mock(side_effect=True)
        scale.polled_warm(kept, manager)
        self.assertEqual(1, kept.poll.call_count)

    def test_bad_sizes_are_one_line(self):
        for bad in ('', 'ten', '1000,-1', '0'):
            error = self.assertRaises(
                SystemExit, self.run_main, bench.main, 'scale', '--hosts',
                bad)
            self.assertIn('--hosts must be positive whole numbers',
                          str(error))

    def test_package_filters_put_numa_fit_first(self):
        defaults = ['ComputeFilter', 'ServerGroupAffinityFilter']
        self.assertEqual(['ComputeFilter', 'ServerGroupAffinityFilter',
                          'PciPassthroughFilter', 'NUMATopologyFilter'],
                         scale.nova_filters(defaults))
        self.assertEqual(['ComputeFilter', 'ServerGroupAffinityFilter',
                          'PciPassthroughFilter', 'NUMAFitFilter',
                          'NUMATopologyFilter'],
                         scale.package_filters(defaults, 'prefilter'))
        self.assertEqual(['ComputeFilter', 'ServerGroupAffinityFilter',
                          'PciPassthroughFilter', 'FastNUMATopologyFilter'],
                         scale.package_filters(defaults))
        self.assertEqual(['NUMATopologyFilter', 'PciPassthroughFilter'],
                         scale.nova_filters(['NUMATopologyFilter']))
