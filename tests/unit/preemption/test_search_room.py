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

"""Victim selection checks the room by placement's rule, units included."""

from nova_sched_ext.cloud import placement
from nova_sched_ext.preemption import victims
from tests import base


def _host(inventories=None):
    return victims.CandidateHost(
        host='h', nodename='h', rp_uuid='rp', free={'VCPU': 2},
        max_unit={'VCPU': 16}, inventories=inventories,
        victims=(victims.Victim(uuid='v', project_id='p', created_at=None,
                                resources={'VCPU': 4}),))


class TestHostLevelRoom(base.TestCase):

    def test_the_victims_room_counts(self):
        host = _host()
        self.assertFalse(victims.host_level_fits(host, {'VCPU': 6}))
        self.assertTrue(victims.host_level_fits(host, {'VCPU': 6},
                                                host.victims))

    def test_a_step_size_placement_refuses_is_no_fit(self):
        host = _host({'VCPU': placement.Inventory(total=16, max_unit=16,
                                                  step_size=4)})
        self.assertFalse(victims.host_level_fits(host, {'VCPU': 6},
                                                 host.victims))
        self.assertTrue(victims.host_level_fits(host, {'VCPU': 4},
                                                host.victims))

    def test_a_min_unit_placement_refuses_is_no_fit(self):
        host = _host({'VCPU': placement.Inventory(total=16, max_unit=16,
                                                  min_unit=8)})
        self.assertFalse(victims.host_level_fits(host, {'VCPU': 6},
                                                 host.victims))
