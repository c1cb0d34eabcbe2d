"""The seam to the C fit helper: the only importer of ``fit._cfit``.

The compiled helper (``_c/cfit.c``, built by ``_cfit_build.py`` in cffi's
out-of-line API mode) is reached through this module alone, as argon2-cffi
reaches its library through ``argon2.low_level``: one Python function per C
entry point, taking packed records and model tuples and returning Python
lists, so that no ``ffi`` or ``lib`` object leaves this module.

* :func:`available` / :func:`require`: whether the helper loads (once,
  thread-safe) and agrees with the Python side, or why not
  (:class:`HelperUnavailable`).
* :func:`fit_hosts` (``nse_fit_hosts``), :func:`fit_runs`
  (``nse_fit_runs``), :func:`slots` (``nse_slots``),
  :func:`slot_weights_indexed` (``nse_slot_weights_indexed``).
* :func:`packed_shapes`: a reference list of shapes and their weights,
  marshalled once per list (cached) and shared by every caller. A request
  shape is marshalled once too (cached), a fit request once per call.
* :class:`HelperError`: the helper refused its input, with the entry point
  and the ``NSE_ERR_*`` code and name. The fit engine's one fallback rule
  (:func:`nova_sched_ext.fit.engine.with_fallback`) turns it into one error
  in the log and the pure-Python twin's answer.

The constants and struct layouts of ``cfit.h`` have their Python values in
:mod:`~nova_sched_ext.fit.model`, :mod:`~nova_sched_ext.fit.packing` and
:data:`ERROR_NAMES` here (the package must work without the helper). The
helper is only used when it reports the same: every value of
:data:`EXPECTED_CONSTANTS` (``lib.NSE_*``, which cffi takes from the
header the helper was built from) and the struct sizes its ``nse_layout``
holds, as the compiled C computed them; a helper built from another
version of the header is unavailable, not misread.
``tests/unit/fit/test_lowlevel.py`` also checks every ``#define`` of
``cfit.h`` and every field offset.

Thread safety: the helper is loaded once under a lock; what is marshalled
once (shapes, requests) is only read by the C code, which keeps no pointer
past its return.
"""

import functools
import threading

from nova_sched_ext import exception as sched_ext_exception
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import packing

#: The names of the helper's error codes (cfit.h's ``NSE_ERR_*``).
ERROR_NAMES = {
    -1: 'NSE_ERR_TRUNCATED',
    -2: 'NSE_ERR_BAD_HOST',
    -3: 'NSE_ERR_BAD_REQUEST',
    -4: 'NSE_ERR_BAD_PCI',
}

#: Every constant of cfit.h, with the value the Python side uses.
EXPECTED_CONSTANTS = dict({
    'NSE_MAX_CELLS': m.MAX_CELLS,
    'NSE_MAX_PAGE_SIZES': m.MAX_PAGE_SIZES,
    'NSE_MAX_THREADS': m.MAX_THREADS,
    # the free sibling histogram: 0..MAX_THREADS free threads
    'NSE_HIST_LEN': m.MAX_THREADS + 1,
    'NSE_MAX_PERMUTATIONS': m.MAX_PERMUTATIONS,
    'NSE_MAX_CANDIDATES': m.MAX_CANDIDATES,
    'NSE_MAX_ALLOCATION_RATIO': m.MAX_ALLOCATION_RATIO,
    'NSE_MAX_CPUS': m.MAX_CPUS,
    'NSE_MAX_AMOUNT': m.MAX_AMOUNT,
    'NSE_MAX_PAGE_SIZE_KB': m.MAX_PAGE_SIZE_KB,
    'NSE_MAX_INSTANCES': m.MAX_INSTANCES,
    'NSE_NO': m.NO,
    'NSE_YES': m.YES,
    'NSE_UNKNOWN': m.UNKNOWN,
    'NSE_HOST_OK': m.HOST_OK,
    'NSE_HOST_NO_TOPOLOGY': m.HOST_NO_TOPOLOGY,
    'NSE_HOST_UNSUPPORTED': m.HOST_UNSUPPORTED,
    'NSE_CPU_SHARED': m.CPU_SHARED,
    'NSE_CPU_DEDICATED': m.CPU_DEDICATED,
    'NSE_CPU_MIXED': m.CPU_MIXED,
    'NSE_THREAD_PREFER': m.THREAD_PREFER,
    'NSE_THREAD_REQUIRE': m.THREAD_REQUIRE,
    'NSE_THREAD_ISOLATE': m.THREAD_ISOLATE,
    'NSE_PAGESIZE_NONE': m.PAGESIZE_NONE,
    'NSE_PAGESIZE_SMALL': m.PAGESIZE_SMALL,
    'NSE_PAGESIZE_LARGE': m.PAGESIZE_LARGE,
    'NSE_PAGESIZE_ANY': m.PAGESIZE_ANY,
    'NSE_PCI_LEGACY': m.PCI_LEGACY,
    'NSE_PCI_REQUIRED': m.PCI_REQUIRED,
    'NSE_PCI_PREFERRED': m.PCI_PREFERRED,
}, **{name: code for code, name in ERROR_NAMES.items()})

#: The C structs whose sizes ``nse_layout`` holds, by its field name.
STRUCTS = {
    'host': 'struct nse_host',
    'host_cell': 'struct nse_host_cell',
    'request': 'struct nse_request',
    'request_cell': 'struct nse_request_cell',
    'shape': 'struct nse_shape',
}


class HelperError(sched_ext_exception.NovaSchedExtError):
    """The C helper refused its input: a bug, please report it.

    Both engines refuse the same inputs, and the adapters make a host
    outside the bounds unknown before either sees it, so a refusal means
    that the Python side built something the helper cannot read.

    :ivar entry_point: the C function, e.g. ``'nse_fit_hosts'``
    :ivar code: its (negative) return code
    :ivar name: the code's name in ``cfit.h``, e.g. ``'NSE_ERR_BAD_HOST'``
    """

    def __init__(self, entry_point, code):
        self.entry_point = entry_point
        self.code = code
        self.name = ERROR_NAMES.get(code, 'an unknown error')
        super().__init__('%s refused its input: %s (%d)' % (
            entry_point, self.name, code))


class HelperUnavailable(ImportError, sched_ext_exception.NovaSchedExtError):
    """The C helper cannot be used: not built, or built from another header.

    The message says why.
    """


_load_lock = threading.Lock()
# (module, None) once loaded, (None, why not) once that failed.
_state = None


def _load():
    global _state
    state = _state
    if state is None:
        with _load_lock:
            if _state is None:
                _state = _import()
            state = _state
    return state


def _import():
    try:
        from nova_sched_ext.fit import _cfit
    except ImportError as exc:
        return None, 'it could not be imported (%s)' % exc
    problem = _disagreement(_cfit.ffi, _cfit.lib)
    if problem is not None:
        return None, ('it was built from another version of cfit.h (%s); '
                      'rebuild it' % problem)
    return _cfit, None


def _disagreement(ffi, lib):
    """How the compiled helper disagrees with the Python side, or None."""
    for name, value in sorted(EXPECTED_CONSTANTS.items()):
        if getattr(lib, name, None) != value:
            return '%s is %s there, %s here' % (
                name, getattr(lib, name, 'missing'), value)
    layout = getattr(lib, 'nse_layout', None)
    if layout is None:
        return 'it has no nse_layout'
    for key, struct_name in sorted(STRUCTS.items()):
        size = getattr(layout, key)
        if size != packing.SIZES[key] or ffi.sizeof(struct_name) != size:
            return '%s has %d bytes there, %d here' % (
                struct_name, size, packing.SIZES[key])
    return None


def available():
    """Whether the C helper is built, loads and agrees with this code."""
    return _load()[0] is not None


def unavailable_reason():
    """Why the C helper cannot be used (a sentence part), or None."""
    return _load()[1]


def require():
    """The check :func:`available` makes, raising why not.

    :raises HelperUnavailable: the helper is not built, does not load or
        was built from another version of ``cfit.h``
    """
    module, reason = _load()
    if module is None:
        raise HelperUnavailable('The C fit helper nova_sched_ext.fit._cfit '
                                'cannot be used: %s.' % reason)
    return module


def helper_constants():
    """``{name: value}`` of every ``NSE_*`` constant the helper exports."""
    lib = require().lib
    return {name: getattr(lib, name) for name in dir(lib)
            if name.startswith('NSE_')}


def helper_layout():
    """``{struct key: size}`` as the helper's ``nse_layout`` reports them."""
    layout = require().lib.nse_layout
    return {key: getattr(layout, key) for key in STRUCTS}


# -- marshalling, once -------------------------------------------------------

class PackedShapes(object):
    """Reference shapes and their slot weights, as the helper reads them.

    Build it with :func:`packed_shapes`, which returns the same object for
    the same list: the engine and the slot arena share it.
    """

    def __init__(self, shapes, shape_weights):
        ffi = require().ffi
        self.shapes = tuple(shapes)
        self.shape_weights = tuple(float(w) for w in shape_weights)
        if len(self.shapes) != len(self.shape_weights):
            raise ValueError('one slot weight per shape')
        self.c_shapes = ffi.new('struct nse_shape[]', max(len(self.shapes),
                                                          1))
        packed = b''.join(packing.pack_shape(s) for s in self.shapes)
        ffi.memmove(self.c_shapes, packed, len(packed))
        self.c_weights = ffi.new('double[]',
                                 list(self.shape_weights) or [0.0])

    def __len__(self):
        return len(self.shapes)


@functools.lru_cache(maxsize=16)
def _packed_shapes(shapes, shape_weights):
    return PackedShapes(shapes, shape_weights)


def packed_shapes(shapes, shape_weights):
    """The :class:`PackedShapes` of a list, built once per list."""
    return _packed_shapes(tuple(shapes),
                          tuple(float(w) for w in shape_weights))


@functools.lru_cache(maxsize=64)
def _c_shape(shape):
    ffi = require().ffi
    c_shape = ffi.new('struct nse_shape *')
    ffi.memmove(c_shape, packing.pack_shape(shape), packing.SIZES['shape'])
    return c_shape


def _c_request(ffi, request):
    c_request = ffi.new('struct nse_request *')
    ffi.memmove(c_request, packing.pack_request(request),
                packing.SIZES['request'])
    return c_request


def _check(entry_point, rc):
    if rc != 0:
        raise HelperError(entry_point, rc)


# -- one function per entry point --------------------------------------------

def fit_hosts(records, request, pci_words=None):
    """``nse_fit_hosts``: YES / NO / UNKNOWN for each host record.

    :param records: a list of packed host records (``PreparedHost.packed``)
    :param request: a :class:`~nova_sched_ext.fit.model.Request`
    :param pci_words: when the request has a PCI request, the int64 words
        of every host's PCI record (:func:`packing.pci_words`), joined
    :returns: a list of answers, one per record
    :raises HelperError: the helper refused the input
    """
    module = require()
    ffi, lib = module.ffi, module.lib
    n_hosts = len(records)
    buffer = b''.join(records)
    if pci_words is not None:
        pci, pci_len = ffi.new('int64_t[]', pci_words), len(pci_words)
    else:
        pci, pci_len = ffi.NULL, 0
    answers = ffi.new('unsigned char[]', max(n_hosts, 1))
    _check('nse_fit_hosts', lib.nse_fit_hosts(
        ffi.from_buffer(buffer), len(buffer), n_hosts,
        _c_request(ffi, request), pci, pci_len, answers))
    return list(ffi.unpack(answers, n_hosts))


def fit_runs(records, candidates, request):
    """``nse_fit_runs``: every one of Nova's runs on each host record.

    :param records: a list of packed host records (``PreparedHost.packed``)
    :param candidates: a list parallel to ``records``: the number of
        allocation candidates each record replays (its model's
        ``candidates``)
    :param request: a :class:`~nova_sched_ext.fit.model.Request` without
        PCI devices
    :returns: ``(answers, runs)``: YES / NO / UNKNOWN per record, and per
        record a tuple of booleans, one per candidate: whether that run
        fits (all False unless the answer is YES)
    :raises HelperError: the helper refused the input (a request with PCI
        devices, or ``candidates`` that are not the records')
    :raises ValueError: ``candidates`` is not one count per record, each
        in 0..``MAX_CANDIDATES``
    """
    n_hosts = len(records)
    if len(candidates) != n_hosts or not all(
            0 <= count <= m.MAX_CANDIDATES for count in candidates):
        raise ValueError('fit_runs needs one count per record, each in '
                         '0..%d' % m.MAX_CANDIDATES)
    module = require()
    ffi, lib = module.ffi, module.lib
    buffer = b''.join(records)
    total = sum(candidates)
    answers = ffi.new('unsigned char[]', max(n_hosts, 1))
    runs = ffi.new('unsigned char[]', max(total, 1))
    _check('nse_fit_runs', lib.nse_fit_runs(
        ffi.from_buffer(buffer), len(buffer), n_hosts,
        _c_request(ffi, request), answers, runs, total))
    flat = ffi.unpack(runs, total)
    per_host, start = [], 0
    for count in candidates:
        per_host.append(tuple(bool(run) for run in flat[start:start + count]))
        start += count
    return list(ffi.unpack(answers, n_hosts)), per_host


def slots(records, shapes, request=None, counts=True):
    """``nse_slots``: slot counts and NUMASlotWeigher raw weights.

    :param records: a list of packed host records
    :param shapes: the reference list's :class:`PackedShapes`
    :param request: a :class:`~nova_sched_ext.fit.model.Shape`, or None
        for the counts before only
    :param counts: False to return no counts (empty lists)
    :returns: ``(before, after, weights)``: flat host-major lists of slot
        counts (``after`` -1 where the request cannot be placed; empty
        without a request), one raw weight per host (empty without one)
    :raises HelperError: the helper refused the input
    """
    module = require()
    ffi, lib = module.ffi, module.lib
    n_hosts, n_shapes = len(records), len(shapes)
    buffer = b''.join(records)
    c_request = _c_shape(request) if request is not None else ffi.NULL
    cells = max(n_hosts * n_shapes, 1)
    before = ffi.new('int32_t[]', cells)
    after = ffi.new('int32_t[]', cells)
    weights = ffi.new('double[]', max(n_hosts, 1))
    _check('nse_slots', lib.nse_slots(
        ffi.from_buffer(buffer), len(buffer), n_hosts, shapes.c_shapes,
        shapes.c_weights, n_shapes, c_request, before, after, weights))
    total = n_hosts * n_shapes if counts else 0
    if request is None:
        return ffi.unpack(before, total), [], []
    return (ffi.unpack(before, total), ffi.unpack(after, total),
            ffi.unpack(weights, n_hosts))


def slot_weights_indexed(arena, arena_len, offsets, n_slots, index,
                         candidates, shapes, request, room_cap=None,
                         memo=None, memo_rows=0, memo_col=0, memo_cols=0):
    """``nse_slot_weights_indexed``: raw weights of hosts kept in an arena.

    :param arena: a buffer (``bytes``, or an ``array`` for 8-byte aligned
        records written in place) of host records
    :param arena_len: how many of its bytes hold records
    :param offsets: an ``array('q')`` of at least ``n_slots`` record
        offsets
    :param n_slots: how many records the arena holds
    :param index: the slot of each host of this request (a sequence of
        ints)
    :param candidates: None, or each host's allocation candidates (see
        ``cfit.h``)
    :param shapes: the reference list's :class:`PackedShapes`
    :param request: the request's :class:`~nova_sched_ext.fit.model.Shape`
    :param room_cap: None, or the room mode's cap (0: no cap)
    :param memo: None, or an ``array('d')`` of ``memo_rows * memo_cols``
        memoised weights (NaN: unknown), read and filled in column
        ``memo_col``
    :returns: one raw weight per host of ``index``
    :raises HelperError: the helper refused the input
    """
    module = require()
    ffi, lib = module.ffi, module.lib
    n_hosts = len(index)
    # The helper trusts these lengths: check them here, where they are
    # known.
    if (len(offsets) < n_slots or arena_len > memoryview(arena).nbytes or
            (candidates is not None and len(candidates) != n_hosts) or
            (memo is not None and len(memo) < memo_rows * memo_cols)):
        raise ValueError('arena buffers shorter than their counts')
    weights = ffi.new('double[]', max(n_hosts, 1))
    _check('nse_slot_weights_indexed', lib.nse_slot_weights_indexed(
        ffi.from_buffer(arena), arena_len,
        ffi.from_buffer('int64_t[]', offsets), n_slots,
        ffi.new('int32_t[]', index) if n_hosts else ffi.NULL,
        ffi.NULL if candidates is None else
        ffi.new('int32_t[]', candidates),
        n_hosts, shapes.c_shapes, shapes.c_weights, len(shapes),
        _c_shape(request),
        -1 if room_cap is None else max(int(room_cap), 0),
        ffi.NULL if memo is None else ffi.from_buffer('double[]', memo),
        memo_rows, memo_col, memo_cols, weights))
    return ffi.unpack(weights, n_hosts)


def place_counts(records, shapes, limits):
    """``nse_place_counts``: how many of each shape each host takes at once.

    :param records: a list of packed host records
    :param shapes: a :class:`PackedShapes` (its weights are not read)
    :param limits: host-major, one per record and shape (what placement
        allows), each in 0..``NSE_MAX_INSTANCES``
    :returns: the counts, host-major, -1 where the engine cannot tell
    :raises HelperError: the helper refused the input
    """
    module = require()
    ffi, lib = module.ffi, module.lib
    n_hosts, n_shapes = len(records), len(shapes)
    total = n_hosts * n_shapes
    # The helper trusts this length: check it here, where it is known.
    if len(limits) != total:
        raise ValueError('%d limits for %d hosts and %d shapes'
                         % (len(limits), n_hosts, n_shapes))
    buffer = b''.join(records)
    c_limits = ffi.new('int32_t[]', max(total, 1))
    c_limits[0:total] = limits
    counts = ffi.new('int32_t[]', max(total, 1))
    _check('nse_place_counts', lib.nse_place_counts(
        ffi.from_buffer(buffer), len(buffer), n_hosts, shapes.c_shapes,
        n_shapes, c_limits, counts))
    return ffi.unpack(counts, total)
