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

"""nova-sched-ext-sim: replay a VM request trace through Nova's scheduler.

The filters and weighers are Nova's own classes (and any plugin's), named
and tuned by ``nova.conf`` options exactly as a deployer names them; the
hosts are ``HostState`` objects with NUMA topologies, consumed with
``HostState.consume_from_request``.  See ``doc/source/simulator.rst``.

Examples::

    nova-sched-ext-sim --policy best-fit --limit 500
    nova-sched-ext-sim --compare --fast \\
        --requests requests_C1.csv --requests requests_C2.csv
    nova-sched-ext-sim --config-file nova.conf --json --plot out.png
    nova-sched-ext-sim --synthetic 3000 --seed 7 \\
        --set filter_scheduler.host_subset_size=3
    nova-sched-ext-sim --capacity --fast --booking --json
    nova-sched-ext-sim --broker --broker-clusters 3 --broker-passes 2
    nova-sched-ext-sim --broker --broker-passes 2 --broker-uneven 25

``--plot`` draws with matplotlib, which the package does not require:
``pip install 'nova-sched-ext[plot]'``.  The command checks for it before
the replay starts, and says where it wrote each plot.

``--capacity`` prints, instead of the replay report, the capacity count
of the trace's largest flavors beside the simulator's own greedy count
and the os-capacity formula (:mod:`~nova_sched_ext_tools.sim.capacity`).

``--broker`` replays the traces through the multi-cluster broker's
decision instead of Nova's scheduler: the hosts split into clusters by
rack ranges, each request's NUMA kind fixed or converted (in the
family's order or the kind with most room first), clusters chosen by
most capacity, in turn or by best fit
(:mod:`~nova_sched_ext_tools.sim.broker`).

Exit status: 0 when the replay ran, 2 when it could not (bad option, bad
trace file, a filter or weigher that cannot be loaded, ``--plot`` without
matplotlib), with one line on stderr that says why; with ``--capacity``,
1 when the capacity count and the simulator's count differ.
"""

import argparse
import logging
import math
import os
import re
import sys
import time
import warnings

from nova_sched_ext import cli
from nova_sched_ext import version

DEFAULT_COMPARE = ('nova-default', 'best-fit', 'numa-slot')
#: progress off a terminal: a line every N requests ...
PROGRESS_EVERY = 100
#: ... or after this many seconds without one, whichever comes first
PROGRESS_SECONDS = 30.0
#: progress on a terminal: the bar is redrawn at most this often (seconds)
PROGRESS_REDRAW = 0.5
#: by default, replays of fewer requests than this show no progress
PROGRESS_MIN_REQUESTS = 20
PROGRESS_BAR = 24
PROG = 'nova-sched-ext-sim'
#: --synthetic-hosts: ten times the largest cloud the benchmarks schedule
MAX_SYNTHETIC_HOSTS = 100000
#: --synthetic: requests are kept in memory, a few hundred bytes each
MAX_SYNTHETIC_REQUESTS = 10000000
#: --capacity: the requests files replayed by default, and how many flavors
CAPACITY_REQUESTS = ('requests_C1.csv', 'requests_C2.csv', 'requests_C3.csv')
CAPACITY_FLAVORS = 5
#: --broker-uneven: the default min_share of the uneven splits (percent)
BROKER_UNEVEN_SHARE = 25
#: --broker-uneven: the largest dual-NUMA sizes counted after each run
#: (the trace has four)
BROKER_LEFTOVER_SIZES = 4
#: --broker: clusters the hosts are split into
BROKER_CLUSTERS = 3
PLOT_NEEDS_MATPLOTLIB = ("--plot needs matplotlib: pip install "
                         "'nova-sched-ext[plot]'")


EPILOG = """\
Options set with --set, --filters, --weighers and the shortcuts override
both the presets and --config-file.

What a replay costs (the trace's 1,710 hosts, a 2-core machine):
  through Nova's handlers (the default): NUMATopologyFilter fits nearly
    every host in Python, about 2.5 s a request (2.3 to 2.9 s): --limit
    300 --compare (900 replays) took 40 minutes; 38 s a request when
    the machine is busy;
  --fast: about 0.2 s a request (the same run: 198 s; 0.7 to 1.1 s when
    busy), 12 to 58 times less in the runs measured.
A replay of 20 requests or more shows its progress on stderr.

--fast places every request on the same host, because it leaves out only
what cannot change a decision here: filters that pass every simulated host
(ComputeFilter: every compute reports in; ComputeCapabilitiesFilter and
ImagePropertiesFilter: no capabilities, no image properties; the server
group filters for a request without a group of their policy) and weighers
that add exactly 0.0 to every host (multiplier 0.0, or a raw weight equal
on all hosts, which Nova normalizes to 0), so the weighed order and the
seeded random picks are unchanged; and NUMATopologyFilter gives way to
NUMAFitFilter, whose C fit gives Nova's own answer, host by host, for
every flavor of the trace (shared CPUs, no huge pages, no PCI), and Nova's
code still fits the chosen host. It could differ only on a request outside
the C fit's subset, where NUMAFitFilter keeps the hosts it cannot decide
(their weights then shift the order), or if the C fit kept a host Nova
rejects: the --fast report counts that as a late fit failure. Only the
times differ (see doc/source/simulator.rst).
"""


#: the options cannot work; found before the replay starts
UsageError = cli.UsageError


_INTEGER = re.compile(r'-?[0-9]{1,18}', re.ASCII)


def _integer(low=None, high=None):
    """An argparse ``type``: an integer from ``low`` to ``high``.

    ASCII digits only, as in the trace files: ``int()`` would also take
    ``1_0`` for 10, and digits of other scripts.
    """
    def parse(text):
        if not _INTEGER.fullmatch(text):
            raise argparse.ArgumentTypeError(
                'expected an integer, got %r' % text[:64])
        value = int(text, 10)
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(
                'must be at least %d, got %r' % (low, text))
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(
                'must be at most %d, got %r' % (high, text))
        return value
    parse.__name__ = 'integer'
    return parse


def _number(above=None, low=None, high=None):
    """An argparse ``type``: a finite float, ``> above``, in [low, high].

    Why finite: ``nan`` passes every comparison as false and ``inf`` turns
    the synthetic trace's arithmetic into nan, without an error.
    """
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                'expected a finite number, got %r' % text[:64])
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(
                'must be above %s, got %r' % (above, text))
        if (low is not None and value < low) or \
                (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                'must be from %s to %s, got %r' % (low, high, text))
        return value
    parse.__name__ = 'number'
    return parse


def build_parser():
    # Errors are one line, like the command's others: argparse would print
    # the whole usage (a dozen lines here) first.
    parser = cli.Parser(
        prog=PROG, help_hint=PROG + ' --help', exits=True, label='',
        description='Replay a VM request trace through Nova\'s own '
                    'scheduler filters and weighers.',
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG)
    version.add_version_option(parser)
    data = parser.add_argument_group('trace')
    data.add_argument(
        '--hosts', metavar='CSV',
        help='hosts.csv of the trace (default: hosts.csv in '
             '../shared/data/huawei-topo-vm, looked up from here and from '
             'the package upwards)')
    data.add_argument(
        '--requests', metavar='CSV', action='append',
        help='a requests_C*.csv file (repeatable: each is replayed on '
             'fresh hosts; default requests_C1.csv beside the hosts file)')
    data.add_argument(
        '--limit', type=_integer(low=1), metavar='N',
        help='replay only the first N requests of each trace')
    data.add_argument(
        '--synthetic', metavar='N',
        type=_integer(low=1, high=MAX_SYNTHETIC_REQUESTS),
        help='replay N synthetic requests (Poisson arrivals, exponential '
             'lifetimes) instead of a requests file')
    data.add_argument(
        '--synthetic-hosts', metavar='N',
        type=_integer(low=1, high=MAX_SYNTHETIC_HOSTS),
        help='use N identical empty hosts (2 cells of 48 vCPUs and 192 GB, '
             '20 to a rack) instead of a hosts file (at most %d)'
             % MAX_SYNTHETIC_HOSTS)
    data.add_argument('--load', type=_number(above=0), default=0.9,
                      help='synthetic: share of the vCPUs in use in the '
                           'steady state (default 0.9)')
    data.add_argument('--arrival-rate', type=_number(above=0), default=1.0,
                      help='synthetic: arrivals per time unit (default 1)')
    data.add_argument('--mean-lifetime', type=_number(above=0),
                      help='synthetic: mean lifetime (default: from --load)')
    data.add_argument('--group-share', type=_number(low=0, high=1),
                      default=0.3,
                      help='synthetic: share of requests in server groups '
                           '(default 0.3)')
    data.add_argument('--seed', type=_integer(), default=0,
                      help='seed of the synthetic trace and of the '
                           'scheduler\'s random picks (host_subset_size, '
                           'shuffle_best_same_weighed_hosts)')

    sched = parser.add_argument_group('scheduler configuration')
    sched.add_argument(
        '--config-file', action='append', default=[], metavar='FILE',
        help='a nova.conf to read (repeatable)')
    sched.add_argument(
        '--policy', metavar='NAME',
        help='a weigher preset: %s' % ', '.join(_preset_names()))
    sched.add_argument(
        '--compare', nargs='?', const=','.join(DEFAULT_COMPARE),
        metavar='P1,P2,...',
        help='replay each trace with several presets and print one table '
             '(default: %s; presets that cannot load are skipped)'
             % ','.join(DEFAULT_COMPARE))
    sched.add_argument(
        '--set', action='append', default=[], metavar='GROUP.OPTION=VALUE',
        help='override a nova.conf option, e.g. '
             'filter_scheduler.ram_weight_multiplier=-1.0 (repeatable)')
    sched.add_argument(
        '--filters', metavar='A,B,...',
        help='[filter_scheduler] enabled_filters')
    sched.add_argument(
        '--weighers', metavar='A,B,...',
        help='[filter_scheduler] weight_classes')
    sched.add_argument('--host-subset-size', type=_integer(low=1),
                       help='[filter_scheduler] host_subset_size')
    sched.add_argument('--ram-weight-multiplier', type=_number(),
                       help='[filter_scheduler] ram_weight_multiplier')
    sched.add_argument('--cpu-weight-multiplier', type=_number(),
                       help='[filter_scheduler] cpu_weight_multiplier')
    sched.add_argument(
        '--fast', action='store_true',
        help='skip what cannot change a decision in the simulated cloud: '
             'filters that pass every host, weighers that weigh every host '
             'the same, and NUMATopologyFilter in favour of NUMAFitFilter '
             '(Nova still fits the chosen host): the same placements, 12 '
             'to 58 times faster (see below)')

    out = parser.add_argument_group('output')
    out.add_argument('--json', action='store_true',
                     help='print the results as JSON instead of tables')
    out.add_argument('--plot', metavar='FILE.png',
                     help='plot placed/rejected and large-flavor slots left '
                          '(one file per trace; the trace name is added '
                          'when there are several); needs matplotlib: pip '
                          'install \'nova-sched-ext[plot]\'')
    out.add_argument('--slot-flavors', type=_integer(low=0), default=3,
                     metavar='N',
                     help='count slots of the N largest flavors of the '
                          'trace (default 3)')
    out.add_argument('--sample-every', type=_integer(low=0), metavar='N',
                     help='count slots every N requests (default: 250 with '
                          '--plot, else only at the end)')
    out.add_argument(
        '--progress', action=argparse.BooleanOptionalAction, default=None,
        help='show the progress of each replay on stderr: a bar on a '
             'terminal, else a line every --progress-every requests or %d '
             'seconds (default: on for replays of %d requests or more; '
             '--no-progress: never)'
             % (PROGRESS_SECONDS, PROGRESS_MIN_REQUESTS))
    out.add_argument(
        '--progress-every', type=_integer(low=1), default=PROGRESS_EVERY,
        metavar='N',
        help='off a terminal, a progress line every N requests (default '
             '%d)' % PROGRESS_EVERY)
    out.add_argument('--debug', action='store_true',
                     help='log Nova\'s scheduler at debug level (verbose)')

    cap = parser.add_argument_group(
        'capacity (instead of the replay report; see the doc)')
    cap.add_argument(
        '--capacity', action='store_true',
        help='for the largest flavors of the trace, print the capacity '
             'count of nova-sched-ext-capacity, the greedy count of the '
             'simulator and the os-capacity formula, on the hosts before '
             'any request and after replaying each requests file (default '
             '%s beside the hosts file); exit status 1 if the capacity '
             'count and the greedy one differ on any host'
             % ', '.join(CAPACITY_REQUESTS))
    cap.add_argument(
        '--capacity-flavors', type=_integer(low=1), metavar='N',
        help='with --capacity: count the N largest flavors (default %d)'
             % CAPACITY_FLAVORS)
    cap.add_argument(
        '--booking', action='store_true',
        help='with --capacity: also book each flavor into a copy of the '
             'cloud through the simulator\'s scheduler until NoValidHost '
             'and compare the boots per host (one to six minutes per '
             'flavor on the trace\'s 1,710 hosts with --fast, hours '
             'without)')
    cap.add_argument(
        '--no-replay', action='store_true',
        help='with --capacity: count the hosts before any request only '
             '(the flavors still come from the requests files)')
    brk = parser.add_argument_group(
        'broker (instead of the replay report; see the doc)')
    brk.add_argument(
        '--broker', action='store_true',
        help='replay each requests file (default %s beside the hosts '
             'file) through the broker\'s decision on the hosts split into '
             'clusters by rack ranges: NUMA kinds fixed and converted '
             '(priority and most-room), clusters chosen by most capacity, '
             'round-robin and best fit, side by side'
             % ', '.join(CAPACITY_REQUESTS))
    brk.add_argument('--broker-clusters', type=_integer(low=1, high=100),
                     metavar='N', help='with --broker: clusters (default '
                     '%d)' % BROKER_CLUSTERS)
    brk.add_argument('--broker-passes', type=_integer(low=1, high=10),
                     metavar='N', help='with --broker: replay each trace N '
                     'times back to back (default 1)')
    brk.add_argument('--broker-refresh', type=_integer(low=1, high=100000),
                     metavar='N', help='with --broker: read the clusters\' '
                     'capacity every N requests only, and decide on that '
                     'stale picture in between (default 1: fresh)')
    brk.add_argument('--broker-uneven', type=_integer(low=1, high=49),
                     nargs='?', const=BROKER_UNEVEN_SHARE, metavar='PCT',
                     help='with --broker: run each mode once more with '
                     'uneven dual-NUMA variants (every split giving each '
                     'node at least PCT %%%% of the vCPUs, default %d), and '
                     'count what the cloud still takes of the %d largest '
                     'dual-NUMA sizes after each run and how many of its '
                     'rejected dual-NUMA requests an uneven split places '
                     'in what is left (the end fill)'
                     % (BROKER_UNEVEN_SHARE, BROKER_LEFTOVER_SIZES))
    dfg = parser.add_argument_group(
        'defragmentation (see doc/source/defrag.rst)')
    dfg.add_argument(
        '--save-state', metavar='FILE.json',
        help='after the replay (one requests file, one policy) save its '
             'end state, for --defrag --state')
    dfg.add_argument(
        '--defrag', action='store_true',
        help='after the replay (or on --state) plan live migrations with '
             'the defragmentation planner at each --budget and print the '
             'large-flavor slots they recover, beside greedy single moves, '
             'the offline repack bound and Watcher\'s VM workload '
             'consolidation')
    dfg.add_argument(
        '--state', metavar='FILE.json',
        help='with --defrag: plan on this saved end state instead of '
             'replaying')
    dfg.add_argument(
        '--budget', metavar='PCT[,PCT...]', default='1,2,5',
        help='with --defrag: budgets in percent of the instances (default '
             '1,2,5)')
    dfg.add_argument(
        '--no-watcher', action='store_true',
        help='with --defrag: leave Watcher\'s strategy out')
    return parser


def parse_args(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.broker:
        for option in ('compare', 'plot', 'sample_every', 'capacity',
                       'synthetic', 'defrag', 'save_state'):
            if getattr(args, option):
                parser.error('--broker and --%s exclude each other'
                             % option.replace('_', '-'))
    else:
        for option, value in (('--broker-clusters', args.broker_clusters),
                              ('--broker-passes', args.broker_passes),
                              ('--broker-refresh', args.broker_refresh),
                              ('--broker-uneven', args.broker_uneven)):
            if value:
                parser.error('%s needs --broker' % option)
    if args.policy and args.compare:
        parser.error('--policy and --compare exclude each other')
    if (args.state or args.no_watcher) and not args.defrag:
        parser.error('--state and --no-watcher need --defrag')
    if args.defrag:
        try:
            args.budgets = [float(p) for p in args.budget.split(',')]
        except ValueError:
            parser.error('--budget %r is not a list of percentages'
                         % args.budget)
        if any(not 0 <= b <= 100 for b in args.budgets):
            parser.error('--budget %r: each percentage must be between 0 '
                         'and 100' % args.budget)
        for option, value in (('--compare', args.compare),
                              ('--capacity', args.capacity),
                              ('--plot', args.plot)):
            if value:
                parser.error('--defrag and %s exclude each other' % option)
    if args.capacity:
        for option, value in (('--compare', args.compare),
                              ('--plot', args.plot),
                              ('--sample-every', args.sample_every)):
            if value is not None:
                parser.error('--capacity and %s exclude each other' % option)
    else:
        for option, value in (('--booking', args.booking),
                              ('--capacity-flavors', args.capacity_flavors),
                              ('--no-replay', args.no_replay)):
            if value:
                parser.error('%s needs --capacity' % option)
    return args


def _preset_names():
    # The presets module imports Nova; the names are stable, list them here.
    return ('nova-default', 'best-fit', 'numa-slot')


def _user_settings(args, policies):
    values = {}
    for text in args.set:
        key, value = policies.parse_setting(text)
        values[key] = value
    if args.filters is not None:
        values['filter_scheduler.enabled_filters'] = args.filters
    if args.weighers is not None:
        values['filter_scheduler.weight_classes'] = args.weighers
    if args.host_subset_size is not None:
        values['filter_scheduler.host_subset_size'] = args.host_subset_size
    if args.ram_weight_multiplier is not None:
        values['filter_scheduler.ram_weight_multiplier'] = \
            args.ram_weight_multiplier
    if args.cpu_weight_multiplier is not None:
        values['filter_scheduler.cpu_weight_multiplier'] = \
            args.cpu_weight_multiplier
    return values


def _hosts(args, trace):
    """``(hosts file or None for synthetic hosts, [TraceHost])``."""
    if args.synthetic_hosts:
        return None, trace.synthetic_hosts(args.synthetic_hosts,
                                           seed=args.seed)
    data_dir = trace.default_data_dir()
    path = args.hosts or (data_dir and os.path.join(data_dir, 'hosts.csv'))
    if not path:
        raise trace.TraceError(
            'no --hosts given and no ../shared/data/huawei-topo-vm/'
            'hosts.csv found; pass --hosts or --synthetic-hosts')
    return path, trace.read_hosts(path)


def _traces(args, trace, hosts=None):
    """``[(label, hosts, requests, largest flavors, all flavors)]``."""
    data_dir = trace.default_data_dir()
    if hosts is None:
        hosts = _hosts(args, trace)[1]
    runs = []
    if args.synthetic:
        spec = trace.SyntheticSpec(
            count=args.synthetic, seed=args.seed,
            arrival_rate=args.arrival_rate, load=args.load,
            mean_lifetime=args.mean_lifetime, group_share=args.group_share,
            max_vcpus=max(h.vcpus for h in hosts),
            max_memory_mb=max(h.memory_mb for h in hosts))
        requests = trace.synthetic_requests(spec, hosts)
        runs.append(('synthetic-seed%d' % args.seed, requests))
    else:
        paths = args.requests
        if not paths:
            base = os.path.dirname(args.hosts) if args.hosts else data_dir
            paths = [os.path.join(base or '.', 'requests_C1.csv')]
            if args.capacity or args.broker:
                # Those of the trace there are; none: the hosts alone.
                paths = [p for p in (os.path.join(base or '.', name)
                                     for name in CAPACITY_REQUESTS)
                         if os.path.isfile(p)]
        for path in paths:
            runs.append((os.path.splitext(os.path.basename(path))[0],
                         trace.read_requests(path)))
    result = []
    for label, requests in runs:
        # Taken from the whole trace, so that --limit changes nothing but
        # the number of requests replayed.
        flavors = trace.largest_flavors(requests, args.slot_flavors)
        every_flavor = trace.largest_flavors(requests, len(requests))
        if args.limit:
            requests = requests[:args.limit]
        result.append((label, hosts, requests, flavors, every_flavor))
    return result


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress(object):
    """A replay's progress on ``stream``, the simulator's ``progress``.

    On a terminal, one bar redrawn in place; elsewhere (a log, a pipe) a
    line every ``every`` requests or ``seconds`` seconds, and one at the
    end. Each says how many requests are done, placed and rejected, the
    time a request takes and what is left.
    """

    def __init__(self, stream, label, total, every=PROGRESS_EVERY,
                 clock=time.monotonic, terminal=None):
        self.stream = stream
        self.label = label
        self.total = total
        self.every = every
        self.clock = clock
        self.terminal = (_is_terminal(stream) if terminal is None
                         else terminal)
        self.started = self.last = clock()

    def __call__(self, simulator, done):
        now = self.clock()
        last = done == self.total
        if self.terminal:
            due = now - self.last >= PROGRESS_REDRAW
        else:
            due = done % self.every == 0 or \
                now - self.last >= PROGRESS_SECONDS
        if not (due or last):
            return
        self.last = now
        text = self.text(simulator.result, done, now - self.started)
        if self.terminal:
            self.stream.write('\r' + text + ('\n' if last else ''))
        else:
            self.stream.write(text + '\n')
        self.stream.flush()

    def text(self, result, done, elapsed):
        per_request = elapsed / done if done else 0.0
        if self.terminal:
            filled = PROGRESS_BAR * done // max(self.total or done, 1)
            count = '[%s%s] %d/%s' % ('#' * filled,
                                      '.' * (PROGRESS_BAR - filled), done,
                                      self.total or '?')
        elif self.total:
            count = '%d/%d requests (%d%%)' % (done, self.total,
                                               100 * done // self.total)
        else:
            count = '%d requests' % done
        text = '  %s, %s: %s, %d placed, %d rejected, %.2f s/request' % (
            self.label, result.policy, count, result.placed,
            result.rejected, per_request)
        if self.total and done < self.total:
            text += ', ~%s left' % _duration(per_request *
                                             (self.total - done))
        return text


def _duration(seconds):
    if seconds < 90:
        return '%d s' % round(seconds)
    if seconds < 5400:
        return '%d min' % round(seconds / 60)
    return '%.1f h' % (seconds / 3600)


def _progress(args, stream, label, total):
    """The simulator's ``progress`` for one replay, or None."""
    show = args.progress
    if show is None:
        show = total is None or total >= PROGRESS_MIN_REQUESTS
    if not show:
        return None
    return Progress(stream, label, total, every=args.progress_every)


def _plot_path(path, label, several):
    """The file a trace's plot goes to.

    Without an extension, ``.png`` is added, as matplotlib would add it:
    the path printed is the file written.
    """
    stem, ext = os.path.splitext(path)
    if several:
        stem = '%s-%s' % (stem, label)
    return stem + (ext or '.png')


def check_plot(path):
    """Fail before the replay, not after it, if ``--plot`` cannot work."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(PLOT_NEEDS_MATPLOTLIB)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError('--plot %s: directory %s does not exist'
                         % (path, directory))


def run(args, stdout=sys.stdout, stderr=sys.stderr):
    if args.broker:
        # the broker's decision needs no Nova: not configured, not imported
        return run_broker(args, stdout, stderr)
    if args.plot:
        check_plot(args.plot)
    import nova.conf
    from oslo_config import cfg

    from nova_sched_ext.cli import config_files
    from nova_sched_ext_tools.sim import policies
    from nova_sched_ext_tools.sim import replay
    from nova_sched_ext_tools.sim import report
    from nova_sched_ext_tools.sim import trace

    conf = nova.conf.CONF
    config_args = []
    for path in args.config_file:
        if not os.path.exists(path):
            raise policies.PolicyError('config file %s not found' % path)
        config_args += ['--config-file', path]
    try:
        # A directory or a file that is not UTF-8 escapes oslo.config.
        config_files.check_readable(args.config_file)
        conf(config_args, project='nova', default_config_files=[])
    except cfg.Error as exc:
        raise policies.PolicyError(' '.join(str(exc).split())) from None
    policies.set_simulator_defaults(conf)

    if args.compare:
        names = [n.strip() for n in args.compare.split(',') if n.strip()]
        explicit = args.compare != ','.join(DEFAULT_COMPARE)
    else:
        names = [args.policy] if args.policy else [None]
        explicit = True
    presets = []
    for name in names:
        if name is None:
            presets.append(('configured', {}))
            continue
        preset = policies.PRESETS.get(name)
        if preset is None:
            raise policies.PolicyError(
                'unknown policy %s; known: %s'
                % (name, ', '.join(policies.PRESETS)))
        try:
            presets.append((name, preset.settings(conf)))
        except policies.PolicyError as exc:
            if explicit:
                raise
            stderr.write('skipping policy %s: %s\n' % (name, exc))
    user = _user_settings(args, policies)
    if args.capacity:
        return run_capacity(args, conf, presets[0], user, stdout, stderr)
    if args.defrag and args.state:
        return run_defrag(args, None, stdout, stderr)
    sample_every = args.sample_every
    if sample_every is None:
        sample_every = 250 if args.plot else 0

    outputs = {}
    traces = _traces(args, trace)
    for label, hosts, requests, flavors, every_flavor in traces:
        results = []
        for name, settings in presets:
            progress = _progress(args, stderr, label, len(requests))
            if progress:
                stderr.write('%s, policy %s: %d requests on %d hosts%s\n'
                             % (label, name, len(requests), len(hosts),
                                ', --fast' if args.fast else ''))
            with policies.Overrides(settings, conf), \
                    policies.Overrides(user, conf):
                simulator = replay.Simulator(
                    hosts, policy=name, seed=args.seed,
                    slot_flavors=flavors, sample_every=sample_every,
                    progress=progress, fast=args.fast,
                    flavors=every_flavor)
                results.append(simulator.run(requests))
            if args.save_state or args.defrag:
                from nova_sched_ext_tools.sim import state as sim_state
                saved = sim_state.from_simulator(simulator, hosts, label)
                saved['slot_flavors'] = [
                    sim_state.flavor_dict(f) for f in flavors]
                if args.save_state:
                    sim_state.save(args.save_state, saved)
                if args.defrag:
                    return run_defrag(args, saved, stdout, stderr)
        outputs[label] = results
        if not args.json:
            if len(results) == 1:
                stdout.write('%s\n%s\n\n' % (label,
                                             report.summary_table(results[0])))
            else:
                stdout.write(report.compare_table(
                    results, title='%s: %d requests on %d hosts%s' % (
                        label, len(requests), len(hosts),
                        ', --fast' if args.fast else '')) + '\n\n')
        if args.plot:
            written = report.plot(
                results, _plot_path(args.plot, label, len(traces) > 1),
                title='%s, %d requests, %d hosts' % (
                    label, len(requests), len(hosts)))
            # With --json, stdout is the JSON's alone.
            if args.json:
                stderr.write('%s: plot of %s written to %s\n'
                             % (PROG, label, os.path.abspath(written)))
            else:
                stdout.write('plot of %s written to %s\n\n'
                             % (label, os.path.abspath(written)))
    if args.json:
        if len(outputs) == 1:
            stdout.write(report.to_json(next(iter(outputs.values()))) + '\n')
        else:
            import json
            stdout.write(json.dumps(
                {label: [r.summary() for r in results]
                 for label, results in outputs.items()},
                indent=2, sort_keys=True) + '\n')
    return outputs


def run_defrag(args, saved, stdout, stderr):
    """--defrag: returns the :class:`~.defrag_report.Report`."""
    from nova_sched_ext_tools.sim import defrag_report
    from nova_sched_ext_tools.sim import state as sim_state
    if saved is None:
        try:
            saved = sim_state.load(args.state)
        except sim_state.StateError as exc:
            raise UsageError(str(exc))

    def progress(text):
        if args.progress:
            stderr.write(text + '\n')
    report = defrag_report.measure(saved, args.budgets,
                                   watcher=not args.no_watcher,
                                   progress=progress)
    stdout.write((report.to_json() if args.json else report.table()) + '\n')
    return report


def run_capacity(args, conf, preset, user, stdout, stderr):
    """--capacity: returns the :class:`~.capacity.Report`.

    The first state is the hosts before any request; then (unless
    ``--no-replay``) each requests file is replayed on fresh hosts, as the
    replay report replays them, and counted after its last request.
    """
    from nova_sched_ext_tools.sim import capacity
    from nova_sched_ext_tools.sim import policies
    from nova_sched_ext_tools.sim import replay
    from nova_sched_ext_tools.sim import trace

    hosts_path, hosts = _hosts(args, trace)
    traces = _traces(args, trace, hosts)
    every_flavor = capacity.choose_flavors(t[4] for t in traces)
    if not every_flavor:
        raise UsageError(
            '--capacity takes the flavors from the requests files, and '
            'there is none beside %s; pass --requests'
            % (hosts_path or 'the hosts'))
    shapes = every_flavor[:args.capacity_flavors or CAPACITY_FLAVORS]
    name, settings = preset
    report = capacity.Report(
        hosts_path=hosts_path,
        hosts_label=('%d synthetic hosts' % len(hosts) if hosts_path is None
                     else '%s (%d hosts)' % (os.path.basename(hosts_path),
                                             len(hosts))),
        shapes=shapes, sources=[t[0] for t in traces], booking=args.booking,
        fast=args.fast)

    def progress(text):
        if args.progress:
            stderr.write('%s\n' % text)
            stderr.flush()

    def simulator(label=None, requests=()):
        # --capacity prints its progress when asked only
        return replay.Simulator(
            hosts, policy=name, seed=args.seed, slot_flavors=shapes,
            progress=(_progress(args, stderr, label, len(requests))
                      if args.progress and requests else None),
            fast=args.fast, flavors=every_flavor)

    with policies.Overrides(settings, conf), policies.Overrides(user, conf):
        label = os.path.basename(hosts_path) if hosts_path else 'hosts'
        progress('%s: counting %d flavors on %d hosts'
                 % (label, len(shapes), len(hosts)))
        report.states.append(capacity.measure(
            label, simulator(), shapes, booking=args.booking,
            progress=progress))
        for label, _same_hosts, requests, _slot, _all in (
                () if args.no_replay else traces):
            progress('%s: replaying %d requests on %d hosts'
                     % (label, len(requests), len(hosts)))
            replayed = simulator(label, requests)
            result = replayed.run(requests)
            report.states.append(capacity.measure(
                label, replayed, shapes, booking=args.booking,
                progress=progress, result=result))
    if args.json:
        import json
        stdout.write(json.dumps(report.to_dict(), indent=2, sort_keys=True)
                     + '\n')
    else:
        stdout.write(report.table() + '\n')
    return report


def run_broker(args, stdout, stderr):
    """--broker: returns the :class:`~.broker.RunResult` list."""
    import json
    from nova_sched_ext_tools.sim import broker
    from nova_sched_ext_tools.sim import trace

    hosts_path, hosts = _hosts(args, trace)
    clusters = args.broker_clusters or BROKER_CLUSTERS
    racks = len({h.rack for h in hosts})
    if clusters > racks:
        raise UsageError('--broker-clusters %d: the hosts have %d racks'
                         % (clusters, racks))
    passes = args.broker_passes or 1
    refresh = args.broker_refresh or 1
    traces = _traces(args, trace, hosts)
    if not traces:
        raise UsageError('--broker needs requests files and there is none '
                         'beside %s; pass --requests' % hosts_path)
    results = []
    share = args.broker_uneven
    modes = list(broker.MODES)
    if share is not None:
        modes += [mode + broker.UNEVEN_SUFFIX for mode in broker.MODES]
    for label, _hosts_again, requests, _slot, _all in traces:
        sizes = () if share is None else broker.dual_sizes(
            requests, BROKER_LEFTOVER_SIZES)
        for mode in modes:
            for chooser in broker.CHOOSERS:
                if args.progress:
                    stderr.write('%s: %s, %s: %d requests x %d on %d hosts '
                                 'in %d clusters\n' % (
                                     label, mode, chooser, len(requests),
                                     passes, len(hosts), clusters))
                    stderr.flush()
                results.append(broker.replay(
                    label, hosts, list(requests) * passes, mode, chooser,
                    clusters=clusters, refresh=refresh, uneven=share,
                    leftover_sizes=sizes))
    if args.json:
        stdout.write(json.dumps({
            'hosts': hosts_path, 'clusters': clusters, 'passes': passes,
            'refresh': refresh, 'uneven_min_share': share,
            'runs': [r.to_dict() for r in results]},
            indent=2, sort_keys=True) + '\n')
    else:
        stdout.write('%d hosts in %d clusters by rack ranges, each trace '
                     'replayed %d time(s), capacity read every %d '
                     'request(s)\n%s\n' % (
                         len(hosts), clusters, passes, refresh,
                         broker.table(results)))
    return results


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Nova's imports warn about eventlet and deprecated options; a
    # simulator's user can do nothing about either.
    warnings.simplefilter('ignore')
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format='%(levelname)s %(name)s: %(message)s')
    from nova_sched_ext_tools.sim import policies
    from nova_sched_ext_tools.sim import replay
    from nova_sched_ext_tools.sim import trace
    try:
        # The streams of now, not of import time (tests replace them).
        outcome = run(args, stdout=sys.stdout, stderr=sys.stderr)
    except (UsageError, policies.PolicyError, replay.SimulationError,
            trace.TraceError) as exc:
        sys.stderr.write('%s: %s\n' % (PROG, exc))
        return 2
    if args.capacity and not outcome.equal:
        sys.stderr.write('%s: the capacity count and the greedy count differ '
                         '(see above)\n' % PROG)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
