"""Pack model tuples into the byte layout of ``_c/cfit.h``.

The layouts here and in the header must match field for field; a unit test
compares ``struct`` sizes with ``ffi.sizeof`` so a drift fails loudly.
"""

import struct

from nova_sched_ext.fit import model as m

HOST = struct.Struct('=6i2d4q')
CELL = struct.Struct('=3q%dq8i%di i' % (4 * m.MAX_PAGE_SIZES,
                                        m.MAX_THREADS + 1))
REQUEST_HEAD = struct.Struct('=8i')
REQUEST_CELL = struct.Struct('=2q6i')

_PAD_PAGES = (0,) * m.MAX_PAGE_SIZES


def _pages(column, pages):
    values = tuple(column(p) for p in pages)
    return values + _PAD_PAGES[len(values):]


def pack_host(host):
    """Bytes of one host record (header followed by its cells)."""
    limits = host.cpu_allocation_ratio is not None
    head = HOST.pack(
        host.status, len(host.cells) if host.status == m.HOST_OK else 0,
        1 if limits else 0, 1 if host.has_pci_stats else 0,
        host.candidates, 0,
        host.cpu_allocation_ratio if limits else 0.0,
        host.ram_allocation_ratio if limits else 0.0,
        host.total_vcpus, host.free_vcpus, host.total_memory_mb,
        host.free_memory_mb)
    if host.status != m.HOST_OK:
        return head
    parts = [head]
    for cell in host.cells:
        hist = [0] * (m.MAX_THREADS + 1)
        for size in cell.free_sibling_sizes:
            hist[size] += 1
        parts.append(CELL.pack(
            cell.memory, cell.memory_usage, cell.pci_devices,
            *_pages(lambda p: p.size_kb, cell.pages),
            *_pages(lambda p: p.total, cell.pages),
            *_pages(lambda p: p.used, cell.pages),
            *_pages(lambda p: p.reserved, cell.pages),
            cell.id, cell.cpus, cell.pcpus, cell.free_pcpus, cell.cpu_usage,
            cell.threads_per_core, 1 if cell.pcpus_are_cpus else 0,
            len(cell.pages), *hist, 0))
    return b''.join(parts)


def pack_request(request):
    """Bytes of a struct nse_request."""
    if request is None:
        return _EMPTY_REQUEST
    pci = request.pci
    parts = [REQUEST_HEAD.pack(
        len(request.cells), 1 if request.emulator_threads_isolated else 0,
        1 if pci else 0, pci.count if pci else 0, pci.policy if pci else 0,
        1 if request.has_pci_requests else 0, 1 if request.pack else 0, 0)]
    for cell in request.cells:
        parts.append(REQUEST_CELL.pack(
            cell.memory, cell.pagesize, cell.id, cell.cpus, cell.pcpus,
            cell.cpu_policy, cell.thread_policy, 0))
    empty = REQUEST_CELL.pack(0, 0, 0, 0, 0, 0, 0, 0)
    parts.extend([empty] * (m.MAX_CELLS - len(request.cells)))
    return b''.join(parts)


def pci_words(host, pci):
    """The int64 words of one host's PCI record (see cfit.h)."""
    if host.status != m.HOST_OK or pci is None:
        n = 0 if host.status != m.HOST_OK else len(host.cells)
        return [n] + [0] * (2 * n) + [0, 0, 0]
    return ([len(host.cells)] + list(pci.matching_by_cell) +
            list(pci.eligible_by_cell) +
            [pci.matching_no_numa, pci.eligible_no_numa, pci.eligible_all])


SHAPE_HEAD = struct.Struct('=2q')


def pack_shape(shape):
    """Bytes of a struct nse_shape."""
    return SHAPE_HEAD.pack(shape.vcpus, shape.memory_mb) + \
        pack_request(shape.numa)


_EMPTY_REQUEST = REQUEST_HEAD.pack(0, 0, 0, 0, 0, 0, 0, 0) + \
    REQUEST_CELL.pack(0, 0, 0, 0, 0, 0, 0, 0) * m.MAX_CELLS
