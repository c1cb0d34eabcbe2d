"""The fit engine's face: one switch between the C helper and the twin.

``check_hosts(hosts, request)`` answers YES / NO / UNKNOWN for many prepared
hosts in one call (one Python-to-C transition per request).  The C helper is
used when it is built and loaded; ``NOVA_SCHED_EXT_FIT_BACKEND=python`` or
``[nova_sched_ext] fit_backend = python`` force the pure-Python twin.  If the
helper cannot be loaded the engine logs one warning and uses the twin: both
give the same answers.
"""

import os
import threading
import typing

from oslo_log import log as logging

from nova_sched_ext import conf
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import packing
from nova_sched_ext.fit import pyfit

LOG = logging.getLogger(__name__)

_load_lock = threading.Lock()
_cfit = None
_cfit_tried = False


class PreparedHost(typing.NamedTuple):
    """A host model with its packed C record, built once and cached."""

    model: m.Host
    packed: bytes


UNSUPPORTED_HOST = m.Host(cells=(), status=m.HOST_UNSUPPORTED)


def prepare(host):
    """The host with its packed record; HOST_UNSUPPORTED when out of bounds.

    Both engines refuse a host outside the bounds of
    :func:`~nova_sched_ext.fit.model.host_problem` (an infinite allocation
    ratio, a billion allocation candidates, ...).  Such a host is made
    unsupported here, once, so that it is answered UNKNOWN on its own
    instead of making a whole request's call fail.  The adapters warn about
    the Nova values behind it.
    """
    if m.host_problem(host) is not None:
        host = UNSUPPORTED_HOST
    return PreparedHost(host, packing.pack_host(host))


def _load_cfit():
    global _cfit, _cfit_tried
    if _cfit_tried:
        return _cfit
    with _load_lock:
        if not _cfit_tried:
            try:
                from nova_sched_ext.fit import _cfit as module
                _cfit = module
            except ImportError as exc:
                LOG.warning('nova-sched-ext: the C fit helper could not be '
                            'loaded (%s); using the pure-Python fit engine, '
                            'which gives the same answers more slowly. '
                            'Reinstall the package with a C compiler to '
                            'build it.', exc)
            _cfit_tried = True
    return _cfit


def _wanted_backend():
    if os.environ.get(conf.FIT_BACKEND_ENV, '').lower() == 'python':
        return 'python'
    return conf.CONF.nova_sched_ext.fit_backend


def backend_name():
    """'c' or 'python': the implementation check_hosts will use."""
    if _wanted_backend() == 'python':
        return 'python'
    return 'c' if _load_cfit() is not None else 'python'


def _check_python(hosts, request, pcis):
    return [pyfit.fits(prepared.model, request,
                       pcis[i] if pcis is not None else None)
            for i, prepared in enumerate(hosts)]


def _check_c(cfit, hosts, request, pcis):
    ffi, lib = cfit.ffi, cfit.lib
    if request.pci is not None:
        # A host whose PCI devices could not be described is left to Nova.
        hosts = [h if pcis[i] is not None or h.model.status != m.HOST_OK
                 else _UNSUPPORTED_PREPARED for i, h in enumerate(hosts)]
        words = []
        for i, prepared in enumerate(hosts):
            words.extend(packing.pci_words(prepared.model, pcis[i]))
        pci = ffi.new('int64_t[]', words)
        pci_len = len(words)
    else:
        pci, pci_len = ffi.NULL, 0
    buffer = b''.join([h.packed for h in hosts])
    req = ffi.new('struct nse_request *')
    ffi.memmove(req, packing.pack_request(request),
                ffi.sizeof('struct nse_request'))
    answers = ffi.new('unsigned char[]', max(len(hosts), 1))
    rc = lib.nse_fit_hosts(ffi.from_buffer(buffer), len(buffer), len(hosts),
                           req, pci, pci_len, answers)
    if rc != 0:
        LOG.error('nova-sched-ext: the C fit helper refused its input '
                  '(error %d); answering with the pure-Python engine. '
                  'Please report this as a bug.', rc)
        return _check_python(hosts, request, pcis)
    return list(ffi.unpack(answers, len(hosts)))


def check_hosts(hosts, request, pcis=None):
    """Answer YES / NO / UNKNOWN for each prepared host.

    :param hosts: a sequence of :class:`PreparedHost`
    :param request: a :class:`~nova_sched_ext.fit.model.Request` with at
        least one cell and at most ``MAX_CELLS``
    :param pcis: when ``request.pci`` is set, a sequence parallel to
        ``hosts`` of :class:`~nova_sched_ext.fit.model.HostPci` (None for a
        host whose devices are unknown: it is answered UNKNOWN)
    """
    if m.request_problem(request) is not None:
        return [m.UNKNOWN] * len(hosts)
    if request.pci is not None and pcis is None:
        return [m.UNKNOWN] * len(hosts)
    if backend_name() == 'c':
        return _check_c(_load_cfit(), hosts, request, pcis)
    return _check_python(hosts, request, pcis)


def fits(host, request, pci=None):
    """Answer for one :class:`~nova_sched_ext.fit.model.Host`."""
    pcis = [pci] if request.pci is not None else None
    return check_hosts([prepare(host)], request, pcis)[0]


_UNSUPPORTED_PREPARED = prepare(UNSUPPORTED_HOST)


def _slots_c(cfit, hosts, shapes, shape_weights, request, counts=True):
    ffi, lib = cfit.ffi, cfit.lib
    n_hosts, n_shapes = len(hosts), len(shapes)
    buffer = b''.join([h.packed for h in hosts])
    c_shapes = ffi.new('struct nse_shape[]', max(n_shapes, 1))
    packed_shapes = b''.join(packing.pack_shape(s) for s in shapes)
    ffi.memmove(c_shapes, packed_shapes, len(packed_shapes))
    c_weights = ffi.new('double[]', list(shape_weights) or [0.0])
    c_request = ffi.NULL
    if request is not None:
        c_request = ffi.new('struct nse_shape *')
        ffi.memmove(c_request, packing.pack_shape(request),
                    ffi.sizeof('struct nse_shape'))
    cells = max(n_hosts * n_shapes, 1)
    before = ffi.new('int32_t[]', cells)
    after = ffi.new('int32_t[]', cells)
    weights = ffi.new('double[]', max(n_hosts, 1))
    rc = lib.nse_slots(ffi.from_buffer(buffer), len(buffer), n_hosts,
                       c_shapes, c_weights, n_shapes, c_request, before,
                       after, weights)
    if rc != 0:
        LOG.error('nova-sched-ext: the C slot counter refused its input '
                  '(error %d); answering with the pure-Python engine. '
                  'Please report this as a bug.', rc)
        return None
    total = n_hosts * n_shapes if counts else 0
    return (ffi.unpack(before, total),
            ffi.unpack(after, total) if request is not None else [],
            ffi.unpack(weights, n_hosts) if request is not None else [])


def _room_weights_c(cfit, hosts, shapes, shape_weights, request,
                    room_cap):
    """Room-mode weights through nse_slot_weights_indexed, without memo."""
    ffi, lib = cfit.ffi, cfit.lib
    n_hosts, n_shapes = len(hosts), len(shapes)
    records = [h.packed for h in hosts]
    buffer = b''.join(records)
    offsets, offset = [], 0
    for record in records:
        offsets.append(offset)
        offset += len(record)
    c_shapes = ffi.new('struct nse_shape[]', max(n_shapes, 1))
    packed_shapes = b''.join(packing.pack_shape(s) for s in shapes)
    ffi.memmove(c_shapes, packed_shapes, len(packed_shapes))
    c_weights = ffi.new('double[]', list(shape_weights) or [0.0])
    c_request = ffi.new('struct nse_shape *')
    ffi.memmove(c_request, packing.pack_shape(request),
                ffi.sizeof('struct nse_shape'))
    weights = ffi.new('double[]', max(n_hosts, 1))
    # the records carry their own allocation candidates
    rc = lib.nse_slot_weights_indexed(
        ffi.from_buffer(buffer), len(buffer),
        ffi.new('int64_t[]', offsets or [0]), n_hosts,
        ffi.new('int32_t[]', list(range(n_hosts)) or [0]), ffi.NULL,
        n_hosts, c_shapes, c_weights, n_shapes, c_request,
        max(int(room_cap), 0), ffi.NULL, 0, 0, 0, weights)
    if rc != 0:
        LOG.error('nova-sched-ext: the C slot counter refused its input '
                  '(error %d); answering with the pure-Python engine. '
                  'Please report this as a bug.', rc)
        return None
    return ffi.unpack(weights, n_hosts)


def slot_weights(hosts, shapes, shape_weights, request=None, counts=True,
                 room_cap=None):
    """Slots per host and shape, before and after placing ``request``.

    :param hosts: a sequence of :class:`PreparedHost`
    :param shapes: a sequence of :class:`~nova_sched_ext.fit.model.Shape`
        (no PCI)
    :param shape_weights: one positive float per shape
    :param request: a Shape being scheduled, or None for counts only
    :param counts: False to skip returning the slot counts (empty lists),
        when only the weights are needed
    :param room_cap: None, or NUMASlotWeigher's room mode (0: no cap, n:
        at most n instances of the request's shape): the weights are then
        :func:`pyfit.room_weight` of each host's room and normal weight
    :returns: ``(before, after, weights)``: flat host-major lists of slot
        counts (``after`` -1 where the request cannot be placed), and one
        NUMASlotWeigher raw weight per host (empty without a request)
    """
    if room_cap is not None and request is None:
        raise ValueError('room mode needs a request')
    if backend_name() == 'c':
        cfit = _load_cfit()
        if room_cap is None:
            result = _slots_c(cfit, hosts, shapes, shape_weights, request,
                              counts)
        else:
            # the counts (if wanted) as usual, the weights in room mode
            result = _slots_c(cfit, hosts, shapes, shape_weights,
                              request if counts else None, counts)
            weights = _room_weights_c(cfit, hosts, shapes, shape_weights,
                                      request, room_cap)
            if result is not None and weights is not None:
                result = (result[0], result[1], weights)
            else:
                result = None
        if result is not None:
            return result
    return pyfit.slot_weights([h.model for h in hosts], shapes,
                              shape_weights, request, room_cap)
