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


"""nova-sched-ext-capacity: how many more instances of each flavor fit.

Run it with the scheduler's ``nova.conf``; it reads the cell databases and
placement as the scheduler does, and writes nothing::

    nova-sched-ext-capacity --config-file /etc/nova/nova.conf \\
        [--flavor NAME]... [--by host|aggregate|az|cell|cloud] \\
        [--az ZONE] [--aggregate NAME] [--per-host] [--json]

It prints a table (``--json``: the report of
:func:`nova_sched_ext.capacity.compute` as JSON). A command line or
configuration it cannot use, an unknown flavor, zone or aggregate, is one
line on stderr and exit status 2; a database or placement it cannot reach
is one line and exit status 1. Never a traceback, unless ``--debug``.
"""
# Native threads; a config file that cannot be read is main()'s to report.
from nova_sched_ext.cmd import config_files; config_files.choose_native_threads()  # noqa

import argparse
import json
import logging
import os
import sys

from oslo_config import cfg

from nova_sched_ext.capacity import errors
from nova_sched_ext import version

PROG = 'nova-sched-ext-capacity'
BY = ('host', 'aggregate', 'az', 'cell', 'cloud')

DESCRIPTION = (
    'How many more instances of each flavor the cloud takes at once, '
    'counted per NUMA cell as Nova places them, within what placement '
    'allows, on every compute host the scheduler could pick for the '
    'flavor. Reads the databases and placement named in the scheduler\'s '
    'nova.conf; changes nothing.')

#: the column heading of each kind of scope
HEADINGS = {'host': 'Host', 'aggregate': 'Aggregate',
            'az': 'Availability zone', 'cell': 'Cell', 'cloud': 'Cloud'}


class UsageError(Exception):
    """The command line or the configuration cannot be used."""


class _Parser(argparse.ArgumentParser):

    def error(self, message):
        raise UsageError('%s (see --help)' % message)


def add_config_options(parser):
    """``--config-file`` and ``--config-dir``, for :func:`load_config`."""
    parser.add_argument(
        '--config-file', action='append', default=[], metavar='PATH',
        help="The scheduler's nova.conf; repeat for more files, later ones "
             "override earlier ones. Default: oslo.config's usual places "
             '(/etc/nova/nova.conf, ...).')
    parser.add_argument(
        '--config-dir', action='append', default=[], metavar='DIR',
        help='A directory of *.conf files read after the config files.')


def build_parser(prog=PROG):
    parser = _Parser(prog=prog, description=DESCRIPTION)
    version.add_version_option(parser)
    add_config_options(parser)
    parser.add_argument(
        '--flavor', action='append', metavar='FLAVOR', dest='flavors',
        help='A flavor name or ID; repeat for more. Default: every public, '
             'enabled flavor.')
    parser.add_argument(
        '--by', choices=BY, default='cloud',
        help='Add the counts up per host, aggregate, availability zone, '
             'cell or for the whole cloud (default).')
    parser.add_argument('--az', metavar='ZONE',
                        help='Count only the hosts of this availability '
                             'zone.')
    parser.add_argument('--aggregate', metavar='AGGREGATE',
                        help='Count only the hosts of this host aggregate '
                             '(name, ID or UUID).')
    parser.add_argument('--per-host', action='store_true',
                        help='Also show each host on its own.')
    parser.add_argument('--json', action='store_true',
                        help='Print the report as JSON.')
    parser.add_argument('--debug', action='store_true',
                        help='Log what the count does on stderr, and the '
                             'traceback of an unexpected error.')
    return parser


def _check_files(args):
    for path in args.config_file:
        if not os.path.isfile(path):
            raise UsageError('config file %s does not exist' % path)
        if not os.access(path, os.R_OK):
            raise UsageError('config file %s cannot be read (permission '
                             'denied)' % path)
    for path in args.config_dir:
        if not os.path.isdir(path):
            raise UsageError('config directory %s does not exist' % path)


def load_config(args, prog=PROG):
    """Parse the configuration files as the scheduler does, or UsageError.

    Only the files: the options of this command are not oslo.config's.
    """
    argv = [prog]
    for path in args.config_file:
        argv += ['--config-file', path]
    for path in args.config_dir:
        argv += ['--config-dir', path]
    try:
        # A directory or a file that is not UTF-8 escapes oslo.config.
        config_files.check_command_line(argv[1:], prog=prog)
    except config_files.UnreadableConfigFile as exc:
        raise UsageError(str(exc)) from None
    _check_files(args)
    import nova.conf
    from nova import config
    conf = nova.conf.CONF
    if not args.config_file and not args.config_dir and not (
            cfg.find_config_files(project='nova') or
            cfg.find_config_dirs(project='nova')):
        raise UsageError(
            'no configuration file: pass --config-file with the '
            "scheduler's nova.conf (for example --config-file "
            '/etc/nova/nova.conf)')
    from nova_sched_ext.capacity import backends
    try:
        config.parse_args(argv, prog=prog, init_rpc=False,
                          configure_db=False)
        backends.check_options(conf)
    except cfg.Error as exc:
        raise UsageError(' '.join(str(exc).split())) from None
    except errors.ConfigError as exc:
        raise UsageError(str(exc)) from None
    # An interactive command: a database or placement that is down or
    # silent is one line within backend_timeout, not a hang.
    backends.bound(conf)
    backends.configure_databases(conf)
    return conf


def setup_logging(debug):
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(levelname)s [%(name)s] %(message)s'))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    return handler


# --- output ------------------------------------------------------------

def render_table(rows, headers, align=None):
    """A plain text table; ``align`` is 'l' or 'r' per column."""
    cells = [[str(h) for h in headers]] + [
        ['' if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or ['l'] * len(headers)
    rule = '+' + '+'.join('-' * (w + 2) for w in widths) + '+'

    def line(row):
        parts = [(c.ljust(w) if a == 'l' else c.rjust(w))
                 for c, w, a in zip(row, widths, align)]
        return '| ' + ' | '.join(parts) + ' |'

    out = [rule, line(cells[0]), rule]
    out += [line(r) for r in cells[1:]]
    out.append(rule)
    return '\n'.join(out)


def render(report):
    """The human-readable form of a report dictionary."""
    flavors = report['flavors']
    blocks = []
    kinds = []
    for scope in report['scopes']:
        if scope['scope'] not in kinds:
            kinds.append(scope['scope'])
    for kind in kinds:
        scopes = [s for s in report['scopes'] if s['scope'] == kind]
        heading = HEADINGS.get(kind, kind)
        rows = []
        for scope in scopes:
            for flavor in flavors:
                rows.append((scope['name'], flavor['name'], flavor['vcpus'],
                             flavor['ram'],
                             scope['capacity'].get(flavor['name'], 0),
                             scope.get('placement_only', {}).get(
                                 flavor['name'], '')))
        blocks.append(render_table(
            rows, (heading, 'Flavor', 'vCPUs', 'RAM (MiB)', 'Capacity',
                   'Placement only'),
            ['l', 'l', 'r', 'r', 'r', 'r']))
        summary = [(s['name'], s['hosts'], s['largest_flavor'] or '-',
                    s['fragmentation']['vcpus'],
                    s['fragmentation']['memory_mb']) for s in scopes]
        blocks.append(render_table(
            summary, (heading, 'Hosts', 'Largest flavor that fits',
                      'Stranded vCPUs', 'Stranded RAM (MiB)'),
            ['l', 'r', 'l', 'r', 'r']))
    notes = ['%d host(s) counted' % report['hosts_counted']]
    skipped = report['hosts_skipped']
    if skipped:
        notes.append('not counted: %s' % ', '.join(
            '%s %d' % (reason, n) for reason, n in sorted(skipped.items())))
    if report['engine_fallbacks']:
        notes.append("%d host/flavor pair(s) counted with Nova's own fit"
                     % report['engine_fallbacks'])
    blocks.append('; '.join(notes) + '. Generated at %s.'
                  % report['generated_at'])
    blocks.append('Capacity: instances of the flavor the scope takes at '
                  'once, each flavor on its own. Placement only: the same '
                  'from placement inventories alone (os-capacity), which '
                  'ignores NUMA, traits and units. Stranded: free vCPUs and '
                  'RAM of the hosts that take none of these flavors.')
    return '\n\n'.join(blocks)


# --- main --------------------------------------------------------------

def run(args, context=None):
    """Count as ``args`` say; the report dictionary."""
    from nova import context as nova_context
    from nova import objects
    from nova_sched_ext import capacity
    objects.register_all()
    if context is None:
        context = nova_context.get_admin_context()
    report = capacity.compute(context, flavors=args.flavors, by=args.by,
                              az=args.az, aggregate=args.aggregate,
                              per_host=args.per_host)
    return report.to_dict()


def output(report, as_json, stream=None):
    stream = stream or sys.stdout
    if as_json:
        stream.write(json.dumps(report, indent=2, sort_keys=False) + '\n')
    else:
        stream.write(render(report) + '\n')


def _fail(prog, message, code):
    sys.stderr.write('%s: error: %s\n' % (prog, ' '.join(
        str(message).split())))
    return code


def unexpected_error(exc):
    """(message, exit code) of an error the count did not turn into one."""
    from keystoneauth1 import exceptions as ks_exc
    from nova_sched_ext.capacity import sources
    text = ' '.join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, sources.DB_ERRORS):
        return 'cannot read a database: %s' % text, 1
    if isinstance(exc, ks_exc.ClientException):
        return 'cannot reach placement: %s' % text, 1
    return 'unexpected error: %s: %s (run with --debug for details)' % (
        type(exc).__name__, text), 1


def main(argv=None):
    argv = sys.argv if argv is None else argv
    prog = os.path.basename(argv[0]) if argv and argv[0] else PROG
    if prog in ('cmd.py', '__main__.py', '-m', '-c'):
        prog = PROG
    prog = prog[:-3] if prog.endswith('.py') else prog
    try:
        args = build_parser(prog).parse_args(argv[1:])
    except UsageError as exc:
        return _fail(prog, exc, 2)
    handler = setup_logging(args.debug)
    try:
        try:
            load_config(args, prog)
            report = run(args)
        except UsageError as exc:
            return _fail(prog, exc, 2)
        except errors.CapacityError as exc:
            return _fail(prog, exc, exc.exit_code)
        except Exception as exc:
            if args.debug:
                logging.getLogger(__name__).exception('capacity count failed')
            message, code = unexpected_error(exc)
            return _fail(prog, message, code)
        output(report, args.json)
        return 0
    finally:
        logging.getLogger().removeHandler(handler)


if __name__ == '__main__':
    sys.exit(main())
