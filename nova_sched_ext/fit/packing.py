"""Pack model tuples into the byte layout of ``_c/cfit.h``.

Each struct of the header is described here once, field by field
(``*_FIELDS``: name and :mod:`struct` code, in the header's order, no
implicit padding), and the :class:`struct.Struct` that packs it is built
from that description. The layouts must match the header's: the compiled
helper reports its own struct sizes (``nse_layout``) and
:mod:`~nova_sched_ext.fit.lowlevel` refuses a helper that disagrees;
``tests/unit/fit/test_lowlevel.py`` also compares every field offset with
the compiled helper's.
"""

import struct

from nova_sched_ext.fit import model as m

HOST_FIELDS = (
    ('status', 'i'), ('n_cells', 'i'), ('has_limits', 'i'),
    ('has_pci_stats', 'i'), ('candidates', 'i'), ('reserved_', 'i'),
    ('cpu_allocation_ratio', 'd'), ('ram_allocation_ratio', 'd'),
    ('total_vcpus', 'q'), ('free_vcpus', 'q'), ('total_memory_mb', 'q'),
    ('free_memory_mb', 'q'),
)
CELL_FIELDS = (
    ('memory', 'q'), ('memory_usage', 'q'), ('pci_devices', 'q'),
    ('page_size_kb', '%dq' % m.MAX_PAGE_SIZES),
    ('page_total', '%dq' % m.MAX_PAGE_SIZES),
    ('page_used', '%dq' % m.MAX_PAGE_SIZES),
    ('page_reserved', '%dq' % m.MAX_PAGE_SIZES),
    ('id', 'i'), ('cpus', 'i'), ('pcpus', 'i'), ('free_pcpus', 'i'),
    ('cpu_usage', 'i'), ('threads_per_core', 'i'), ('pcpus_are_cpus', 'i'),
    ('n_pages', 'i'),
    # free_sibling_hist[s]: sibling sets with s free threads, s = 0..max
    ('free_sibling_hist', '%di' % (m.MAX_THREADS + 1)),
    ('reserved_', 'i'),
)
REQUEST_FIELDS = (
    ('n_cells', 'i'), ('emulator_threads_isolated', 'i'), ('has_pci', 'i'),
    ('pci_count', 'i'), ('pci_policy', 'i'), ('has_pci_requests', 'i'),
    ('pack', 'i'), ('reserved_', 'i'),
)
REQUEST_CELL_FIELDS = (
    ('memory', 'q'), ('pagesize', 'q'), ('id', 'i'), ('cpus', 'i'),
    ('pcpus', 'i'), ('cpu_policy', 'i'), ('thread_policy', 'i'),
    ('reserved_', 'i'),
)
# struct nse_request ends with cells[MAX_CELLS], struct nse_shape with its
# struct nse_request numa: packed as REQUEST_HEAD then the cells.
SHAPE_FIELDS = (('vcpus', 'q'), ('memory_mb', 'q'))


def _struct(fields):
    return struct.Struct('=' + ''.join(code for _name, code in fields))


def offsets(fields):
    """``{field name: byte offset}`` of a ``*_FIELDS`` description."""
    result, offset = {}, 0
    for name, code in fields:
        result[name] = offset
        offset += struct.calcsize('=' + code)
    return result


HOST = _struct(HOST_FIELDS)
CELL = _struct(CELL_FIELDS)
REQUEST_HEAD = _struct(REQUEST_FIELDS)
REQUEST_CELL = _struct(REQUEST_CELL_FIELDS)
SHAPE_HEAD = _struct(SHAPE_FIELDS)

#: The size of each struct of cfit.h as packed here, by the name
#: the helper's ``nse_layout`` gives it.
SIZES = {
    'host': HOST.size,
    'host_cell': CELL.size,
    'request': REQUEST_HEAD.size + m.MAX_CELLS * REQUEST_CELL.size,
    'request_cell': REQUEST_CELL.size,
    'shape': SHAPE_HEAD.size + REQUEST_HEAD.size +
    m.MAX_CELLS * REQUEST_CELL.size,
}

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
    parts.extend([_EMPTY_CELL] * (m.MAX_CELLS - len(request.cells)))
    return b''.join(parts)


def pci_words(host, pci):
    """The int64 words of one host's PCI record (see cfit.h)."""
    if host.status != m.HOST_OK or pci is None:
        n = 0 if host.status != m.HOST_OK else len(host.cells)
        return [n] + [0] * (2 * n) + [0, 0, 0]
    return ([len(host.cells)] + list(pci.matching_by_cell) +
            list(pci.eligible_by_cell) +
            [pci.matching_no_numa, pci.eligible_no_numa, pci.eligible_all])


def pack_shape(shape):
    """Bytes of a struct nse_shape."""
    return SHAPE_HEAD.pack(shape.vcpus, shape.memory_mb) + \
        pack_request(shape.numa)


_EMPTY_CELL = REQUEST_CELL.pack(0, 0, 0, 0, 0, 0, 0, 0)
_EMPTY_REQUEST = REQUEST_HEAD.pack(0, 0, 0, 0, 0, 0, 0, 0) + \
    _EMPTY_CELL * m.MAX_CELLS
