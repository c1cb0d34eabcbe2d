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

"""``nova-sched-ext-sim --defrag``: the planner on a replay's end state.

The replay's cloud (:mod:`.state`: the trace hosts and the instances left
at the end, with the cells Nova gave them and their groups) becomes the
planner's :class:`~nova_sched_ext.defrag.model.Cloud`: each host a
``NUMATopology`` of its free capacity (:func:`.cloud.host_topology`) with
its instances' usage accounted by Nova's ``numa_usage_from_instance_numa``,
one placement provider of VCPU and MEMORY_MB (ratio 1.0, as the replay),
its rack as its failure domain; the trace's groups as server groups
(``affinity``, ``anti-affinity``) and deployment sets of strategy
``partition`` (``fault_domain``), as the replay schedules them.

Beside the plans, three references on the same state:

repack
    the offline bound: the same instances booted again, from scratch, on
    the trace's empty hosts by best-fit decreasing (largest first; each
    on the valid host with the least RAM left after it, the rules of a
    move applied to the boot: group affinity and anti-affinity, the
    deployment sets), with the fit engine and Nova's fit as the planner
    uses them.  No budget: every instance may move.  An instance the
    repack cannot boot again is counted (``unplaced``).
watcher
    python-watcher's ``vm_workload_consolidation`` strategy on a Watcher
    model of the same cloud (:mod:`.watcher_baseline`).
move bound
    at each budget, the most slots any plan of that many moves can
    recover (:meth:`~nova_sched_ext.defrag.planner.Planner.move_bound`).
"""

import collections

from nova import objects
from nova.virt import hardware

from nova_sched_ext.capacity import flavors as capacity_flavors
from nova_sched_ext.cloud import placement
from nova_sched_ext.defrag import model
from nova_sched_ext.defrag import planner
from nova_sched_ext.defrag import state as planning_state
from nova_sched_ext.defrag import validity
from nova_sched_ext_tools.sim import cloud as sim_cloud
from nova_sched_ext_tools.sim import replay
from nova_sched_ext_tools.sim import state as sim_state
from nova_sched_ext_tools.sim import trace


def _inventories(trace_host):
    return {
        'VCPU': placement.Inventory(total=trace_host.vcpus,
                                    max_unit=trace_host.vcpus),
        'MEMORY_MB': placement.Inventory(total=trace_host.memory_mb,
                                         max_unit=trace_host.memory_mb),
    }


def _fitted(template, cells):
    """The instance topology Nova's fit gave.

    The flavor's constraints with each cell on the host cell the replay
    recorded (shared CPUs: nothing else changes).
    """
    fitted = template.obj_clone()
    for cell, placed in zip(fitted.cells, cells):
        cell.id = placed['host_cell']
    return fitted


def _groups(saved):
    groups = {}
    for entry in saved['instances']:
        group = entry.get('group')
        if group is None:
            continue
        uuid = sim_cloud.stable_uuid('group', group['strategy'], group['id'])
        if group['strategy'] == trace.FAULT_DOMAIN:
            groups[uuid] = model.ServerGroup(
                uuid=uuid, policy='anti-affinity',
                max_server_per_host=replay.UNBOUNDED_PER_HOST,
                deployment_set_strategy='partition')
        else:
            groups[uuid] = model.ServerGroup(uuid=uuid,
                                             policy=group['strategy'])
    return groups


def cloud_of(saved, factory=None, empty=False):
    """The planner's cloud of a saved state.

    ``empty``: no instance on any host, for the repack.
    """
    sim_cloud.register_objects()
    factory = factory or sim_cloud.RequestFactory()
    hosts = {}
    # Many hosts have the same free cells; Nova's functions never change
    # a topology they are given, so hosts may share one.
    topologies = {}
    for trace_host in sim_state.trace_hosts(saved):
        if trace_host.name in hosts:
            raise model.PlanError('the saved state has host %s twice'
                                  % trace_host.name)
        topology = topologies.get(trace_host.cells)
        if topology is None:
            topology = topologies[trace_host.cells] = \
                sim_cloud.host_topology(trace_host.cells)
        hosts[trace_host.name] = model.Host(
            name=trace_host.name, numa_topology=topology,
            inventories=_inventories(trace_host), usages={},
            failure_domains=frozenset([trace_host.rack]))
    instances = {}
    on_host = collections.defaultdict(list)
    for entry in saved['instances']:
        if entry['uuid'] in instances:
            # One would replace the other, and a plan be made on a cloud
            # with one instance less than the state has.
            raise model.PlanError('the saved state has instance %s twice'
                                  % entry['uuid'])
        flavor = sim_state.flavor_of(entry)
        nova_flavor, template = factory.flavor(flavor)
        fitted = _fitted(template, entry['cells']) \
            if template is not None else None
        group = entry.get('group')
        instance = model.Instance(
            uuid=entry['uuid'], host=None if empty else entry['host'],
            flavor_name=flavor.name, vcpus=flavor.vcpus,
            memory_mb=flavor.memory_mb,
            resources={'VCPU': flavor.vcpus, 'MEMORY_MB': flavor.memory_mb},
            requested_topology=template,
            numa_topology=None if empty else fitted,
            project_id='sim-project',
            group=sim_cloud.stable_uuid('group', group['strategy'],
                                        group['id']) if group else None,
            partition=group['partition'] if group else None)
        instances[instance.uuid] = instance
        if not empty:
            on_host[entry['host']].append(instance)
    for name, placed in on_host.items():
        host = hosts[name]
        topology = host.numa_topology
        for instance in placed:
            topology = hardware.numa_usage_from_instance_numa(
                topology, instance.numa_topology)
        host.numa_topology = topology
        host.usages = {'VCPU': sum(i.vcpus for i in placed),
                       'MEMORY_MB': sum(i.memory_mb for i in placed)}
    return model.Cloud(hosts=hosts, instances=instances,
                       groups=_groups(saved))


def reference_flavors(shapes, factory=None):
    """``FlavorRequest`` objects of trace flavor shapes."""
    factory = factory or sim_cloud.RequestFactory()
    return [capacity_flavors.flavor_request(factory.flavor(shape)[0])
            for shape in shapes]


class RepackResult(object):
    def __init__(self, slots, unplaced, seconds):
        self.slots = slots
        self.unplaced = unplaced
        self.seconds = seconds


def repack(saved, flavors, factory=None):
    """The offline bound (see the module docstring)."""
    import time
    started = time.monotonic()
    empty = cloud_of(saved, factory, empty=True)
    repacker = planner.Planner(empty, flavors)
    state = repacker.state
    order = sorted(empty.instances.values(),
                   key=lambda i: (-i.memory_mb, -i.vcpus, i.uuid))
    unplaced = 0
    for instance in order:
        valid, _refused = repacker.valid_targets(instance)
        for name in valid:
            fits, fitted = state.nova_fit(instance.uuid, name)
            if fits:
                state.apply(instance.uuid, name, fitted)
                break
        else:
            unplaced += 1
    return RepackResult(state.total_slots(), unplaced,
                        time.monotonic() - started)


def plan(saved, flavors, budget, search='drain', factory=None):
    cloud = cloud_of(saved, factory)
    return planner.Planner(cloud, flavors, budget=budget,
                           search=search).plan()


def check_plan(saved, flavors, plan_, factory=None):
    """Replay a plan's moves on a fresh copy of the state.

    Each is checked again with Nova's fit and the rules: the list of
    problems (empty when every move is valid in order).
    """
    cloud = cloud_of(saved, factory)
    state = planning_state.PlanningState(cloud, flavors)
    groups = validity.GroupIndex(cloud)
    problems = []
    for number, move in enumerate(plan_.moves):
        instance = cloud.instances[move.instance]
        if state.where[move.instance] != move.source:
            problems.append('move %d: %s is not on %s' % (
                number, move.instance, move.source))
            break
        why = validity.why_not_target(state, instance, move.target, groups)
        fits, fitted = state.nova_fit(move.instance, move.target)
        if why or not fits:
            problems.append('move %d: %s' % (number, why or 'no NUMA fit'))
            break
        if planner.fitted_cells(fitted) != move.cells:
            problems.append('move %d: Nova gives cells %s, the plan says %s'
                            % (number, planner.fitted_cells(fitted),
                               move.cells))
            break
        state.apply(move.instance, move.target, fitted)
    return problems


__all__ = ['cloud_of', 'reference_flavors', 'repack', 'plan', 'check_plan',
           'objects']
