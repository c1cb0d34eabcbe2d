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


"""A fake hypervisor whose host has NUMA cells, for test clouds.

Nova's own ``fake.FakeDriver`` reports no NUMA topology, so a devstack cloud
on the fake driver never exercises NUMA scheduling. :class:`FakeNUMADriver`
behaves like ``fake.FakeDriverWithoutFakeNodes`` (one node named after the
host, a stable node UUID from ``[DEFAULT] state_path``) and, in addition,
reports a host NUMA topology and the inventory that goes with it, so that
``NUMATopologyFilter``, the package's filters and weighers and the compute
claims all work as on a real NUMA host. Nothing is started: instances only
exist in the driver's memory.

Nova only loads drivers from its own ``nova.virt`` package, so run the test
computes with :mod:`nova_sched_ext.virt.compute` (``nova-compute`` that can
load this driver) and name the driver there; the devstack plugin does this
when ``NOVA_SCHED_EXT_FAKE_VIRT=True``::

    python -m nova_sched_ext.virt.compute --config-file nova-cpu.conf

    [DEFAULT]
    compute_driver = nova_sched_ext_fake_numa.FakeNUMADriver

    [nova_sched_ext_fake_virt]
    # two cells, 4 CPUs and 4096 MiB each
    numa_topology = 2x4x4096

CPUs are numbered cell by cell (cell 0 holds CPUs 0..3 above). Like the
libvirt driver, the driver reports the CPUs of ``[compute]
cpu_dedicated_set`` as ``PCPU`` (for pinned guests) and the others, or those
of ``[compute] cpu_shared_set`` when set, as ``VCPU``. Each CPU is its own
core (no SMT), and memory is in 4 KiB pages.

The driver also sets the trait named by
:attr:`nova_sched_ext.virt.layout.Layout.trait` on its resource provider,
which is how the tempest plugin learns each test host's cells.

Live migration is NUMA-aware, as with the libvirt driver: for an instance
with a NUMA topology both ends say they support NUMA live migration, so
the destination's resource tracker claims cells for it there (Nova fits
the instance to the destination's cells) and the instance takes those
cells when the migration ends; a rolled-back migration drops that claim.
Nova's own fake driver says nothing, so Nova moves the instance without a
claim and it keeps the cell ids it had on the source. After the move the
source forgets the instance, as a real hypervisor would.
"""

import collections

import os_resource_classes as orc
from oslo_log import log as logging
from oslo_serialization import jsonutils

import nova.conf
from nova import exception
from nova.virt import fake
from nova.virt import hardware

from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext.conf import fake_virt as fake_virt_conf
from nova_sched_ext.fit import host_topology
from nova_sched_ext.virt import layout as layout_mod

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

GROUP_NAME = fake_virt_conf.GROUP_NAME


class FakeNUMADriver(fake.FakeDriverWithoutFakeNodes):
    """A fake single-node hypervisor with NUMA cells."""

    capabilities = dict(fake.FakeDriver.capabilities, supports_pcpus=True)

    def __init__(self, virtapi, read_only=False):
        opts = CONF[GROUP_NAME]
        try:
            self.layout = layout_mod.parse(opts.numa_topology)
        except ValueError as exc:
            raise exception.InvalidConfiguration(
                '[%s] numa_topology: %s' % (GROUP_NAME, exc))
        self.shared_cpus, self.dedicated_cpus = self._split_cpus(self.layout)
        # FakeDriver sizes its bookkeeping from these class attributes.
        self.vcpus = len(self.shared_cpus)
        self.memory_mb = self.layout.memory_mb
        self.local_gb = opts.disk_gb
        super().__init__(virtapi, read_only=read_only)
        LOG.info('Fake NUMA host: %(cells)d cells of %(cpus)d CPUs and '
                 '%(mem)d MiB; shared CPUs %(shared)s, dedicated CPUs '
                 '%(dedicated)s.',
                 {'cells': self.layout.cells,
                  'cpus': self.layout.cpus_per_cell,
                  'mem': self.layout.memory_mb_per_cell,
                  'shared': hardware.format_cpu_spec(self.shared_cpus) or '-',
                  'dedicated': (hardware.format_cpu_spec(self.dedicated_cpus)
                                or '-')})

    @staticmethod
    def _split_cpus(layout):
        host_cpus = set(range(layout.cpus))
        dedicated = hardware.get_cpu_dedicated_set() or set()
        shared = hardware.get_cpu_shared_set() or (host_cpus - dedicated)
        for name, cpus in (('cpu_dedicated_set', dedicated),
                           ('cpu_shared_set', shared)):
            unknown = cpus - host_cpus
            if unknown:
                raise exception.InvalidConfiguration(
                    '[compute] %s names CPUs %s, but the fake NUMA host '
                    '%s only has CPUs 0-%d.'
                    % (name, hardware.format_cpu_spec(unknown), layout.spec,
                       layout.cpus - 1))
        if shared & dedicated:
            raise exception.InvalidConfiguration(
                '[compute] cpu_shared_set and cpu_dedicated_set overlap on '
                'CPUs %s.' % hardware.format_cpu_spec(shared & dedicated))
        if not shared and not dedicated:
            raise exception.InvalidConfiguration(
                'The fake NUMA host has no usable CPU.')
        return frozenset(shared), frozenset(dedicated)

    def host_numa_topology(self):
        """The host's NUMA topology, without usage (Nova adds the usage).

        Built as the offline tools build theirs
        (:mod:`nova_sched_ext.fit.host_topology`): one core per CPU, memory
        in 4 KiB pages, a socket per cell.
        """
        cells = []
        for cell_id in range(self.layout.cells):
            cpus = self.layout.cell_cpus(cell_id)
            cells.append(host_topology.numa_cell(
                cell_id,
                cpuset=cpus & self.shared_cpus,
                pcpuset=cpus & self.dedicated_cpus,
                siblings=host_topology.core_siblings(min(cpus), len(cpus)),
                memory_mb=self.layout.memory_mb_per_cell,
                socket=cell_id))
        return host_topology.numa_topology(cells)

    def get_available_resource(self, nodename):
        resources = super().get_available_resource(nodename)
        if not resources:
            return resources
        resources['numa_topology'] = nova_compat.numa_topology_json(
            self.host_numa_topology())
        resources['cpu_info'] = jsonutils.dumps(collections.OrderedDict([
            ('arch', 'x86_64'),
            ('model', 'Nehalem'),
            ('vendor', 'Intel'),
            ('features', ['pge', 'clflush']),
            ('topology', {'sockets': self.layout.cells,
                          'cores': self.layout.cpus_per_cell,
                          'threads': 1}),
        ]))
        return resources

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        inventory = provider_tree.data(nodename).inventory
        ratios = nova_compat.allocation_ratios(self, inventory)
        new_inventory = {}
        if self.shared_cpus:
            new_inventory[orc.VCPU] = {
                'total': len(self.shared_cpus),
                'min_unit': 1,
                'max_unit': len(self.shared_cpus),
                'step_size': 1,
                'allocation_ratio': ratios[orc.VCPU],
                'reserved': CONF.reserved_host_cpus,
            }
        if self.dedicated_cpus:
            new_inventory[orc.PCPU] = {
                'total': len(self.dedicated_cpus),
                'min_unit': 1,
                'max_unit': len(self.dedicated_cpus),
                'step_size': 1,
                'allocation_ratio': 1,
                'reserved': 0,
            }
        new_inventory[orc.MEMORY_MB] = {
            'total': self.layout.memory_mb,
            'min_unit': 1,
            'max_unit': self.layout.memory_mb,
            'step_size': 1,
            'allocation_ratio': ratios[orc.MEMORY_MB],
            'reserved': CONF.reserved_host_memory_mb,
        }
        new_inventory[orc.DISK_GB] = {
            'total': self.local_gb,
            'min_unit': 1,
            'max_unit': self.local_gb,
            'step_size': 1,
            'allocation_ratio': ratios[orc.DISK_GB],
            'reserved': nova_compat.reserved_host_disk_gb(self),
        }
        provider_tree.update_inventory(nodename, new_inventory)

        stale = {trait for trait in provider_tree.data(nodename).traits
                 if trait.startswith(layout_mod.TRAIT_PREFIX) and
                 trait != self.layout.trait}
        if stale:
            provider_tree.remove_traits(nodename, *stale)
        if CONF[GROUP_NAME].publish_layout_trait:
            provider_tree.add_traits(nodename, self.layout.trait)

    # -- live migration ----------------------------------------------------

    def check_can_live_migrate_destination(self, context, instance,
                                           src_compute_info, dst_compute_info,
                                           block_migration=False,
                                           disk_over_commit=False):
        data = super().check_can_live_migrate_destination(
            context, instance, src_compute_info, dst_compute_info,
            block_migration=block_migration,
            disk_over_commit=disk_over_commit)
        # Without this flag Nova makes no claim on the destination and the
        # instance keeps its source cell ids there (the libvirt driver sets
        # it the same way).
        if instance.numa_topology:
            data.dst_supports_numa_live_migration = True
        return data

    def check_can_live_migrate_source(self, context, instance,
                                      dest_check_data, block_device_info=None):
        data = super().check_can_live_migrate_source(
            context, instance, dest_check_data,
            block_device_info=block_device_info)
        # Nova claims on the destination only when both ends agree; this
        # flag also makes a rollback drop that claim
        # (drop_move_claim_at_destination).
        if instance.numa_topology:
            data.src_supports_numa_live_migration = True
        return data

    def post_live_migration(self, context, instance, block_device_info,
                            migrate_data=None):
        # The instance runs on the destination now (which spawned it in
        # post_live_migration_at_destination); the source must not keep
        # reporting it.
        self.destroy(context, instance, network_info=None,
                     block_device_info=block_device_info)
