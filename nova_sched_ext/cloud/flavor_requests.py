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


"""What a flavor asks of a host, built the way Nova builds it.

For each flavor, :func:`flavor_request` makes the ``RequestSpec`` of a boot
with an image without properties, then derives from it, with Nova's own
functions:

* the allocation candidate queries of the scheduler:
  ``ResourceRequest.from_request_spec`` (VCPU/PCPU, MEMORY_MB, DISK_GB and
  the ``resources[N]:`` overrides and ``trait[N]:`` specs of the extra
  specs), the root trait ``COMPUTE_STATUS_DISABLED`` forbidden as
  ``compute_status_filter`` forbids it, and for a pinned flavor the VCPU
  fallback query the scheduler also makes unless ``[workarounds]
  disable_fallback_pcpu_query`` is set;
* the instance NUMA topology (``hardware.numa_get_constraints``) and the PCI
  requests of the flavor's ``pci_passthrough:alias``;
* the fit engine's shape (``adapters.shape_from_flavor``), or None where the
  engine has no model of the flavor.

The capacity count and the defragmentation planner count with these
(``nova_sched_ext.capacity.flavors`` is this module).
"""

import dataclasses
import typing

from nova import objects
from nova.pci import request as pci_request
from nova.scheduler import utils as scheduler_utils
from nova.virt import hardware
import os_traits
from oslo_config import cfg
from oslo_log import log as logging

from nova_sched_ext.cloud import placement
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext.fit import adapters

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class FlavorRequest:
    #: the ``objects.Flavor``
    flavor: typing.Any
    #: the ``objects.RequestSpec`` of a boot of the flavor (for Nova's own
    #: filters)
    spec: typing.Any
    #: placement queries (:class:`placement.Request`), in the scheduler's
    #: order; empty if the flavor cannot be booted at all
    queries: tuple
    #: every trait the flavor requires (aggregate isolation compares them)
    required_traits: frozenset
    #: the ``objects.InstanceNUMATopology``, or None
    instance_topology: typing.Any
    #: ``InstancePCIRequest`` list, or None
    pci_requests: typing.Optional[list]
    #: the fit engine's ``model.Shape``, or None (Nova's fit decides)
    shape: typing.Any
    #: why the engine has no shape for the flavor, or None
    unsupported: typing.Optional[str] = None
    #: why the flavor cannot be booted anywhere (bad extra specs), or None
    invalid: typing.Optional[str] = None

    @property
    def name(self):
        return self.flavor.name

    @property
    def is_numa(self):
        return self.instance_topology is not None


def _image():
    return objects.ImageMeta(properties=objects.ImageMetaProps())


def _groups(resource_request):
    # ResourceRequest offers no public iterator over its groups; Nova's own
    # code reads _rg_by_id the same way.
    groups = []
    for group in nova_compat.request_groups(resource_request):
        resources = {rc: int(n) for rc, n in group.resources.items() if n}
        if not resources:
            continue
        groups.append(placement.Group(
            resources=resources,
            required_traits=frozenset(group.required_traits),
            forbidden_traits=frozenset(group.forbidden_traits),
            same_provider=bool(group.use_same_provider)))
    # The unnumbered group first, as placement reads it.
    groups.sort(key=lambda g: g.same_provider)
    return tuple(groups)


def _query(spec, pinning):
    resource_request = scheduler_utils.ResourceRequest.from_request_spec(
        spec, enable_pinning_translate=pinning)
    root_forbidden = nova_compat.root_forbidden(resource_request)
    # compute_status_filter, a mandatory request filter of the scheduler
    root_forbidden.add(os_traits.COMPUTE_STATUS_DISABLED)
    query = placement.Request(
        groups=_groups(resource_request),
        root_required=frozenset(nova_compat.root_required(resource_request)),
        root_forbidden=frozenset(root_forbidden),
        group_policy=resource_request.group_policy)
    return resource_request, query


def flavor_request(flavor):
    """The :class:`FlavorRequest` of one ``objects.Flavor``."""
    image = _image()
    invalid = None
    topology = None
    pci_requests = None
    try:
        topology = hardware.numa_get_constraints(flavor, image)
        # as nova-api builds them for a boot
        pci_requests = pci_request.get_pci_requests_from_flavor(
            flavor, affinity_policy=hardware.get_pci_numa_policy_constraint(
                flavor, image)).requests or None
    except nova_compat.CONSTRAINT_REFUSALS as exc:
        invalid = ' '.join(str(exc).split())
    spec = objects.RequestSpec(
        flavor=flavor, is_bfv=False, image=image, numa_topology=topology,
        pci_requests=objects.InstancePCIRequests(requests=pci_requests or []),
        scheduler_hints={}, num_instances=1, project_id=None,
        availability_zone=None, ignore_hosts=None, force_hosts=None,
        force_nodes=None)
    if CONF.filter_scheduler.pci_in_placement and pci_requests:
        spec.requested_resources = []
        spec.generate_request_groups_from_pci_requests()
    queries, required = (), frozenset()
    if invalid is None:
        try:
            resource_request, query = _query(spec, pinning=True)
            queries = (query,)
            required = frozenset(resource_request.all_required_traits)
            if (resource_request.cpu_pinning_requested and
                    not CONF.workarounds.disable_fallback_pcpu_query):
                queries += (_query(spec, pinning=False)[1],)
        except nova_compat.CONSTRAINT_REFUSALS as exc:
            invalid = ' '.join(str(exc).split())
            queries = ()
    if invalid is not None:
        LOG.warning('Flavor %s cannot be booted, its capacity is 0: %s',
                    flavor.name, invalid)
    shape, unsupported = None, None
    if invalid is None:
        try:
            shape = adapters.shape_from_flavor(flavor, image)
        except adapters.Unsupported as exc:
            unsupported = str(exc) or type(exc).__name__
        except nova_compat.CONSTRAINT_REFUSALS as exc:  # pragma: no cover
            invalid = str(exc)
    return FlavorRequest(
        flavor=flavor, spec=spec, queries=queries,
        required_traits=required, instance_topology=topology,
        pci_requests=pci_requests, shape=shape, unsupported=unsupported,
        invalid=invalid)


def larger(a, b):
    """Whether flavor ``a`` is larger than ``b``: by vCPUs, then RAM."""
    return (a.vcpus, a.memory_mb) > (b.vcpus, b.memory_mb)
