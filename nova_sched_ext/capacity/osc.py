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

"""OpenStackClient plugin: ``openstack capacity list``.

It reads the capacity API (catalog service type ``numa-capacity``) with
the session and credentials of the ``openstack`` command::

    $ openstack capacity list --flavor m1.large --flavor m1.xlarge --by az
    +-------+-------+----------+-----------+
    | Scope | Name  | m1.large | m1.xlarge |
    +-------+-------+----------+-----------+
    | az    | nova  |       37 |        12 |
    | az    | zone2 |        4 |         0 |
    +-------+-------+----------+-----------+

One row per scope and one column per flavor; ``--long`` adds what
placement alone would admit, the hosts counted, the largest flavor that
still fits and the fragmentation figures. An endpoint other than the
catalog's can be given as ``numa_capacity_endpoint_override`` in
``clouds.yaml``.
"""

import logging

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ks_exc
from osc_lib.command import command
from osc_lib import exceptions
from osc_lib import utils

from nova_sched_ext.conf import capacity as capacity_conf

LOG = logging.getLogger(__name__)

API_NAME = 'numa_capacity'
API_VERSION_OPTION = 'os_numa_capacity_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = {'1': 'nova_sched_ext.capacity.osc.CapacityClient'}
SERVICE_TYPE = capacity_conf.SERVICE_TYPE


class CapacityClient:
    """A client of version 1 of the capacity API.

    :param session: a keystoneauth session
    :param endpoint: the API's root URL; None looks the service type up
        in the catalog
    """

    def __init__(self, session, endpoint=None, interface=None,
                 region_name=None):
        self._adapter = adapter.Adapter(
            session, service_type=SERVICE_TYPE, interface=interface,
            region_name=region_name, endpoint_override=endpoint)

    def get_capacity(self, flavors=None, by=None, az=None, aggregate=None,
                     per_host=False, fresh=False):
        """The capacity report (a dict), as GET /v1/capacity returns it."""
        params = [('flavor', flavor) for flavor in flavors or ()]
        for name, value in (('by', by), ('az', az),
                            ('aggregate', aggregate)):
            if value:
                params.append((name, value))
        if per_host:
            params.append(('per_host', 'true'))
        if fresh:
            params.append(('fresh', 'true'))
        try:
            response = self._adapter.get(
                '/v1/capacity', params=params, raise_exc=False,
                headers={'Accept': 'application/json'})
        except ks_exc.EndpointNotFound:
            raise exceptions.CommandError(
                'No %s endpoint in the service catalog: the capacity API '
                'is not deployed in this region' % SERVICE_TYPE)
        if response.status_code >= 400:
            raise exceptions.CommandError(
                'The capacity API refused the request (HTTP %d): %s'
                % (response.status_code, _error_detail(response)))
        try:
            return response.json()
        except ValueError:
            raise exceptions.CommandError(
                'The capacity API answered with something other than '
                'JSON (HTTP %d)' % response.status_code)


def _error_detail(response):
    try:
        errors = response.json()['errors']
        return '; '.join(error.get('detail') or error.get('title', '')
                         for error in errors)
    except (ValueError, KeyError, TypeError, AttributeError):
        return response.reason or response.text.strip()[:200]


def make_client(instance):
    """The plugin's client, from OpenStackClient's ClientManager."""
    client_class = utils.get_client_class(
        API_NAME, instance._api_version[API_NAME], API_VERSIONS)
    # An override (numa_capacity_endpoint_override) or, without a catalog
    # (auth type none), the endpoint given to the auth plugin.
    try:
        endpoint = instance.get_endpoint_for_service_type(
            SERVICE_TYPE, region_name=instance.region_name,
            interface=instance.interface)
    except ks_exc.EndpointNotFound:
        # Reported when the client is used, with the reason.
        endpoint = None
    LOG.debug('Instantiating the capacity client %s for %s', client_class,
              endpoint)
    return client_class(session=instance.session, endpoint=endpoint,
                        interface=instance.interface,
                        region_name=instance.region_name)


def build_option_parser(parser):
    parser.add_argument(
        '--os-numa-capacity-api-version',
        metavar='<numa-capacity-api-version>',
        default=utils.env('OS_NUMA_CAPACITY_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='Capacity API version, default=%s '
             '(Env: OS_NUMA_CAPACITY_API_VERSION)' % DEFAULT_API_VERSION)
    return parser


class ListCapacity(command.Lister):
    """List how many more instances of each flavor fit, NUMA-exact.

    Counted per NUMA cell of every compute host, the way the scheduler
    fits an instance, and summed per scope (the cloud, each availability
    zone, aggregate or cell).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--flavor', metavar='<flavor>', action='append', default=[],
            dest='flavors',
            help='Flavor to count (repeat the option to count several); '
                 'default: every flavor')
        parser.add_argument(
            '--by', metavar='<scope>', choices=capacity_conf.SCOPES,
            help='Group the hosts by %s (default: cloud, one row for the '
                 'whole cloud)' % ', '.join(capacity_conf.SCOPES))
        parser.add_argument(
            '--az', metavar='<availability-zone>',
            help='Count only the hosts of this availability zone')
        parser.add_argument(
            '--aggregate', metavar='<aggregate>',
            help='Count only the hosts of this host aggregate')
        parser.add_argument(
            '--per-host', action='store_true',
            help='Add one row per compute host')
        parser.add_argument(
            '--fresh', action='store_true',
            help='Count now rather than take the figures the service '
                 'counted in the last refresh interval')
        parser.add_argument(
            '--long', action='store_true',
            help='Also list what placement alone would admit, the hosts '
                 'counted, the largest flavor that still fits and the '
                 'fragmentation')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.numa_capacity
        report = client.get_capacity(
            flavors=parsed_args.flavors, by=parsed_args.by,
            az=parsed_args.az, aggregate=parsed_args.aggregate,
            per_host=parsed_args.per_host, fresh=parsed_args.fresh)
        skipped = report.get('hosts_skipped') or {}
        if skipped:
            LOG.warning('%d compute host(s) not counted: %s',
                        sum(skipped.values()), ', '.join(
                            '%s %d' % (reason, count)
                            for reason, count in sorted(skipped.items())))
        return self.table(report, parsed_args.long)

    @staticmethod
    def table(report, long=False):
        """(columns, rows) of a capacity report."""
        flavors = [flavor['name'] for flavor in report.get('flavors', ())]
        columns = ['Scope', 'Name'] + flavors
        if long:
            columns += ['%s (placement only)' % name for name in flavors]
            columns += ['Hosts', 'Largest flavor', 'Fragmented vCPUs',
                        'Fragmented memory (MiB)']
        rows = []
        for scope in report.get('scopes', ()):
            capacity = scope.get('capacity') or {}
            row = [scope.get('scope'), scope.get('name')]
            row += [capacity.get(name, '') for name in flavors]
            if long:
                placement = scope.get('placement_only') or {}
                fragmentation = scope.get('fragmentation') or {}
                row += [placement.get(name, '') for name in flavors]
                row += [scope.get('hosts', ''),
                        scope.get('largest_flavor') or '',
                        fragmentation.get('vcpus', ''),
                        fragmentation.get('memory_mb', '')]
            rows.append(tuple(row))
        return columns, rows
