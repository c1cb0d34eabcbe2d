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

"""Where the driver finds preemptible instances (the cells mocked)."""

from unittest import mock

import fixtures
from nova.compute import task_states
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import extra_specs

PRE = {extra_specs.PREEMPTIBLE_KEY: 'true'}


def flavor(id_, specs):
    return objects.Flavor(id=id_, flavorid=str(id_), extra_specs=specs)


def instance(uuid, host='h1', specs=PRE, task_state=None):
    return objects.Instance(uuid=uuid, host=host, task_state=task_state,
                            flavor=flavor(1, dict(specs)))


class TestCensus(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext('u', 'p')
        self.flavors = [flavor(1, PRE), flavor(2, {}),
                        flavor(3, {extra_specs.PREEMPTIBLE_KEY: 'false'})]
        self.useFixture(fixtures.MockPatchObject(
            objects.FlavorList, 'get_all',
            side_effect=lambda ctx: self.flavors))
        self.cells = {uuids.cell1: [], uuids.cell2: []}

        def scatter(context, fn):
            return {cell: result for cell, result in self.cells.items()}
        self.scatter = self.useFixture(fixtures.MockPatchObject(
            nova_context, 'scatter_gather_skip_cell0',
            side_effect=scatter)).mock

    def test_only_flavors_preemptible_now_are_asked_for(self):
        self.assertEqual([1], census.preemptible_flavor_ids(self.context))

    def test_the_embedded_flavor_decides(self):
        self.cells[uuids.cell1] = [
            instance(uuids.a), instance(uuids.resized, specs={})]
        self.cells[uuids.cell2] = [instance(uuids.b, host='h2'),
                                   instance(uuids.offloaded, host=None)]
        found = census.preemptible_instances(self.context)
        self.assertEqual({uuids.a, uuids.b}, {i.uuid for i in found})

    def test_the_query_uses_the_flavor_ids_and_hosts(self):
        with mock.patch.object(objects.InstanceList,
                               'get_by_filters') as query:
            self.scatter.side_effect = lambda ctx, fn: {
                uuids.cell1: fn(ctx)}
            census.preemptible_instances(self.context, hosts={'h2', 'h1'})
        query.assert_called_once_with(
            self.context, {'deleted': False, 'instance_type_id': [1],
                           'host': ['h1', 'h2']},
            expected_attrs=['flavor', 'numa_topology', 'pci_requests'])

    def test_no_preemptible_flavor_means_no_query(self):
        self.flavors = [flavor(2, {})]
        self.assertEqual([], census.preemptible_instances(self.context))
        self.scatter.assert_not_called()

    def test_a_cell_that_does_not_answer_is_an_error(self):
        self.cells[uuids.cell2] = nova_context.did_not_respond_sentinel
        self.assertRaises(census.CellUnavailable,
                          census.preemptible_instances, self.context)

    def test_instances_being_deleted_or_offloaded_are_going(self):
        self.assertTrue(census.is_going(instance(
            uuids.a, task_state=task_states.DELETING)))
        self.assertTrue(census.is_going(instance(
            uuids.a, task_state=task_states.SHELVING_OFFLOADING)))
        self.assertFalse(census.is_going(instance(uuids.a)))

    def test_zones_from_aggregates_else_the_default(self):
        self.flags(default_availability_zone='dflt')
        with mock.patch.object(
                objects.AggregateList, 'get_by_metadata_key',
                return_value=[mock.Mock(metadata={'availability_zone': 'z'},
                                        hosts=['h1'])]):
            zones = census.host_availability_zones(self.context)
        self.assertEqual('z', census.zone_of(zones, 'h1'))
        self.assertEqual('dflt', census.zone_of(zones, 'h2'))


class TestNeedsNewRoom(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext('u', 'p')
        self.spec_obj = objects.RequestSpec(scheduler_hints={})
        self.mapping = self.useFixture(fixtures.MockPatchObject(
            objects.InstanceMapping, 'get_by_instance_uuid')).mock
        self.useFixture(fixtures.MockPatchObject(
            nova_context, 'target_cell')).mock.return_value.__enter__ = \
            mock.Mock(return_value=self.context)
        self.get = self.useFixture(fixtures.MockPatchObject(
            objects.Instance, 'get_by_uuid')).mock

    def needs(self):
        return census.needs_new_room(self.context, self.spec_obj,
                                     [uuids.i1])

    def test_a_boot_needs_room(self):
        self.mapping.return_value = mock.Mock(cell_mapping=None)
        self.assertTrue(self.needs())

    def test_an_unshelve_needs_room_a_move_does_not(self):
        self.mapping.return_value = mock.Mock(cell_mapping=mock.Mock())
        self.get.return_value = mock.Mock(host=None)
        self.assertTrue(self.needs())
        self.get.return_value = mock.Mock(host='h1')
        self.assertFalse(self.needs())

    def test_a_rebuild_does_not(self):
        self.spec_obj.scheduler_hints = {'_nova_check_type': ['rebuild']}
        self.assertFalse(self.needs())
        self.mapping.assert_not_called()

    def test_unknown_instances_do_not(self):
        self.mapping.side_effect = exception.InstanceMappingNotFound(
            uuid=uuids.i1)
        self.assertFalse(self.needs())
        self.assertFalse(census.needs_new_room(self.context, self.spec_obj,
                                               []))


class TestDeletedInstances(test.TestCase):
    """Which pending placements the cells show deleted (real cell DBs)."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.cell = self.cell_mappings[test.CELL1_NAME]

    def create(self, uuid):
        with nova_context.target_cell(self.context, self.cell) as cctxt:
            instance = objects.Instance(context=cctxt, uuid=uuid,
                                        project_id='p', user_id='u')
            instance.create()
        return instance

    def test_only_deleted_instances_are_returned(self):
        gone = self.create(uuids.gone)
        self.create(uuids.alive)
        with nova_context.target_cell(self.context, self.cell) as cctxt:
            gone._context = cctxt
            gone.destroy()
        self.assertEqual({uuids.gone}, census.deleted_instance_uuids(
            self.context, [uuids.gone, uuids.alive, uuids.not_yet_created]))

    def test_nothing_pending_asks_no_cell(self):
        with mock.patch.object(nova_context,
                               'scatter_gather_skip_cell0') as scatter:
            self.assertEqual(set(), census.deleted_instance_uuids(
                self.context, []))
        scatter.assert_not_called()

    def test_a_cell_that_does_not_answer_is_an_error(self):
        no_answer = {uuids.cell1: nova_context.did_not_respond_sentinel}
        with mock.patch.object(nova_context, 'scatter_gather_skip_cell0',
                               return_value=no_answer):
            self.assertRaises(census.CellUnavailable,
                              census.deleted_instance_uuids, self.context,
                              [uuids.x])
