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

"""The planner's cloud read from a running Nova.

The hosts come from the one reader of the cloud
(:func:`nova_sched_ext.cloud.computes.read_cloud`: every compute node of
the enabled cells as nova-scheduler's ``HostState``, with its NUMA
topology and usage, allocation ratios, aggregates and availability zone;
:class:`~nova_sched_ext.cloud.placement.PlacementReader`: the
inventories and usages of its root resource provider, and what the
provider has allocated to each instance).  A host the scheduler cannot
pick (its service disabled or down, no resource provider) is kept, with
why, so that its instances stay where they are.

The instances come from every cell database at once, through Nova's
objects: their flavor, the ``InstanceNUMATopology`` Nova gave them
(``instance_extra``), their PCI requests, states and project; their server
groups from the API database, and for the members of an anti-affinity
group the deployment-set hints they were booted with (their request
specs), which make the group a deployment set and give its partitions.

Every database or placement failure is one line
(:class:`~nova_sched_ext.cloud.errors.CloudError`, the capacity count's
``CapacityError``); nothing is written anywhere.
"""

import collections

from nova.compute import vm_states
from nova import objects
from nova.virt import hardware
from oslo_log import log as logging

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import computes
from nova_sched_ext.cloud import flavor_requests
from nova_sched_ext.cloud import flavors as cloud_flavors
from nova_sched_ext.cloud import groups as cloud_groups
from nova_sched_ext.cloud import placement
from nova_sched_ext.cloud import preemptible
from nova_sched_ext.cloud import set_hints
from nova_sched_ext.cloud import set_rules
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf
from nova_sched_ext.defrag import model

CONF = conf.CONF
LOG = logging.getLogger(__name__)

#: How a host the scheduler cannot pick is described (after "it is").
HOST_SKIPPED = {
    computes.SKIP_NO_SERVICE: 'without a nova-compute service',
    computes.SKIP_SERVICE_DISABLED: 'disabled',
    computes.SKIP_SERVICE_DOWN: 'down (its nova-compute service does not '
                                'report)',
    computes.SKIP_NOT_REPORTING: 'not reporting its resources yet',
    computes.SKIP_NO_PROVIDER: 'unknown to placement',
}

#: The prefix of the flavor extra specs AggregateInstanceExtraSpecsFilter
#: matches against aggregate metadata.
AGGREGATE_SPEC_PREFIX = 'aggregate_instance_extra_specs:'
AGGREGATE_SPEC_FILTER = 'AggregateInstanceExtraSpecsFilter'

#: What an instance's row must bring along.
EXPECTED_ATTRS = ['flavor', 'numa_topology', 'pci_requests',
                  'system_metadata']

#: Live migration moves running (or paused) servers only.
MIGRATABLE_VM_STATES = (vm_states.ACTIVE, vm_states.PAUSED)


def _metadata_values(aggregates):
    """``{key: frozenset(values)}`` of the aggregates' metadata.

    A value may list several, comma-separated, as Nova's
    ``aggregate_metadata_get_by_host`` callers read it.
    """
    values = collections.defaultdict(set)
    for aggregate in aggregates:
        for key, value in (aggregate.metadata or {}).items():
            values[key].update(v.strip() for v in str(value).split(','))
    return {key: frozenset(v) for key, v in values.items()}


def _host(found, tree):
    state = found.state
    disabled = HOST_SKIPPED.get(found.skipped) if found.skipped else None
    if tree is None and disabled is None:
        disabled = HOST_SKIPPED[computes.SKIP_NO_PROVIDER]
    root = tree.root if tree is not None else None
    return model.Host(
        name=found.name,
        numa_topology=state.numa_topology,
        inventories=dict(root.inventories) if root else {},
        usages=dict(root.usages) if root else {},
        cpu_allocation_ratio=state.cpu_allocation_ratio or 1.0,
        ram_allocation_ratio=state.ram_allocation_ratio or 1.0,
        availability_zone=found.availability_zone,
        aggregates=frozenset(a.name for a in found.aggregates),
        aggregate_metadata=_metadata_values(found.aggregates),
        failure_domains=set_rules.domains_from_aggregates(
            found.name, found.aggregates),
        disabled_reason=disabled,
        pci_stats=getattr(state, 'pci_stats', None))


def _instances_on(cctxt, hosts_by_cell):
    hosts = hosts_by_cell.get(cctxt.cell_uuid)
    if not hosts:
        return []
    return list(objects.InstanceList.get_by_filters(
        cctxt, filters={'host': sorted(hosts), 'deleted': False},
        expected_attrs=EXPECTED_ATTRS))


def _why_unmovable(instance, resources):
    """None if Nova can live-migrate the instance, else why not."""
    pci = instance.pci_requests if instance.obj_attr_is_set(
        'pci_requests') else None
    if pci is not None and pci.requests:
        return model.PCI_DEVICES
    if instance.task_state:
        return 'it has the task state %s' % instance.task_state
    if instance.vm_state not in MIGRATABLE_VM_STATES:
        return 'it is %s, and only active or paused servers live-migrate' % (
            instance.vm_state)
    if not resources:
        return 'placement holds no allocation of it on its host'
    return None


class _Flavors(object):
    """What an instance's flavor (and image) say, worked out once each."""

    def __init__(self):
        self._topologies = {}

    @staticmethod
    def _key(flavor, image_meta):
        props = image_meta.properties.obj_to_primitive() \
            if 'properties' in image_meta else None
        return (flavor.flavorid, flavor.vcpus, flavor.memory_mb,
                tuple(sorted((flavor.extra_specs or {}).items())),
                repr(props))

    def requested_topology(self, instance):
        """``(InstanceNUMATopology or None, why it cannot be read)``."""
        try:
            image_meta = instance.image_meta
        except Exception as exc:  # a system_metadata Nova cannot read
            return None, 'its image properties cannot be read: %s' % exc
        key = self._key(instance.flavor, image_meta)
        if key not in self._topologies:
            try:
                self._topologies[key] = (hardware.numa_get_constraints(
                    instance.flavor, image_meta), None)
            except nova_compat.CONSTRAINT_REFUSALS as exc:
                self._topologies[key] = (None, 'its flavor asks for a NUMA '
                                         'topology Nova refuses: %s'
                                         % ' '.join(str(exc).split()))
        topology, why = self._topologies[key]
        return (topology.obj_clone() if topology is not None else None), why


def _required_metadata(flavor):
    if AGGREGATE_SPEC_FILTER not in CONF.filter_scheduler.enabled_filters:
        return {}
    return {key[len(AGGREGATE_SPEC_PREFIX):]: value
            for key, value in (flavor.extra_specs or {}).items()
            if key.startswith(AGGREGATE_SPEC_PREFIX)}


def _groups(context, on_hosts):
    """``(groups, {instance: group}, {instance: partition})``.

    Only the groups with a member on a host; an anti-affinity group is a
    deployment set when a member was booted with a strategy hint.
    """
    found = cloud_groups.server_groups(context)
    groups, group_of, partition_of = {}, {}, {}
    for group in found:
        members = [uuid for uuid in group.members or () if uuid in on_hosts]
        if not members:
            continue
        strategy = None
        if group.policy == 'anti-affinity':
            with cloud_cells.database('API database (request specs)'):
                for uuid in members:
                    member_hints = cloud_groups.member_hints(context, uuid)
                    if member_hints is set_hints.NO_HINTS:
                        continue
                    strategy = strategy or member_hints.strategy
                    if member_hints.partition is not None:
                        partition_of[uuid] = member_hints.partition
        groups[group.uuid] = model.ServerGroup(
            uuid=group.uuid, policy=group.policy,
            max_server_per_host=cloud_groups.max_server_per_host(group),
            deployment_set_strategy=strategy)
        for uuid in members:
            group_of[uuid] = group.uuid
    return groups, group_of, partition_of


def read_cloud(context, placement_reader=None, hosts=None):
    """The planner's :class:`~.model.Cloud` of the running cloud.

    :param context: an admin ``RequestContext``
    :param placement_reader: a ``PlacementReader`` (default: one
        through Nova's report client, ``[placement]`` of nova.conf, with
        ``[nova_sched_ext_capacity] placement_workers`` requests at once)
    :param hosts: host names: only these hosts, the instances on them and
        their groups (:func:`~.model.part_of`), as the executor reads
        again what a move touches; their providers and allocations are
        the only ones asked of placement, their instances the only rows
        read (the compute node and aggregate lists are read whole, one
        query each)
    :raises CloudError: a database or placement that cannot be read,
        in one line
    """
    found = computes.read_cloud(context)
    reader = placement_reader or placement.PlacementReader(
        context, workers=CONF.nova_sched_ext_capacity.placement_workers)
    partial = hosts is not None
    if partial:
        wanted = set(hosts)
        found = found._replace(hosts=[h for h in found.hosts
                                      if h.name in wanted])
    roots = [h.uuid for h in found.hosts if h.uuid]
    trees = reader.trees(roots)
    allocations = reader.allocations(sorted(trees))
    hosts, host_cell, root_of = {}, {}, {}
    for entry in found.hosts:
        if entry.name in hosts:
            # Live migration targets a host, not a node: a host of several
            # nodes (ironic) is nothing the planner moves to.
            LOG.warning('Defragmentation: host %s has several compute '
                        'nodes; only %s is read.', entry.name,
                        root_of[entry.name])
            continue
        tree = trees.get(entry.uuid) if entry.uuid else None
        hosts[entry.name] = _host(entry, tree)
        host_cell[entry.name] = entry.cell.uuid
        root_of[entry.name] = entry.uuid
    by_cell = collections.defaultdict(set)
    for name, cell_uuid in host_cell.items():
        by_cell[cell_uuid].add(name)
    rows = []
    for _cell, cell_rows in cloud_cells.in_cells(
            context, found.cells, _instances_on, dict(by_cell)):
        rows.extend(cell_rows)
    on_hosts = {row.uuid for row in rows}
    groups, group_of, partition_of = _groups(context, on_hosts)
    flavors = _Flavors()
    instances = {}
    for row in rows:
        resources = allocations.get(root_of.get(row.host), {}).get(row.uuid)
        requested, unreadable = flavors.requested_topology(row)
        instances[row.uuid] = model.Instance(
            uuid=row.uuid, host=row.host, flavor_name=row.flavor.name,
            vcpus=row.flavor.vcpus, memory_mb=row.flavor.memory_mb,
            resources=dict(resources or {}),
            requested_topology=requested,
            numa_topology=row.numa_topology,
            project_id=row.project_id,
            group=group_of.get(row.uuid),
            partition=partition_of.get(row.uuid),
            preemptible=preemptible.is_preemptible(row.flavor),
            unmovable=_why_unmovable(row, resources) or unreadable,
            required_metadata=_required_metadata(row.flavor))
    (LOG.debug if partial else LOG.info)(
        'Defragmentation: read %d hosts and %d instances in %d cell(s).',
        len(hosts), len(instances), len(found.cells))
    return model.Cloud(
        hosts=hosts, instances=instances, groups=groups,
        preemptible_max_per_host=CONF.nova_sched_ext.preemptible_max_per_host)


def reference_flavors(context, names=None):
    """The ``cloud.flavor_requests.FlavorRequest`` of the flavors to recover.

    ``names`` (names or IDs; ``cloud.flavors.read_flavors`` refuses an
    unknown one), else the NUMA-slot weigher's reference flavors
    (``[nova_sched_ext] numa_slot_reference_flavors``, or the largest
    ones): the flavors whose slots the scheduler protects are the ones a
    plan gives room back to.
    """
    if names:
        chosen = cloud_flavors.read_flavors(context, names)
    else:
        with cloud_cells.database('API database (flavors)'):
            chosen = cloud_flavors.reference_flavors(context)
    return [flavor_requests.flavor_request(flavor) for flavor in chosen]
