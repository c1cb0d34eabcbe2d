"""Has a ``HostState`` changed since its model was built? One answer.

Every cache of what the fit engine builds from a Nova ``HostState`` asks
this question on every request, for every host: the per-host cache of
:func:`~nova_sched_ext.fit.adapters.prepared_hosts` (NUMAFitFilter), the
slot arena of :mod:`~nova_sched_ext.fit.slotcache` (NUMASlotWeigher) and
the simulator's slot counter. They record :func:`version` beside what they
built and ask :func:`unchanged` later; a caller that checks thousands of
hosts first compares :data:`stamp` with :func:`vouching_stamp` in one
C-level pass (``map``) and asks :func:`unchanged` only for the hosts whose
stamps differ.

The rule: a host with a stamp (``updated`` is set) is unchanged while its
stamp is; a host without one is also compared, field by field, with what
its model was built from.

The stamp's fields, and why each is in it:

* ``updated``: Nova's ``HostManager`` sets it to the compute node's
  ``updated_at``, which the database moves on every change of the record,
  and ``consume_from_request`` sets it when the scheduler claims resources.
  Nova rebuilds the host's ``numa_topology`` and ``pci_stats`` objects from
  the compute node before every request (new objects, equal when nothing
  changed): with an equal ``updated`` they need not be looked at.
* ``free_ram_mb``, ``vcpus_used``: ``updated_at`` has a resolution of one
  second in MySQL, so two saves of a compute node within one second keep
  it; every instance claimed or dropped changes the usage.
* ``cpu_allocation_ratio``, ``ram_allocation_ratio``: the other inputs of
  the model that a compute node save within the same second can change
  without changing the usage.

A host without a stamp (a compute node that never reported, or a host
built by hand) is unchanged while its stamp's fields are equal, its
``numa_topology`` and ``pci_stats`` are the same objects (by identity:
comparing Nova objects by value costs more than rebuilding) and its
``vcpus_total`` and ``total_usable_ram_mb`` are equal. A cache keeps the
version, hence the objects, alive, so an identity is never compared with a
recycled object.

Values are compared as tuples compare them: the same object (a NaN ratio
included) or an equal value.
"""

import operator
import typing

#: The ``HostState`` attributes of a host's stamp, in order.
STAMP_FIELDS = ('updated', 'free_ram_mb', 'vcpus_used',
                'cpu_allocation_ratio', 'ram_allocation_ratio')

#: A host's stamp: equal stamps mean an unchanged host, for a host with one
#: (``updated`` not None). An ``operator.attrgetter``, so that a caller can
#: read the stamps of many hosts in one C-level pass (``map``); a Python
#: loop over the hosts reads them faster inline (``adapters.prepared_hosts``
#: does, tested against :data:`STAMP_FIELDS`).
stamp = operator.attrgetter(*STAMP_FIELDS)

_REST = operator.attrgetter('numa_topology', 'pci_stats', 'vcpus_total',
                            'total_usable_ram_mb')


class Version(typing.NamedTuple):
    """What a model was built from, as :func:`unchanged` compares it."""

    stamp: tuple
    numa_topology: object
    pci_stats: object
    vcpus_total: object
    total_usable_ram_mb: object


def version(host_state):
    """The :class:`Version` of a host, to record beside its model."""
    return Version(stamp(host_state), *_REST(host_state))


#: What :func:`vouching_stamp` gives for a host without a stamp: equal to
#: no stamp, so that the fast pass always asks :func:`unchanged`.
NO_STAMP = object()


def vouching_stamp(recorded):
    """The stamp a fast pass compares with ``stamp(host_state)``.

    Equal means unchanged; unequal means "ask :func:`unchanged`". For a
    host that had no stamp, a value equal to no stamp at all.
    """
    return recorded.stamp if recorded.stamp[0] is not None else NO_STAMP


def unchanged(recorded, host_state):
    """Whether ``host_state`` still matches the :class:`Version` recorded."""
    if recorded.stamp != stamp(host_state):
        return False
    if recorded.stamp[0] is not None:
        return True
    return (recorded.numa_topology is host_state.numa_topology and
            recorded.pci_stats is host_state.pci_stats and
            recorded[3:] == (host_state.vcpus_total,
                             host_state.total_usable_ram_mb))
