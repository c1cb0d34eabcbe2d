"""Build the fit engine's model from Nova's scheduler objects.

* :func:`prepared_host` turns a ``HostState`` into a
  :class:`~nova_sched_ext.fit.engine.PreparedHost`, cached on the
  ``HostState`` until Nova changes it (see :mod:`~.hoststamp`).
* :func:`request_from_spec` turns a ``RequestSpec`` into a
  :class:`~nova_sched_ext.fit.model.Request`, or ``None`` when the request
  has no NUMA topology, or raises :class:`Unsupported` when it uses a feature
  outside the engine's subset (the caller then leaves the decision to Nova).
* :func:`host_pci` describes, per request, which PCI devices of a host could
  serve the request's PCI request, using Nova's own pool filters.

A ``HostState`` whose numbers are not sane (an allocation ratio of inf,
NaN, 1e308 or not above 0, a size past the engines' bounds) is the
unsupported host, without host-level room: the engine answers UNKNOWN for
it, so Nova's own filters decide, and one warning per host and value says
which value is wrong (see :class:`BadHostValue`).
"""

import threading

from nova import objects
from nova.objects import fields
from oslo_config import cfg
from oslo_log import log as logging

from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import exception as sched_ext_exception
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import hoststamp
from nova_sched_ext.fit import model as m

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

# Devices assumed for a host without PCI stats: Nova skips the PCI check
# there, so the engine must never run out of them.
_UNLIMITED = 1 << 40

_CPU_POLICY = {
    None: m.CPU_SHARED,
    fields.CPUAllocationPolicy.SHARED: m.CPU_SHARED,
    fields.CPUAllocationPolicy.DEDICATED: m.CPU_DEDICATED,
    fields.CPUAllocationPolicy.MIXED: m.CPU_MIXED,
}
_THREAD_POLICY = {
    None: m.THREAD_PREFER,
    fields.CPUThreadAllocationPolicy.PREFER: m.THREAD_PREFER,
    fields.CPUThreadAllocationPolicy.REQUIRE: m.THREAD_REQUIRE,
    fields.CPUThreadAllocationPolicy.ISOLATE: m.THREAD_ISOLATE,
}
_PCI_POLICY = {
    fields.PCINUMAAffinityPolicy.LEGACY: m.PCI_LEGACY,
    fields.PCINUMAAffinityPolicy.REQUIRED: m.PCI_REQUIRED,
    fields.PCINUMAAffinityPolicy.PREFERRED: m.PCI_PREFERRED,
}


class Unsupported(sched_ext_exception.NovaSchedExtError):
    """The request or host uses a feature outside the engine's subset."""


class BadHostValue(Unsupported):
    """A host reports a number no real compute node reports.

    Such a value is a misconfiguration or a corrupt record, and building
    the host's model from it went wrong in ways that were hard to see:
    ``int(inf)`` raised for every request, a NaN ratio compared false
    everywhere, a negative one read as "no host-level limit". The bounds
    are the engines' own (``model.MAX_*``, see ``cfit.h``), so a host that
    passes here is never refused by the C helper or the twin.
    """


# A cell id is an int32 in the packed record.
_MAX_CELL_ID = (1 << 31) - 1


def _refuse(name, value, expected):
    shown = repr(value)
    if len(shown) > 40:
        # The log gets the point, not a thousand digits.
        shown = '%s... (%d characters)' % (shown[:24], len(shown))
    raise BadHostValue('%s %s (expected %s)' % (name, shown, expected))


def _sane(name, value, low, high):
    """``value`` if it is a whole number in [low, high], else BadHostValue.

    NaN fails every comparison and None or a string cannot be compared,
    so only a real, finite, whole number within bounds passes.
    """
    try:
        ok = low <= value <= high and value == int(value)
    except (TypeError, ValueError, ArithmeticError):
        ok = False
    if not ok:
        _refuse(name, value, 'a whole number from %d to %d' % (low, high))
    return value


def _sane_ratio(name, value):
    """An allocation ratio above 0 and at most MAX_ALLOCATION_RATIO.

    Nova's options only ask for a number >= 0, but Nova's ``ComputeNode``
    object replaces a stored 0.0 with the configured (or initial) ratio,
    so the scheduler never gets 0 from Nova.
    """
    try:
        ok = 0 < value <= m.MAX_ALLOCATION_RATIO
    except (TypeError, ValueError, ArithmeticError):
        ok = False
    if not ok:
        _refuse(name, value, 'a number above 0 and at most %d' %
                m.MAX_ALLOCATION_RATIO)
    return value


def _field(obj, name, default=None):
    return getattr(obj, name) if obj.obj_attr_is_set(name) else default


def _host_cell(cell, pci_devices):
    siblings = _field(cell, 'siblings', [])
    if not siblings:
        # Nova's pinning code cannot run on such a cell either.
        raise Unsupported('host cell %s has no sibling sets' % cell.id)
    threads_per_core = max(len(s) for s in siblings) or 1
    if threads_per_core > m.MAX_THREADS:
        raise Unsupported('more than %d threads per core' % m.MAX_THREADS)
    cell_id = _sane('NUMA cell id', cell.id, 0, _MAX_CELL_ID)
    where = 'NUMA cell %s ' % cell_id
    cpuset = _field(cell, 'cpuset', set())
    pcpuset = _field(cell, 'pcpuset', set())
    pinned = _field(cell, 'pinned_cpus', set())
    free_pcpus = pcpuset - pinned
    mempages = _field(cell, 'mempages', []) or []
    if len(mempages) > m.MAX_PAGE_SIZES:
        raise Unsupported('more than %d page sizes' % m.MAX_PAGE_SIZES)
    pages = []
    for page in mempages:
        pages.append(m.Page(
            _sane(where + 'page size_kb', page.size_kb, 1,
                  m.MAX_PAGE_SIZE_KB),
            _sane(where + 'pages total', page.total, 0, m.MAX_AMOUNT),
            _sane(where + 'pages used', page.used, 0, m.MAX_AMOUNT),
            _sane(where + 'pages reserved', _field(page, 'reserved', 0),
                  0, m.MAX_AMOUNT)))
    return m.HostCell(
        id=cell_id, cpus=len(cpuset), pcpus=len(pcpuset),
        free_pcpus=len(free_pcpus),
        cpu_usage=_sane(where + 'cpu_usage', cell.cpu_usage or 0, 0,
                        m.MAX_CPUS),
        memory=_sane(where + 'memory', cell.memory, 0, m.MAX_AMOUNT),
        memory_usage=_sane(where + 'memory_usage', cell.memory_usage or 0,
                           0, m.MAX_AMOUNT),
        threads_per_core=threads_per_core,
        pcpus_are_cpus=pcpuset == cpuset,
        free_sibling_sizes=tuple(len(s & free_pcpus) for s in siblings),
        pages=tuple(pages),
        pci_devices=_sane(where + 'PCI devices', pci_devices, 0,
                          m.MAX_AMOUNT))


def _pci_devices_by_node(pools):
    counts = {}
    for pool in pools:
        node = pool.get('numa_node')
        counts[node] = counts.get(node, 0) + pool['count']
    return counts


def host_model(numa_topology, pci_stats=None, cpu_allocation_ratio=None,
               ram_allocation_ratio=None, candidates=1):
    """A :class:`~nova_sched_ext.fit.model.Host` from Nova objects.

    Arguments mirror ``numa_fit_instance_to_host``; ratios of None mean no
    limits.  Never raises: a host outside the subset, or with values that
    are not sane (:class:`BadHostValue`), is HOST_UNSUPPORTED.
    """
    try:
        return _host_model(numa_topology, pci_stats, cpu_allocation_ratio,
                           ram_allocation_ratio, candidates)
    except Exception:
        return engine.UNSUPPORTED_HOST


def _host_model(numa_topology, pci_stats, cpu_allocation_ratio,
                ram_allocation_ratio, candidates=1):
    """:func:`host_model`, raising why a host is unsupported."""
    if not numa_topology:
        return m.Host(cells=(), status=m.HOST_NO_TOPOLOGY)
    cells = numa_topology.cells
    if len(cells) > m.MAX_CELLS:
        raise Unsupported('more than %d NUMA cells' % m.MAX_CELLS)
    if len({c.id for c in cells}) != len(cells):
        raise Unsupported('duplicate NUMA cell ids')
    pci_by_node = _pci_devices_by_node(
        pci_stats.pools if pci_stats is not None else ())
    model_cells = tuple(_host_cell(c, pci_by_node.get(c.id, 0))
                        for c in cells)
    if (cpu_allocation_ratio is None) != (ram_allocation_ratio is None):
        raise Unsupported('only one allocation ratio is known')
    if cpu_allocation_ratio is not None:
        _sane_ratio('cpu_allocation_ratio', cpu_allocation_ratio)
        _sane_ratio('ram_allocation_ratio', ram_allocation_ratio)
    return m.Host(cells=model_cells, status=m.HOST_OK,
                  cpu_allocation_ratio=cpu_allocation_ratio,
                  ram_allocation_ratio=ram_allocation_ratio,
                  has_pci_stats=pci_stats is not None,
                  candidates=candidates)


_NO_TOPOLOGY = engine.prepare(m.Host(cells=(), status=m.HOST_NO_TOPOLOGY))

# The packed model is cached on the HostState itself, with the host's
# version (fit/hoststamp.py says when a host is unchanged, and why): an
# entry is (the stamp that vouches for it, the version, the prepared host,
# {allocation candidate count: the prepared host replaying that many}).
# The last is filled as requests need it: a pinned flavor's hosts have two
# candidates each (Nova asks for PCPU, then VCPU), and packing the model
# again for every host of every such request cost more than the fit.
_CACHE_ATTR = '_nova_sched_ext_fit'


def host_room(host_state):
    """Host-level VCPU and MEMORY_MB room, as placement computes it.

    Empty when an allocation ratio is unknown (None).

    :raises BadHostValue: a ratio, size or usage is not sane
    """
    cpu_ratio = host_state.cpu_allocation_ratio
    ram_ratio = host_state.ram_allocation_ratio
    if cpu_ratio is None or ram_ratio is None:
        return {}
    _sane_ratio('cpu_allocation_ratio', cpu_ratio)
    _sane_ratio('ram_allocation_ratio', ram_ratio)
    vcpus_total = _sane('vcpus_total', host_state.vcpus_total, 0,
                        m.MAX_CPUS)
    vcpus_used = _sane('vcpus_used', host_state.vcpus_used, 0, m.MAX_CPUS)
    ram_total = _sane('total_usable_ram_mb', host_state.total_usable_ram_mb,
                      0, m.MAX_AMOUNT)
    # Nova: free_ram_mb can be negative (more used than there is).
    free_ram = _sane('free_ram_mb', host_state.free_ram_mb,
                     -m.MAX_AMOUNT, m.MAX_AMOUNT)
    total_vcpus = int(vcpus_total * cpu_ratio)
    total_memory = int(ram_total * ram_ratio)
    used_memory = int(ram_total - free_ram)
    return {'total_vcpus': total_vcpus,
            'free_vcpus': total_vcpus - int(vcpus_used),
            'total_memory_mb': total_memory,
            'free_memory_mb': total_memory - used_memory}


class _WarnedHosts(object):
    """Which hosts were warned about, and for which value.

    A host with a bad value is rebuilt whenever Nova refreshes it (and
    with a NaN ratio, which equals nothing, at every request): one warning
    per host and value is enough.  Keyed by host and node, the dict holds
    at most ``_max_hosts`` entries and then starts over, as the slot arena
    does; a host that reports sane values again is forgotten, so that it
    is warned about if it goes wrong again.  Shared by every request
    thread: each call holds the lock.
    """

    def __init__(self, max_hosts=10000):
        self._lock = threading.Lock()
        self._warned = {}
        self._max_hosts = max_hosts

    def warn(self, host_state, problem):
        key = (host_state.host, host_state.nodename)
        problem = str(problem)
        with self._lock:
            if self._warned.get(key) == problem:
                return
            if len(self._warned) >= self._max_hosts:
                self._warned.clear()
            self._warned[key] = problem
        LOG.warning("nova-sched-ext treats host %(host)s (node %(node)s) "
                    "as unknown until it reports sane values: "
                    "%(problem)s. NUMAFitFilter leaves the host to "
                    "NUMATopologyFilter, and NUMASlotWeigher weighs every "
                    "request there as on the worst host. Check the compute "
                    "node's allocation ratios and reported resources.",
                    {'host': host_state.host, 'node': host_state.nodename,
                     'problem': problem})

    def forget(self, host_state):
        # Read without the lock first: almost always nobody was warned.
        if self._warned:
            with self._lock:
                self._warned.pop((host_state.host, host_state.nodename),
                                 None)


_BAD_HOSTS = _WarnedHosts()


def candidate_count(allocation_candidates):
    """How many allocation candidates the engine replays for one host.

    Nova runs the fit once per candidate, each run starting from what the
    last one left in the request; both engines stop as soon as a run leaves
    that state unchanged, which happens after a few runs.  Past
    ``model.MAX_CANDIDATES`` (placement returns at most ``[scheduler]
    max_placement_results`` in all) the count is capped rather than
    refused, so that one host with very many candidates cannot make a whole
    request's call fail.
    """
    return min(len(allocation_candidates), m.MAX_CANDIDATES)


def _with_candidates(prepared, candidates):
    if prepared.model.status != m.HOST_OK:
        return prepared
    return engine.prepare(prepared.model._replace(candidates=candidates))


def _build(host_state, topology):
    """The prepared host.

    :raises BadHostValue: a value of the host or of its cells is not sane,
        or the model built from them is outside the engines' bounds (say
        a sane memory size times a sane ratio), which ``engine.prepare``
        would otherwise turn into an unknown host without a word
    """
    room = host_room(host_state)
    if not topology:
        if not room:
            return _NO_TOPOLOGY
        host = _NO_TOPOLOGY.model._replace(**room)
    elif not room:
        # Nova's filter would fail on a host without ratios; stay out.
        return _UNSUPPORTED
    else:
        try:
            host = _host_model(topology, host_state.pci_stats,
                               host_state.cpu_allocation_ratio,
                               host_state.ram_allocation_ratio)
        except BadHostValue:
            raise
        except Exception:
            host = engine.UNSUPPORTED_HOST
        host = host._replace(**room)
    problem = m.host_problem(host)
    if problem is not None:
        raise BadHostValue(problem)
    return engine.prepare(host, checked=True)


_UNSUPPORTED = engine.prepare(engine.UNSUPPORTED_HOST)


def _refresh(host_state):
    # Read before the model is built: a host changed meanwhile then no
    # longer matches the version, and is rebuilt at the next request.
    version = hoststamp.version(host_state)
    try:
        prepared = _build(host_state, version.numa_topology)
    except BadHostValue as exc:
        # Unknown, without the host-level room its values cannot give.
        _BAD_HOSTS.warn(host_state, exc)
        prepared = _UNSUPPORTED
    else:
        _BAD_HOSTS.forget(host_state)
    entry = (hoststamp.vouching_stamp(version), version, prepared, {})
    setattr(host_state, _CACHE_ATTR, entry)
    return entry


def prepared_hosts(host_states, per_candidate=True):
    """The cached, packed models of many ``HostState`` objects.

    ``per_candidate``: each model replays Nova's fit once per allocation
    candidate of its host, as ``NUMATopologyFilter`` runs it; False for one
    run whatever the candidates, as the scheduler's
    ``consume_from_request`` and the compute's claim fit a request that
    passed (``NUMASlotWeigher``).

    This runs for every host of every request. A host whose stamp vouches
    for its entry costs a few attribute reads and one compare: the stamp is
    :data:`hoststamp.stamp`'s, read inline because in a Python loop that is
    several times cheaper than calling the attrgetter (the unit tests check
    that it reads every field of :data:`hoststamp.STAMP_FIELDS`). Any other
    host asks :func:`hoststamp.unchanged`.
    """
    result = []
    append = result.append
    attr = _CACHE_ATTR
    unchanged = hoststamp.unchanged
    for hs in host_states:
        entry = hs.__dict__.get(attr)
        if entry is None or not (
                entry[0] == (hs.updated, hs.free_ram_mb, hs.vcpus_used,
                             hs.cpu_allocation_ratio,
                             hs.ram_allocation_ratio) or
                unchanged(entry[1], hs)):
            entry = _refresh(hs)
        if per_candidate and len(hs.allocation_candidates) != 1:
            count = candidate_count(hs.allocation_candidates)
            by_count = entry[3]
            prepared = by_count.get(count)
            if prepared is None:
                # A pure function of the cached model and the count; two
                # threads building it at once build the same thing.
                prepared = by_count[count] = _with_candidates(entry[2],
                                                              count)
            append(prepared)
        else:
            append(entry[2])
    return result


def prepared_host(host_state):
    """The cached, packed model of one ``HostState``."""
    return prepared_hosts((host_state,))[0]


def request_from_topology(instance_topology, pci_requests=None,
                          network_metadata=None):
    """A :class:`~nova_sched_ext.fit.model.Request` from Nova objects.

    :param instance_topology: an ``InstanceNUMATopology`` (not None)
    :param pci_requests: a list of ``InstancePCIRequest`` or None
    :param network_metadata: a ``NetworkMetadata`` or None
    :raises Unsupported: outside the engine's subset
    """
    if network_metadata is not None:
        physnets = _field(network_metadata, 'physnets', set())
        tunneled = _field(network_metadata, 'tunneled', False)
        if physnets or tunneled:
            raise Unsupported('NUMA affinity of networks')
    cells = []
    for cell in instance_topology.cells:
        try:
            cpu_policy = _CPU_POLICY[_field(cell, 'cpu_policy')]
            thread_policy = _THREAD_POLICY[_field(cell, 'cpu_thread_policy')]
        except KeyError as exc:
            raise Unsupported('policy %s' % exc)
        cells.append(m.RequestCell(
            id=cell.id, cpus=len(_field(cell, 'cpuset', set())),
            pcpus=len(_field(cell, 'pcpuset', set())), memory=cell.memory,
            pagesize=_field(cell, 'pagesize') or m.PAGESIZE_NONE,
            cpu_policy=cpu_policy, thread_policy=thread_policy))
    if not cells or len(cells) > m.MAX_CELLS:
        raise Unsupported('%d instance NUMA cells' % len(cells))
    pci = None
    if pci_requests:
        if len(pci_requests) > 1:
            raise Unsupported('more than one PCI request')
        pci_request = pci_requests[0]
        if (CONF.filter_scheduler.pci_in_placement and
                pci_request.source != objects.InstancePCIRequest.NEUTRON_PORT):
            raise Unsupported('PCI devices tracked in placement')
        policy = _field(pci_request, 'numa_policy') or \
            fields.PCINUMAAffinityPolicy.LEGACY
        if policy not in _PCI_POLICY:
            raise Unsupported('PCI NUMA affinity policy %s' % policy)
        pci = m.PciRequest(count=pci_request.count,
                           policy=_PCI_POLICY[policy])
    return m.Request(
        cells=tuple(cells),
        emulator_threads_isolated=bool(
            instance_topology.emulator_threads_isolated),
        pci=pci, has_pci_requests=bool(pci_requests),
        pack=CONF.compute.packing_host_numa_cells_allocation_strategy)


def request_from_spec(spec_obj):
    """``(request, pci_requests)`` of a ``RequestSpec``.

    ``request`` is None when the spec has no NUMA topology; ``pci_requests``
    is the spec's list of ``InstancePCIRequest`` (or None), which
    :func:`host_pci` needs per host.

    :raises Unsupported: outside the engine's subset
    """
    topology = _field(spec_obj, 'numa_topology')
    if not topology:
        return None, None
    pci_requests = _field(spec_obj, 'pci_requests')
    requests = pci_requests.requests if pci_requests else None
    return request_from_topology(
        topology, requests, _field(spec_obj, 'network_metadata')), requests


def host_pci(host_state, pci_request):
    """A :class:`~nova_sched_ext.fit.model.HostPci`, or None if unknown."""
    topology = host_state.numa_topology
    if not topology:
        return None
    cell_ids = [cell.id for cell in topology.cells]
    stats = host_state.pci_stats
    if stats is None:
        n = len(cell_ids)
        return m.HostPci((_UNLIMITED,) * n, (_UNLIMITED,) * n, 0, 0,
                         _UNLIMITED)
    try:
        pools = list(stats.pools)
        matching, eligible = nova_compat.pci_pools(stats, pools, pci_request)
    except Exception:
        return None
    matching_by = _pci_devices_by_node(matching)
    eligible_by = _pci_devices_by_node(eligible)
    return m.HostPci(
        matching_by_cell=tuple(matching_by.get(i, 0) for i in cell_ids),
        eligible_by_cell=tuple(eligible_by.get(i, 0) for i in cell_ids),
        matching_no_numa=matching_by.get(None, 0),
        eligible_no_numa=eligible_by.get(None, 0),
        eligible_all=sum(p['count'] for p in eligible))


def _dedicated_vcpus(instance_topology):
    return sum(len(_field(cell, 'pcpuset', set()))
               for cell in instance_topology.cells)


def shape_from_flavor(flavor, image_meta=None):
    """The :class:`~nova_sched_ext.fit.model.Shape` of a flavor.

    The NUMA part is what Nova builds for the flavor
    (``numa_get_constraints``); the host-level part counts the VCPU
    placement consumes (dedicated CPUs are PCPU and counted per cell).

    :raises Unsupported: the flavor asks for what slot counting ignores
    :raises nova.exception.Invalid: the flavor's extra specs are invalid
    """
    from nova.virt import hardware
    if image_meta is None:
        image_meta = objects.ImageMeta(properties=objects.ImageMetaProps())
    topology = hardware.numa_get_constraints(flavor, image_meta)
    return _shape(flavor.vcpus, flavor.memory_mb, topology)


def shape_from_spec(spec_obj):
    """The Shape of the instance a ``RequestSpec`` schedules.

    :raises Unsupported: outside the engine's subset
    """
    return _shape(spec_obj.vcpus, spec_obj.memory_mb,
                  _field(spec_obj, 'numa_topology'))


def _shape(vcpus, memory_mb, topology):
    if not topology:
        return m.Shape(vcpus=vcpus, memory_mb=memory_mb)
    request = request_from_topology(topology)
    return m.Shape(vcpus=max(vcpus - _dedicated_vcpus(topology), 0),
                   memory_mb=memory_mb, numa=request)
