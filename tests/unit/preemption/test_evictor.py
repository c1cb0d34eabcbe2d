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

"""The evictor: openstacksdk calls, and the re-check before each eviction."""

from unittest import mock

from nova import test
from openstack import exceptions as sdk_exc
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.preemption import evictor as evictor_mod
from nova_sched_ext.preemption import extra_specs

PREEMPTIBLE = {extra_specs.PREEMPTIBLE_KEY: 'true'}


def server(status='ACTIVE', specs=PREEMPTIBLE, task_state=None):
    return mock.Mock(status=status, task_state=task_state,
                     flavor={'extra_specs': dict(specs)}
                     if specs is not None else {})


class TestEvictor(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.evictor = evictor_mod.Evictor()
        self.connection = mock.Mock()
        self.evictor._connection = self.connection
        self.compute = self.connection.compute

    def test_a_preemptible_server_is_deleted(self):
        self.compute.get_server.return_value = server()
        self.assertTrue(self.evictor.evict(uuids.v, 'delete'))
        self.compute.get_server.assert_called_once_with(uuids.v)
        self.compute.delete_server.assert_called_once_with(uuids.v)

    def test_a_server_not_preemptible_is_never_touched(self):
        for specs in ({}, {extra_specs.PREEMPTIBLE_KEY: 'false'},
                      {extra_specs.PREEMPTIBLE_KEY: 'maybe'}, None):
            self.compute.get_server.return_value = server(specs=specs)
            self.assertRaises(evictor_mod.NotPreemptible,
                              self.evictor.evict, uuids.v, 'delete')
        self.compute.delete_server.assert_not_called()
        self.compute.shelve_server.assert_not_called()

    def test_a_server_gone_already_is_not_an_error(self):
        self.compute.get_server.side_effect = \
            sdk_exc.NotFoundException('gone')
        self.assertFalse(self.evictor.evict(uuids.v, 'delete'))
        self.compute.delete_server.assert_not_called()
        self.assertIsNone(self.evictor.check_preemptible(uuids.v))

    def test_an_api_error_is_an_eviction_error(self):
        self.compute.get_server.return_value = server()
        self.compute.delete_server.side_effect = sdk_exc.HttpException(
            message='boom', http_status=500)
        exc = self.assertRaises(evictor_mod.EvictionError,
                                self.evictor.evict, uuids.v, 'delete')
        self.assertIn('delete of server %s failed' % uuids.v, str(exc))
        self.compute.get_server.side_effect = sdk_exc.HttpException(
            message='down', http_status=503)
        self.assertRaises(evictor_mod.EvictionError, self.evictor.get,
                          uuids.v)

    def test_shelve_offload_shelves_then_offloads(self):
        self.compute.get_server.return_value = server()
        self.evictor.evict(uuids.v, 'shelve_offload')
        self.compute.shelve_server.assert_called_once_with(uuids.v)
        # Nova stopped at SHELVED (shelved_offload_time != 0): offload.
        self.compute.get_server.return_value = server(status='SHELVED')
        self.assertFalse(self.evictor.is_gone(uuids.v, 'shelve_offload'))
        self.compute.shelve_offload_server.assert_called_once_with(uuids.v)
        self.compute.get_server.return_value = server(
            status='SHELVED_OFFLOADED')
        self.assertTrue(self.evictor.is_gone(uuids.v, 'shelve_offload'))

    def test_gone_means_not_found_for_delete(self):
        self.compute.get_server.return_value = server(task_state='deleting')
        self.assertFalse(self.evictor.is_gone(uuids.v, 'delete'))
        self.compute.get_server.side_effect = sdk_exc.NotFoundException()
        self.assertTrue(self.evictor.is_gone(uuids.v, 'delete'))

    def test_a_victim_in_error_fails_the_wait(self):
        self.compute.get_server.return_value = server(status='ERROR')
        self.assertRaises(evictor_mod.EvictionError, self.evictor.wait_gone,
                          [uuids.v], 'delete', 1, 0.01)

    def test_wait_returns_those_still_there_at_the_deadline(self):
        def get_server(uuid):
            if uuid == uuids.gone:
                raise sdk_exc.NotFoundException()
            return server(task_state='deleting')

        self.compute.get_server.side_effect = get_server
        self.assertEqual([uuids.slow], self.evictor.wait_gone(
            [uuids.gone, uuids.slow], 'delete', 0.05, 0.01))

    @mock.patch('openstack.connection.Connection')
    @mock.patch.object(evictor_mod, 'load_session')
    def test_the_connection_uses_the_evictor_section(self, load, connect):
        self.flags(region_name='r1', endpoint_override='http://nova:8774',
                   valid_interfaces=['internal'],
                   group='nova_sched_ext_evictor')
        evictor = evictor_mod.Evictor()
        self.assertIs(connect.return_value.compute, evictor.compute)
        self.assertIs(connect.return_value.compute, evictor.compute)
        connect.assert_called_once_with(
            session=load.return_value, compute_api_version='2',
            interface=['internal'], region_name='r1',
            compute_endpoint_override='http://nova:8774')
        load.assert_called_once_with()

    @mock.patch('keystoneauth1.loading.load_session_from_conf_options')
    @mock.patch('keystoneauth1.loading.load_auth_from_conf_options')
    def test_the_session_comes_from_keystoneauth_options(self, auth,
                                                         session):
        self.assertIs(session.return_value, evictor_mod.load_session())
        auth.assert_called_once_with(evictor_mod.CONF,
                                     'nova_sched_ext_evictor')
        session.assert_called_once_with(
            evictor_mod.CONF, 'nova_sched_ext_evictor',
            auth=auth.return_value)
