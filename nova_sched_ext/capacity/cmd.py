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
from nova_sched_ext.cli import native_threads  # noqa

import json
import logging
import sys

from nova_sched_ext import cli
from nova_sched_ext.cli import table
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


#: the console scripts' toolkit's, by this module's old names
UsageError = cli.UsageError
render_table = table.render


def build_parser(prog=PROG):
    parser = cli.Parser(prog=prog, description=DESCRIPTION)
    version.add_version_option(parser)
    cli.add_config_options(parser)
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


def load_config(args, prog=PROG):
    """Parse the configuration files as the scheduler does, or UsageError.

    Only the files: the options of this command are not oslo.config's.
    """
    from nova_sched_ext.cloud import backends
    return backends.load_nova_conf(args, prog)


# --- output ------------------------------------------------------------

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
        blocks.append(table.render(
            rows, (heading, 'Flavor', 'vCPUs', 'RAM (MiB)', 'Capacity',
                   'Placement only'),
            ['l', 'l', 'r', 'r', 'r', 'r']))
        summary = [(s['name'], s['hosts'], s['largest_flavor'] or '-',
                    s['fragmentation']['vcpus'],
                    s['fragmentation']['memory_mb']) for s in scopes]
        blocks.append(table.render(
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


def main(argv=None):
    argv = sys.argv if argv is None else argv
    prog = cli.prog_name(argv, PROG)
    try:
        args = build_parser(prog).parse_args(argv[1:])
    except cli.UsageError as exc:
        return cli.report(prog, exc)
    handler = cli.setup_logging(args.debug)

    counted = []

    def count():
        load_config(args, prog)
        counted.append(run(args))
        return 0

    try:
        status = cli.run(
            prog, count, unexpected=cli.unexpected_error,
            log_unexpected=lambda: args.debug and logging.getLogger(
                __name__).exception('capacity count failed'))
        if status:
            return status
        output(counted[0], args.json)
        return 0
    finally:
        logging.getLogger().removeHandler(handler)


if __name__ == '__main__':
    sys.exit(main())
