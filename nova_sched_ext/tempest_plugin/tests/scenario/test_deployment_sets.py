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


"""Deployment sets in a real cloud: spread, failure domains and the cap.

A deployment set is a server group (policy anti-affinity) whose members are
booted with the scheduler hint ``deployment_set_strategy``; the filter is
DeploymentSetFilter (see the package documentation). Each scenario puts
empty hosts into an availability zone of its own and boots small members
into it.

They run when DeploymentSetFilter is in ``scheduler_enabled_filters`` and
``[nova_sched_ext] deployment_sets`` is True (the devstack plugin sets it
when it enables the filter).
"""

from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators

from nova_sched_ext.tempest_plugin.tests import base

CONF = config.CONF


class DeploymentSetTest(base.NUMASchedulingTest):
    """A deployment set's members never share a host or failure domain."""

    required_filters = ('DeploymentSetFilter',)

    @classmethod
    def skip_checks(cls):
        if not CONF.nova_sched_ext.deployment_sets:
            raise cls.skipException(
                'deployment sets are not enabled in this cloud '
                '([nova_sched_ext] deployment_sets = False)')
        super().skip_checks()

    def setUp(self):
        super().setUp()
        self.flavor = self.create_flavor(ram=256, vcpus=1, disk=1)

    def _create_set(self):
        group = self.server_groups_client.create_server_group(
            name=data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                      name='nse-deployment-set'),
            policies=['anti-affinity'])['server_group']
        # Deleted after its members: cleanups run last-in first-out.
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.server_groups_client.delete_server_group,
                        group['id'])
        return group

    def _member(self, group, zone, wait_until='ACTIVE', **hints):
        hints = dict({'group': group['id']}, **{
            'deployment_set_%s' % name: str(value)
            for name, value in hints.items()})
        return self.boot(self.flavor, zone, wait_until=wait_until,
                         hints=hints)

    def _hosts(self, at_least):
        return sorted(self.empty_described_hosts(at_least=at_least))

    @decorators.idempotent_id('32574479-6382-4fa6-a7aa-c6183290d0ad')
    def test_members_spread_across_hosts(self):
        """As many members as hosts, each on its own; one more refused."""
        hosts = self._hosts(at_least=2)
        zone = self.create_zone(hosts)
        group = self._create_set()

        members = [self._member(group, zone, strategy='host')
                   for _ in hosts]

        self.assertCountEqual(hosts, [self.host_of(m) for m in members])
        extra = self._member(group, zone, wait_until='ERROR')
        self.assert_no_valid_host(extra)

    @decorators.idempotent_id('5e3cd92a-7d40-466f-bbb5-54d98f382f68')
    def test_member_beyond_the_cap_gets_no_valid_host(self):
        """A set capped at 2 refuses a third member despite a free host."""
        hosts = self._hosts(at_least=3)
        zone = self.create_zone(hosts)
        group = self._create_set()

        first = self._member(group, zone, strategy='host', max_size=2)
        second = self._member(group, zone)
        third = self._member(group, zone, wait_until='ERROR')

        self.assertNotEqual(self.host_of(first), self.host_of(second))
        self.assert_no_valid_host(third)

    @decorators.idempotent_id('382dbc7f-784c-4b5f-9fdf-9c901f527156')
    def test_members_spread_across_failure_domains(self):
        """Two hosts share a rack: two racks take only two members."""
        hosts = self._hosts(at_least=3)[:3]
        zone = self.create_zone(hosts)
        key = CONF.nova_sched_ext.deployment_set_domain_key
        rack = data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                    name='rack')
        self.create_aggregate(hosts[:2], metadata={key: rack})
        group = self._create_set()

        first = self._member(group, zone, strategy='domain')
        second = self._member(group, zone)
        third = self._member(group, zone, wait_until='ERROR')

        landed = {self.host_of(first), self.host_of(second)}
        self.assertIn(hosts[2], landed)
        self.assertEqual(1, len(landed & set(hosts[:2])))
        self.assert_no_valid_host(third)
