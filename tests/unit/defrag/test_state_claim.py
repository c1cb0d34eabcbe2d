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

"""The planner's target check is the claim's, not only Nova's fit (issue 31).

On the issue's split host with three instances of its mixed flavor, Nova's
fit places a fourth with a cell carrying the pinning of another host cell,
and the claim's ``numa_usage_from_instance_numa`` refuses it: a move there
would fail at the target's claim, so the host is no target.
"""

import types

from nova.virt import hardware

from nova_sched_ext.defrag import state as planning_state
from tests import base
from tests.unit.fit import oracle
from tests.unit.fit import strategies


class TestNovaFitIsTheClaim(base.TestCase):

    def _state(self, topology, requested):
        state = planning_state.PlanningState.__new__(
            planning_state.PlanningState)
        host = types.SimpleNamespace(cpu_allocation_ratio=2.0,
                                     ram_allocation_ratio=1.0)
        state.cloud = types.SimpleNamespace(instances={
            'vm': types.SimpleNamespace(requested_topology=requested)})
        state.views = {'h': types.SimpleNamespace(topology=topology,
                                                  host=host)}
        return state

    def test_a_fit_the_claim_refuses_is_no_target(self):
        _specs, requested = strategies.mixed_flavor_with_mask()
        topology = strategies.split_host_with_four_cells()
        booking = oracle.book(topology, requested, (2.0, 1.0), 3)
        self.assertEqual(3, booking.count)
        for _ in range(3):
            fits, fitted = self._state(topology, requested).nova_fit(
                'vm', 'h')
            self.assertTrue(fits)
            topology = hardware.numa_usage_from_instance_numa(topology,
                                                              fitted)
        # Nova's fit alone finds cells for a fourth
        self.assertIsNotNone(hardware.numa_fit_instance_to_host(
            topology, requested.obj_clone(), None,
            limits=planning_state.limits_of(
                types.SimpleNamespace(cpu_allocation_ratio=2.0,
                                      ram_allocation_ratio=1.0))))
        self.assertEqual((False, None),
                         self._state(topology, requested).nova_fit('vm', 'h'))
