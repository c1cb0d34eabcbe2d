"""The fit engine's face: one switch between the C helper and the twin.

``check_hosts(hosts, request)`` answers YES / NO / UNKNOWN for many prepared
hosts in one call (one Python-to-C transition per request), and
``slot_weights`` counts slots for NUMASlotWeigher and ``place_counts``
instances for the capacity count, in the C helper (reached
through :mod:`~nova_sched_ext.fit.lowlevel` only) or in the pure-Python twin
:mod:`~nova_sched_ext.fit.pyfit`; both give the same answers.

Which one, ``[nova_sched_ext] fit_backend``:

* ``auto``: the C helper when it can be used, else the twin (one warning);
* ``c``: the C helper, or fail: :func:`check_backend` (called when the
  plugins are created, so the scheduler does not start) and every call
  raise :class:`~nova_sched_ext.fit.lowlevel.HelperUnavailable`, saying
  why;
* ``python``: the twin; ``NOVA_SCHED_EXT_FIT_BACKEND=python`` forces it
  whatever the option says.

One fallback rule (:func:`with_fallback`): when the C helper refuses its
input, a bug, the call logs one error and is answered by the twin, whether
it came through this module or through the slot arena.
"""

import array
import functools
import os
import threading
import typing

from oslo_log import log as logging

from nova_sched_ext import conf
from nova_sched_ext.fit import lowlevel
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import packing
from nova_sched_ext.fit import pyfit

LOG = logging.getLogger(__name__)

_warn_lock = threading.Lock()
_warned_unavailable = False


class PreparedHost(typing.NamedTuple):
    """A host model with its packed C record, built once and cached."""

    model: m.Host
    packed: bytes


UNSUPPORTED_HOST = m.Host(cells=(), status=m.HOST_UNSUPPORTED)


def prepare(host, checked=False):
    """The host with its packed record; HOST_UNSUPPORTED when out of bounds.

    Both engines refuse a host outside the bounds of
    :func:`~nova_sched_ext.fit.model.host_problem` (an infinite allocation
    ratio, a billion allocation candidates, ...).  Such a host is made
    unsupported here, once, so that it is answered UNKNOWN on its own
    instead of making a whole request's call fail.  The adapters warn about
    the Nova values behind it.

    ``checked=True`` says the caller has just found ``host_problem(host)``
    None itself (the adapters do, to warn), so it is not asked twice.
    """
    if not checked and m.host_problem(host) is not None:
        host = UNSUPPORTED_HOST
    return PreparedHost(host, packing.pack_host(host))


def _wanted_backend():
    if os.environ.get(conf.scheduler.FIT_BACKEND_ENV, '').lower() == 'python':
        return 'python'
    return conf.CONF.nova_sched_ext.fit_backend


def _unavailable(wanted):
    """The backend to use without the helper: the twin, or fail for 'c'."""
    global _warned_unavailable
    reason = lowlevel.unavailable_reason()
    if wanted == 'c':
        raise lowlevel.HelperUnavailable(
            'nova-sched-ext: [nova_sched_ext] fit_backend = c, but the C fit '
            'helper cannot be used: %s. Reinstall nova-sched-ext where a C '
            'compiler and the Python headers are installed so that it is '
            'built, or set fit_backend = auto to run the pure-Python fit '
            'engine instead.' % reason)
    if not _warned_unavailable:
        with _warn_lock:
            if not _warned_unavailable:
                LOG.warning('nova-sched-ext: the C fit helper cannot be used '
                            '(%s); using the pure-Python fit engine, which '
                            'gives the same answers more slowly. Reinstall '
                            'the package with a C compiler to build it, or '
                            'set [nova_sched_ext] fit_backend = python to '
                            'say that the pure-Python engine is meant.',
                            reason)
                _warned_unavailable = True
    return 'python'


def backend_name():
    """'c' or 'python': the implementation check_hosts will use.

    :raises lowlevel.HelperUnavailable: ``fit_backend = c`` and the C
        helper cannot be used
    """
    wanted = _wanted_backend()
    if wanted == 'python':
        return 'python'
    if lowlevel.available():
        return 'c'
    return _unavailable(wanted)


def check_backend():
    """Fail now if the configured backend cannot run.

    The plugins call it when Nova creates them, so that ``fit_backend = c``
    without a usable helper stops the scheduler at start, with the reason,
    rather than at the first request.

    :raises lowlevel.HelperUnavailable: as :func:`backend_name`
    """
    return backend_name()


def with_fallback(c_call, twin_call):
    """``c_call()``, or ``twin_call()`` when the C helper refuses its input.

    The one fallback rule of the fit engine, for the fit, the slot counts
    and the slot arena alike. A refusal is a bug (the adapters make a host
    outside the bounds unknown before either engine sees it, and both
    refuse the same inputs), so it is logged once per call, here, naming
    the entry point and the error; the twin then answers that call, as it
    would have with ``fit_backend = python``.
    """
    try:
        return c_call()
    except lowlevel.HelperError as exc:
        LOG.error('nova-sched-ext: the C fit helper refused its input in '
                  '%(entry_point)s (%(name)s, %(code)d); answering this '
                  'call with the pure-Python fit engine. Please report this '
                  'as a bug.', {'entry_point': exc.entry_point,
                                'name': exc.name, 'code': exc.code})
        return twin_call()


def _check_python(hosts, request, pcis):
    return [pyfit.fits(prepared.model, request,
                       pcis[i] if pcis is not None else None)
            for i, prepared in enumerate(hosts)]


def _check_c(hosts, request, pcis):
    """:func:`check_hosts` in C.

    :raises lowlevel.HelperError: the helper refused the input
    """
    words = None
    if request.pci is not None:
        # A host whose PCI devices could not be described is left to Nova.
        hosts = [h if pcis[i] is not None or h.model.status != m.HOST_OK
                 else _UNSUPPORTED_PREPARED for i, h in enumerate(hosts)]
        words = []
        for i, prepared in enumerate(hosts):
            words.extend(packing.pci_words(prepared.model, pcis[i]))
    return lowlevel.fit_hosts([h.packed for h in hosts], request, words)


def check_hosts(hosts, request, pcis=None):
    """Answer YES / NO / UNKNOWN for each prepared host.

    :param hosts: a sequence of :class:`PreparedHost`
    :param request: a :class:`~nova_sched_ext.fit.model.Request` with at
        least one cell and at most ``MAX_CELLS``
    :param pcis: when ``request.pci`` is set, a sequence parallel to
        ``hosts`` of :class:`~nova_sched_ext.fit.model.HostPci` (None for a
        host whose devices are unknown: it is answered UNKNOWN)
    :raises lowlevel.HelperUnavailable: ``fit_backend = c`` and the C
        helper cannot be used
    """
    if m.request_problem(request) is not None:
        return [m.UNKNOWN] * len(hosts)
    if request.pci is not None and pcis is None:
        return [m.UNKNOWN] * len(hosts)
    if backend_name() == 'c':
        return with_fallback(
            functools.partial(_check_c, hosts, request, pcis),
            functools.partial(_check_python, hosts, request, pcis))
    return _check_python(hosts, request, pcis)


def _runs_python(hosts, request):
    result = []
    for prepared in hosts:
        try:
            result.append(pyfit.run_outcomes(prepared.model, request))
        except m.InvalidInput:
            result.append(None)
    return result


def _runs_c(hosts, request):
    """:func:`run_outcomes` in C.

    :raises lowlevel.HelperError: the helper refused the input
    """
    answers, runs = lowlevel.fit_runs(
        [h.packed for h in hosts], [h.model.candidates for h in hosts],
        request)
    return [None if answer == m.UNKNOWN else host_runs
            for answer, host_runs in zip(answers, runs)]


def run_outcomes(hosts, request):
    """Whether each of Nova's runs fits, per prepared host, or None.

    One run per allocation candidate each host's model replays, as Nova's
    ``NUMATopologyFilter`` runs them (:func:`pyfit.run_outcomes`): a list
    parallel to ``hosts`` of tuples of booleans, None for a host whose
    answer is UNKNOWN or whose input is refused.  The C helper answers
    them (``nse_fit_runs``) with ``fit_backend = c``, the twin otherwise.

    :param request: a :class:`~nova_sched_ext.fit.model.Request` without
        PCI devices (each run of those reads its candidate's provider
        mapping, which the engine does not model)
    :raises ValueError: the request has PCI devices
    :raises lowlevel.HelperUnavailable: ``fit_backend = c`` and the C
        helper cannot be used
    """
    if request.pci is not None:
        raise ValueError('the runs of a request with PCI devices are '
                         'not replayed')
    hosts = list(hosts)
    if m.request_problem(request) is not None:
        return [None] * len(hosts)
    if backend_name() == 'c':
        return with_fallback(functools.partial(_runs_c, hosts, request),
                             functools.partial(_runs_python, hosts, request))
    return _runs_python(hosts, request)


def fits(host, request, pci=None):
    """Answer for one :class:`~nova_sched_ext.fit.model.Host`."""
    pcis = [pci] if request.pci is not None else None
    return check_hosts([prepare(host)], request, pcis)[0]


_UNSUPPORTED_PREPARED = prepare(UNSUPPORTED_HOST)


def _room_weights_c(records, shapes, request, room_cap):
    """Room-mode weights through nse_slot_weights_indexed, without memo.

    The records carry their own allocation candidates.
    """
    arena = b''.join(records)
    offsets, offset = array.array('q', bytes(8 * len(records))), 0
    for i, record in enumerate(records):
        offsets[i] = offset
        offset += len(record)
    index = list(range(len(records)))
    return lowlevel.slot_weights_indexed(arena, len(arena), offsets,
                                         len(records), index, None, shapes,
                                         request, room_cap)


def _slot_weights_c(hosts, shapes, shape_weights, request, counts,
                    room_cap):
    """:func:`slot_weights` in C.

    :raises lowlevel.HelperError: the helper refused the input
    """
    packed = lowlevel.packed_shapes(shapes, shape_weights)
    records = [h.packed for h in hosts]
    if room_cap is None:
        return lowlevel.slots(records, packed, request, counts)
    # the counts (if wanted) as usual, the weights in room mode
    before, after = [], []
    if counts:
        before, after, _weights = lowlevel.slots(records, packed, request)
    return before, after, _room_weights_c(records, packed, request,
                                          room_cap)


def _slot_weights_python(hosts, shapes, shape_weights, request, room_cap):
    return pyfit.slot_weights([h.model for h in hosts], shapes,
                              shape_weights, request, room_cap)


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
    :raises lowlevel.HelperUnavailable: ``fit_backend = c`` and the C
        helper cannot be used
    """
    if room_cap is not None and request is None:
        raise ValueError('room mode needs a request')
    twin = functools.partial(_slot_weights_python, hosts, shapes,
                             shape_weights, request, room_cap)
    if backend_name() == 'c':
        return with_fallback(
            functools.partial(_slot_weights_c, hosts, shapes, shape_weights,
                              request, counts, room_cap), twin)
    return twin()


def _place_counts_c(hosts, shapes, limits):
    """:func:`place_counts` in C.

    :raises lowlevel.HelperError: the helper refused the input
    """
    packed = lowlevel.packed_shapes(shapes, [0.0] * len(shapes))
    return lowlevel.place_counts([h.packed for h in hosts], packed, limits)


def place_counts(hosts, shapes, limits):
    """How many instances of each shape each host takes at the same time.

    Placed one after another exactly as Nova places them, each one's usage
    accounted before the next (:func:`pyfit.place_count` says precisely),
    up to each pair's limit.

    :param hosts: a sequence of :class:`PreparedHost`
    :param shapes: a sequence of :class:`~nova_sched_ext.fit.model.Shape`
        (no PCI)
    :param limits: host-major, one int per host and shape, each in
        0..``model.MAX_INSTANCES``: what placement allows
    :returns: the counts, host-major, -1 where the engine cannot tell (the
        caller asks Nova's own fit there)
    :raises model.InvalidInput: a shape or limit outside the bounds
    :raises lowlevel.HelperUnavailable: ``fit_backend = c`` and the C
        helper cannot be used
    """
    hosts, shapes, limits = list(hosts), list(shapes), list(limits)
    twin = functools.partial(pyfit.place_counts, [h.model for h in hosts],
                             shapes, limits)
    if backend_name() == 'c':
        for shape in shapes:
            m.check(m.shape_problem(shape))
        if len(limits) != len(hosts) * len(shapes) or not all(
                0 <= limit <= m.MAX_INSTANCES for limit in limits):
            return twin()  # raises InvalidInput, saying which
        return with_fallback(
            functools.partial(_place_counts_c, hosts, shapes, limits), twin)
    return twin()
