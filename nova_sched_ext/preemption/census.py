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

"""Where the preemptible instances are: the cells' databases, read once.

A preemptible instance is one whose *embedded* flavor (the copy Nova keeps
with the instance, what the API shows) has ``nova_sched_ext:preemptible``
true.  Reading every instance's flavor of a large cloud would be slow, so
the cells are asked only for instances whose flavor id is one of the
flavors preemptible *now* (one indexed query per cell), and the embedded
flavor then decides.  Consequences, documented for operators: an instance
whose flavor was deleted, or made non-preemptible after the instance was
booted, is not found (never evicted, not counted by the caps); one whose
flavor was made preemptible after boot is not preemptible.
"""

import collections

from nova.compute import task_states
from nova import conf as nova_conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import utils
from oslo_log import log as logging

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import errors as cloud_errors
from nova_sched_ext.cloud import preemptible as extra_specs

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

#: what the eviction needs of a victim, loaded with it
INSTANCE_ATTRS = ['flavor', 'numa_topology', 'pci_requests']


def preemptible_flavor_ids(context):
    """Database ids of the flavors that are preemptible now."""
    flavors = objects.FlavorList.get_all(context)
    return [flavor.id for flavor in flavors
            if extra_specs.is_preemptible(flavor)]


def preemptible_instances(context, hosts=None, flavor_ids=None):
    """The preemptible instances on hosts, from every cell.

    :param hosts: host names to look at; None means all hosts.  Instances
        on no host (shelved and offloaded, never scheduled) are never
        returned.
    :param flavor_ids: the result of :func:`preemptible_flavor_ids`, if the
        caller has it already
    :returns: ``[objects.Instance]`` with flavor, NUMA topology and PCI
        requests loaded
    :raises CellUnavailable: a cell does not answer (the callers must not
        act on a partial view)
    """
    if flavor_ids is None:
        flavor_ids = preemptible_flavor_ids(context)
    if not flavor_ids or hosts is not None and not hosts:
        return []
    filters = {'deleted': False, 'instance_type_id': list(flavor_ids)}
    if hosts is not None:
        filters['host'] = sorted(hosts)

    def query(cell_context):
        return objects.InstanceList.get_by_filters(
            cell_context, filters, expected_attrs=INSTANCE_ATTRS)

    found = []
    for result in cloud_cells.in_every_cell(context, query).values():
        found.extend(result)
    return [instance for instance in found
            if instance.host and
            extra_specs.is_preemptible(instance.flavor)]


def deleted_instance_uuids(context, uuids):
    """Those of ``uuids`` that some cell shows as deleted.

    A deleted instance never comes back, so whatever still counts it (a
    placement recorded before the cells showed it) may be dropped.  An
    instance a cell does not show at all is *not* returned: the conductor
    may not have created it yet.

    :raises CellUnavailable: a cell does not answer
    """
    if not uuids:
        return set()
    filters = {'uuid': sorted(uuids), 'deleted': True}

    def query(cell_context):
        cell_context = cell_context.elevated(read_deleted='only')
        return objects.InstanceList.get_by_filters(
            cell_context, filters, expected_attrs=[])

    deleted = set()
    for result in cloud_cells.in_every_cell(context, query).values():
        deleted.update(instance.uuid for instance in result)
    return deleted


def is_going(instance):
    """Being deleted or shelved already: neither a victim nor counted."""
    return instance.task_state in (task_states.DELETING,
                                   task_states.SOFT_DELETING,
                                   task_states.SHELVING_OFFLOADING)


#: A cell did not answer: the cloud reader's one error for it.
CellUnavailable = cloud_errors.CellUnavailable


def host_availability_zones(context):
    """``{host: availability zone}`` of the hosts in an AZ aggregate.

    Hosts in none are in ``[DEFAULT] default_availability_zone``; see
    :func:`zone_of`.
    """
    zones = {}
    aggregates = objects.AggregateList.get_by_metadata_key(
        context, 'availability_zone')
    for aggregate in aggregates:
        zone = aggregate.metadata['availability_zone']
        for host in aggregate.hosts:
            zones[host] = zone
    return zones


def zone_of(zones, host):
    return zones.get(host, CONF.default_availability_zone)


def count_by_host(instances):
    """``Counter({host: number of instances})``."""
    return collections.Counter(instance.host for instance in instances)


def needs_new_room(context, spec_obj, instance_uuids):
    """Whether the request places instances that are on no host now.

    True for a boot (the instances are not in a cell yet) and an unshelve
    (on no host); False for a rebuild, a resize, a migration or an
    evacuation, which the caps and the eviction leave to Nova.
    """
    if utils.request_is_rebuild(spec_obj) or not instance_uuids:
        return False
    mapping, instance = find_instance(context, instance_uuids[0])
    if mapping is None:
        return False
    if mapping.cell_mapping is None:
        return True
    return instance is not None and not instance.host


def find_instance(context, uuid):
    """``(instance mapping, instance from its cell)``; either may be None.

    The mapping is None for an unknown instance; the instance is None
    before the conductor created it in a cell (no cell yet) or if the
    cell has no such instance.
    """
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(context, uuid)
    except exception.InstanceMappingNotFound:
        return None, None
    if mapping.cell_mapping is None:
        return mapping, None
    with nova_context.target_cell(context, mapping.cell_mapping) as cctxt:
        try:
            return mapping, objects.Instance.get_by_uuid(cctxt, uuid)
        except exception.InstanceNotFound:
            return mapping, None
