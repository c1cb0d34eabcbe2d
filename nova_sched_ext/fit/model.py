"""The compact resource model the fit engine works on.

A :class:`Host` is what the engine needs to know of one compute node's NUMA
cells, a :class:`Request` what it needs to know of the instance NUMA topology
being scheduled.  Both are plain, immutable tuples built by
:mod:`nova_sched_ext.fit.adapters` from Nova's objects; the C helper gets the
same data packed by :mod:`nova_sched_ext.fit.packing`.

Units follow Nova: memory in MiB, page sizes in KiB, page counts in pages.
"""

import typing

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

# Limits of the supported subset; the C helper uses the same numbers.
MAX_CELLS = 16
MAX_PAGE_SIZES = 8
MAX_THREADS = 16
# Nova tries every k-permutation of the host cells; past this many the
# engine answers UNKNOWN rather than spend Nova's exponential time.
MAX_PERMUTATIONS = 200000


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
