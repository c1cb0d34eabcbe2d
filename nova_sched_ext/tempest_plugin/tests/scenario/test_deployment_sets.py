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


"""Deployment sets: members spread across hosts, and a size cap.

The place for the deployment-set scenarios. They run when tempest.conf says
the cloud has deployment sets (``[nova_sched_ext] deployment_sets = True``,
written by the devstack plugin from NOVA_SCHED_EXT_TEMPEST_DEPLOYMENT_SETS)
and DeploymentSetFilter is in ``scheduler_enabled_filters``; until their
bodies are written they skip with that reason.
"""

from tempest import config
from tempest.lib import decorators

from nova_sched_ext.tempest_plugin.tests import base

CONF = config.CONF


class DeploymentSetTest(base.NUMASchedulingTest):
    """A deployment set's members never share a host; a full set refuses."""

    required_filters = ('DeploymentSetFilter',)

    @classmethod
    def skip_checks(cls):
        if not CONF.nova_sched_ext.deployment_sets:
            raise cls.skipException(
                'deployment sets are not enabled in this cloud '
                '([nova_sched_ext] deployment_sets = False)')
        super().skip_checks()

    def _not_written_yet(self):
        raise self.skipException('the deployment-set scenarios are not '
                                 'written yet')

    @decorators.idempotent_id('32574479-6382-4fa6-a7aa-c6183290d0ad')
    def test_members_spread_across_hosts(self):
        """Boot as many members as hosts: each lands on its own host."""
        self._not_written_yet()

    @decorators.idempotent_id('5e3cd92a-7d40-466f-bbb5-54d98f382f68')
    def test_member_beyond_the_cap_gets_no_valid_host(self):
        """A set capped at N takes N members; member N+1 gets NoValidHost."""
        self._not_written_yet()
