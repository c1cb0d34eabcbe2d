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

"""nova-sched-ext-demo: watch the package's plugins in a real Nova.

Everything runs in this one process: Nova's API, conductor and scheduler on
an in-memory sqlite database, placement from the ``openstack-placement``
fixture, and nova-compute services with the libvirt driver on fake libvirt
hosts of several NUMA layouts (2 and 4 cells, 2M and 1G huge pages, a PCI
device).  The package's filters are enabled the way a deployer enables them,
through ``[filter_scheduler] available_filters`` / ``enabled_filters``.

For each scenario (see :mod:`nova_sched_ext_tools.harness.scenarios`) the
demo boots a series of NUMA flavors and prints where each server landed, or
NoValidHost.  By default each scenario runs twice on the same hosts:

* ``mixed-numa``: first with Nova's filters alone, then with NUMAFitFilter;
  the demo shows how many hosts each filter kept and checks that the
  filter changed nothing but the work;
* ``numa-slot``: first with Nova's weighers alone, then with
  NUMASlotWeigher added to ``weight_classes``; the demo shows side by side
  where the small servers went and whether the big flavor still fits.

Each scenario ends with the capacity of its cloud
(:mod:`nova_sched_ext.capacity`, what ``nova-sched-ext-capacity`` prints):
per flavor, NUMA-exact and from placement alone, before the boots and
after them.  The count of each request's flavor is also checked around the
request (:mod:`~nova_sched_ext_tools.harness.capacity_check`).

Exit status: 0 if every boot went as the scenario expects and the capacity
count agreed with every boot, 1 if not, 2 if the demo could not run.
Nova's test fixtures are used as a harness, so their requirements must be
installed: ``pip install 'nova-sched-ext[demo]'``
(``openstack-placement``, ``wsgi-intercept``, ``oslotest``; all are in
``test-requirements.txt`` too).
"""

import logging
import os
import sys
import warnings

ALWAYS_SHOWN_FILTERS = ('NUMAFitFilter', 'NUMATopologyFilter')


def build_parser():
    from nova_sched_ext import cli
    from nova_sched_ext import version
    # One-line errors, as the package's other commands.
    parser = cli.Parser(
        prog='nova-sched-ext-demo', help_hint='nova-sched-ext-demo --help',
        exits=True,
        description='Boot NUMA flavors on a real, in-process Nova with the '
                    'nova-sched-ext filters enabled from nova.conf, and '
                    'show where each server landed.')
    version.add_version_option(parser)
    parser.add_argument(
        '--scenario', action='append', metavar='NAME',
        help='run only this scenario (repeatable; see --list)')
    parser.add_argument(
        '--list', action='store_true', help='list the scenarios and exit')
    parser.add_argument(
        '--no-compare', dest='compare', action='store_false',
        help='skip each scenario\'s reference run (Nova\'s filters or '
             'weighers alone; about half the time)')
    parser.add_argument(
        '--threads', action='store_true',
        help='run Nova\'s services with native threads, as Nova 34 does in '
             'production (slower here: the in-process message bus polls); '
             'the default is the eventlet mode of Nova\'s test harness')
    parser.add_argument(
        '-v', '--verbose', action='count', default=0,
        help='show Nova\'s log on stderr (-v: info, -vv: debug)')
    return parser


def parse_args(argv):
    return build_parser().parse_args(argv)


def _quiet_process_logging(verbose):
    """No stray output: only the demo's report, unless asked for logs."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(
            '%(asctime)s %(levelname)s [%(name)s] %(message)s'))
        root.addHandler(handler)
        root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    else:
        root.addHandler(logging.NullHandler())
        root.setLevel(logging.CRITICAL)
        warnings.simplefilter('ignore')


def _table(headers, rows):
    widths = [max(len(str(cell)) for cell in column)
              for column in zip(headers, *rows)]
    lines = []
    for row in [headers] + rows:
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths)]
        lines.append('  ' + '  '.join(cells).rstrip())
    lines.insert(1, '  ' + '  '.join('-' * width for width in widths))
    return lines


def _chain(result, index):
    """The filter chain of pass ``index`` of a boot, as text."""
    if index >= len(result.passes):
        if index == 0:
            return 'placement: no candidate host'
        return ''
    return result.passes[index].render(always=ALWAYS_SHOWN_FILTERS)


def render(run, out):
    scenario = run.scenario
    from nova_sched_ext_tools.harness import fake_hosts

    write = out.write
    write('\nScenario %s: %s\n\n' % (scenario.name, scenario.title))
    if run.reference is not None:
        write('It runs twice on the same hosts with the same boots: first '
              '%s, then %s.\n\n'
              % (scenario.reference.label, scenario.setup.label))
    write('Hosts (each %d CPUs; [compute] cpu_shared_set = %s, '
          'cpu_dedicated_set = %s):\n' % (
              fake_hosts.CPUS_PER_HOST, fake_hosts.CPU_SHARED_SET,
              fake_hosts.CPU_DEDICATED_SET))
    write('\n'.join(_table(
        ['host', 'layout'],
        [[h.name, h.describe()] for h in scenario.hosts])) + '\n\n')
    write('Flavors:\n')
    write('\n'.join(_table(
        ['flavor', 'asks for', 'extra specs'],
        [[f.name, f.describe(),
          ' '.join('%s=%s' % kv for kv in sorted(f.extra_specs.items()))]
         for f in scenario.flavors()])) + '\n\n')
    if run.results is None:
        return
    if run.reference is None or scenario.same_as_reference:
        _render_same_scheduling(run, write)
    else:
        _render_comparison(run, write)
    _render_capacity(run, write)


def _conf_value(value):
    if isinstance(value, (list, tuple)):
        return ','.join(map(str, value))
    return str(value)


def _write_flags(flags, write):
    """``(group, option, value)`` settings as nova.conf sections."""
    sections = {}
    for group, option, value in flags:
        sections.setdefault(group, {})[option] = value
    for group, options in sections.items():
        write('  [%s]\n' % group)
        for option, value in options.items():
            write('  %s = %s\n' % (option, _conf_value(value)))


def _write_fit_backend(run, write):
    write('NUMA fit engine in use: %s\n\n' % {
        'c': 'the C helper', 'python': 'the pure-Python twin'}.get(
            run.fit_backend, run.fit_backend))


def _write_why(scenario, write):
    write('Why:\n')
    width = max(len(boot.server) for boot in scenario.boots)
    for boot in scenario.boots:
        if boot.why:
            write('  %s  %s\n' % (boot.server.ljust(width), boot.why))
    write('\n')


def _render_same_scheduling(run, write):
    """A plugin that must not change where servers land (NUMAFitFilter)."""
    scenario = run.scenario
    write('nova.conf:\n  [filter_scheduler]\n')
    for line in run.available_filters or ():
        write('  available_filters = %s\n' % line)
    write('  enabled_filters = %s\n' % ','.join(run.enabled_filters or ()))
    write('  weight_classes = %s\n' % ','.join(run.weight_classes or ()))
    _write_flags(scenario.flags, write)
    _write_fit_backend(run, write)

    headers = ['#', 'server', 'flavor', 'landed on', 'as expected',
               'hosts kept by each filter']
    if run.reference is not None:
        headers.insert(5, 'Nova alone')
    rows = []
    number = 0
    reference = run.reference or [None] * len(run.results)
    for boot, results, ref_results in zip(scenario.boots, run.results,
                                          reference):
        for index, result in enumerate(results):
            number += 1
            row = [number, result.server, result.flavor, result.where(),
                   'yes' if boot.accepts(result) else
                   'NO, expected %s' % boot.expected_text(),
                   _chain(results[0], index)]
            if run.reference is not None:
                ref = ref_results[index] if index < len(ref_results) \
                    else None
                same = ref is not None and \
                    ref.outcome() == result.outcome() and \
                    ref.survivors() == result.survivors()
                row.insert(5, 'same' if same else
                           'DIFFERENT: %s' % (ref.where() if ref else '-'))
            rows.append(row)
    write('\n'.join(_table(headers, rows)) + '\n\n')
    _write_why(scenario, write)

    write(filter_summary(run))
    if run.reference is not None:
        differences = [p for p in run.problems() if ' vs ' in p]
        servers = sum(len(results) for results in run.results)
        label = scenario.reference.label
        if differences:
            write('With %s: %d DIFFERENCE(S).\n' % (label, len(differences)))
        else:
            write('Compared with %s (reference run): the same host and '
                  'NUMA cells for all %d servers, the same failures,\nthe '
                  'same hosts left after filtering.\n' % (label, servers))


def table_passes(run):
    """``(shown, not_shown)``: the filter passes of the table, and the rest.

    Row ``i`` of a request shows the request's pass ``i``, the one that
    placed its ``i``-th server.  Nova filters a request for several servers
    once more to pick alternate hosts (``_get_alternate_hosts``); no row
    shows that pass.
    """
    shown, not_shown = [], []
    for results in run.results:
        passes = results[0].passes if results else ()
        shown.extend(passes[:len(results)])
        not_shown.extend(passes[len(results):])
    return shown, not_shown


def filter_summary(run):
    """The lines under the table: what the NUMA filters did in its passes.

    Counted over the passes the rows show (:func:`table_passes`), so that
    the sums are those of the rows.
    """
    shown, not_shown = table_passes(run)
    fit_rejected = sum(p.rejected('NUMAFitFilter') for p in shown)
    nova_rejected = sum(p.rejected('NUMATopologyFilter') for p in shown)
    skipped = sum(1 for p in shown if p.kept and
                  p.kept[-1] == ('NUMAFitFilter', 0))
    text = ('NUMAFitFilter removed %d host(s) in the %d filter passes '
            'above.\n'
            'NUMATopologyFilter removed %d after it, and did not run at all '
            'in %d pass(es) where no host was left.\n'
            % (fit_rejected, len(shown), nova_rejected, skipped))
    if not_shown:
        text += ('Not in the table: %d more pass(es) Nova made to pick '
                 'alternate hosts for requests of several servers '
                 '(NUMAFitFilter removed %d host(s) there).\n'
                 % (len(not_shown),
                    sum(p.rejected('NUMAFitFilter') for p in not_shown)))
    return text


def _render_comparison(run, write):
    """A plugin that changes where servers land (a weigher): side by side."""
    scenario = run.scenario
    reference, candidate = run.runs[0], run.runs[-1]
    write('nova.conf, the same in both runs:\n  [filter_scheduler]\n')
    for line in candidate.available_filters:
        write('  available_filters = %s\n' % line)
    write('  enabled_filters = %s\n' % ','.join(candidate.enabled_filters))
    write('  host_subset_size = 1\n'
          '  shuffle_best_same_weighed_hosts = False\n')
    _write_flags(scenario.flags, write)
    write('and what differs, with the weighers nova-scheduler loaded:\n')
    for number, each in enumerate(run.runs, 1):
        write('  run %d, %s:\n' % (number, each.setup.label))
        write('    [filter_scheduler] weight_classes = %s\n'
              % ','.join(each.weight_classes))
        write('    loaded: %s\n' % ', '.join(each.weighers))
    write('(HostNameTieBreaker, a test helper, only ranks hosts that all '
          'the other weighers see as equal, by name.)\n')
    _write_fit_backend(run, write)

    headers = ['#', 'server', 'flavor', reference.setup.label,
               candidate.setup.label, 'as expected']
    rows = []
    number = 0
    for boot, ref_results, results in zip(scenario.boots, reference.results,
                                          candidate.results):
        for ref, result in zip(ref_results, results):
            number += 1
            wrong = []
            if not boot.accepts(ref, reference=True):
                wrong.append('run 1: %s' % boot.expected_text(True))
            if not boot.accepts(result):
                wrong.append('run 2: %s' % boot.expected_text())
            rows.append([number, result.server, result.flavor,
                         _where(ref, ref_results[0]),
                         _where(result, results[0]),
                         'NO, expected %s' % '; '.join(wrong) if wrong
                         else 'yes'])
    write('\n'.join(_table(headers, rows)) + '\n\n')
    _write_why(scenario, write)

    write('At the end: free pinned CPUs per NUMA cell, and the servers on '
          'each host:\n')
    rows = []
    for layout in scenario.hosts:
        row = [layout.name]
        for each in (reference, candidate):
            servers = [r.server for results in each.results
                       for r in results if r.host == layout.name]
            free = each.free_pinned.get(layout.name, ())
            row.append('%s  %s' % ('+'.join(map(str, free)),
                                   ' '.join(servers) or '-'))
        rows.append(row)
    write('\n'.join(_table(
        ['host', reference.setup.label, candidate.setup.label], rows)))
    write('\n\n')
    for each in (reference, candidate):
        write('%s: %s.\n' % (each.setup.label, _summary(scenario, each)))


def _where(result, first):
    """Where a server landed or, if nowhere, what turned it down.

    ``first`` is the first server of the same request: the request's
    filter passes are recorded on it.
    """
    text = result.where()
    if not result.no_valid_host or result is not first:
        return text
    if not result.passes:
        return text + ' (placement: no candidate)'
    kept = result.passes[-1].kept
    if kept and kept[-1][1] == 0:
        return text + ' (%s)' % kept[-1][0]
    return text


def _summary(scenario, each):
    """Per flavor: on how many hosts, or NoValidHost; free pinned CPUs."""
    parts = []
    for flavor in scenario.flavors():
        results = [r for rs in each.results for r in rs
                   if r.flavor == flavor.name]
        placed = [r.host for r in results if r.host is not None]
        failed = len(results) - len(placed)
        text = '%d x %s ' % (len(results), flavor.name)
        if placed:
            hosts = sorted(set(placed))
            text += 'on %d host%s (%s)' % (
                len(hosts), '' if len(hosts) == 1 else 's', ', '.join(hosts))
        if failed:
            text += '%s%s' % (', ' if placed else '',
                              'NoValidHost' if failed == len(results)
                              else '%d NoValidHost' % failed)
        parts.append(text)
    free = {host: sum(cells) for host, cells in each.free_pinned.items()}
    total = sum(sum(layout.dedicated_cpus_per_cell())
                for layout in scenario.hosts)
    parts.append('%d of %d pinned CPUs free, at most %d on one host' % (
        sum(free.values()), total, max(free.values(), default=0)))
    return '; '.join(parts)


def _render_capacity(run, write):
    """The capacity of the cloud before and after the boots, and the check.

    A scenario whose runs schedule alike shows its last run; one whose
    runs differ shows each run's outcome side by side.
    """
    scenario = run.scenario
    runs = [each for each in run.runs or () if each.capacity is not None]
    if not runs:
        return
    if scenario.same_as_reference:
        runs = runs[-1:]
    counted = runs[-1].capacity
    write('\nCapacity of the cloud, as nova-sched-ext-capacity counts it: '
          'how many more servers of each\nflavor fit, NUMA-exact / from '
          "placement's inventories alone (os-capacity's formula):\n")
    headers = ['flavor', 'before']
    for number, each in enumerate(runs, 1):
        prefix = 'run %d ' % number if len(runs) > 1 else ''
        headers += [prefix + 'landed', prefix + 'after']
    rows = []
    for name in counted.flavors:
        row = [name, counted.before.cell(name)]
        for each in runs:
            results = [r for rs in each.results for r in rs
                       if r.flavor == name]
            row += ['%d of %d' % (sum(1 for r in results
                                      if r.host is not None),
                                  len(results)),
                    each.capacity.after.cell(name)]
        rows.append(row)
    write('\n'.join(_table(headers, rows)) + '\n')
    if len(runs) > 1:
        write('(%s)\n' % '; '.join('run %d: %s' % (number, each.setup.label)
                                   for number, each in enumerate(runs, 1)))
    checked = [each for each in run.runs if each.capacity is not None]
    requests = sum(len(each.capacity.checks) for each in checked)
    wrong = run.capacity_problems()
    if wrong:
        write('The count disagreed with the scheduler in %d case(s):\n  %s\n'
              % (len(wrong), '\n  '.join(wrong)))
    else:
        write('Checked at each of the %d requests%s: the count of the '
              'booted flavor dropped by exactly\nthe servers that landed, '
              'on the hosts they landed on, and showed less room than asked '
              'for\nwhere the request got NoValidHost.\n'
              % (requests, ' of both runs' if len(checked) == 2 else ''))


def _choose_concurrency(threads):
    """Eventlet or native threads: Nova decides on its first import.

    ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` from the environment is honoured
    unless ``--threads`` is given.
    """
    if threads:
        os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = 'true'
    else:
        os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'false')
    # Applies the choice (and eventlet's monkey patching) before anything
    # else imports Nova.
    import nova_sched_ext_tools.harness  # noqa: F401


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    _quiet_process_logging(args.verbose)
    _choose_concurrency(args.threads)

    try:
        from nova_sched_ext_tools.harness import scenarios
    except ImportError as exc:
        return _missing_harness(exc)

    if args.list:
        for scenario in scenarios.DEMO_SCENARIOS:
            print('%-16s %s' % (scenario.name, scenario.title))
        return 0
    selected = list(scenarios.DEMO_SCENARIOS)
    if args.scenario:
        known = {s.name: s for s in selected}
        unknown = [name for name in args.scenario if name not in known]
        if unknown:
            print('nova-sched-ext-demo: unknown scenario(s) %s; known: %s'
                  % (', '.join(unknown), ', '.join(sorted(known))),
                  file=sys.stderr)
            return 2
        selected = [known[name] for name in args.scenario]

    problem = _check_installation()
    if problem:
        print('nova-sched-ext-demo: %s' % problem, file=sys.stderr)
        return 2

    try:
        from nova_sched_ext_tools.harness import runner
    except ImportError as exc:
        return _missing_harness(exc)

    # Importing Nova's test harness set up oslo.log on the root logger.
    _quiet_process_logging(args.verbose)
    log_level = None
    if args.verbose:
        log_level = logging.DEBUG if args.verbose > 1 else logging.INFO
    print('nova-sched-ext demo: a real Nova %s in this process (API, '
          'conductor, scheduler, placement, fake libvirt computes; sqlite '
          'in memory).' % _nova_version())
    sys.stdout.flush()

    status = 0
    for scenario in selected:
        run = runner.run_scenario(scenario, compare=args.compare,
                                  log_level=log_level)
        if not args.verbose:
            _quiet_process_logging(0)  # Nova's harness left DEBUG on
        render(run, sys.stdout)
        if run.error:
            print('\nThe scenario could not run:\n%s' % run.error)
            print('Nova\'s log of this run: %s' % run.log_path)
            status = 2
            continue
        problems = run.problems()
        if problems:
            print('\n%d unexpected result(s):\n  %s' % (
                len(problems), '\n  '.join(problems)))
            status = max(status, 1)
        else:
            runs = run.runs or ()
            print('All %d servers%s went as expected (%.0f s).' % (
                sum(len(r) for each in runs for r in each.results),
                ' of both runs' if len(runs) == 2 else '', run.seconds))
        sys.stdout.flush()
    return status


def _missing_harness(exc):
    print('nova-sched-ext-demo: cannot load Nova\'s test harness (%s); '
          'install the demo\'s requirements: pip install '
          '\'nova-sched-ext[demo]\'' % exc, file=sys.stderr)
    return 2


def _check_installation():
    """Why the plugins cannot be loaded from nova.conf, or None."""
    try:
        from nova_sched_ext import filters
        names = [cls.__name__ for cls in filters.all_filters()]
    except Exception as exc:
        return 'cannot list the package\'s filters: %s' % exc
    if 'NUMAFitFilter' not in names:
        return ('NUMAFitFilter is not registered in the '
                '"nova_sched_ext.filters" entry-point namespace: install '
                'the package (pip install -e .) so that '
                '"available_filters = nova_sched_ext.filters.all_filters" '
                'finds it.')
    return None


def _nova_version():
    try:
        from importlib import metadata
        return metadata.version('nova')
    except Exception:
        return '(unknown version)'


if __name__ == '__main__':
    sys.exit(main())
