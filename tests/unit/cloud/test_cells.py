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

"""One policy for a cell that does not answer, wherever the cells are read."""

from unittest import mock

from nova import context as nova_context
from nova import objects
from oslo_db import exception as db_exc
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.capacity import errors as capacity_errors
from nova_sched_ext.cloud import cells
from nova_sched_ext.cloud import errors
from nova_sched_ext.deployment_set import members
from nova_sched_ext.preemption import census
from tests import base

CELL1 = objects.CellMapping(uuid=uuids.cell1, name='cell1')
CELL2 = objects.CellMapping(uuid=uuids.cell2, name=None)


class TestOnePolicy(base.TestCase):

    def gather(self, answers):
        return mock.patch.object(
            nova_context, 'scatter_gather_cells',
            side_effect=lambda ctx, cells_, timeout, fn, *args: {
                c.uuid: answers[c.uuid] for c in cells_})

    def test_a_silent_cell(self):
        error = cells.failure(CELL1, nova_context.did_not_respond_sentinel)
        self.assertIsInstance(error, errors.CellUnavailable)
        self.assertEqual('the database of cell cell1 did not answer within '
                         '%d seconds' % nova_context.CELL_TIMEOUT, str(error))
        self.assertEqual((uuids.cell1, 1, True), (
            error.cell_uuid, error.exit_code, error.unavailable))

    def test_a_failing_cell_without_a_name_is_named_by_uuid(self):
        error = cells.failure(CELL2, db_exc.DBConnectionError(
            "(2003) Can't connect\nto server"))
        self.assertEqual("cannot read the database of cell %s: (2003) "
                         "Can't connect to server" % uuids.cell2, str(error))

    def test_a_cell_that_cannot_be_used_is_a_configuration_error(self):
        error = cells.failure(CELL1, db_exc.CantStartEngineError('bad url'))
        self.assertIsInstance(error, errors.CellUnavailable)
        self.assertIsInstance(error, errors.ConfigError)
        self.assertEqual((2, False), (error.exit_code, error.unavailable))
        self.assertIn('check its database_connection', str(error))

    def test_an_answer_is_no_failure(self):
        self.assertIsNone(cells.failure(CELL1, []))

    def test_answers_give_the_failure_and_in_cells_raises_it(self):
        answers = {CELL1.uuid: ['row'],
                   CELL2.uuid: nova_context.did_not_respond_sentinel}
        with self.gather(answers):
            found = cells.answers(None, [CELL1, CELL2], lambda c: None)
            self.assertEqual((CELL1, ['row']), found[0])
            self.assertIsInstance(found[1][1], errors.CellUnavailable)
            read = cells.in_cells(None, [CELL1, CELL2], lambda c: None)
            self.assertEqual((CELL1, ['row']), next(read))
            self.assertRaises(errors.CellUnavailable, next, read)

    def test_in_every_cell_raises_the_same_error(self):
        with mock.patch.object(
                nova_context, 'scatter_gather_skip_cell0',
                return_value={uuids.cell1: ValueError('boom')}):
            error = self.assertRaises(errors.CellUnavailable,
                                      cells.in_every_cell, None, len)
        self.assertEqual('cannot read the database of cell %s: boom'
                         % uuids.cell1, str(error))

    def test_the_old_names_are_the_one_error(self):
        # The features' names for it, kept for their except clauses.
        self.assertIs(errors.CellUnavailable, census.CellUnavailable)
        self.assertTrue(issubclass(errors.CellUnavailable,
                                   capacity_errors.BackendUnavailable))
        self.assertIs(capacity_errors.CapacityError, errors.CloudError)
        # A feature's reaction maps it: the members' source says what it
        # was reading, after the cloud's message.
        source = members.DatabaseMemberSource()
        mapping = mock.Mock(cell_mapping=CELL1, instance_uuid=uuids.m)
        with self.gather({CELL1.uuid: nova_context.did_not_respond_sentinel}):
            error = self.assertRaises(
                members.MembersUnavailable, source._instances, None,
                {uuids.m: mapping}, [uuids.m], None)
        self.assertEqual('the database of cell cell1 did not answer within '
                         '%d seconds (reading the members %s)'
                         % (nova_context.CELL_TIMEOUT, uuids.m), str(error))
