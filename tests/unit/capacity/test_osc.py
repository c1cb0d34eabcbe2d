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

"""The OpenStackClient plugin: its client over HTTP, and the command."""

import argparse
import io
from unittest import mock
import urllib.parse

import fixtures
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import plugin as ks_plugin
from keystoneauth1 import session as ks_session
from osc_lib import exceptions
from requests_mock.contrib import fixture as requests_fixture

from nova_sched_ext.capacity import osc
from tests import base
from tests.unit.capacity import api_fakes

ENDPOINT = 'https://cloud.example/numa-capacity'


class FakeInstance:
    """What OpenStackClient's ClientManager gives make_client."""

    def __init__(self, endpoint=ENDPOINT, session=None):
        self._api_version = {osc.API_NAME: '1'}
        self.session = session or ks_session.Session()
        self.region_name = 'RegionOne'
        self.interface = 'public'
        self._endpoint = endpoint
        self.endpoint_queries = []

    def get_endpoint_for_service_type(self, service_type, region_name=None,
                                      interface='public'):
        self.endpoint_queries.append((service_type, region_name, interface))
        if self._endpoint is None:
            raise ks_exc.EndpointNotFound()
        return self._endpoint


class TestPluginModule(base.TestCase):

    def test_what_openstackclient_looks_for(self):
        self.assertEqual('numa_capacity', osc.API_NAME)
        self.assertEqual('os_numa_capacity_api_version',
                         osc.API_VERSION_OPTION)
        self.assertEqual({'1': 'nova_sched_ext.capacity.osc.CapacityClient'},
                         osc.API_VERSIONS)

    def test_option_parser(self):
        parser = osc.build_option_parser(argparse.ArgumentParser())
        self.assertEqual('1',
                         parser.parse_args([]).os_numa_capacity_api_version)
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_NUMA_CAPACITY_API_VERSION', '1.0'))
        parser = osc.build_option_parser(argparse.ArgumentParser())
        self.assertEqual('1.0',
                         parser.parse_args([]).os_numa_capacity_api_version)

    def test_make_client_uses_the_catalog_entry(self):
        instance = FakeInstance()
        client = osc.make_client(instance)
        self.assertIsInstance(client, osc.CapacityClient)
        self.assertEqual([('numa-capacity', 'RegionOne', 'public')],
                         instance.endpoint_queries)


class TestClient(base.TestCase):

    def setUp(self):
        super().setUp()
        self.http = self.useFixture(requests_fixture.Fixture())
        self.client = osc.make_client(FakeInstance())

    def query(self):
        return urllib.parse.parse_qsl(
            urllib.parse.urlsplit(self.http.last_request.url).query)

    def test_get_capacity(self):
        self.http.get(ENDPOINT + '/v1/capacity',
                      json=api_fakes.report('az'))
        report = self.client.get_capacity(
            flavors=['m1.small', 'M1.Large'], by='az', az='nova',
            aggregate='ssd', per_host=True, fresh=True)
        self.assertEqual(api_fakes.report('az'), report)
        self.assertEqual([('flavor', 'm1.small'), ('flavor', 'M1.Large'),
                          ('by', 'az'), ('az', 'nova'),
                          ('aggregate', 'ssd'), ('per_host', 'true'),
                          ('fresh', 'true')], self.query())

    def test_defaults_send_no_parameters(self):
        self.http.get(ENDPOINT + '/v1/capacity',
                      json=api_fakes.report('cloud'))
        self.client.get_capacity()
        self.assertEqual([], self.query())

    def test_an_api_error_is_a_command_error_with_its_detail(self):
        self.http.get(ENDPOINT + '/v1/capacity', status_code=400, json={
            'errors': [{'status': 400, 'title': 'Bad Request',
                        'detail': "Unknown flavor 'm9.huge'"}]})
        error = self.assertRaises(exceptions.CommandError,
                                  self.client.get_capacity,
                                  flavors=['m9.huge'])
        self.assertEqual("The capacity API refused the request (HTTP 400): "
                         "Unknown flavor 'm9.huge'", str(error))

    def test_an_error_without_json(self):
        self.http.get(ENDPOINT + '/v1/capacity', status_code=502,
                      text='<html>Bad Gateway</html>', reason='Bad Gateway')
        error = self.assertRaises(exceptions.CommandError,
                                  self.client.get_capacity)
        self.assertIn('(HTTP 502): Bad Gateway', str(error))

    def test_no_catalog_entry(self):
        auth = mock.Mock(spec=ks_plugin.BaseAuthPlugin)
        auth.get_endpoint.return_value = None
        auth.get_headers.return_value = {}
        instance = FakeInstance(endpoint=None,
                                session=ks_session.Session(auth=auth))
        client = osc.make_client(instance)
        error = self.assertRaises(exceptions.CommandError,
                                  client.get_capacity)
        self.assertIn('No numa-capacity endpoint in the service catalog',
                      str(error))


class TestListCapacity(base.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.capacity.osc'))
        self.client = mock.Mock(spec=osc.CapacityClient)
        self.client.get_capacity.return_value = api_fakes.report('az')
        app = mock.Mock(stdout=io.StringIO(), stderr=io.StringIO())
        app.client_manager.numa_capacity = self.client
        self.command = osc.ListCapacity(app, None)

    def run_command(self, *args):
        parser = self.command.get_parser('openstack capacity list')
        return self.command.take_action(parser.parse_args(list(args)))

    def test_one_row_per_scope_one_column_per_flavor(self):
        columns, rows = self.run_command('--flavor', 'm1.small', '--flavor',
                                         'm1.large', '--by', 'az')
        self.client.get_capacity.assert_called_once_with(
            flavors=['m1.small', 'm1.large'], by='az', az=None,
            aggregate=None, per_host=False, fresh=False)
        self.assertEqual(['Scope', 'Name', 'm1.small', 'm1.large'], columns)
        self.assertEqual([('az', 'nova', 40, 6), ('az', 'zone2', 4, 0)],
                         list(rows))

    def test_long(self):
        columns, rows = self.run_command('--long', '--az', 'nova',
                                         '--aggregate', 'ssd', '--per-host',
                                         '--fresh')
        self.client.get_capacity.assert_called_once_with(
            flavors=[], by=None, az='nova', aggregate='ssd', per_host=True,
            fresh=True)
        self.assertEqual(
            ['Scope', 'Name', 'm1.small', 'm1.large',
             'm1.small (placement only)', 'm1.large (placement only)',
             'Hosts', 'Largest flavor', 'Fragmented vCPUs',
             'Fragmented memory (MiB)'], columns)
        self.assertEqual(('az', 'nova', 40, 6, 48, 9, 3, 'm1.large', 3,
                          1024), rows[0])

    def test_skipped_hosts_are_a_warning(self):
        self.run_command()
        self.assertIn('1 compute host(s) not counted: no_numa_topology 1',
                      self.log.output)

    def test_by_is_checked_by_the_parser(self):
        parser = self.command.get_parser('openstack capacity list')
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        self.assertRaises(SystemExit, parser.parse_args, ['--by', 'rack'])

    def test_a_missing_figure_is_blank(self):
        report = api_fakes.report('az')
        del report['scopes'][1]['capacity']['m1.large']
        columns, rows = osc.ListCapacity.table(report)
        self.assertEqual(('az', 'zone2', 4, ''), rows[1])
