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


"""The capacity API in a real cloud: a boot takes exactly one instance.

Run when tempest.conf says the capacity API runs (``[nova_sched_ext]
capacity_api = True``, written by the devstack plugin when
``nse-capacity-api`` is enabled). The API is found in the catalog under its
service type, ``numa-capacity``, and read with ``fresh=true`` so that its
report cache does not hide the boot.

``openstack capacity list``, the package's OpenStackClient plugin over the
same API, is run from ``[nova_sched_ext] cli_dir``; its scenario is skipped
when that directory has no ``openstack``.
"""

import json
import os
import urllib.parse

from tempest import config
from tempest.lib.cli import base as cli_base
from tempest.lib.common import rest_client
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from nova_sched_ext.tempest_plugin.tests import base

CONF = config.CONF
# nova_sched_ext.capacity.SERVICE_TYPE; not imported, because the
# capacity package imports Nova, whose options would clash with tempest's
# on the one global CONF.
SERVICE_TYPE = 'numa-capacity'


class CapacityClient(rest_client.RestClient):
    """GET /v1/capacity of the capacity API."""

    def capacity(self, **params):
        url = 'v1/capacity'
        if params:
            url += '?' + urllib.parse.urlencode(params, doseq=True)
        resp, body = self.get(url)
        self.expected_success(200, resp.status)
        return rest_client.ResponseBody(resp, json.loads(body))


class CapacityAPITest(base.NUMASchedulingTest):
    """What the capacity API counts follows what the cloud places."""

    @classmethod
    def skip_checks(cls):
        if not CONF.nova_sched_ext.capacity_api:
            raise cls.skipException(
                'the capacity API does not run in this cloud '
                '([nova_sched_ext] capacity_api = False)')
        super().skip_checks()

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        params = config.service_client_config()
        cls.capacity_client = CapacityClient(
            cls.os_admin.auth_provider, SERVICE_TYPE,
            CONF.identity.region, **params)
        cls.member_capacity_client = CapacityClient(
            cls.os_primary.auth_provider, SERVICE_TYPE,
            CONF.identity.region, **params)

    def zone_scope(self, flavor, zone):
        """The zone's scope of a fresh capacity report of the flavor."""
        report = self.capacity_client.capacity(
            flavor=flavor['name'], by='az', az=zone, fresh='true')
        scopes = [scope for scope in report['scopes']
                  if scope['scope'] == 'az' and scope['name'] == zone]
        self.assertEqual(1, len(scopes), 'zone %s in %s' % (zone, report))
        return scopes[0]

    def capacity_in_zone(self, flavor, zone):
        return self.zone_scope(flavor, zone)['capacity'][flavor['name']]

    def openstack_client(self):
        """tempest's CLI client with the admin credentials, or a skip."""
        cli_dir = CONF.nova_sched_ext.cli_dir
        command = os.path.join(cli_dir, 'openstack')
        if not os.access(command, os.X_OK):
            raise self.skipException(
                'no OpenStackClient at %s ([nova_sched_ext] cli_dir)'
                % command)
        creds = self.os_admin.credentials
        return cli_base.CLIClient(
            username=creds.username, password=creds.password,
            tenant_name=creds.project_name, uri=CONF.identity.uri_v3,
            cli_dir=cli_dir,
            insecure=CONF.identity.disable_ssl_certificate_validation,
            user_domain_name=creds.user_domain_name,
            project_domain_name=creds.project_domain_name,
            identity_api_version=3)

    @decorators.idempotent_id('46b13809-442f-4ff9-ad48-a0886cd22e03')
    def test_a_boot_takes_one_instance_of_its_flavor(self):
        hosts = self.empty_described_hosts()
        host = hosts[sorted(hosts)[0]]
        zone = self.create_zone([host.name])
        # One vCPU and a small share of one cell: the server takes exactly
        # one slot of its own flavor, whatever the layout.
        flavor = self.create_numa_flavor(vcpus=1, memory_mb=256,
                                         numa_nodes=1)

        before = self.capacity_in_zone(flavor, zone)
        if before < 2:
            raise self.skipException(
                'host %s fits %d instance(s) of 1 vCPU and 256 MiB; the '
                'scenario needs 2' % (host.name, before))
        server = self.boot(flavor, zone)
        self.assertEqual(host.name, self.host_of(server))

        self.assertEqual(before - 1, self.capacity_in_zone(flavor, zone))

    @decorators.idempotent_id('b61f724d-65d4-4efb-8377-eeef9ddd6a50')
    def test_openstack_capacity_list_prints_the_api_figures(self):
        client = self.openstack_client()
        hosts = self.empty_described_hosts()
        host = hosts[sorted(hosts)[0]]
        zone = self.create_zone([host.name])
        flavor = self.create_numa_flavor(vcpus=1, memory_mb=256,
                                         numa_nodes=1)
        name = flavor['name']
        scope = self.zone_scope(flavor, zone)
        self.assertGreater(scope['capacity'][name], 0, scope)

        output = client.openstack(
            'capacity list', flags='--os-region-name %s'
            % CONF.identity.region,
            params='--flavor %s --by az --az %s --fresh --long -f json'
            % (name, zone))
        self.assertEqual(
            [{'Scope': 'az', 'Name': zone, name: scope['capacity'][name],
              '%s (placement only)' % name: scope['placement_only'][name],
              'Hosts': scope['hosts'],
              'Largest flavor': scope['largest_flavor'],
              'Fragmented vCPUs': scope['fragmentation']['vcpus'],
              'Fragmented memory (MiB)':
                  scope['fragmentation']['memory_mb']}],
            json.loads(output))

    @decorators.idempotent_id('187ee6c3-fa92-4565-b30d-eada26218dc7')
    def test_an_unknown_flavor_is_a_bad_request(self):
        self.assertRaises(lib_exc.BadRequest, self.capacity_client.capacity,
                          flavor='nse-no-such-flavor')

    @decorators.idempotent_id('c4b2c3c3-10bd-4dba-9a94-cb97c3ea3864')
    def test_a_member_is_refused(self):
        # The default [nova_sched_ext_capacity] allowed_roles is admin.
        self.assertRaises(lib_exc.Forbidden,
                          self.member_capacity_client.capacity)
