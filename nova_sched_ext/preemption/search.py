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


"""An eviction's first step: the hosts where victims could make room.

:class:`CandidateSearch` turns one request into the resources of one
instance (:meth:`~CandidateSearch.request_resources`), finds the compute
nodes with preemptible instances that pass the request's constraints and
the enabled filters that do not judge usage
(:meth:`~CandidateSearch.filter_hosts`), and describes each from
placement, read through the cloud reader
(:meth:`~CandidateSearch.describe_host`): its free room by placement's
rule (:mod:`nova_sched_ext.cloud.room`) and the victims' allocations.
Nothing is reserved or evicted here.
"""

from concurrent import futures

from nova import exception
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_sched_ext.cloud import placement as cloud_placement
from nova_sched_ext.cloud import room
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import victims as victims_mod

LOG = logging.getLogger(__name__)

#: enabled filters not re-run on eviction candidates: they judge the usage
#: the victims hold (NUMA, PCI and instance counts)
USAGE_FILTERS = frozenset((
    'NUMATopologyFilter', 'NUMAFitFilter', 'FastNUMATopologyFilter',
    'PciPassthroughFilter', 'NumInstancesFilter',
    'AggregateNumInstancesFilter', 'IoOpsFilter', 'AggregateIoOpsFilter',
))

#: placement reads of candidate hosts run at once
PLACEMENT_READERS = 8


class CandidateSearch(object):
    """The candidate hosts of one request; see the module docstring.

    :param manager: the scheduler manager (its host manager and placement
        client)
    """

    def __init__(self, manager, context, spec_obj):
        self.manager = manager
        self.context = context
        self.spec_obj = spec_obj
        self.placement = cloud_placement.PlacementReader(
            context, client=manager.placement_client)
        #: the request's ``RequestSpec`` resources, once
        #: :meth:`request_resources` read them
        self.resource_request = None

    def request_resources(self):
        """``{rc: amount}`` of one instance, or None if not servable."""
        if self.spec_obj.obj_attr_is_set('requested_resources') and \
                self.spec_obj.requested_resources:
            LOG.info('Preemption: request %s has port or accelerator '
                     'resources; eviction does not serve it.',
                     self.context.request_id)
            return None
        request = scheduler_utils.resources_from_request_spec(
            self.context, self.spec_obj, self.manager.host_manager,
            enable_pinning_translate=True)
        if request.get_num_of_suffixed_groups():
            LOG.info('Preemption: request %s has granular resource groups; '
                     'eviction does not serve it.', self.context.request_id)
            return None
        self.resource_request = request
        return {rc: n for rc, n in
                request.get_request_group(None).resources.items() if n}

    def candidate_hosts(self, resources):
        """``[victims.CandidateHost]`` that pass the request's constraints."""
        flavor_ids = census.preemptible_flavor_ids(self.context)
        instances = [i for i in census.preemptible_instances(
            self.context, flavor_ids=flavor_ids) if not census.is_going(i)]
        if not instances:
            return []
        by_node = {}
        for instance in instances:
            by_node.setdefault((instance.host, instance.node),
                               []).append(instance)
        # None: every compute node (of the requested cell, if any).
        states = [s for s in
                  self.manager.host_manager.get_host_states_by_uuids(
                      self.context, None, self.spec_obj)
                  if (s.host, s.nodename) in by_node]
        states = self.filter_hosts(states)
        if not states:
            return []

        def describe(state):
            return self.describe_host(
                state, by_node[(state.host, state.nodename)])

        # Four placement reads per host: a few run at once, so a cloud with
        # many hosts of preemptible instances is not read one at a time.
        with futures.ThreadPoolExecutor(
                max_workers=min(PLACEMENT_READERS, len(states))) as pool:
            described = list(pool.map(describe, states))
        return [host for host in described if host is not None]

    def filter_hosts(self, states):
        spec = self.spec_obj
        wanted = {
            'ignore': {h.lower() for h in (spec.ignore_hosts or ())},
            'force': {h.lower() for h in (spec.force_hosts or ())},
            'nodes': set(spec.force_nodes or ()),
        }
        dest = spec.requested_destination \
            if spec.obj_attr_is_set('requested_destination') else None
        zone = spec.availability_zone \
            if spec.obj_attr_is_set('availability_zone') else None
        zones = census.host_availability_zones(self.context) if zone else {}
        group = self.resource_request.get_request_group(None)
        required_aggs = [set(any_of) for any_of in
                         (group.aggregates or ())]
        forbidden_aggs = set(group.forbidden_aggregates or ())
        kept = []
        for state in states:
            name = state.host.lower()
            if name in wanted['ignore'] or \
                    wanted['force'] and name not in wanted['force'] or \
                    wanted['nodes'] and state.nodename not in \
                    wanted['nodes']:
                continue
            if dest is not None and dest.obj_attr_is_set('host') and \
                    dest.host and (dest.host != state.host or (
                        dest.obj_attr_is_set('node') and dest.node and
                        dest.node != state.nodename)):
                continue
            if zone and census.zone_of(zones, state.host) != zone:
                continue
            member_of = {agg.uuid for agg in state.aggregates}
            if any(not (any_of & member_of) for any_of in required_aggs) \
                    or member_of & forbidden_aggs:
                continue
            kept.append(state)
        filters = [f for f in self.manager.host_manager.enabled_filters
                   if type(f).__name__ not in USAGE_FILTERS]
        if kept and filters:
            kept = list(self.manager.host_manager.filter_handler
                        .get_filtered_objects(filters, kept, spec, 0) or [])
        return kept

    def describe_host(self, state, instances):
        """The host as victim selection sees it, or None if unusable."""
        rp_uuid = state.uuid
        try:
            found = self.placement.provider_room(rp_uuid)
        except cloud_placement.ReadError as exc:
            raise exception.NoValidHost(
                reason='placement did not answer: %s' % exc)
        if found is None:
            raise exception.NoValidHost(
                reason='placement did not answer for provider %s' % rp_uuid)
        traits = found.traits
        group = self.resource_request.get_request_group(None)
        required = set(group.required_traits or ()) | \
            nova_compat.root_required(self.resource_request)
        forbidden = set(group.forbidden_traits or ()) | \
            nova_compat.root_forbidden(self.resource_request)
        if not required <= set(traits) or forbidden & set(traits):
            return None
        # placement's rule: what it would still allocate, and the units
        free = {rc: room.free(inventory, found.usages.get(rc, 0))
                for rc, inventory in found.inventories.items()}
        max_unit = {rc: inventory.max_unit
                    for rc, inventory in found.inventories.items()}
        victims = []
        for instance in instances:
            held = found.allocations.get(instance.uuid)
            if not held:
                continue
            victims.append(victims_mod.Victim(
                uuid=instance.uuid, project_id=instance.project_id,
                created_at=instance.created_at, resources=dict(held),
                numa_topology=instance.numa_topology,
                pci_requests=instance.pci_requests))
        if not victims:
            return None
        return victims_mod.CandidateHost(
            host=state.host, nodename=state.nodename, rp_uuid=rp_uuid,
            free=free, host_state=state, victims=victims,
            max_unit=max_unit, inventories=found.inventories)
