"""The oracle of the counting tests: Nova booking instances one by one.

``numa_fit_instance_to_host`` for the next instance (a fresh clone of the
flavor's topology), with the limits NUMATopologyFilter passes, then
``numa_usage_from_instance_numa`` (and, for PCI devices,
``PciDeviceStats.apply_requests``) to account it, as the compute's claim
does, until one does not fit.  An instance whose claim Nova's accounting
refuses (``CPUPinningUnknown`` where Nova's fit hands over the pinning of
another host cell, issue 31) cannot be booked: the booking stops there,
as ``capacity.count.count_nova`` stops.
"""

from nova import exception as nova_exc
from nova import objects
from nova.virt import hardware


class Booking(object):
    """How a booking ended: the count, and whether a claim was refused."""

    def __init__(self, count, refused=None):
        self.count = count
        #: the exception the claim's accounting raised, or None
        self.refused = refused


def book(host_topology, instance_topology, ratios, limit, pci_stats=None,
         pci_requests=None):
    """Book up to ``limit`` instances as Nova does: a :class:`Booking`.

    :param ratios: ``(cpu_allocation_ratio, ram_allocation_ratio)``, or
        None for no limits
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
            # the compute's claim fails: this instance is not booked
            return Booking(placed, exc)
        if pci_requests:
            pci_stats.apply_requests(pci_requests, None, fitted.cells)
        placed += 1
    return Booking(placed)


def nova_count(host_topology, instance_topology, ratios, limit,
               pci_stats=None, pci_requests=None):
    """How many instances Nova books on the host, at most ``limit``."""
    return book(host_topology, instance_topology, ratios, limit,
                pci_stats=pci_stats, pci_requests=pci_requests).count
