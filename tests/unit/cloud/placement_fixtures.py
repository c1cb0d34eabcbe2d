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

"""The in-process placement for the cloud reader's tests, and its names."""

import logging
import uuid as uuid_lib

import fixtures

from nova_sched_ext_tools import placement_direct

CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB', 'CUSTOM_NSE_GPU')
TRAITS = ('HW_CPU_X86_AVX', 'COMPUTE_STATUS_DISABLED', 'CUSTOM_NSE_A',
          'CUSTOM_NSE_B')
AGGREGATES = tuple(str(uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS, 'agg%d' % i))
                   for i in range(3))
RATIOS = (1.0, 0.57, 1.5, 4.0, 16.0)


class Quiet(fixtures.Fixture):
    """A logger at WARNING for one test."""

    def __init__(self, name):
        super().__init__()
        self.logger = logging.getLogger(name)

    def _setUp(self):
        self.addCleanup(self.logger.setLevel, self.logger.level)
        self.logger.setLevel(logging.WARNING)


class Running(fixtures.Fixture):
    """The in-process placement, for one test."""

    def _setUp(self):
        running = placement_direct.running()
        self.placement = running.__enter__()
        self.addCleanup(running.__exit__, None, None, None)


class InProcessPlacement(fixtures.Fixture):
    """The in-process placement, emptied and quiet: ``self.placement``.

    It knows :data:`CLASSES` and :data:`TRAITS`.
    """

    def _setUp(self):
        # Placement logs every request at DEBUG; the capture would spend
        # more than the requests.
        for name in ('placement', 'oslo_concurrency', 'oslo_policy'):
            self.useFixture(Quiet(name))
        self.placement = self.useFixture(Running()).placement
        self.placement.reset()
        # queries name them whether a provider has them or not
        self.placement.ensure(CLASSES, TRAITS)
