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


"""Nova's fit with the filter's limits: the one call of Nova's fit.

Where the package asks Nova itself whether (and how) an instance's NUMA
topology fits a host (the Fast filter's limits, victim selection, the
capacity count where the fit engine cannot count, defragmentation's
moves), it calls :func:`fit`: Nova's
``nova.virt.hardware.numa_fit_instance_to_host`` on a copy of the
request, with the limits Nova's ``NUMATopologyFilter`` gives a host that
passes (:func:`filter_limits`: the host's CPU and RAM allocation ratios,
and the request's network metadata) and the host's PCI devices
(``PciDeviceStats``) with the request's PCI requests, as that filter
passes them.  The compute's claim reads the same limits.

A host's PCI devices matter even to a request without PCI: Nova's fit
then prefers the host cells without PCI devices.
"""

from nova import objects
from nova.virt import hardware


def filter_limits(cpu_allocation_ratio, ram_allocation_ratio,
                  network_metadata=None):
    """The ``NUMATopologyLimits`` NUMATopologyFilter gives a passing host.

    None when a ratio is not known (a host that never reported): Nova's
    fit then checks no oversubscription limit.
    """
    if cpu_allocation_ratio is None or ram_allocation_ratio is None:
        return None
    limits = objects.NUMATopologyLimits(
        cpu_allocation_ratio=cpu_allocation_ratio,
        ram_allocation_ratio=ram_allocation_ratio)
    if network_metadata:
        limits.network_metadata = network_metadata
    return limits


def host_limits(host, network_metadata=None):
    """:func:`filter_limits` of anything with the two allocation ratios.

    (A ``HostState``, a compute node, a defragmentation host.)
    """
    return filter_limits(host.cpu_allocation_ratio,
                         host.ram_allocation_ratio, network_metadata)


def spec_network_metadata(spec_obj):
    """The request's network metadata, as NUMATopologyFilter reads it."""
    if spec_obj is not None and 'network_metadata' in spec_obj:
        return spec_obj.network_metadata
    return None


def fit(host_topology, instance_topology, limits, pci_requests=None,
        pci_stats=None, provider_mapping=None):
    """Nova's fit of a copy of ``instance_topology`` on ``host_topology``.

    :param limits: :func:`filter_limits` (or :func:`host_limits`)
    :param pci_requests: the request's list of ``InstancePCIRequest`` (as
        NUMATopologyFilter passes ``spec_obj.pci_requests.requests``), or
        None
    :param pci_stats: the host's ``PciDeviceStats``, or None; not changed
    :param provider_mapping: the allocation candidate's mappings, or None
    :returns: the fitted ``InstanceNUMATopology`` (pinning, host cells), or
        None when it does not fit
    """
    return hardware.numa_fit_instance_to_host(
        host_topology, instance_topology.obj_clone(), provider_mapping,
        limits=limits, pci_requests=pci_requests, pci_stats=pci_stats)
