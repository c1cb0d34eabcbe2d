"""Pure-Python fit engine: the reference twin of the C helper.

It answers, for one :class:`~nova_sched_ext.fit.model.Host` and one
:class:`~nova_sched_ext.fit.model.Request`, whether
``nova.virt.hardware.numa_fit_instance_to_host`` would return a topology.

It replays Nova's algorithm rather than solving the assignment problem
cleanly, because the contract is *Nova's* answer: Nova orders host cells by
usage, tries cell permutations in ``itertools`` order, caches per
``(host cell id, instance cell id)`` pair, and mutates the instance cells
while it goes (a chosen page size sticks, an instance cell's id becomes the
id of the host cell it fitted).  These side effects can make Nova miss a
valid placement; a cleaner search would then say "fits" where Nova says
"no", and the filter would let through hosts Nova rejects, which is harmless,
but the differential tests demand equality, so the engine mirrors Nova.

``_c/cfit.c`` implements exactly the same steps; keep them in lockstep.
"""

import itertools
import math

from nova_sched_ext.fit import model as m


def _pick_page_size(cell, pagesize, memory_kb):
    """Nova's _numa_cell_supports_pagesize_request; returns a size or 0."""
    sizes = sorted((p.size_kb for p in cell.pages), reverse=True)
    if pagesize == m.PAGESIZE_SMALL:
        candidates = sizes[-1:]
    elif pagesize == m.PAGESIZE_LARGE:
        candidates = sizes[:-1]
    elif pagesize == m.PAGESIZE_ANY:
        candidates = sizes
    else:
        candidates = [pagesize]
    for size in candidates:
        if _can_fit_pagesize(cell, size, memory_kb, use_free=True):
            return size
    return 0


def _can_fit_pagesize(cell, size_kb, memory_kb, use_free):
    for page in cell.pages:
        if page.size_kb == size_kb:
            pages = page.total - page.used - page.reserved if use_free \
                else page.total
            return (memory_kb <= pages * page.size_kb and
                    memory_kb % page.size_kb == 0)
    # Nova raises MemoryPageSizeNotSupported, which its caller treats as
    # "does not fit".
    return False


# Pinning outcomes of Nova's _get_pinning: None, an empty list, a list.
_NONE, _EMPTY, _SOME = 0, 1, 2


def _pinning(threads, sets, wanted):
    if threads * sets < wanted:
        return _NONE
    return _SOME if wanted else _EMPTY


def _pack_onto_cores(cell, wanted, reserved, thread_policy):
    """Nova's _pack_instance_onto_cores, reduced to "does it succeed"."""
    sizes = [s for s in cell.free_sibling_sizes if s > 0]
    total_free = sum(sizes)
    largest = max(sizes, default=0)
    tpc = cell.threads_per_core

    def sets_with_at_least(threads):
        return sum(1 for s in sizes if s >= threads)

    def reserved_ok(pinning, left):
        # Nova reserves from the CPUs left after pinning and only checks that
        # the result is non-empty.
        if not reserved:
            return True
        return pinning == _SOME and left > 0

    if thread_policy == m.THREAD_ISOLATE:
        if largest < tpc:
            return False
        if tpc != 1 and not cell.pcpus_are_cpus:
            return False
        pinning = _pinning(1, sets_with_at_least(tpc), wanted)
        return pinning == _SOME and reserved_ok(
            pinning, total_free - wanted * tpc)

    if thread_policy == m.THREAD_REQUIRE and tpc <= 1:
        return False
    pinning = _NONE
    for threads in range(largest, 0, -1):
        if thread_policy == m.THREAD_REQUIRE and threads <= 1:
            continue
        pinning = _pinning(threads, sets_with_at_least(threads), wanted)
        if pinning == _NONE or not reserved_ok(pinning, total_free - wanted):
            continue
        break
    if thread_policy != m.THREAD_REQUIRE and pinning != _SOME:
        # Nova falls back to treating every free thread as a core.
        pinning = _pinning(1, total_free, wanted)
    return pinning != _NONE and reserved_ok(pinning, total_free - wanted)


def _fit_cell(host, cell, req, pagesize, reserved):
    """Nova's _numa_fit_instance_cell.

    Returns ``(fits, pagesize)``: Nova stores the chosen page size in the
    instance cell as soon as the memory check passes, even if a later check
    fails, and later attempts use it.
    """
    dedicated = req.cpu_policy in (m.CPU_DEDICATED, m.CPU_MIXED)
    shared = req.cpu_policy in (m.CPU_SHARED, m.CPU_MIXED)
    if pagesize:
        chosen = _pick_page_size(cell, pagesize, req.memory * 1024)
        if not chosen:
            return False, pagesize
        pagesize = chosen
    elif cell.pages:
        smallest = min(p.size_kb for p in cell.pages)
        if not _can_fit_pagesize(cell, smallest, req.memory * 1024,
                                 use_free=dedicated):
            return False, pagesize
    elif dedicated:
        if cell.memory - cell.memory_usage < req.memory:
            return False, pagesize
    elif cell.memory < req.memory:
        return False, pagesize

    if dedicated and req.pcpus + reserved > cell.pcpus:
        return False, pagesize
    if shared and req.cpus > cell.cpus:
        return False, pagesize
    if dedicated:
        if req.pcpus + reserved > cell.free_pcpus:
            return False, pagesize
        if not _pack_onto_cores(cell, req.pcpus, reserved,
                                req.thread_policy):
            return False, pagesize
    if shared and host.cpu_allocation_ratio is not None:
        if cell.cpu_usage + req.cpus > cell.cpus * host.cpu_allocation_ratio:
            return False, pagesize
        if (cell.memory_usage + req.memory >
                cell.memory * host.ram_allocation_ratio):
            return False, pagesize
    return True, pagesize


def _ordered_cells(host, request):
    """The order in which Nova tries host cells."""
    cells = list(host.cells)
    if len(cells) <= len(request.cells):
        return cells
    pack = request.pack
    cells.sort(reverse=not pack,
               key=lambda c: c.memory - c.memory_usage)
    if request.cells[0].cpu_policy == m.CPU_SHARED:
        cells.sort(reverse=pack, key=lambda c: c.cpu_usage)
    else:
        cells.sort(reverse=not pack, key=lambda c: c.free_pcpus)
    if host.has_pci_stats:
        cells.sort(reverse=request.has_pci_requests,
                   key=lambda c: c.pci_devices)
    return cells


def _pci_fits(request, chosen, pci, index_of):
    wanted = request.pci.count
    matching = sum(pci.matching_by_cell[index_of[c.id]] for c in chosen)
    eligible = sum(pci.eligible_by_cell[index_of[c.id]] for c in chosen)
    policy = request.pci.policy
    if policy == m.PCI_REQUIRED or matching >= wanted:
        return eligible >= wanted
    if (policy == m.PCI_LEGACY or
            matching + pci.matching_no_numa >= wanted):
        return eligible + pci.eligible_no_numa >= wanted
    return pci.eligible_all >= wanted


def fits(host, request, pci=None):
    """Return YES, NO or UNKNOWN for one host (see module docstring)."""
    if host.status == m.HOST_NO_TOPOLOGY:
        return m.NO
    if host.status != m.HOST_OK:
        return m.UNKNOWN
    if not request.cells or not host.cells:
        return m.NO
    if len(host.cells) < len(request.cells):
        return m.NO
    if math.perm(len(host.cells), len(request.cells)) > m.MAX_PERMUTATIONS:
        return m.UNKNOWN
    if request.pci is not None and pci is None:
        return m.UNKNOWN

    ordered = _ordered_cells(host, request)
    index_of = {cell.id: i for i, cell in enumerate(host.cells)}
    # The instance cells' mutable state, carried across candidates as Nova
    # carries it in the one request object its filter reuses.
    cell_ids = [cell.id for cell in request.cells]
    pagesizes = [cell.pagesize for cell in request.cells]
    for _candidate in range(host.candidates):
        if _fit_once(host, request, pci, ordered, index_of, cell_ids,
                     pagesizes):
            return m.YES
    return m.NO


def _fit_once(host, request, pci, ordered, index_of, cell_ids, pagesizes):
    fitted = set()
    not_fitted = set()
    for perm in itertools.permutations(ordered, len(request.cells)):
        complete = True
        for position, host_cell in enumerate(perm):
            key = (host_cell.id, cell_ids[position])
            if key in not_fitted:
                complete = False
                break
            if key in fitted:
                cell_ids[position] = host_cell.id
                continue
            reserved = 1 if (request.emulator_threads_isolated and
                             position == 0) else 0
            ok, pagesizes[position] = _fit_cell(
                host, host_cell, request.cells[position],
                pagesizes[position], reserved)
            if not ok:
                not_fitted.add(key)
                complete = False
                break
            cell_ids[position] = host_cell.id
            fitted.add(key)
        if not complete:
            continue
        if request.pci is not None and not _pci_fits(request, perm, pci,
                                                     index_of):
            continue
        return True
    return False
