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
import sys

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

    Returns ``(fits, pagesize, pinned)``.  Nova stores the chosen page size
    in the instance cell as soon as the memory check passes, even if a later
    check fails, and later attempts use it.  ``pinned`` says that Nova's
    ``_pack_instance_onto_cores`` succeeded: it sets the instance cell's id
    to the host cell's there, before the shared-CPU limits of a mixed cell
    are checked, so the id stays changed when that check then fails.
    """
    dedicated = req.cpu_policy in (m.CPU_DEDICATED, m.CPU_MIXED)
    shared = req.cpu_policy in (m.CPU_SHARED, m.CPU_MIXED)
    if pagesize:
        chosen = _pick_page_size(cell, pagesize, req.memory * 1024)
        if not chosen:
            return False, pagesize, False
        pagesize = chosen
    elif cell.pages:
        smallest = min(p.size_kb for p in cell.pages)
        if not _can_fit_pagesize(cell, smallest, req.memory * 1024,
                                 use_free=dedicated):
            return False, pagesize, False
    elif dedicated:
        if cell.memory - cell.memory_usage < req.memory:
            return False, pagesize, False
    elif cell.memory < req.memory:
        return False, pagesize, False

    if dedicated and req.pcpus + reserved > cell.pcpus:
        return False, pagesize, False
    if shared and req.cpus > cell.cpus:
        return False, pagesize, False
    if dedicated:
        if req.pcpus + reserved > cell.free_pcpus:
            return False, pagesize, False
        if not _pack_onto_cores(cell, req.pcpus, reserved,
                                req.thread_policy):
            return False, pagesize, False
    if shared and host.cpu_allocation_ratio is not None:
        if cell.cpu_usage + req.cpus > cell.cpus * host.cpu_allocation_ratio:
            return False, pagesize, dedicated
        if (cell.memory_usage + req.memory >
                cell.memory * host.ram_allocation_ratio):
            return False, pagesize, dedicated
    return True, pagesize, dedicated


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
    """Return YES, NO or UNKNOWN for one host (see module docstring).

    Raises :class:`~nova_sched_ext.fit.model.InvalidInput` for a host or
    request outside the bounds, as the C helper refuses them.
    """
    m.check(m.host_problem(host))
    m.check(m.request_problem(request))
    return _search(host, request, pci)[0]


def _search(host, request, pci=None):
    """``(answer, chosen host cells, chosen page sizes, stale pinning)``.

    The answer is Nova's fit's.  ``stale pinning`` (with YES) says that an
    instance cell that must pin host CPUs was placed through Nova's pair
    cache while the pinning it carries was computed in another host cell
    (see :func:`_fit_once`): the compute's claim cannot account such a
    topology as the engine would.
    """
    answer = _before_any_run(host, request, pci)
    if answer is not None:
        return answer, None, None, False
    ordered, index_of, cell_ids, pagesizes, pinned_in = _first_run(
        host, request)
    for _candidate in range(host.candidates):
        state = (list(cell_ids), list(pagesizes))
        chosen = _fit_once(host, request, pci, ordered, index_of, cell_ids,
                           pagesizes, pinned_in)
        if chosen is not None:
            return m.YES, chosen, pagesizes, _stale_pinning(
                request, chosen, pinned_in)
        if state == (cell_ids, pagesizes):
            # The next candidate starts from the same state and fails the
            # same way: one more proves nothing (and bounds the loop).
            break
    return m.NO, None, None, False


def run_outcomes(host, request, pci=None):
    """Whether each of Nova's runs fits, one per allocation candidate.

    Nova's ``NUMATopologyFilter`` runs the fit once per candidate of a
    host on one copy of the request, each run starting from the instance
    cell ids and page sizes the run before left, success or not, and
    keeps the candidates whose run fits.  :func:`fits` stops at the first
    run that fits; this goes on, in the same steps, through
    ``host.candidates`` runs.

    :returns: a tuple of ``host.candidates`` booleans, or None where the
        answer is UNKNOWN
    :raises model.InvalidInput: as :func:`fits`
    """
    m.check(m.host_problem(host))
    m.check(m.request_problem(request))
    answer = _before_any_run(host, request, pci)
    if answer == m.UNKNOWN:
        return None
    if answer == m.NO:
        return (False,) * host.candidates
    ordered, index_of, cell_ids, pagesizes, pinned_in = _first_run(
        host, request)
    outcomes = []
    while len(outcomes) < host.candidates:
        state = (list(cell_ids), list(pagesizes))
        outcomes.append(_fit_once(host, request, pci, ordered, index_of,
                                  cell_ids, pagesizes, pinned_in)
                        is not None)
        if state == (cell_ids, pagesizes):
            # Every later run starts from this state: it ends the same.
            outcomes.extend([outcomes[-1]] *
                            (host.candidates - len(outcomes)))
    return tuple(outcomes)


def _before_any_run(host, request, pci):
    """The answer known before any run (NO or UNKNOWN), or None."""
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
    return None


def _first_run(host, request):
    """What the first of Nova's runs on a host starts from.

    ``(host cells in Nova's order, index by cell id, instance cell ids,
    page sizes, pinned_in)``; the last three are the instance cells'
    mutable state, carried across candidates as Nova carries it in the
    one request object its filter reuses (``pinned_in``: the host cell id
    whose CPUs each instance cell's pinning names, the last one Nova's
    ``_pack_instance_onto_cores`` pinned it in).
    """
    return (_ordered_cells(host, request),
            {cell.id: i for i, cell in enumerate(host.cells)},
            [cell.id for cell in request.cells],
            [cell.pagesize for cell in request.cells],
            [None] * len(request.cells))


def _stale_pinning(request, chosen, pinned_in):
    """Whether a chosen cell carries the pinning of another host cell.

    Nova's pair cache skips the fit of a pair it saw fit before, so the
    instance cell keeps the pinning of the last host cell it was packed
    onto, which may be another one since (a later permutation, or a mixed
    cell pinned before its shared CPUs failed), or none at all (the key
    was cached by another instance cell that had the same id then).  The
    claim's ``numa_usage_from_instance_numa`` then pins those foreign CPUs
    in the landed cell: ``CPUPinningUnknown`` (the claim fails); or it
    pins nothing there (no pinning, or the ``isolate`` policy), which the
    engine's accounting does not model either.  Only a cell with CPUs to
    pin (dedicated ones, or the emulator's reserved one) is affected.
    """
    for pos, host_cell in enumerate(chosen):
        want = request.cells[pos]
        if want.cpu_policy not in (m.CPU_DEDICATED, m.CPU_MIXED):
            continue
        reserved = pos == 0 and request.emulator_threads_isolated
        if (want.pcpus or reserved) and pinned_in[pos] != host_cell.id:
            return True
    return False


def _fit_once(host, request, pci, ordered, index_of, cell_ids, pagesizes,
              pinned_in):
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
            ok, pagesizes[position], pinned = _fit_cell(
                host, host_cell, request.cells[position],
                pagesizes[position], reserved)
            if pinned:
                pinned_in[position] = host_cell.id
            if not ok:
                # The pair is cached under the id the cell had before the
                # try, but a pinned mixed cell leaves with its new id.
                not_fitted.add(key)
                if pinned:
                    cell_ids[position] = host_cell.id
                complete = False
                break
            cell_ids[position] = host_cell.id
            fitted.add(key)
        if not complete:
            continue
        if request.pci is not None and not _pci_fits(request, perm, pci,
                                                     index_of):
            continue
        return perm
    return None


# --- Slot counting (NUMASlotWeigher); _c/cfit.c mirrors it. -------------

SLOTS_MAX = 2 ** 31 - 1


def _floor_div(numerator, denominator):
    # not (x > 0) rather than x <= 0: NaN is no room, as in cfit.c
    if not numerator > 0:
        return 0
    quotient = numerator / denominator
    return SLOTS_MAX if quotient >= SLOTS_MAX else int(quotient)


def _free_pages(page):
    return page.total - page.used - page.reserved


def _page_candidate(cell, page, pagesize):
    smallest = min(p.size_kb for p in cell.pages)
    if pagesize > 0:
        return page.size_kb == pagesize
    if pagesize == m.PAGESIZE_SMALL:
        return page.size_kb == smallest
    if pagesize == m.PAGESIZE_LARGE:
        return page.size_kb != smallest
    return pagesize == m.PAGESIZE_ANY


def _cell_units(host, cell, want):
    """How many copies of one instance cell fit in one host cell alone."""
    dedicated = want.cpu_policy in (m.CPU_DEDICATED, m.CPU_MIXED)
    shared = want.cpu_policy in (m.CPU_SHARED, m.CPU_MIXED)
    memory_kb = want.memory * 1024
    units = SLOTS_MAX
    if want.memory <= 0:
        return 0
    if want.pagesize:
        by_pages = 0
        for page in cell.pages:
            if (not _page_candidate(cell, page, want.pagesize) or
                    memory_kb % page.size_kb):
                continue
            by_pages += _floor_div(_free_pages(page) * page.size_kb,
                                   memory_kb)
        units = min(units, by_pages)
    elif cell.pages:
        size = min(p.size_kb for p in cell.pages)
        page = next(p for p in cell.pages if p.size_kb == size)
        if memory_kb % size:
            return 0
        if dedicated:
            units = min(units, _floor_div(_free_pages(page) * size,
                                          memory_kb))
        elif memory_kb > page.total * size:
            return 0
    elif dedicated:
        units = min(units, _floor_div(cell.memory - cell.memory_usage,
                                      want.memory))
    elif cell.memory < want.memory:
        return 0

    if dedicated and want.pcpus > 0:
        if want.pcpus > cell.pcpus:
            return 0
        sizes = cell.free_sibling_sizes
        if want.thread_policy == m.THREAD_ISOLATE:
            if cell.threads_per_core != 1 and not cell.pcpus_are_cpus:
                return 0
            threads = sum(1 for s in sizes if s == cell.threads_per_core)
        elif want.thread_policy == m.THREAD_REQUIRE:
            if cell.threads_per_core <= 1:
                return 0
            threads = sum(s for s in sizes if s >= 2)
        else:
            threads = cell.free_pcpus
        units = min(units, threads // want.pcpus)
    if shared:
        if want.cpus > cell.cpus:
            return 0
        if host.cpu_allocation_ratio is not None:
            if want.cpus > 0:
                units = min(units, _floor_div(
                    cell.cpus * host.cpu_allocation_ratio - cell.cpu_usage,
                    want.cpus))
            units = min(units, _floor_div(
                cell.memory * host.ram_allocation_ratio - cell.memory_usage,
                want.memory))
    return max(units, 0)


def _unit_cell(numa):
    """The largest instance cell, field by field (never overstates)."""
    cells = numa.cells
    unit = cells[0]._replace(cpus=max(c.cpus for c in cells),
                             pcpus=max(c.pcpus for c in cells),
                             memory=max(c.memory for c in cells))
    if numa.emulator_threads_isolated:
        unit = unit._replace(pcpus=unit.pcpus + 1)
    return unit


def _host_cap(host, shape):
    cap = SLOTS_MAX
    if host.total_vcpus >= 0 and shape.vcpus > 0:
        cap = min(cap, _floor_div(host.free_vcpus, shape.vcpus))
    if host.total_memory_mb >= 0 and shape.memory_mb > 0:
        cap = min(cap, _floor_div(host.free_memory_mb, shape.memory_mb))
    return cap


def slots(host, shape):
    """How many more instances of ``shape`` the host can take at once.

    Per host cell, the number of copies of the shape's (largest) instance
    cell that fit there alone; an instance of k cells needs k distinct
    cells, so the count is the largest t with sum(min(units, t)) >= k * t;
    then capped by the host-level room placement sees.  Raises
    :class:`~nova_sched_ext.fit.model.InvalidInput` where cfit refuses.
    """
    m.check(m.host_problem(host))
    m.check(m.shape_problem(shape))
    return _slots(host, shape)


def _slots(host, shape):
    cap = _host_cap(host, shape)
    numa = shape.numa
    if numa is None or not numa.cells:
        return cap
    if host.status != m.HOST_OK or len(host.cells) < len(numa.cells):
        return 0
    unit = _unit_cell(numa)
    units = [_cell_units(host, cell, unit) for cell in host.cells]
    k = len(numa.cells)
    lo, hi = 0, sum(units) // k
    while lo < hi:
        mid = lo + (hi - lo + 1) // 2
        if sum(min(u, mid) for u in units) >= k * mid:
            lo = mid
        else:
            hi = mid - 1
    return min(lo, cap)


def _take_threads(cell, wanted, policy):
    """Nova-like pinning on the free sibling sizes (see cfit.c)."""
    hist = [0] * (m.MAX_THREADS + 1)
    for size in cell.free_sibling_sizes:
        hist[size] += 1
    free_pcpus = cell.free_pcpus
    if policy == m.THREAD_ISOLATE:
        tpc = cell.threads_per_core
        cores = min(wanted, hist[tpc])
        hist[tpc] -= cores
        hist[0] += cores
        free_pcpus -= cores * tpc
    else:
        threads = 1
        for t in range(m.MAX_THREADS, 0, -1):
            sets = sum(hist[t:])
            if sets > 0 and t * sets >= wanted:
                threads = t
                break
        while wanted > 0:
            size = next((s for s in range(threads, m.MAX_THREADS + 1)
                         if hist[s] > 0), None)
            if size is None:
                if threads == 1:
                    break
                threads = 1
                continue
            take = min(threads, wanted)
            hist[size] -= 1
            hist[size - take] += 1
            free_pcpus -= take
            wanted -= take
    sizes = tuple(s for s, n in enumerate(hist) for _ in range(n))
    return cell._replace(free_sibling_sizes=sizes, free_pcpus=free_pcpus)


def place(host, request):
    """The host once ``request`` (a Shape) is placed as Nova places it.

    None when the request does not fit, or the engine cannot tell (among
    others where Nova's fit answers a topology whose pinning the compute's
    claim would refuse, or would pin nothing: :func:`_stale_pinning`).
    Raises :class:`~nova_sched_ext.fit.model.InvalidInput` where cfit
    refuses.
    """
    m.check(m.host_problem(host))
    m.check(m.shape_problem(request))
    return _place(host, request)


def _place(host, request):
    return _place_or_why(host, request)[0]


def _place_or_why(host, request):
    """``(host after, answer)``: :func:`_place`, and why it is None.

    The answer is YES with a placed host, NO where Nova's fit says no, and
    UNKNOWN where the engine cannot tell: a host of unknown status, a
    search beyond the engine's bounds, or a placement whose pinning the
    compute's claim would not account as the engine does
    (:func:`_stale_pinning`).
    """
    if host.status not in (m.HOST_OK, m.HOST_NO_TOPOLOGY):
        # The engine cannot tell, whatever the request: such a host weighs
        # as the worst host (cfit.c's place_request too), never as one
        # where the request costs nothing.
        return None, m.UNKNOWN
    after = host._replace(free_vcpus=host.free_vcpus - request.vcpus,
                          free_memory_mb=host.free_memory_mb -
                          request.memory_mb)
    numa = request.numa
    if numa is None or not numa.cells:
        return after, m.YES
    answer, chosen, pagesizes, stale = _search(host, numa)
    if answer != m.YES:
        return None, answer
    if stale:
        return None, m.UNKNOWN
    cells = list(host.cells)
    position_of = {c.id: i for i, c in enumerate(host.cells)}
    for pos, host_cell in enumerate(chosen):
        i = position_of[host_cell.id]
        cell = cells[i]
        want = numa.cells[pos]
        changes = {'memory_usage': cell.memory_usage + want.memory}
        if want.cpu_policy in (m.CPU_SHARED, m.CPU_MIXED):
            changes['cpu_usage'] = cell.cpu_usage + want.cpus
        if cell.pages:
            size = pagesizes[pos]
            if size <= 0:
                size = min(p.size_kb for p in cell.pages)
            pages = list(cell.pages)
            for j, page in enumerate(pages):
                if page.size_kb == size:
                    pages[j] = page._replace(
                        used=page.used + want.memory * 1024 // size)
                    break
            changes['pages'] = tuple(pages)
        cell = cell._replace(**changes)
        pinned = want.pcpus + (1 if pos == 0 and
                               numa.emulator_threads_isolated else 0)
        if want.cpu_policy in (m.CPU_DEDICATED, m.CPU_MIXED):
            cell = _take_threads(cell, pinned, want.thread_policy)
        cells[i] = cell
    return after._replace(cells=tuple(cells)), m.YES


def place_count(host, shape, limit):
    """How many instances of ``shape`` ``host`` takes at once (cfit.c).

    Placed one after another as Nova places them (:func:`_place`), each
    one's usage accounted before the next, until one does not fit or
    ``limit`` are placed.  A shape without NUMA cells is not placed (it is
    counted at ``limit``: only placement has a say); -1 when the engine
    cannot tell: a host of unknown status, a host whose state, once
    filled, leaves the bounds of
    :func:`~nova_sched_ext.fit.model.host_problem`, or an instance that
    Nova's fit places with pinning the compute's claim would not account
    as the engine does (:func:`_stale_pinning`: the claim fails, or pins
    nothing).
    The host and shape are checked by :func:`place_counts`.
    """
    if limit == 0:
        return 0
    numa = shape.numa
    if numa is None or not numa.cells:
        return limit
    if host.status not in (m.HOST_OK, m.HOST_NO_TOPOLOGY):
        return -1
    count = 0
    while count < limit:
        if count > 0 and m.host_problem(host) is not None:
            return -1
        after, answer = _place_or_why(host, shape)
        if answer == m.UNKNOWN:
            return -1
        if after is None:
            break
        count += 1
        host = after
    return count


def place_counts(hosts, shapes, limits):
    """:func:`place_count` of every host and shape, like nse_place_counts.

    :param hosts: :class:`~nova_sched_ext.fit.model.Host` objects
    :param shapes: :class:`~nova_sched_ext.fit.model.Shape` objects (no PCI)
    :param limits: host-major, one per host and shape, each in
        0..``MAX_INSTANCES``
    :returns: the counts, host-major
    :raises: :class:`~nova_sched_ext.fit.model.InvalidInput` where cfit
        refuses the input
    """
    hosts, shapes, limits = list(hosts), list(shapes), list(limits)
    for shape in shapes:
        m.check(m.shape_problem(shape))
    if len(limits) != len(hosts) * len(shapes):
        raise m.InvalidInput('%d limits for %d hosts and %d shapes' % (
            len(limits), len(hosts), len(shapes)))
    for limit in limits:
        if not 0 <= limit <= m.MAX_INSTANCES:
            raise m.InvalidInput('limit %r not in 0..%d' % (
                limit, m.MAX_INSTANCES))
    counts = []
    for h, host in enumerate(hosts):
        m.check(m.host_problem(host))
        base = h * len(shapes)
        counts.extend(place_count(host, shape, limits[base + k])
                      for k, shape in enumerate(shapes))
    return counts


def free_share(host):
    share, parts = 0.0, 0
    if host.total_vcpus > 0:
        share += host.free_vcpus / host.total_vcpus
        parts += 1
    if host.total_memory_mb > 0:
        share += host.free_memory_mb / host.total_memory_mb
        parts += 1
    if not parts:
        return 0.0
    return min(max(share / parts, 0.0), 1.0)


def room_weight(room, weight):
    """A host's raw weight in room mode, from its room and normal weight.

    ``room`` is how many instances of the request's own shape the host can
    still take (capped); ``weight`` the normal raw weight (minus the
    weighted slot loss minus the tie-break, <= 0).  Room decides first; the
    second term, in (0, 0.5], orders hosts of equal room by their normal
    weight.  cfit.c computes the same expression.
    """
    return room + 0.5 / (1.0 - weight)


def slot_weights(hosts, shapes, shape_weights, request, room_cap=None):
    """``(before, after, weights)`` for many hosts, like cfit's nse_slots.

    With ``room_cap`` not None (room mode, see NUMASlotWeigher), each
    placeable host weighs :func:`room_weight` of its room (the slots of the
    request's own shape, at most ``room_cap`` when it is > 0) and its
    normal weight.
    """
    for shape in list(shapes) + ([request] if request is not None else []):
        m.check(m.shape_problem(shape))
    for weight in shape_weights:
        # finite and not negative, written so that NaN fails (cfit.c)
        if not 0.0 <= weight <= sys.float_info.max:
            raise m.InvalidInput('slot weight %r' % (weight,))
    if room_cap is not None and room_cap > SLOTS_MAX:
        raise m.InvalidInput('room cap %r' % (room_cap,))
    for host in hosts:
        m.check(m.host_problem(host))
    positive = [w for w in shape_weights if w > 0]
    tie = min(positive + [1.0]) / 2
    before, after, weights = [], [], []
    for host in hosts:
        placed = _place(host, request) if request is not None else None
        loss = 0.0
        for shape, weight in zip(shapes, shape_weights):
            b = _slots(host, shape)
            before.append(b)
            if request is None:
                continue
            if placed is not None:
                a = _slots(placed, shape)
                after.append(a)
                if b > a:
                    loss += weight * (b - a)
            else:
                after.append(-1)
        if request is None:
            continue
        if placed is None:
            weights.append(None)
            continue
        weight = -loss - tie * free_share(placed)
        if room_cap is not None:
            room = _slots(host, request)
            if room_cap > 0:
                room = min(room, room_cap)
            weight = room_weight(room, weight)
        weights.append(weight)
    if request is not None:
        known = [w for w in weights if w is not None]
        worst = min(known) if known else 0.0
        weights = [worst if w is None else w for w in weights]
    return before, after, weights
