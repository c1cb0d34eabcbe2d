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

"""The free-room rule against placement itself, at the edges.

Each row of ``tests/unit/cloud/room_cases.py`` gets a provider of its own
in placement's fixture, with the row's inventory and usage; then
placement is asked (``GET /allocation_candidates`` for the amount: is the
provider a candidate?) and tried (``PUT /allocations`` of the amount, one
consumer after another, until placement refuses one: how many did it
take?).  Both answers must be the row's, and the rule's
(:mod:`nova_sched_ext.cloud.room`).
"""

from nova import test
from nova.tests.functional import fixtures as func_fixtures
from oslo_utils import uuidutils

from nova_sched_ext.cloud import placement
from nova_sched_ext.cloud import room
from tests.unit.cloud import room_cases

#: consumer generations (1.28) and provider creation answering a body
#: (1.20) are both in this version
VERSION = '1.36'
RC = 'VCPU'


class RoomAgainstPlacementTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(func_fixtures.PlacementFixture())
        self.api = self.placement.api

    def _provider(self, name, inventory):
        body = self.api.post('/resource_providers', {'name': name},
                             version=VERSION).body
        uuid = body['uuid']
        self.api.put('/resource_providers/%s/inventories' % uuid, {
            'resource_provider_generation': body['generation'],
            'inventories': {RC: inventory}}, version=VERSION)
        return uuid

    def _allocate(self, uuid, amount):
        """Whether placement accepted a new consumer of ``amount``."""
        response = self.api.put(
            '/allocations/%s' % uuidutils.generate_uuid(), {
                'allocations': {uuid: {'resources': {RC: amount}}},
                'project_id': uuidutils.generate_uuid(),
                'user_id': uuidutils.generate_uuid(),
                'consumer_generation': None}, version=VERSION)
        return response.status == 204

    def _use(self, uuid, inventory, used):
        """Allocate ``used``, in pieces the inventory's units allow."""
        step = inventory['step_size']
        piece = inventory['max_unit'] // step * step
        while used > 0:
            amount = min(piece, used)
            self.assertTrue(self._allocate(uuid, amount))
            used -= amount

    def _is_candidate(self, uuid, amount):
        body = self.api.get('/allocation_candidates?resources=%s:%d'
                            % (RC, amount), version=VERSION).body
        return uuid in body['provider_summaries']

    def _taken(self, uuid, amount, most):
        """How many allocations of ``amount`` placement takes, up to most."""
        taken = 0
        while taken < most and self._allocate(uuid, amount):
            taken += 1
        return taken

    def test_each_row_is_placements_answer_and_the_rules(self):
        for case in room_cases.CASES:
            uuid = self._provider(case.name, case.inventory)
            self._use(uuid, case.inventory, case.used)
            inventory = placement.Inventory.from_json(case.inventory)
            self.assertEqual(case.fits, self._is_candidate(uuid, case.amount),
                             case.name)
            self.assertEqual(room.fits(inventory, case.used, case.amount),
                             case.fits, case.name)
            # One more try than the rule allows: placement must refuse it.
            self.assertEqual(case.units, self._taken(uuid, case.amount,
                                                     case.units + 1),
                             case.name)
            self.assertEqual(room.units(inventory, case.used, case.amount),
                             case.units, case.name)
