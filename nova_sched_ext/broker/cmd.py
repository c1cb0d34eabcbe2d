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

"""nova-sched-ext-broker: plan or boot a request across the clusters.

::

    nova-sched-ext-broker --config broker.yaml plan \\
        --family v.c3.large --image centos-9 --network private --count 3
    nova-sched-ext-broker --config broker.yaml boot \\
        --family v.c3.large --image centos-9 --network private --count 3 \\
        --role auto-scaling --name web --json

``flavors`` prints, from the configuration alone, the uneven dual-NUMA
flavors its families derive and the extra specs the clusters must give
them::

    nova-sched-ext-broker --config broker.yaml flavors --family v.c3.large

``plan`` is a dry run: it reads every cluster and prints the candidates
in boot order, with each cluster's capacity, and for every cluster and
variant why it was kept or dropped.  ``boot`` boots the first candidate
and falls back to the next while a boot fails, and prints which variant
in which cluster took the request and every attempt.

The configuration is ``--config``, else ``$NOVA_SCHED_EXT_BROKER_CONFIG``,
else :data:`DEFAULT_CONFIG`; the clusters' credentials are their
``clouds.yaml`` entries.

Exit status: 0 when the plan has a candidate or the boot succeeded; 1
when nothing can be (or was) placed; 2 for a bad option, configuration or
request, with one line on stderr that says why.
"""

import json
import logging
import os
import sys

from nova_sched_ext import cli
from nova_sched_ext.cli import table
from nova_sched_ext import version

PROG = 'nova-sched-ext-broker'
DEFAULT_CONFIG = '/etc/nova-sched-ext/broker.yaml'
CONFIG_ENV = 'NOVA_SCHED_EXT_BROKER_CONFIG'


#: what an error line of the command starts with, after its name: the
#: broker's lines are ``nova-sched-ext-broker: <message>``
LABEL = ''


def build_parser():
    parser = cli.Parser(
        prog=PROG, help_hint='%s --help' % PROG,
        description='Place a request across clusters: pick the cluster '
                    'and flavor variant from each cluster\'s capacity, '
                    'boot, fall back.')
    version.add_version_option(parser)
    parser.add_argument('--config', metavar='FILE',
                        help='the broker configuration (default: $%s, '
                             'else %s)' % (CONFIG_ENV, DEFAULT_CONFIG))
    parser.add_argument('--debug', action='store_true',
                        help='log at debug level')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND',
                                     parser_class=cli.Parser)
    commands.required = True
    for name, help_text in (
            ('plan', 'a dry run: the candidates in boot order and why each '
                     'cluster and variant was kept or dropped'),
            ('boot', 'boot the request, falling back while boots fail')):
        sub = commands.add_parser(name, help=help_text,
                                  description=help_text)
        sub.add_argument('--family', required=True,
                         help='the base flavor (a flavor family)')
        sub.add_argument('--image', required=True, help='image name or ID')
        sub.add_argument('--network', required=True,
                         help='network name or ID')
        sub.add_argument('--count', type=int, default=1,
                         help='servers, all in one cluster (default 1)')
        sub.add_argument('--role', default='pay-as-you-go',
                         help='the user\'s role (default pay-as-you-go)')
        sub.add_argument('--datacenter', help='only this data center')
        sub.add_argument('--zone', help='only clusters of this zone')
        sub.add_argument('--cluster', action='append', default=[],
                         dest='clusters', metavar='NAME',
                         help='only this cluster (repeatable)')
        sub.add_argument('--deployment-set', metavar='NAME',
                         help='the deployment set the servers join')
        sub.add_argument('--name', default='broker',
                         help='the servers\' name (default broker)')
        sub.add_argument('--json', action='store_true',
                         help='print JSON instead of tables')
    help_text = ('the uneven dual-NUMA flavors the configuration derives, '
                 'with the extra specs each cluster must give them (read '
                 'from the file alone)')
    sub = commands.add_parser('flavors', help=help_text,
                              description=help_text)
    sub.add_argument('--family', help='only this flavor family')
    sub.add_argument('--json', action='store_true',
                     help='print JSON instead of a table')
    return parser


def uneven_flavors(conf, family=None):
    """``[{family, flavor, base, pool, vcpus, ram, extra_specs}]``.

    :raises planning.RequestError: an unknown family
    """
    from nova_sched_ext.broker import planning
    if family is not None and family not in conf.families:
        raise planning.RequestError('unknown flavor family %r; known: %s'
                                    % (family, ', '.join(sorted(
                                        conf.families))))
    return [{'family': f.name, 'flavor': v.flavor, 'base': v.base,
             'pool': v.pool, 'vcpus': v.vcpus, 'ram': v.memory_mb,
             'extra_specs': v.flavor_specs()}
            for f in conf.families.values()
            if family is None or f.name == family
            for v in f.variants if v.numa == 'uneven']


def render_flavors(flavors):
    if not flavors:
        return 'No flavor family declares uneven splits.'
    rows = []
    for f in flavors:
        specs = sorted(f['extra_specs'].items())
        rows.append((f['family'], f['flavor'], f['base'], f['vcpus'],
                     f['ram'], '%s=%s' % specs[0]))
        rows += [('', '', '', '', '', '%s=%s' % item) for item in specs[1:]]
    return _table(
        ['Family', 'Flavor', 'Like', 'vCPUs', 'RAM MiB', 'Extra specs'],
        rows)


def _table(headers, rows):
    return table.render(rows, headers, empty='-')


def render_plan(the_plan):
    request = the_plan.request
    lines = ['%d x %s for role %s: variants %s' % (
        request.count, request.family, request.role,
        ', '.join(v.flavor for v in the_plan.variants))]
    if the_plan.candidates:
        lines += ['', 'Candidates, in boot order:', _table(
            ['#', 'Cluster', 'Flavor', 'Pool', 'NUMA', 'Capacity'],
            [(i + 1, c.cluster, c.variant.flavor, c.variant.pool,
              c.variant.numa, 'unknown' if c.capacity is None
              else c.capacity)
             for i, c in enumerate(the_plan.candidates)])]
    if the_plan.verdicts:
        lines += ['', 'Clusters and variants:', _table(
            ['Cluster', 'Flavor', 'Kept', 'Capacity', 'Why'],
            [(v.cluster, v.variant.flavor if v.variant else '(cluster)',
              'yes' if v.kept else 'no', v.capacity, v.reason)
             for v in the_plan.verdicts])]
    for warning in the_plan.warnings:
        lines.append('warning: %s' % warning)
    if the_plan.refusal:
        lines += ['', 'Refused: %s' % the_plan.refusal]
    return '\n'.join(lines)


def render_result(result):
    lines = []
    if result.placed:
        lines.append('Placed %d x %s in cluster %s: %s' % (
            len(result.servers), result.variant.flavor, result.cluster,
            ', '.join(result.servers)))
    else:
        lines.append('Not placed: %s' % result.error)
    if result.attempts:
        lines += ['', 'Attempts:', _table(
            ['#', 'Cluster', 'Flavor', 'Outcome', 'Why'],
            [(i + 1, a.cluster, a.flavor, a.outcome, a.reason)
             for i, a in enumerate(result.attempts)])]
    return '\n'.join(lines)


def _request(args):
    from nova_sched_ext.broker import planning
    return planning.Request(
        family=args.family, image=args.image, network=args.network,
        count=args.count, role=args.role, datacenter=args.datacenter,
        zone=args.zone, clusters=tuple(args.clusters),
        deployment_set=args.deployment_set, name=args.name)


def run(args, broker_factory=None, stdout=None):
    """Run a parsed command; its exit status."""
    from nova_sched_ext.broker import config as broker_config
    from nova_sched_ext.broker import service
    stdout = stdout or sys.stdout
    path = args.config or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG
    conf = broker_config.load(path)
    if args.command == 'flavors':
        flavors = uneven_flavors(conf, args.family)
        stdout.write((json.dumps(flavors, indent=2) if args.json
                      else render_flavors(flavors)) + '\n')
        return 0
    broker = (broker_factory or service.Broker)(conf)
    request = _request(args)
    if args.command == 'plan':
        the_plan = broker.plan(request)
        stdout.write((json.dumps(the_plan.to_dict(), indent=2)
                      if args.json else render_plan(the_plan)) + '\n')
        return 1 if the_plan.refusal else 0
    result = broker.place(request)
    stdout.write((json.dumps(result.to_dict(), indent=2)
                  if args.json else render_result(result)) + '\n')
    return 0 if result.placed else 1


def main(argv=None, broker_factory=None):
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None
                                         else argv)
    except cli.UsageError as exc:
        return cli.report(PROG, exc, label=LABEL)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format='%(levelname)s %(name)s: %(message)s', stream=sys.stderr)
    # A cluster that fails is one WARNING of the broker's, keystoneauth's
    # reason in it; keystoneauth's own warnings about the same failure (a
    # version discovery that timed out) would say it twice.
    logging.getLogger('keystoneauth').setLevel(
        logging.NOTSET if args.debug else logging.ERROR)
    return cli.run(PROG, lambda: run(args, broker_factory=broker_factory),
                   label=LABEL)


if __name__ == '__main__':
    sys.exit(main())
