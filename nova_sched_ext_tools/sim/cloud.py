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

"""Nova's scheduler objects for the simulator, built as Nova builds them.

Hosts: a trace host lists the *free* vCPUs and RAM of each NUMA cell, so a
cell here is that free capacity and nothing else: a ``NUMACell`` with that
many shared CPUs (``cpuset``; ``pcpuset`` empty; one sibling set per CPU),
that much memory in MiB (with 4 KiB pages, as a libvirt host reports them),
no usage, and allocation ratios of 1.0.  The ``HostState`` carries the sums
as its host-level inventory (what placement would hold as VCPU and
MEMORY_MB), an up-and-enabled ``nova-compute`` service record, and the rack
as an aggregate whose metadata names the failure domain
(:data:`FAILURE_DOMAIN_KEY`).

Requests: a ``Flavor`` with ``hw:numa_nodes`` (1 or 2; Nova splits two
nodes half and half), its ``InstanceNUMATopology`` from Nova's own
``numa_get_constraints`` and a ``RequestSpec`` from
``RequestSpec.from_components``, the helper the conductor uses.

Placement is not run; :func:`placement_allows` stands in for its check of
the host's VCPU and MEMORY_MB inventory, which in Nova happens before any
filter sees the host.
"""

import contextlib
from unittest import mock
import uuid

from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import host_manager
from nova.virt import hardware
from oslo_utils import timeutils

from nova_sched_ext_tools import hosts
from nova_sched_ext_tools import loader

# Aggregate metadata key holding a host's failure domain (its rack).
FAILURE_DOMAIN_KEY = 'failure_domain'

CELL_UUID = '5f0d8c6e-8d8f-4c1a-9d0e-51b0c5a1d001'
_NAMESPACE = uuid.UUID('0b4e5d64-2f6c-4d63-9c51-7a3a44b6b1e2')


def stable_uuid(*parts):
    """A UUID that is the same in every run for the same names."""
    return str(uuid.uuid5(_NAMESPACE, '/'.join(str(p) for p in parts)))


def register_objects():
    """Nova's objects must be registered before any is built."""
    loader.load_nova()


def host_topology(cells):
    """A ``NUMATopology`` of free capacity: ``cells`` is ((vcpus, MiB),).

    Each cell has that many shared CPUs, one thread per core, and that much
    memory in 4 KiB pages, nothing in use; built by
    :func:`nova_sched_ext_tools.hosts.numa_topology`.
    """
    return hosts.numa_topology(
        [hosts.Cell(memory_mb=memory_mb, shared=vcpus)
         for vcpus, memory_mb in cells])


def rack_aggregates(trace_hosts):
    """One aggregate per rack, ``{rack: Aggregate}``."""
    members = {}
    for host in trace_hosts:
        members.setdefault(host.rack, []).append(host.name)
    aggregates = {}
    for number, rack in enumerate(sorted(members, key=_natural)):
        aggregates[rack] = objects.Aggregate(
            id=number + 1, uuid=stable_uuid('rack', rack),
            name='rack-%s' % rack, hosts=members[rack],
            metadata={FAILURE_DOMAIN_KEY: rack})
    return aggregates


def _natural(text):
    return (0, int(text), '') if text.isdigit() else (1, 0, text)


def service_record(name, number, now=None):
    """An enabled, up ``nova-compute`` service as ComputeFilter reads it."""
    now = now or timeutils.utcnow()
    return host_manager.ReadOnlyDict({
        'id': number, 'host': name, 'binary': 'nova-compute',
        'topic': 'compute', 'disabled': False, 'disabled_reason': None,
        'forced_down': False, 'created_at': now, 'updated_at': now,
        'last_seen_up': now})


def heartbeat(host_states, now=None):
    """Every compute reports in: keeps ComputeFilter's liveness check true.

    A replay takes minutes of wall time, longer than ``service_down_time``;
    real computes report every ``report_interval`` seconds meanwhile.
    """
    now = now or timeutils.utcnow()
    for number, state in enumerate(host_states):
        state.service = service_record(state.host, number, now)


def build_host_states(trace_hosts):
    """``HostState`` objects for the trace hosts, in trace order."""
    aggregates = rack_aggregates(trace_hosts)
    now = timeutils.utcnow()
    states = []
    for number, host in enumerate(trace_hosts):
        state = host_manager.HostState(host.name, host.name, CELL_UUID)
        state.uuid = stable_uuid('compute', host.name)
        state.numa_topology = host_topology(host.cells)
        state.pci_stats = None
        state.vcpus_total = host.vcpus
        state.vcpus_used = 0
        state.total_usable_ram_mb = host.memory_mb
        state.free_ram_mb = host.memory_mb
        state.total_usable_disk_gb = 0
        state.free_disk_mb = 0
        state.disk_mb_used = 0
        state.cpu_allocation_ratio = 1.0
        state.ram_allocation_ratio = 1.0
        state.disk_allocation_ratio = 1.0
        state.hypervisor_type = 'QEMU'
        state.hypervisor_version = 8002000
        state.hypervisor_hostname = host.name
        state.supported_instances = [('x86_64', 'kvm', 'hvm')]
        state.cpu_info = '{}'
        state.stats = {}
        state.metrics = objects.MonitorMetricList(objects=[])
        state.service = service_record(host.name, number, now)
        state.aggregates = [aggregates[host.rack]]
        state.instances = {}
        state.updated = now
        states.append(state)
    return states


def failure_domain(host_state):
    """The failure domain of a host: its rack aggregate's metadata."""
    for aggregate in host_state.aggregates:
        value = aggregate.metadata.get(FAILURE_DOMAIN_KEY)
        if value is not None:
            return value
    # A host without the metadata is its own failure domain.
    return 'host:%s' % host_state.host


class RequestFactory(object):
    """Builds ``RequestSpec`` objects, caching what requests share."""

    def __init__(self):
        self.context = nova_context.RequestContext(
            user_id='sim-user', project_id='sim-project', is_admin=True)
        self.image = objects.ImageMeta.from_dict({})
        self._flavors = {}

    def flavor(self, shape):
        """``(objects.Flavor, InstanceNUMATopology template)`` of a shape."""
        cached = self._flavors.get(shape)
        if cached is None:
            extra_specs = {'hw:numa_nodes': str(shape.numa_nodes)}
            extra_specs.update(dict(shape.extra_specs))
            flavor = objects.Flavor(
                id=len(self._flavors) + 1, flavorid=shape.name,
                name=shape.name, vcpus=shape.vcpus,
                memory_mb=shape.memory_mb, root_gb=0, ephemeral_gb=0,
                swap=0, rxtx_factor=1.0, vcpu_weight=0, disabled=False,
                is_public=True, extra_specs=extra_specs)
            topology = hardware.numa_get_constraints(flavor, self.image)
            cached = (flavor, topology)
            self._flavors[shape] = cached
        return cached

    def instance_topology(self, shape):
        """A fresh copy: Nova's fit mutates the topology it is given."""
        topology = self.flavor(shape)[1]
        return topology.obj_clone() if topology is not None else None

    def request_spec(self, shape, instance_uuid, instance_group=None,
                     hints=None):
        flavor = self.flavor(shape)[0]
        filter_properties = {}
        if hints:
            filter_properties['scheduler_hints'] = hints
        return objects.RequestSpec.from_components(
            self.context, instance_uuid, self.image, flavor,
            self.instance_topology(shape),
            objects.InstancePCIRequests(requests=[]),
            filter_properties, instance_group, None)


@contextlib.contextmanager
def flavor_table(flavors):
    """The simulated cloud's flavors, for plugins that look them up.

    There is no API database: while the context is active,
    ``Flavor.get_by_name``, ``Flavor.get_by_flavor_id`` and
    ``FlavorList.get_all`` answer from ``flavors`` (``objects.Flavor``),
    so that e.g. NUMASlotWeigher's automatic reference flavors are the
    trace's flavors, as they would be in the traced cloud.
    """
    flavors = list(flavors)

    def by(attribute):
        def get(context, value, *args, **kwargs):
            for flavor in flavors:
                if getattr(flavor, attribute) == value:
                    return flavor
            raise exception.FlavorNotFound(flavor_id=value)
        return get

    def get_all(context, *args, **kwargs):
        return objects.FlavorList(objects=list(flavors))

    with mock.patch.object(objects.Flavor, 'get_by_name',
                           side_effect=by('name')), \
            mock.patch.object(objects.Flavor, 'get_by_flavor_id',
                              side_effect=by('flavorid')), \
            mock.patch.object(objects.FlavorList, 'get_all',
                              side_effect=get_all):
        yield


def placement_allows(host_state, vcpus, memory_mb):
    """Placement's inventory check on VCPU and MEMORY_MB, per host.

    ``used + requested <= total * allocation_ratio``; reserved is 0 and
    max_unit is the total, as the free-capacity host model has it.
    """
    cpu_capacity = host_state.vcpus_total * host_state.cpu_allocation_ratio
    ram_capacity = (host_state.total_usable_ram_mb *
                    host_state.ram_allocation_ratio)
    ram_used = host_state.total_usable_ram_mb - host_state.free_ram_mb
    return (host_state.vcpus_used + vcpus <= cpu_capacity and
            ram_used + memory_mb <= ram_capacity and
            vcpus <= host_state.vcpus_total and
            memory_mb <= host_state.total_usable_ram_mb)


def numa_limits(host_state, spec_obj=None):
    """The limits NUMATopologyFilter records for a host that passes."""
    limits = objects.NUMATopologyLimits(
        cpu_allocation_ratio=host_state.cpu_allocation_ratio,
        ram_allocation_ratio=host_state.ram_allocation_ratio)
    if spec_obj is not None and 'network_metadata' in spec_obj and \
            spec_obj.network_metadata:
        limits.network_metadata = spec_obj.network_metadata
    return limits


def free_instance(host_state, vcpus, memory_mb, numa_topology, uuid_):
    """Undo ``consume_from_request`` for a deleted instance.

    What the compute's resource tracker reports after the deletion: the
    host-level usage goes down and Nova's
    ``numa_usage_from_instance_numa(free=True)`` takes the instance's
    cells off the host's NUMA usage.
    """
    host_state.vcpus_used -= vcpus
    host_state.free_ram_mb += memory_mb
    host_state.num_instances -= 1
    if numa_topology is not None and host_state.numa_topology:
        host_state.numa_topology = hardware.numa_usage_from_instance_numa(
            host_state.numa_topology, numa_topology, free=True)
    host_state.instances.pop(uuid_, None)
    host_state.updated = timeutils.utcnow()
