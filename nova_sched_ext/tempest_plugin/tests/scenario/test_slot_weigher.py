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


"""NUMASlotWeigher in a real cloud: small servers keep room for a large one.

Two empty hosts of the same layout go into an availability zone. The
scenario creates the reference flavor the weigher protects (its name is in
nova.conf's ``numa_slot_reference_flavors``): one vCPU per NUMA cell and all
the memory placement offers, so it needs a whole empty host. Then it boots
two small one-cell servers.

The first small server costs one large slot wherever it lands. The second
costs nothing more on the first server's host and one more slot on the other
host, so the weigher sends it to the first server's host, and the large
flavor still fits on the other. Nova's default weighers spread instead:
the second small server would take the empty host and the large flavor would
get NoValidHost.
"""

from tempest import config
from tempest.lib import decorators

from nova_sched_ext.tempest_plugin.tests import base

CONF = config.CONF

#: the longest wait for the weigher's reference-flavor cache we accept
MAX_REFRESH_WAIT = 60


class NUMASlotWeigherTest(base.NUMASchedulingTest):
    """The slot weigher packs small servers to keep a large slot free."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        options = CONF.nova_sched_ext
        if not options.slot_weigher:
            raise cls.skipException(
                'NUMASlotWeigher is not enabled ([nova_sched_ext] '
                'slot_weigher = False)')
        if not options.slot_reference_flavor:
            raise cls.skipException(
                '[nova_sched_ext] slot_reference_flavor names no reference '
                'flavor for the scenario to create')
        interval = options.slot_reference_refresh_interval
        if not 0 < interval <= MAX_REFRESH_WAIT:
            raise cls.skipException(
                'the scheduler reloads its reference flavors every %d s '
                '([nova_sched_ext] slot_reference_refresh_interval); the '
                'scenario needs 1 to %d s' % (interval, MAX_REFRESH_WAIT))

    def _create_reference_flavor(self, host):
        """The protected flavor: all an empty host of this layout offers.

        One vCPU and an equal share of the memory placement offers per NUMA
        cell, so any other server on the host leaves it too little.
        """
        name = CONF.nova_sched_ext.slot_reference_flavor
        for stale in self.admin_flavors_client.list_flavors()['flavors']:
            if stale['name'] == name:
                # Left by an interrupted run; its size may not suit.
                self.admin_flavors_client.delete_flavor(stale['id'])
                self.admin_flavors_client.wait_for_resource_deletion(
                    stale['id'])
        cells = host.layout.cells
        memory_mb = host.room('MEMORY_MB') // cells * cells
        if host.room('VCPU') < cells or not memory_mb:
            raise self.skipException(
                '%s offers too little for a flavor spanning its %d cells'
                % (host.name, cells))
        return self.create_numa_flavor(vcpus=cells, memory_mb=memory_mb,
                                       numa_nodes=cells, name=name)

    @decorators.idempotent_id('a1f8301e-8c11-4145-b718-9768ae19e0cd')
    def test_small_servers_share_a_host_to_keep_room_for_a_large_one(self):
        first_host, second_host = self.empty_hosts_alike(
            2, lambda host: (host.layout, host.room('VCPU'),
                             host.room('MEMORY_MB')),
            'two empty hosts with the same NUMA layout and room')
        zone = self.create_zone([first_host.name, second_host.name])
        large = self._create_reference_flavor(first_host)
        small = self.create_numa_flavor(vcpus=1, memory_mb=256, numa_nodes=1)
        self.wait_for_scheduler_cache(
            CONF.nova_sched_ext.slot_reference_refresh_interval + 2,
            'NUMASlotWeigher reloads its reference flavors, now with %s'
            % large['name'])

        first = self.boot(small, zone)
        second = self.boot(small, zone)

        self.assertEqual(
            self.host_of(first), self.host_of(second),
            'the second small server went to the empty host, destroying '
            'the slot of %s there' % large['name'])
        big = self.boot(large, zone)
        self.assertNotEqual(self.host_of(first), self.host_of(big))
