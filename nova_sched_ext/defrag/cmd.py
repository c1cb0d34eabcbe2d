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

"""nova-sched-ext-defrag: plan live migrations that give large flavors room.

::

    nova-sched-ext-defrag plan [--config-file nova.conf] [--state FILE]
        [--budget-moves N] [--budget-ram-gb X] [--budget-share PERCENT]
        [--scope-az AZ] [--scope-aggregate A] [--scope-hosts h1,h2]
        [--never-move uuid,...] [--never-move-project p,...]
        [--flavor NAME]... [--search drain|greedy] [--json] [-o PLAN.json]
    nova-sched-ext-defrag apply PLAN.json [--config-file nova.conf]
        [--dry-run] [--parallel N]

``plan`` reads the running cloud as the capacity count does
(:mod:`.live`, with the scheduler's ``nova.conf``), or with ``--state`` a
saved state (a simulator's end state: a format registered in the
``nova_sched_ext.defrag.saved_states`` entry-point namespace), and prints
the plan as a table, or with ``--json`` the plan document ``apply`` reads
(``-o`` writes that document to a file as well).  ``apply`` live-migrates
the moves of a plan file through the Compute API, with the credentials of
``[nova_sched_ext_defrag]``, one line per finished move.

Exit status: 0 done; 1 ``apply`` stopped on a failed move (every earlier
move stays in place), or a database, placement or the Compute API could
not be reached; 2 the input cannot be used (a command line, configuration,
plan or state file, unknown instance, host, zone or aggregate, a negative
budget, a scope matching nothing), said in one line, nothing moved.
"""

# Native threads; a config file that cannot be read is main()'s to report.
from nova_sched_ext.cli import native_threads  # noqa

import argparse
import importlib.metadata
import json
import logging
import math
import sys

from nova_sched_ext import cli
from nova_sched_ext.cli import table
from nova_sched_ext.conf import defrag as defrag_conf
from nova_sched_ext import version

PROG = 'nova-sched-ext-defrag'
#: The entry-point namespace of the saved states ``plan --state`` reads.
SAVED_STATES = 'nova_sched_ext.defrag.saved_states'

DESCRIPTION = (
    'Plan live migrations that give the large flavors their room back '
    '(NUMA-exact, within a budget and a scope), and apply such a plan.')

#: the console scripts' toolkit's, by this module's old name
UsageError = cli.UsageError


def load_config(args, prog=PROG):
    """Parse ``nova.conf`` as the capacity count does, or UsageError.

    The cloud is read through the cloud reader, with the capacity count's
    options and its bounded database and placement calls.
    """
    from nova_sched_ext.cloud import backends
    return backends.load_nova_conf(args, prog)


def _config_options(parser):
    cli.add_config_options(parser)
    parser.add_argument('--debug', action='store_true',
                        help='Log what the command does on stderr, and the '
                             'traceback of an unexpected error.')


def _names(text):
    return [name.strip() for name in text.split(',') if name.strip()]


def _percent(text):
    try:
        return float(text[:-1] if text.endswith('%') else text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a percentage' % text)


def _gib(text):
    """A budget of RAM in GiB: a number whose MiB are finite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a number of GiB' % text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError('%r is not a finite number of GiB'
                                         % text)
    if not math.isfinite(value * 1024):
        raise argparse.ArgumentTypeError(
            '%r GiB is too large to count (for no RAM budget, leave the '
            'option out)' % text)
    return value


def build_parser(prog=PROG):
    parser = cli.Parser(prog=prog, description=DESCRIPTION)
    version.add_version_option(parser)
    commands = parser.add_subparsers(dest='command', metavar='COMMAND',
                                     parser_class=cli.Parser)
    commands.required = True
    plan = commands.add_parser(
        'plan', help='Plan the moves, print them; moves nothing.',
        description='Plan live migrations that recover large-flavor slots.')
    _config_options(plan)
    plan.add_argument(
        '--state', metavar='FILE',
        help='Plan on this saved state (nova-sched-ext-sim --save-state) '
             'instead of the running cloud; no nova.conf is needed.')
    plan.add_argument('--budget-moves', type=int, metavar='N',
                      help='At most N live migrations.')
    plan.add_argument('--budget-ram-gb', type=_gib, metavar='GB',
                      help='At most this much instance RAM moved (GiB).')
    plan.add_argument('--budget-share', type=_percent, metavar='PERCENT',
                      help='At most this share of the instances in scope '
                           'moved, in percent (5 or 5%%).')
    plan.add_argument('--scope-az', metavar='AZ',
                      help='Only hosts of this availability zone.')
    plan.add_argument('--scope-aggregate', metavar='AGGREGATE',
                      help='Only hosts of this host aggregate (name).')
    plan.add_argument('--scope-hosts', type=_names, metavar='HOST,...',
                      help='Only these compute hosts.')
    plan.add_argument('--never-move', type=_names, default=[],
                      metavar='UUID,...',
                      help='Instances never to move.')
    plan.add_argument('--never-move-project', type=_names, default=[],
                      metavar='PROJECT,...',
                      help='Projects whose instances never move.')
    plan.add_argument(
        '--flavor', action='append', dest='flavors', metavar='FLAVOR',
        help='A flavor (name or ID) whose slots to recover; repeat for '
             'more. Default: the NUMA-slot weigher\'s reference flavors '
             '([nova_sched_ext] numa_slot_reference_flavors). Not with '
             '--state, whose file names its own.')
    plan.add_argument('--search', choices=('drain', 'greedy'),
                      default='drain',
                      help='drain (default): moves chosen by slots '
                           'recovered per budget spent, several at once; '
                           'greedy: one instance at a time (a baseline).')
    plan.add_argument('--json', action='store_true',
                      help='Print the plan document (what apply reads).')
    plan.add_argument('-o', '--output', metavar='PLAN.json',
                      help='Also write the plan document to this file.')
    apply_ = commands.add_parser(
        'apply', help='Live-migrate the moves of a plan file.',
        description='Live-migrate the moves of a plan file, in order, each '
                    'checked again first; stop on the first failure.')
    apply_.add_argument('plan_file', metavar='PLAN.json')
    _config_options(apply_)
    apply_.add_argument('--dry-run', action='store_true',
                        help='Check each move against the cloud now, as '
                             'the moves before it would leave it; '
                             'migrate nothing.')
    apply_.add_argument('--never-move', type=_names, default=[],
                        metavar='UUID,...',
                        help="Instances never to move, besides the plan's "
                             'own never-move list.')
    apply_.add_argument('--never-move-project', type=_names, default=[],
                        metavar='PROJECT,...',
                        help='Projects whose instances never move, besides '
                             "the plan's own.")
    apply_.add_argument('--ignore-checksum', action='store_true',
                        help='Apply a plan whose checksum is missing (an '
                             'older or hand-written plan) or does not '
                             'match (an edited plan); every move is still '
                             'checked against the cloud and the never-move '
                             'lists first.')
    apply_.add_argument('--parallel', type=int, default=1, metavar='N',
                        help='Up to N migrations at once, of moves that '
                             'share no host and no server group '
                             '(default 1).')
    return parser


# --- plan ---------------------------------------------------------------

def _budget(args):
    from nova_sched_ext.defrag import model
    ram_mb = None
    if args.budget_ram_gb is not None:
        if args.budget_ram_gb < 0:
            raise model.PlanError('the budget --budget-ram-gb must not be '
                                  'negative, not %g' % args.budget_ram_gb)
        ram_mb = int(args.budget_ram_gb * 1024)
    share = None if args.budget_share is None else args.budget_share / 100.0
    return model.Budget(max_moves=args.budget_moves, max_ram_mb=ram_mb,
                        max_share=share)


def _scope(args):
    from nova_sched_ext.defrag import model
    return model.Scope(
        availability_zone=args.scope_az, aggregate=args.scope_aggregate,
        hosts=frozenset(args.scope_hosts)
        if args.scope_hosts is not None else None)


def saved_state(path):
    """``(cloud, reference flavors)`` of a saved state file.

    Its ``format`` picks the reader among the entry points of
    :data:`SAVED_STATES`.
    """
    from nova_sched_ext.defrag import model
    from stevedore import driver
    readers = sorted(ep.name for ep in importlib.metadata.entry_points(
        group=SAVED_STATES))
    if not readers:
        raise model.PlanError('no saved-state format is installed (entry '
                              'point namespace %s)' % SAVED_STATES)
    document = model.read_document(path, readers, 'state file',
                                   'a saved state to plan on',
                                   model.PlanError)
    reader = driver.DriverManager(SAVED_STATES, document['format']).driver
    try:
        return reader(document)
    except model.PlanError as exc:
        raise model.PlanError('state file %s: %s' % (path, exc)) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise model.PlanError('state file %s is damaged: %s: %s'
                              % (path, type(exc).__name__, exc)) from None


def _check_never_move(cloud, args):
    from nova_sched_ext.defrag import model
    unknown = sorted(set(args.never_move) - set(cloud.instances))
    if unknown:
        raise model.PlanError('--never-move: no instance %s in the cloud'
                              % ', '.join(unknown))
    return model.NeverMove(instances=frozenset(args.never_move),
                           projects=frozenset(args.never_move_project))


def run_plan(args, context=None):
    """The :class:`~.planner.Plan` the arguments ask for."""
    from nova_sched_ext.defrag import model
    from nova_sched_ext.defrag import planner
    budget, scope = _budget(args), _scope(args)
    if args.state:
        if args.flavors:
            raise UsageError('--flavor is not for --state: a saved state '
                             'names its reference flavors')
        if args.config_file or args.config_dir:
            load_config(args, PROG)
        cloud, flavors = saved_state(args.state)
    else:
        load_config(args, PROG)
        from nova import context as nova_context
        from nova import objects
        from nova_sched_ext.defrag import live
        objects.register_all()
        context = context or nova_context.get_admin_context()
        flavors = live.reference_flavors(context, args.flavors)
        cloud = live.read_cloud(context)
    if not flavors:
        raise model.PlanError(
            'no reference flavor to recover slots of: name them with '
            '--flavor or [nova_sched_ext] numa_slot_reference_flavors')
    scope.check(cloud)
    never_move = _check_never_move(cloud, args)
    return planner.Planner(cloud, flavors, budget=budget, scope=scope,
                           never_move=never_move, search=args.search).plan()


def _in_gib(memory_mb):
    return '%.1f' % (memory_mb / 1024.0)


def _cells(move):
    return ','.join(str(c['host_cell']) for c in move['cells']) or '-'


def render_plan(document):
    """The table of a plan document (``Plan.to_dict()``)."""
    flavors = list(document['slots_before'])
    rows = []
    for number, move in enumerate(document['moves'], 1):
        recovered = move['slots_recovered']
        rows.append((number, move['instance'], move['flavor'],
                     move['source'], move['target'], _cells(move),
                     _in_gib(move['memory_mb']),
                     ' / '.join('%+d' % recovered.get(f, 0)
                                for f in flavors)))
    blocks = []
    if rows:
        blocks.append(table.render(
            rows, ('#', 'Instance', 'Flavor', 'From', 'To', 'Host cells',
                   'RAM (GiB)', 'Slots (%s)' % ' / '.join(flavors)),
            ['r', 'l', 'l', 'l', 'l', 'l', 'r', 'r']))
    else:
        blocks.append('No move recovers a large-flavor slot within the '
                      'budget and scope.')
    blocks.append(table.render(
        [(f, document['slots_before'][f], document['slots_after'][f],
          '%+d' % document['slots_recovered'][f]) for f in flavors],
        ('Flavor', 'Slots before', 'Slots after', 'Recovered'),
        ['l', 'r', 'r', 'r']))
    reasons = {}
    for entry in document['left_alone']:
        reasons[entry['reason']] = reasons.get(entry['reason'], 0) + 1
    if reasons:
        blocks.append(table.render(
            sorted(((n, r) for r, n in reasons.items()),
                   key=lambda row: (-row[0], row[1])),
            ('Instances', 'Left alone because'), ['r', 'l']))
    blocks.append(
        '%d move(s), %s GiB of RAM moved; %d instance(s) on %d host(s) in '
        'scope; planned in %.2f s (%s search).' % (
            len(document['moves']), _in_gib(document['memory_moved_mb']),
            document['instances_in_scope'], document['hosts_in_scope'],
            document['seconds'], document['search']))
    return '\n\n'.join(blocks)


def write_plan(path, document):
    try:
        with open(path, 'w') as stream:
            json.dump(document, stream, indent=2)
            stream.write('\n')
    except OSError as exc:
        raise UsageError('cannot write the plan file %s: %s'
                         % (path, exc.strerror or exc)) from None


# --- apply --------------------------------------------------------------

def _compute():
    """The Compute API proxy, with ``[nova_sched_ext_defrag]``'s user."""
    from keystoneauth1 import exceptions as ks_exc
    from nova_sched_ext.cloud import session as cloud_session
    from oslo_config import cfg
    group = defrag_conf.GROUP_NAME
    if not cfg.CONF[group].auth_type:
        raise UsageError(
            '[%s] auth_type is not set: give the credentials of the user '
            'that live-migrates (as in [placement])' % group)
    try:
        session = cloud_session.load_session(group)
        return cloud_session.connect(session, group).compute
    except ks_exc.ClientException as exc:
        raise UsageError('the credentials of [%s] cannot be used: %s'
                         % (group, ' '.join(str(exc).split()))) from None


def _progress_line(total, stream):
    def progress(step):
        text = '[%d/%d] %s %s -> %s: %s' % (
            step.number, total, step.instance, step.source, step.target,
            step.status)
        stream.write(text + (' (%s)' % step.reason if step.reason else '')
                     + '\n')
        stream.flush()
    return progress


def run_apply(args, stdout, context=None, compute=None):
    """Apply the plan file; the exit status.

    The configuration and credentials are checked before the plan file is
    read, the plan file before the cloud.
    """
    from nova_sched_ext.defrag import executor
    from nova_sched_ext.defrag import live
    from nova_sched_ext.defrag import model
    from oslo_config import cfg
    if args.parallel < 1:
        raise UsageError('--parallel must be at least 1, not %d'
                         % args.parallel)
    load_config(args, PROG)
    _check_defrag_options()
    if compute is None and not args.dry_run:
        compute = _compute()
    plan = executor.read_plan(args.plan_file, args.ignore_checksum)
    moves = plan.moves
    never_move = model.NeverMove(
        instances=plan.never_move.instances | frozenset(args.never_move),
        projects=plan.never_move.projects |
        frozenset(args.never_move_project))
    from nova import context as nova_context
    from nova import objects
    from nova_sched_ext.cloud import placement
    objects.register_all()
    context = context or nova_context.get_admin_context()
    reader = placement.PlacementReader(
        context, workers=cfg.CONF.nova_sched_ext_capacity.placement_workers)
    opts = cfg.CONF[defrag_conf.GROUP_NAME]
    runner = executor.Executor(
        compute,
        lambda hosts=None: live.read_cloud(context, reader, hosts=hosts),
        wait_timeout=opts.migration_timeout,
        poll_interval=opts.poll_interval,
        progress=_progress_line(len(moves), stdout),
        never_move=never_move)
    outcome = runner.apply(moves, dry_run=args.dry_run,
                           parallel=args.parallel)
    counts = {}
    for step in outcome.steps:
        counts[step.status] = counts.get(step.status, 0) + 1
    summary = ', '.join('%d %s' % (n, status)
                        for status, n in sorted(counts.items())) or 'nothing'
    if outcome.stopped_at is not None:
        stdout.write('Stopped at move %d of %d: %s. Earlier moves stay in '
                     'place; run apply again with the same plan to resume.\n'
                     % (outcome.stopped_at, len(moves), summary))
        return 1
    stdout.write('%d move(s): %s.\n' % (len(moves), summary))
    return 0


def _check_defrag_options():
    """Refuse a bad value of ``[nova_sched_ext_defrag]`` before any move.

    keystoneauth's float options there (``timeout``, the retry delays)
    take nan and inf; the scheduler refuses them at start for its own
    service-credential section, and this command does the same for its.
    """
    from oslo_config import cfg

    from nova_sched_ext.conf import checks
    try:
        checks.check_values(cfg.CONF, defrag_conf.list_opts())
    except checks.InvalidOptionValue as exc:
        raise UsageError(str(exc)) from None


# --- main ---------------------------------------------------------------

def run(args, stdout):
    """Run a parsed command; its exit status."""
    if args.command == 'apply':
        return run_apply(args, stdout)
    plan = run_plan(args)
    document = plan.to_dict()
    if args.output:
        write_plan(args.output, document)
    stdout.write((json.dumps(document, indent=2) if args.json
                  else render_plan(document)) + '\n')
    return 0


def main(argv=None, stdout=None):
    argv = sys.argv if argv is None else argv
    stdout = stdout or sys.stdout
    prog = cli.prog_name(argv, PROG)
    try:
        args = build_parser(prog).parse_args(argv[1:])
    except cli.UsageError as exc:
        return cli.report(prog, exc)
    handler = cli.setup_logging(args.debug)
    try:
        return cli.run(
            prog, lambda: run(args, stdout), unexpected=cli.unexpected_error,
            log_unexpected=lambda: args.debug and logging.getLogger(
                __name__).exception('%s failed', args.command))
    finally:
        logging.getLogger().removeHandler(handler)


if __name__ == '__main__':
    sys.exit(main())
