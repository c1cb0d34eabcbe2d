"""The oracle of the counting tests: Nova placing instances one by one.

``numa_fit_instance_to_host`` for the next instance, with the limits
NUMATopologyFilter passes, then ``numa_usage_from_instance_numa`` (and,
for PCI devices, ``PciDeviceStats.apply_requests``) to account it, as the
compute's resource tracker does, until one does not fit.
"""

from nova import exception as nova_exc
from nova import objects
from nova.virt import hardware


class OracleFailed(Exception):
    """Nova's own accounting raised: the host is beyond Nova's model."""


def nova_count(host_topology, instance_topology, ratios, limit,
               pci_stats=None, pci_requests=None):
    """How many instances Nova places on the host, at most ``limit``.

    :param ratios: ``(cpu_allocation_ratio, ram_allocation_ratio)``, or
        None for no limits
    :raises OracleFailed: Nova's accounting refused the host
    """
    limits = None
    if ratios is not None:
        limits = objects.NUMATopologyLimits(cpu_allocation_ratio=ratios[0],
                                            ram_allocation_ratio=ratios[1])
    placed = 0
    while placed < limit:
        fitted = hardware.numa_fit_instance_to_host(
            host_topology, instance_topology.obj_clone(), None,
            limits=limits, pci_requests=pci_requests, pci_stats=pci_stats)
        if fitted is None:
            break
        try:
            host_topology = hardware.numa_usage_from_instance_numa(
                host_topology, fitted)
        except nova_exc.NovaException as exc:
            raise OracleFailed(exc)
        if pci_requests:
            pci_stats.apply_requests(pci_requests, None, fitted.cells)
        placed += 1
    return placed
