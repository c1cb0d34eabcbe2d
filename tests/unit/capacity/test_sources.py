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


"""Reading the cloud: cells, services, compute nodes, aggregates, flavors."""

import copy
import subprocess
import sys
import textwrap
from unittest import mock

from nova import context as nova_context
from nova import exception as nova_exc
from nova import objects
from nova import test
from nova.tests.unit.scheduler import fakes
from oslo_db import exception as db_exc
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.capacity import errors
from nova_sched_ext.capacity import sources

CELL0 = objects.CellMapping(uuid=objects.CellMapping.CELL0_UUID,
                            name='cell0', disabled=False)
CELL1 = objects.CellMapping(uuid=uuids.cell1, name='cell1', disabled=False)
CELL2 = objects.CellMapping(uuid=uuids.cell2, name=None, disabled=False)
OFF = objects.CellMapping(uuid=uuids.off, name='off', disabled=True)


def compute(index, **changes):
    node = copy.deepcopy(fakes.COMPUTE_NODES[index])
    for name, value in changes.items():
        setattr(node, name, value)
    return node


def service(host, disabled=False, **fields):
    return objects.Service(host=host, disabled=disabled, binary='nova-compute',
                           **fields)


class TestReadCloud(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.cells = [CELL0, CELL1, CELL2, OFF]
        self.results = {}
        self.aggregates = []
        self.useFixture(test.fixtures.MockPatchObject(
            objects.CellMappingList, 'get_all',
            side_effect=lambda ctx: objects.CellMappingList(
                objects=list(self.cells))))
        self.useFixture(test.fixtures.MockPatchObject(
            objects.AggregateList, 'get_all',
            side_effect=lambda ctx: list(self.aggregates)))
        self.gather = self.useFixture(test.fixtures.MockPatchObject(
            nova_context, 'scatter_gather_cells',
            side_effect=lambda ctx, cells, timeout, fn: {
                c.uuid: self.results[c.uuid] for c in cells})).mock
        self.up = self.useFixture(test.fixtures.MockPatch(
            'nova.servicegroup.API.service_is_up',
            side_effect=lambda svc: svc.host != 'host-down')).mock
        self.context = nova_context.get_admin_context()

    def test_hosts_of_enabled_cells(self):
        self.aggregates = [
            objects.Aggregate(id=2, name='b', hosts=['host1'],
                              metadata={'availability_zone': 'az-b'}),
            objects.Aggregate(id=1, name='a', hosts=['host1', 'host3'],
                              metadata={'availability_zone': 'az-a'})]
        self.results = {
            CELL1.uuid: ([service('host1'), service('host2', True),
                          service('host-down')],
                         [compute(0), compute(1),
                          compute(2, host='host-down'),
                          compute(3, host='no-service')]),
            CELL2.uuid: ([service('host3')],
                         [compute(2, host='host3', free_disk_gb=None)]),
        }
        cloud = sources.read_cloud(self.context)
        (_ctx, cells, *_), _ = self.gather.call_args
        self.assertEqual([CELL1.uuid, CELL2.uuid], [c.uuid for c in cells])
        self.assertEqual([CELL1.uuid, CELL2.uuid],
                         [c.uuid for c in cloud.cells])
        by_host = {h.name: h for h in cloud.hosts}
        self.assertEqual({'host1': None, 'host2': 'service_disabled',
                          'host-down': 'service_down',
                          'no-service': 'no_service',
                          'host3': 'not_reporting'},
                         {n: h.skipped for n, h in by_host.items()})
        host1 = by_host['host1']
        # the AZ of the aggregate with the lowest id, as Nova's lookup
        self.assertEqual('az-a', host1.availability_zone)
        self.assertEqual(['b', 'a'], [a.name for a in host1.aggregates])
        self.assertEqual(host1.aggregates, host1.state.aggregates)
        self.assertEqual(uuids.cn1, host1.uuid)
        self.assertEqual(16.0, host1.state.cpu_allocation_ratio)
        self.assertEqual('cell1', host1.cell_name)
        self.assertEqual(uuids.cell2, by_host['host3'].cell_name)
        self.assertEqual('nova', by_host['host2'].availability_zone)

    def test_a_cell_that_does_not_answer(self):
        self.cells = [CELL1]
        self.results = {CELL1.uuid: nova_context.did_not_respond_sentinel}
        exc = self.assertRaises(errors.BackendUnavailable,
                                sources.read_cloud, self.context)
        self.assertIn('cell1', str(exc))
        self.results = {CELL1.uuid: db_exc.DBConnectionError('refused')}
        exc = self.assertRaises(errors.BackendUnavailable,
                                sources.read_cloud, self.context)
        self.assertIn('refused', str(exc))
        self.results = {CELL1.uuid: db_exc.CantStartEngineError('no url')}
        self.assertRaises(errors.ConfigError, sources.read_cloud,
                          self.context)

    def test_the_api_database_is_down(self):
        objects.CellMappingList.get_all.side_effect = (
            db_exc.DBConnectionError('(2003) Can\'t connect\nto MySQL'))
        exc = self.assertRaises(errors.BackendUnavailable,
                                sources.read_cloud, self.context)
        self.assertIn('API database', str(exc))
        self.assertNotIn('\n', str(exc))
        self.assertEqual(1, exc.exit_code)
        objects.CellMappingList.get_all.side_effect = (
            db_exc.CantStartEngineError('No sql_connection parameter'))
        exc = self.assertRaises(errors.ConfigError, sources.read_cloud,
                                self.context)
        self.assertEqual(2, exc.exit_code)


class TestReadFlavors(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.small = objects.Flavor(flavorid='1', name='small', vcpus=1,
                                    memory_mb=512)
        self.big = objects.Flavor(flavorid='2', name='big', vcpus=8,
                                  memory_mb=512)
        self.context = nova_context.get_admin_context()

    @mock.patch.object(objects.FlavorList, 'get_all')
    def test_all_public_enabled(self, get_all):
        get_all.return_value = [self.big, self.small]
        self.assertEqual([self.small, self.big],
                         sources.read_flavors(self.context))
        get_all.assert_called_once_with(
            self.context, inactive=False,
            filters={'is_public': True, 'disabled': False})

    @mock.patch.object(objects.Flavor, 'get_by_flavor_id')
    @mock.patch.object(objects.Flavor, 'get_by_name')
    def test_by_name_or_id(self, by_name, by_id):
        def name(ctx, value):
            if value == 'small':
                return self.small
            raise nova_exc.FlavorNotFoundByName(flavor_name=value)

        def flavor_id(ctx, value):
            if value == '2':
                return self.big
            raise nova_exc.FlavorNotFound(flavor_id=value)
        by_name.side_effect = name
        by_id.side_effect = flavor_id
        self.assertEqual([self.small, self.big], sources.read_flavors(
            self.context, ['small', '2', 'small']))
        exc = self.assertRaises(errors.UnknownFlavor, sources.read_flavors,
                                self.context, ['small', 'tiny'])
        self.assertIn("'tiny'", str(exc))
        self.assertEqual(2, exc.exit_code)

    @mock.patch.object(objects.FlavorList, 'get_all')
    def test_database_down(self, get_all):
        get_all.side_effect = db_exc.DBConnectionError('gone')
        self.assertRaises(errors.BackendUnavailable, sources.read_flavors,
                          self.context)


class TestCellMappingsWithoutRPC(test.NoDBTestCase):
    """The services parse nova.conf without RPC, which cell mappings need.

    Run in a fresh interpreter: in the test process every RPC option is
    registered by the test fixtures already.
    """

    CODE = textwrap.dedent('''
        from nova import config
        from nova import objects
        from nova.objects import cell_mapping
        config.parse_args(['capacity'], default_config_files=[],
                          init_rpc=False)
        objects.register_all()
        try:
            cell_mapping.CellMapping.format_mq_url('rabbit://u@mq/')
        except Exception as exc:
            print('before:', type(exc).__name__)
        from nova_sched_ext.capacity import sources
        sources.register_transport_options()
        print('after:', cell_mapping.CellMapping.format_mq_url(
            'rabbit://u@mq/'))
    ''')

    def test_a_cell_mapping_loads_without_rpc(self):
        out = subprocess.run([sys.executable, '-c', self.CODE],
                             capture_output=True, text=True, timeout=120,
                             check=True).stdout
        self.assertEqual('before: NoSuchOptError\nafter: rabbit://u@mq/\n',
                         out)
