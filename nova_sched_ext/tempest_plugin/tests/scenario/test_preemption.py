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


"""Preemption: an on-demand boot evicts a preemptible server on a full cloud.

Run when tempest.conf says the cloud schedules with the preemption driver
(``[nova_sched_ext] preemption = True``, written by the devstack plugin
from NOVA_SCHED_EXT_PREEMPTION).  Each scenario takes one empty compute
host into an availability zone of its own and fills it with two
preemptible servers that each take half of its free memory, so that the
zone is full for one more server of that size.
"""

from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators

from nova_sched_ext.tempest_plugin.tests import base

CONF = config.CONF
PREEMPTIBLE_KEY = 'nova_sched_ext:preemptible'


class PreemptionTest(base.NUMASchedulingTest):
    """On-demand requests evict preemptible servers, never the reverse."""

    @classmethod
    def skip_checks(cls):
        if not CONF.nova_sched_ext.preemption:
            raise cls.skipException(
                'preemption is not enabled in this cloud '
                '([nova_sched_ext] preemption = False)')
        super().skip_checks()

    def full_zone(self):
        """A zone of one host, full of two preemptible servers.

        :returns: ``(zone, half-host flavor size in MiB, [servers])``
        """
        hosts = self.empty_described_hosts()
        host = hosts[sorted(hosts)[0]]
        half = host.room('MEMORY_MB') // 2
        if half < 64 or host.room('VCPU') < 3 or host.room('DISK_GB') < 3:
            raise self.skipException('host %s is too small' % host.name)
        zone = self.create_zone([host.name])
        preemptible = self.create_flavor(
            ram=half, vcpus=1, disk=1,
            name=data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                      name='nse-spot'))
        self.admin_flavors_client.set_flavor_extra_spec(
            preemptible['id'], **{PREEMPTIBLE_KEY: 'true'})
        servers = [self.boot(preemptible, zone) for _ in range(2)]
        self.assertEqual({host.name}, {self.host_of(s) for s in servers})
        return zone, half, preemptible, servers

    def server_ids(self):
        servers = self.admin_servers_client.list_servers(
            all_tenants=True)['servers']
        return {server['id'] for server in servers}

    @decorators.idempotent_id('7fb72380-06d4-4e64-b1d5-3c32beb02342')
    def test_on_demand_boot_evicts_a_preemptible_server(self):
        """Fill the zone with preemptible servers; an on-demand one fits."""
        zone, half, _, preemptible = self.full_zone()
        on_demand = self.create_flavor(ram=half, vcpus=1, disk=1)

        server = self.boot(on_demand, zone)

        self.assertEqual(self.host_of(preemptible[0]), self.host_of(server))
        # Exactly one victim: the youngest, under the default strategy.
        waiters.wait_for_server_termination(self.servers_client,
                                            preemptible[1]['id'])
        self.assertIn(preemptible[0]['id'], self.server_ids())

    @decorators.idempotent_id('1990d1cf-2bbc-46b9-bba9-ca4012451819')
    def test_preemptible_boot_on_a_full_cloud_gets_no_valid_host(self):
        """A preemptible request never evicts anything."""
        zone, _, preemptible_flavor, preemptible = self.full_zone()

        server = self.boot(preemptible_flavor, zone, wait_until='ERROR')

        self.assert_no_valid_host(server)
        still = self.server_ids()
        for victim in preemptible:
            self.assertIn(victim['id'], still)
            self.assertEqual('ACTIVE', self.servers_client.show_server(
                victim['id'])['server']['status'])

    @decorators.idempotent_id('c5b0b0d4-5d0e-4b8e-9a47-0f3c6a1e2d71')
    def test_multi_create_that_cannot_all_fit_evicts_nothing(self):
        """Three half-host servers cannot fit on one host: none evicted."""
        zone, half, _, preemptible = self.full_zone()
        on_demand = self.create_flavor(ram=half, vcpus=1, disk=1)
        body = self.servers_client.create_server(
            name=data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                      name='nse-multi'),
            imageRef=CONF.compute.image_ref, flavorRef=on_demand['id'],
            availability_zone=zone, networks='none', min_count=3,
            max_count=3, return_reservation_id=True)
        created = self.servers_client.list_servers(
            detail=True, reservation_id=body['reservation_id'])['servers']
        self.assertEqual(3, len(created))
        for server in created:
            self.addCleanup(waiters.wait_for_server_termination,
                            self.servers_client, server['id'],
                            ignore_error=True)
            self.addCleanup(self.servers_client.delete_server, server['id'])
            waiters.wait_for_server_status(self.servers_client,
                                           server['id'], 'ERROR',
                                           raise_on_error=False)
            self.assert_no_valid_host(
                self.admin_servers_client.show_server(
                    server['id'])['server'])
        still = self.server_ids()
        for victim in preemptible:
            self.assertIn(victim['id'], still)
