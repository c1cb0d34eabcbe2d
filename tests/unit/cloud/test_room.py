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

"""The free-room rule against placement's answers at the edges."""

from nova_sched_ext.cloud import placement
from nova_sched_ext.cloud import room
from tests import base
from tests.unit.cloud import room_cases


class TestRoomTable(base.TestCase):
    """Each row of the table, as placement answered it (functional test)."""

    def test_fits(self):
        for case in room_cases.CASES:
            inventory = placement.Inventory.from_json(case.inventory)
            self.assertEqual(case.fits,
                             room.fits(inventory, case.used, case.amount),
                             case.name)

    def test_fits_from_a_headroom(self):
        for case in room_cases.CASES:
            inventory = placement.Inventory.from_json(case.inventory)
            self.assertEqual(case.fits, room.fits_headroom(
                room.headroom(inventory, case.used), case.amount),
                case.name)

    def test_units(self):
        for case in room_cases.CASES:
            inventory = placement.Inventory.from_json(case.inventory)
            self.assertEqual(case.units,
                             room.units(inventory, case.used, case.amount),
                             case.name)

    def test_why_not_is_none_exactly_where_it_fits(self):
        for case in room_cases.CASES:
            inventory = placement.Inventory.from_json(case.inventory)
            reason = room.why_not(inventory, 'VCPU', case.used, case.amount)
            self.assertEqual(case.fits, reason is None, case.name)


class TestRoom(base.TestCase):

    def test_a_provider_s_headroom_is_its_own_and_made_once(self):
        inventories = {'VCPU': placement.Inventory(total=8,
                                                   allocation_ratio=2.0),
                       'MEMORY_MB': placement.Inventory(total=4096,
                                                        reserved=512)}
        provider = placement.Provider(
            uuid='rp', name='rp', parent_uuid=None, inventories=inventories,
            usages={'VCPU': 3}, traits=frozenset())
        headroom = provider.headroom()
        self.assertIs(headroom, provider.headroom())
        self.assertEqual({'VCPU': room.headroom(inventories['VCPU'], 3),
                          'MEMORY_MB': room.headroom(
                              inventories['MEMORY_MB'], 0)}, headroom)
        self.assertEqual((13, 16), (headroom['VCPU'].free,
                                    headroom['VCPU'].capacity))
        # a claim or a resync replaces the provider: its own headroom
        claimed = provider._replace(usages={'VCPU': 16})
        self.assertIsInstance(claimed, placement.Provider)
        self.assertEqual(0, claimed.headroom()['VCPU'].free)
        self.assertEqual(13, provider.headroom()['VCPU'].free)
        # still the tuple it was: equal to one that never computed it
        self.assertEqual(provider, placement.Provider(*provider))

    def test_capacity_is_an_integer_floor_of_placements_float(self):
        inv = placement.Inventory(total=100, allocation_ratio=0.57)
        self.assertEqual(56, room.capacity(inv))
        self.assertIsInstance(room.capacity(inv), int)
        self.assertEqual(10, room.capacity(
            placement.Inventory(total=7, allocation_ratio=1.5)))

    def test_free_is_never_below_zero_over_is(self):
        inv = placement.Inventory(total=8, reserved=2)
        self.assertEqual(0, room.free(inv, 7))
        self.assertEqual(-1, room.over(inv, 7))
        self.assertEqual(2, room.free(inv, 4))

    def test_nothing_asked_fits_and_counts_no_units(self):
        inv = placement.Inventory(total=8)
        self.assertTrue(room.fits(inv, 8, 0))
        self.assertEqual(0, room.units(inv, 0, 0))

    def test_reasons(self):
        inv = placement.Inventory(total=32, min_unit=2, max_unit=8,
                                  step_size=2)
        self.assertEqual('VCPU 16 is above its max_unit 8',
                         room.why_not(inv, 'VCPU', 0, 16))
        self.assertEqual('VCPU 1 is below its min_unit 2',
                         room.why_not(inv, 'VCPU', 0, 1))
        self.assertEqual('VCPU 3 is not a multiple of its step_size 2',
                         room.why_not(inv, 'VCPU', 0, 3))
        self.assertEqual('placement has 2 free of VCPU, not 4',
                         room.why_not(inv, 'VCPU', 30, 4))

    def test_the_inventory_model_uses_the_rule(self):
        inv = placement.Inventory(total=7, allocation_ratio=1.5)
        self.assertEqual(room.capacity(inv), inv.capacity)
