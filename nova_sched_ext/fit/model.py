"""The compact resource model the fit engine works on.

A :class:`Host` is what the engine needs to know of one compute node's NUMA
cells, a :class:`Request` what it needs to know of the instance NUMA topology
being scheduled.  Both are plain, immutable tuples built by
:mod:`nova_sched_ext.fit.adapters` from Nova's objects; the C helper gets the
same data packed by :mod:`nova_sched_ext.fit.packing`.

Units follow Nova: memory in MiB, page sizes in KiB, page counts in pages.

The integer constants below are also ``cfit.h``'s (``NSE_<name>``), kept
here so that the package works without the C helper: the helper is only
used when it exports the same values
(:data:`nova_sched_ext.fit.lowlevel.EXPECTED_CONSTANTS`), and
``tests/unit/fit/test_lowlevel.py`` compares them with the header.
"""

import typing

from nova_sched_ext import exception as sched_ext_exception

# Answers of the engine.  UNKNOWN means "outside the supported subset": the
# caller must treat the host as a candidate and let Nova decide.
NO = 0
YES = 1
UNKNOWN = 2

# Host status (how an adapter classified a host).
HOST_OK = 0
HOST_NO_TOPOLOGY = 1      # Nova rejects a NUMA request on such a host
HOST_UNSUPPORTED = 2      # the engine answers UNKNOWN

# CPU allocation policy of a request cell.
CPU_SHARED = 0            # includes "no policy"
CPU_DEDICATED = 1
CPU_MIXED = 2

# CPU thread policy of a request cell.
THREAD_PREFER = 0         # includes "no policy"
THREAD_REQUIRE = 1
THREAD_ISOLATE = 2

# Requested page size: > 0 is an explicit size in KiB.
PAGESIZE_NONE = 0
PAGESIZE_SMALL = -1
PAGESIZE_LARGE = -2
PAGESIZE_ANY = -3

# PCI NUMA affinity policy of the (single) PCI request.
PCI_LEGACY = 0
PCI_REQUIRED = 1
PCI_PREFERRED = 2

# Limits of the supported subset.
MAX_CELLS = 16
MAX_PAGE_SIZES = 8
MAX_THREADS = 16
# Nova tries every k-permutation of the host cells; past this many the
# engine answers UNKNOWN rather than spend Nova's exponential time.
MAX_PERMUTATIONS = 200000
# Bounds on the values a host or request may carry (cfit.h explains them):
# both engines refuse anything outside, the same way (InvalidInput here,
# NSE_ERR_BAD_* there), and engine.prepare() turns such a host into
# HOST_UNSUPPORTED before either sees it.
MAX_CANDIDATES = 1000
MAX_ALLOCATION_RATIO = 10000
MAX_CPUS = 1 << 20
MAX_AMOUNT = 1 << 38
MAX_PAGE_SIZE_KB = 1 << 24
#: The most instances of one shape counted on one host (NSE_MAX_INSTANCES):
#: a bound on the capacity count's loop, far above what any host takes.
MAX_INSTANCES = 1 << 16


class Page(typing.NamedTuple):
    size_kb: int
    total: int
    used: int
    reserved: int


class HostCell(typing.NamedTuple):
    """One host NUMA cell, reduced to what a fit decision reads."""

    id: int
    cpus: int                  # len(cpuset): CPUs for shared (floating) use
    pcpus: int                 # len(pcpuset): CPUs for dedicated (pinned) use
    free_pcpus: int            # len(pcpuset - pinned_cpus)
    cpu_usage: int
    memory: int                # MiB
    memory_usage: int          # MiB
    threads_per_core: int      # max(len(sibling set)) or 1
    pcpus_are_cpus: bool       # pcpuset == cpuset (legacy vcpu_pin_set host)
    free_sibling_sizes: tuple  # len(s & free_pcpus) for each sibling set s
    pages: tuple               # Page, in the host's order
    pci_devices: int           # free PCI devices of all pools on this node


class Host(typing.NamedTuple):
    cells: tuple
    status: int = HOST_OK
    # None means "no limits" (Nova's limits=None); the scheduler always sets
    # them from the host's allocation ratios.
    cpu_allocation_ratio: typing.Optional[float] = None
    ram_allocation_ratio: typing.Optional[float] = None
    # Nova orders host cells by PCI devices whenever the host has PCI stats.
    has_pci_stats: bool = False
    # Nova's NUMATopologyFilter runs the fit once per allocation candidate,
    # and the fit mutates the request between runs: the engine replays that.
    candidates: int = 1
    # Host-level room as placement sees it (slot counting only); a negative
    # total means unknown.
    total_vcpus: int = -1
    free_vcpus: int = 0
    total_memory_mb: int = -1
    free_memory_mb: int = 0


class RequestCell(typing.NamedTuple):
    id: int
    cpus: int                  # len(cpuset): shared vCPUs
    pcpus: int                 # len(pcpuset): dedicated vCPUs
    memory: int                # MiB
    pagesize: int              # PAGESIZE_* or an explicit size in KiB
    cpu_policy: int            # CPU_*
    thread_policy: int         # THREAD_*


class PciRequest(typing.NamedTuple):
    count: int
    policy: int                # PCI_*


class HostPci(typing.NamedTuple):
    """Devices of one host that could serve the request's PCI request.

    ``matching`` counts devices whose pool matches the request's spec,
    ``eligible`` those that also survive Nova's later pool filters (unrequested
    PFs, vDPA, remote-managed, live-migratable).  Nova decides which NUMA
    nodes are acceptable from the matching counts and then needs enough
    eligible devices there.
    """

    matching_by_cell: tuple    # per host cell, in host cell order
    eligible_by_cell: tuple
    matching_no_numa: int      # pools with numa_node None
    eligible_no_numa: int
    eligible_all: int          # every pool, whatever its node


class Request(typing.NamedTuple):
    cells: tuple
    emulator_threads_isolated: bool = False
    pci: typing.Optional[PciRequest] = None
    # Whether the request carries PCI requests at all (orders host cells).
    has_pci_requests: bool = False
    # [compute] packing_host_numa_cells_allocation_strategy
    pack: bool = False


class Shape(typing.NamedTuple):
    """A flavor as slot counting sees it.

    ``numa`` is a :class:`Request` without PCI, or None for a flavor
    without a NUMA topology (counted at the host level only).
    """

    vcpus: int
    memory_mb: int
    numa: typing.Optional[Request] = None


class InvalidInput(ValueError, sched_ext_exception.NovaSchedExtError):
    """A host or request outside the bounds both engines accept."""


def _amount_ok(value):
    return 0 <= value <= MAX_AMOUNT


def _cpus_ok(value):
    return 0 <= value <= MAX_CPUS


def _ratio_ok(ratio):
    # written so that NaN is out of range, as in cfit.c
    return ratio > 0.0 and ratio <= MAX_ALLOCATION_RATIO


def host_problem(host):
    """Why the engines would refuse ``host`` (cfit.c's checks), or None.

    The header fields are checked whatever the host's status; its cells only
    when it is HOST_OK (the only status whose record carries them).
    """
    if host.status == HOST_OK and len(host.cells) > MAX_CELLS:
        return 'more than %d NUMA cells' % MAX_CELLS
    if not 0 <= host.candidates <= MAX_CANDIDATES:
        return 'allocation candidates %r not in 0..%d' % (
            host.candidates, MAX_CANDIDATES)
    if host.cpu_allocation_ratio is not None and not (
            _ratio_ok(host.cpu_allocation_ratio) and
            _ratio_ok(host.ram_allocation_ratio)):
        return 'allocation ratios %r, %r not in (0, %d]' % (
            host.cpu_allocation_ratio, host.ram_allocation_ratio,
            MAX_ALLOCATION_RATIO)
    for name in ('total_vcpus', 'free_vcpus', 'total_memory_mb',
                 'free_memory_mb'):
        if abs(getattr(host, name)) > MAX_AMOUNT:
            return '%s %r out of range' % (name, getattr(host, name))
    for cell in host.cells if host.status == HOST_OK else ():
        if not 1 <= cell.threads_per_core <= MAX_THREADS:
            return 'cell %s: %r threads per core' % (
                cell.id, cell.threads_per_core)
        if not (_amount_ok(cell.memory) and _amount_ok(cell.memory_usage) and
                cell.pci_devices >= 0):
            return 'cell %s: memory %r, usage %r out of range' % (
                cell.id, cell.memory, cell.memory_usage)
        if not all(_cpus_ok(v) for v in (cell.cpus, cell.pcpus,
                                         cell.free_pcpus, cell.cpu_usage)):
            return 'cell %s: CPU counts out of range' % cell.id
        if any(not 0 <= size <= MAX_THREADS or size > cell.threads_per_core
               for size in cell.free_sibling_sizes):
            return 'cell %s: free sibling sizes %r out of range' % (
                cell.id, cell.free_sibling_sizes)
        if len(cell.free_sibling_sizes) > MAX_CPUS:
            return 'cell %s: more than %d sibling sets' % (cell.id, MAX_CPUS)
        if len(cell.pages) > MAX_PAGE_SIZES:
            return 'cell %s: more than %d page sizes' % (
                cell.id, MAX_PAGE_SIZES)
        for page in cell.pages:
            if not (0 < page.size_kb <= MAX_PAGE_SIZE_KB and
                    _amount_ok(page.total) and _amount_ok(page.used) and
                    _amount_ok(page.reserved)):
                return 'cell %s: page %r out of range' % (cell.id, page)
    return None


def request_problem(request):
    """Why the engines would refuse ``request``, or None."""
    if len(request.cells) > MAX_CELLS:
        return 'more than %d instance cells' % MAX_CELLS
    for cell in request.cells:
        if not (_cpus_ok(cell.cpus) and _cpus_ok(cell.pcpus) and
                _amount_ok(cell.memory)):
            return 'instance cell %s: size out of range' % cell.id
        if not (PAGESIZE_ANY <= cell.pagesize <= MAX_PAGE_SIZE_KB):
            return 'instance cell %s: page size %r' % (cell.id,
                                                       cell.pagesize)
        if cell.cpu_policy not in (CPU_SHARED, CPU_DEDICATED, CPU_MIXED):
            return 'instance cell %s: CPU policy %r' % (cell.id,
                                                        cell.cpu_policy)
        if cell.thread_policy not in (THREAD_PREFER, THREAD_REQUIRE,
                                      THREAD_ISOLATE):
            return 'instance cell %s: thread policy %r' % (
                cell.id, cell.thread_policy)
    if request.pci is not None and (
            request.pci.policy not in (PCI_LEGACY, PCI_REQUIRED,
                                       PCI_PREFERRED) or
            request.pci.count < 0):
        return 'PCI request %r' % (request.pci,)
    return None


def shape_problem(shape):
    """Why the slot counters would refuse ``shape``, or None."""
    if not (_amount_ok(shape.vcpus) and _amount_ok(shape.memory_mb)):
        return 'shape %s: size out of range' % (shape,)
    if shape.numa is not None:
        if shape.numa.pci is not None:
            return 'shape %s: slot counting has no PCI' % (shape,)
        return request_problem(shape.numa)
    return None


def check(problem):
    """Raise :class:`InvalidInput` for a problem string (None: no problem)."""
    if problem is not None:
        raise InvalidInput(problem)
