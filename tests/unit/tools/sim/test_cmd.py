"""nova-sched-ext-sim end to end on a tiny trace: tables, JSON, plot."""

import io
import json
import os
import subprocess
import sys
import tempfile
from unittest import mock

from nova_sched_ext_tools.sim import cli
from nova_sched_ext_tools.sim import replay
from tests.unit.tools.sim import base

HOSTS = ('host_id,rack_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,numa1_ram_gb\n'
         'host-0,0,16,32,16,32\n'
         'host-1,0,8,16,0,0\n'
         'host-2,1,12,48,12,48\n')
REQUESTS = ('seq,flavor_vcpus,flavor_ram,numa,strategy,group,domain\n'
            '0,8,16,1,fault_domain,0,1\n'
            '1,8,16,1,fault_domain,0,0\n'
            '2,2,4,1,affinity,0,\n'
            '3,2,4,1,affinity,0,\n'
            '4,4,8,1,anti-affinity,0,\n'
            '5,4,8,1,anti-affinity,0,\n'
            '6,24,48,2,,,\n'
            '7,32,64,1,,,\n')


class TestCommand(base.SimTestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: [os.unlink(os.path.join(self.dir, n))
                                 for n in os.listdir(self.dir)] and None)
        self.hosts = self.path('hosts.csv', HOSTS)
        self.requests = self.path('requests_T.csv', REQUESTS)

    def path(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def run_cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        args = cli.parse_args(['--hosts', self.hosts,
                               '--requests', self.requests] + list(argv))
        outputs = cli.run(args, stdout=out, stderr=err)
        return out.getvalue(), err.getvalue(), outputs

    def test_json_has_the_keys(self):
        out, _err, _ = self.run_cli('--json', '--policy', 'nova-default')
        summary = json.loads(out)
        for key in ('placed', 'rejected', 'placed_vcpus', 'rejected_by',
                    'large_slots_left', 'mean_decision_ms'):
            self.assertIn(key, summary)
        self.assertEqual({'none', 'affinity', 'anti-affinity',
                          'fault_domain'}, set(summary['rejected_by']))
        self.assertEqual(8, summary['placed'] + summary['rejected'])
        # 32 vCPUs in one NUMA node: no cell has them; 12+12 vCPUs: the
        # earlier members left no host with 12 free in both cells
        self.assertEqual(2, summary['rejected_by']['none'])
        self.assertEqual(0, summary['rejected_by']['fault_domain'])
        self.assertEqual({'32c64g-1n', '24c48g-2n', '8c16g-1n'},
                         set(summary['large_slots_left']))
        self.assertEqual('nova-default', summary['policy'])

    def test_table_and_limit(self):
        out, _err, outputs = self.run_cli('--limit', '3', '--fast')
        self.assertIn('placed vCPUs', out)
        self.assertIn('--fast pipeline', out)
        [results] = outputs.values()
        self.assertEqual(3, results[0].requests)
        # --limit keeps the reference flavors of the whole trace
        self.assertIn('32c64g-1n', results[0].large_slots_left)

    def test_compare_and_plot(self):
        png = os.path.join(self.dir, 'out.png')
        out, err, outputs = self.run_cli(
            '--compare', 'nova-default,best-fit', '--plot', png,
            '--sample-every', '2')
        self.assertIn('nova-default', out)
        self.assertIn('best-fit', out)
        self.assertIn('slots left', out)
        with open(png, 'rb') as f:
            self.assertEqual(b'\x89PNG', f.read(4))
        # where it went, after the table
        self.assertTrue(out.endswith(
            'plot of requests_T written to %s\n\n' % png), out)
        [results] = outputs.values()
        self.assertEqual([0, 2, 4, 6, 8],
                         [s['request'] for s in results[0].samples])

    def test_plot_with_json_is_named_on_stderr(self):
        stem = os.path.join(self.dir, 'replay')
        out, err, _ = self.run_cli('--json', '--plot', stem, '--limit', '2')
        json.loads(out)
        # matplotlib would add .png; the path says so
        self.assertEqual('nova-sched-ext-sim: plot of requests_T written '
                         'to %s.png\n' % stem, err)
        self.assertTrue(os.path.isfile(stem + '.png'))

    def test_set_overrides_an_option(self):
        _out, _err, outputs = self.run_cli(
            '--set', 'filter_scheduler.ram_weight_multiplier=-3.5',
            '--host-subset-size', '2')
        [[result]] = outputs.values()
        self.assertEqual(-3.5, result.settings['ram_weight_multiplier'])
        self.assertEqual(2, result.settings['host_subset_size'])

    def test_errors_exit_2(self):
        bad = self.path('bad.csv', 'seq,flavor_vcpus\n0,1\n')
        self.assertEqual(2, cli.main(['--hosts', self.hosts,
                                      '--requests', bad]))
        self.assertEqual(2, cli.main(['--hosts', self.hosts,
                                      '--requests', self.requests,
                                      '--policy', 'no-such-policy']))
        self.assertEqual(2, cli.main(['--hosts', self.hosts,
                                      '--requests', self.requests,
                                      '--set', 'no_such_group.x=1']))

    def test_synthetic(self):
        out, _err, outputs = self.run_cli('--synthetic', '60', '--seed', '2',
                                          '--synthetic-hosts', '4', '--json')
        summary = json.loads(out)
        self.assertEqual(60, summary['requests'])
        self.assertGreater(summary['departed'], 0)

    def test_a_long_replay_shows_progress_by_default(self):
        # 30 requests: a long replay for the default; a line every 10
        _out, err, _ = self.run_cli('--synthetic', '30', '--seed', '2',
                                    '--synthetic-hosts', '4', '--json',
                                    '--progress-every', '10')
        lines = err.splitlines()
        self.assertEqual('synthetic-seed2, policy configured: 30 requests '
                         'on 4 hosts', lines[0])
        self.assertEqual(3, len(lines[1:]), err)
        for done, line in zip((10, 20, 30), lines[1:]):
            self.assertIn('synthetic-seed2, configured: %d/30 requests'
                          % done, line)
            self.assertIn('placed', line)
            self.assertIn('s/request', line)
        self.assertIn('left', lines[1])

    def test_no_progress(self):
        _out, err, _ = self.run_cli('--synthetic', '30', '--seed', '2',
                                    '--synthetic-hosts', '4', '--json',
                                    '--no-progress')
        self.assertEqual('', err)
        # a short replay shows none unless asked
        self.assertEqual('', self.run_cli('--json')[1])
        err = self.run_cli('--json', '--progress', '--progress-every',
                           '4')[1]
        self.assertIn('configured: 4/8 requests (50%)', err)
        self.assertIn('configured: 8/8 requests (100%)', err)

    def test_a_bar_on_a_terminal(self):
        class Terminal(io.StringIO):
            def isatty(self):
                return True

        clock = iter(range(0, 1000, 10))
        args = cli.parse_args(['--hosts', self.hosts, '--requests',
                               self.requests])
        stream = Terminal()
        progress = cli.Progress(stream, 'T', 8,
                                every=args.progress_every,
                                clock=lambda: next(clock))
        result = replay.Result(policy='p', hosts=3)
        simulator = mock.Mock(result=result)
        for done in range(1, 9):
            result.placed = done
            progress(simulator, done)
        text = stream.getvalue()
        # redrawn in place, one line in the end
        self.assertEqual(8, text.count('\r'))
        self.assertEqual(1, text.count('\n'))
        self.assertTrue(text.endswith('\n'))
        self.assertIn('[' + '#' * 12 + '.' * 12 + '] 4/8', text)
        self.assertIn('8 placed, 0 rejected, 10.00 s/request', text)
        self.assertIn('~40 s left', text)


class TestBadInput(base.CommandTestCase):
    """Bad files and options: exit 2, one line on stderr, no traceback."""

    def setUp(self):
        super().setUp()
        self.hosts = self.path('hosts.csv', HOSTS)
        self.requests = self.path('requests_T.csv', REQUESTS)

    def assertFails(self, argv, *words):
        code, _out, err = self.main(*argv)
        self.assertEqual(2, code, err)
        self.assertNotIn('Traceback', err)
        self.assertEqual(1, len(err.splitlines()), err)
        self.assertTrue(err.startswith('nova-sched-ext-sim: '), err)
        for word in words:
            self.assertIn(word, err)
        return err

    def assertBadHosts(self, data, *words):
        hosts = self.path('bad-hosts.csv', data)
        return self.assertFails(['--hosts', hosts,
                                 '--requests', self.requests],
                                hosts, *words)

    def test_short_row_missing_rack_id(self):
        self.assertBadHosts(
            'host_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,numa1_ram_gb,'
            'rack_id\nh1,8,16,0,0\n', 'line 2', 'rack_id')

    def test_short_row_missing_host_id(self):
        self.assertBadHosts(
            'rack_id,host_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,'
            'numa1_ram_gb\n0\n', 'line 2', 'host_id')

    def test_not_utf8(self):
        self.assertBadHosts(HOSTS.encode() + b'host-\xff,0,8,16,0,0\n',
                            'line 5', 'not UTF-8')

    def test_field_over_the_csv_limit(self):
        err = self.assertBadHosts(
            HOSTS + 'host-' + 'x' * 140000 + ',0,8,16,0,0\n',
            'line 5', 'longer than 131072 characters')
        self.assertLess(len(err), 500)

    def test_host_too_large(self):
        self.assertBadHosts(HOSTS + 'host-9,0,10000000,16,0,0\n',
                            'line 5', 'numa0_vcpus', 'at most 1024')

    def test_byte_order_mark_is_accepted(self):
        hosts = self.path('bom-hosts.csv', b'\xef\xbb\xbf' + HOSTS.encode())
        code, out, err = self.main('--hosts', hosts,
                                   '--requests', self.requests,
                                   '--limit', '2', '--fast', '--json')
        self.assertEqual(0, code, err)
        self.assertEqual(2, json.loads(out)['requests'])

    def test_numeric_options(self):
        synthetic = ['--synthetic', '5', '--synthetic-hosts', '2']
        for argv, words in (
                (['--synthetic-hosts', '-1', '--synthetic', '5'],
                 ('--synthetic-hosts', 'at least 1', "'-1'")),
                (['--synthetic-hosts', '0', '--synthetic', '5'],
                 ('--synthetic-hosts', 'at least 1')),
                (['--synthetic-hosts', 'many'],
                 ('--synthetic-hosts', 'an integer', "'many'")),
                (['--synthetic-hosts', '100001'],
                 ('--synthetic-hosts', 'at most 100000')),
                (['--synthetic-hosts', '1_0'],
                 ('--synthetic-hosts', 'an integer')),
                (['--synthetic', '10000001', '--synthetic-hosts', '2'],
                 ('--synthetic', 'at most 10000000')),
                (['--synthetic', '0', '--synthetic-hosts', '2'],
                 ('--synthetic', 'at least 1')),
                (synthetic + ['--arrival-rate', '0'],
                 ('--arrival-rate', 'above 0', "'0'")),
                (synthetic + ['--arrival-rate', '-2'],
                 ('--arrival-rate', 'above 0')),
                (synthetic + ['--arrival-rate', 'nan'],
                 ('--arrival-rate', 'a finite number')),
                (synthetic + ['--load', '0'], ('--load', 'above 0')),
                (synthetic + ['--load', 'inf'], ('--load', 'finite')),
                (synthetic + ['--mean-lifetime', '0'],
                 ('--mean-lifetime', 'above 0')),
                (synthetic + ['--group-share', '1.5'],
                 ('--group-share', 'from 0 to 1')),
                (['--limit', '0'], ('--limit', 'at least 1')),
                (['--host-subset-size', '0'],
                 ('--host-subset-size', 'at least 1')),
                (['--sample-every', '-1'], ('--sample-every', 'at least 0')),
                (['--slot-flavors', '-1'], ('--slot-flavors', 'at least 0')),
                (['--ram-weight-multiplier', 'nan'],
                 ('--ram-weight-multiplier', 'finite')),
                (['--seed', '1.5'], ('--seed', 'an integer')),
                (['--policy', 'best-fit', '--compare'],
                 ('--policy and --compare exclude each other',)),
        ):
            self.assertFails(argv, *words)

    def test_plot_without_matplotlib_stops_before_the_replay(self):
        png = os.path.join(self.dir, 'out.png')
        with mock.patch.dict(sys.modules, {'matplotlib': None}), \
                mock.patch.object(replay.Simulator, 'run') as replay_run:
            err = self.assertFails(
                ['--hosts', self.hosts, '--requests', self.requests,
                 '--plot', png],
                "--plot needs matplotlib: pip install "
                "'nova-sched-ext[plot]'")
        replay_run.assert_not_called()
        self.assertEqual("nova-sched-ext-sim: --plot needs matplotlib: pip "
                         "install 'nova-sched-ext[plot]'\n", err)
        self.assertFalse(os.path.exists(png))

    def test_plot_into_a_missing_directory(self):
        png = os.path.join(self.dir, 'no-such-dir', 'out.png')
        with mock.patch.object(replay.Simulator, 'run') as replay_run:
            self.assertFails(['--hosts', self.hosts,
                              '--requests', self.requests, '--plot', png],
                             'does not exist', 'no-such-dir')
        replay_run.assert_not_called()

    def test_real_stderr_has_one_line(self):
        # The console script's own stderr, not a patched one.
        hosts = self.path('bad-hosts.csv', HOSTS.encode() + b'\xff\n')
        for argv in (['--synthetic-hosts', '2', '--synthetic', '5',
                      '--arrival-rate', '0'],
                     ['--hosts', hosts, '--requests', self.requests]):
            proc = subprocess.run(
                [sys.executable, '-m', 'nova_sched_ext_tools.sim.cli']
                + argv,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                universal_newlines=True, timeout=300)
            self.assertEqual(2, proc.returncode, proc.stderr)
            self.assertNotIn('Traceback', proc.stderr)
            self.assertEqual(1, len(proc.stderr.splitlines()), proc.stderr)
