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


"""Base class of the nova-sched-ext scenarios: hosts, zones, flavors, boots.

The scenarios reason about the NUMA cells of the compute hosts. A host
describes them with the trait ``CUSTOM_NSE_NUMA_<cells>CELLS_<cpus>CPUS_
<mib>MB`` on its resource provider: the package's fake NUMA virt driver sets
it, and an operator can set it on real hosts
(:mod:`nova_sched_ext.virt.layout`). Hosts without the trait are left out.

Each scenario puts the hosts it reasons about into an availability zone of
its own and boots into that zone, so other hosts cannot change the outcome,
and deletes its servers, zone and flavors when it ends.
"""

import dataclasses
import time

from oslo_log import log as logging

from tempest.api.compute import base
from tempest.common import compute
from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils

from nova_sched_ext.virt import layout as layout_mod

CONF = config.CONF
LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Host:
    """A compute host with a described NUMA layout."""

    name: str
    rp_uuid: str
    layout: layout_mod.Layout
    inventories: dict
    usages: dict

    @property
    def empty(self):
        return not any(self.usages.values())

    def room(self, resource_class):
        """What placement still lets one request take of a class."""
        inventory = self.inventories.get(resource_class)
        if inventory is None:
            return 0
        capacity = int((inventory['total'] - inventory['reserved']) *
                       inventory['allocation_ratio'])
        free = capacity - self.usages.get(resource_class, 0)
        return max(0, min(free, inventory['max_unit']))

    def placeable(self, vcpus, memory_mb):
        """Whether placement would offer this host (shared CPUs)."""
        return (vcpus <= self.room('VCPU') and
                memory_mb <= self.room('MEMORY_MB'))


class NUMASchedulingTest(base.BaseV2ComputeAdminTest):
    """Admin scenarios on hosts whose NUMA layout is known."""

    # Hypervisor ids are resource provider UUIDs from 2.53 on.
    min_microversion = '2.53'
    # Resource provider traits need placement 1.6.
    placement_min_microversion = '1.6'
    #: scheduler filters a scenario needs; it is skipped without them
    required_filters = ()

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        for name in cls.required_filters:
            if not compute.is_scheduler_filter_enabled(name):
                raise cls.skipException(
                    '%s is not in [compute-feature-enabled] '
                    'scheduler_enabled_filters' % name)

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_hypervisor_client = cls.os_admin.hypervisor_client
        cls.admin_aggregates_client = cls.os_admin.aggregates_client
        cls.admin_rp_client = cls.os_admin.resource_providers_client

    # -- hosts -------------------------------------------------------------

    def described_hosts(self):
        """Up, enabled hosts with a NUMA layout trait, by host name."""
        hosts = {}
        hypervisors = self.admin_hypervisor_client.list_hypervisors(
            detail=True)['hypervisors']
        for hypervisor in hypervisors:
            if hypervisor['state'] != 'up' or hypervisor['status'] != (
                    'enabled'):
                continue
            rp_uuid = hypervisor['id']
            traits = self.admin_rp_client.list_resource_provider_traits(
                rp_uuid)['traits']
            layouts = [layout_mod.from_trait(trait) for trait in traits]
            layouts = [layout for layout in layouts if layout is not None]
            if len(layouts) != 1:
                continue
            inventories = self.admin_rp_client.\
                list_resource_provider_inventories(rp_uuid)['inventories']
            usages = self.admin_rp_client.list_resource_provider_usages(
                rp_uuid)['usages']
            name = hypervisor['service']['host']
            hosts[name] = Host(name, rp_uuid, layouts[0], inventories,
                               usages)
        return hosts

    def empty_described_hosts(self, at_least=1):
        hosts = {name: host for name, host in self.described_hosts().items()
                 if host.empty}
        if len(hosts) < at_least:
            raise self.skipException(
                'needs %d empty compute hosts that describe their NUMA '
                'layout with a %s* trait (the fake NUMA virt driver does); '
                'found %d' % (at_least, layout_mod.TRAIT_PREFIX, len(hosts)))
        return hosts

    def empty_hosts_alike(self, count, alike, need, accept=None):
        """``count`` empty described hosts with the same ``alike(host)``.

        The first such group in host name order, of the hosts ``accept``
        takes (all by default); ``need`` says what the scenario needs when
        there is none (the skip reason).
        """
        hosts = self.empty_described_hosts(at_least=count)
        groups = {}
        for name in sorted(hosts):
            host = hosts[name]
            if accept is None or accept(host):
                groups.setdefault(alike(host), []).append(host)
        for group in groups.values():
            if len(group) >= count:
                return group[:count]
        raise self.skipException('needs %s; found %s' % (need, ', '.join(
            '%s=%s' % (name, host.layout)
            for name, host in sorted(hosts.items()))))

    # -- availability zones ------------------------------------------------

    def create_aggregate(self, hosts, zone=False, metadata=None):
        """A host aggregate of these hosts, removed when the test ends.

        :param zone: make it an availability zone of the same name
        :returns: the aggregate's name
        """
        name = data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                    name='nse-zone' if zone else 'nse-agg')
        aggregate = self.admin_aggregates_client.create_aggregate(
            name=name, availability_zone=name if zone else None)['aggregate']
        self.addCleanup(self.admin_aggregates_client.delete_aggregate,
                        aggregate['id'])
        if metadata:
            self.admin_aggregates_client.set_metadata(aggregate['id'],
                                                      metadata=metadata)
        for host in sorted(hosts):
            self.admin_aggregates_client.add_host(aggregate['id'], host=host)
            self.addCleanup(self.admin_aggregates_client.remove_host,
                            aggregate['id'], host=host)
        return name

    def create_zone(self, hosts):
        """An availability zone holding exactly these hosts."""
        return self.create_aggregate(hosts, zone=True)

    # -- flavors -------------------------------------------------------------

    def create_numa_flavor(self, vcpus, memory_mb, numa_nodes, name=None):
        flavor = self.create_flavor(ram=memory_mb, vcpus=vcpus, disk=1,
                                    name=name)
        self.admin_flavors_client.set_flavor_extra_spec(
            flavor['id'], **{'hw:numa_nodes': str(numa_nodes)})
        return flavor

    # -- servers -------------------------------------------------------------

    def boot(self, flavor, zone, wait_until='ACTIVE', hints=None,
             host=None):
        """Boot a server into the zone; it is deleted when the test ends.

        :param hints: scheduler hints (``os:scheduler_hints``)
        :param host: ask for this host of the zone (compute API 2.74, which
            the test class must request, and admin only): unlike a forced
            ``zone:host``, the scheduler's filters still check it, so a
            host whose NUMA cells cannot take the server is NoValidHost
        :returns: the server as the admin sees it (with its host).
        """
        extra = {'scheduler_hints': hints} if hints else {}
        if host:
            extra['host'] = host
        client = self.admin_servers_client if host else self.servers_client
        server = client.create_server(
            name=data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                      name=self.__class__.__name__),
            imageRef=CONF.compute.image_ref,
            flavorRef=flavor['id'],
            availability_zone=zone,
            networks='none', **extra)['server']
        # Cleanups run last-in first-out: delete, then wait for it.
        self.addCleanup(waiters.wait_for_server_termination,
                        client, server['id'], ignore_error=True)
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        client.delete_server, server['id'])
        if wait_until:
            waiters.wait_for_server_status(
                client, server['id'], wait_until,
                raise_on_error=wait_until != 'ERROR')
        return self.admin_servers_client.show_server(server['id'])['server']

    @staticmethod
    def host_of(server):
        return server['OS-EXT-SRV-ATTR:host']

    def assert_no_valid_host(self, server):
        """The server is in ERROR because the scheduler found no host."""
        # The admin sees the servers of every project (boot(host=...)
        # creates them as the admin).
        shown = self.admin_servers_client.show_server(server['id'])['server']
        self.assertEqual('ERROR', shown['status'])
        self.assertIn('No valid host', shown.get('fault', {}).get(
            'message', ''), 'fault: %s' % shown.get('fault'))
        self.assertIsNone(self.host_of(server))

    def wait_for_scheduler_cache(self, seconds, why):
        """Let a scheduler-side cache expire; the reason goes to the log."""
        LOG.info('Waiting %d s: %s', seconds, why)
        time.sleep(seconds)
