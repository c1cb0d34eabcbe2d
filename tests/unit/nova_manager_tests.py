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

"""Nova's own SchedulerManager unit tests, for running on our managers."""

import fixtures
from nova.tests.unit.scheduler import test_manager as nova_test_manager


class NovaSchedulerManagerTests(nova_test_manager.SchedulerManagerTestCase):
    """Nova's SchedulerManagerTestCase, isolated from its other copies.

    Nova's manager warns once per process that a host mapping exists
    (module global ``HOST_MAPPING_EXISTS_WARNING``), and Nova's test of that
    warning expects to be the first to trigger it. Several copies of Nova's
    tests (one per manager of ours) share a test worker, so each test
    starts with the flag clear, as it would in Nova's own run.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.manager.HOST_MAPPING_EXISTS_WARNING', False))
