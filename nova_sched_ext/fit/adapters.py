"""Build the fit engine's model from Nova's scheduler objects.

* :func:`prepared_host` turns a ``HostState`` into a
  :class:`~nova_sched_ext.fit.engine.PreparedHost`, cached on the
  ``HostState`` until Nova changes it (see ``_version``).
* :func:`request_from_spec` turns a ``RequestSpec`` into a
  :class:`~nova_sched_ext.fit.model.Request`, or ``None`` when the request
  has no NUMA topology, or raises :class:`Unsupported` when it uses a feature
  outside the engine's subset (the caller then leaves the decision to Nova).
* :func:`host_pci` describes, per request, which PCI devices of a host could
  serve the request's PCI request, using Nova's own pool filters.
"""

from nova import objects
from nova.objects import fields
from oslo_config import cfg

from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model as m

CONF = cfg.CONF

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


class Unsupported(Exception):
    """The request or host uses a feature outside the engine's subset."""


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
    cpuset = _field(cell, 'cpuset', set())
    pcpuset = _field(cell, 'pcpuset', set())
    pinned = _field(cell, 'pinned_cpus', set())
    free_pcpus = pcpuset - pinned
    mempages = _field(cell, 'mempages', []) or []
    if len(mempages) > m.MAX_PAGE_SIZES:
        raise Unsupported('more than %d page sizes' % m.MAX_PAGE_SIZES)
    pages = []
    for page in mempages:
        if page.size_kb <= 0:
            raise Unsupported('page size %r' % page.size_kb)
        pages.append(m.Page(page.size_kb, page.total, page.used,
                            _field(page, 'reserved', 0)))
    return m.HostCell(
        id=cell.id, cpus=len(cpuset), pcpus=len(pcpuset),
        free_pcpus=len(free_pcpus), cpu_usage=cell.cpu_usage or 0,
        memory=cell.memory, memory_usage=cell.memory_usage or 0,
        threads_per_core=threads_per_core,
        pcpus_are_cpus=pcpuset == cpuset,
        free_sibling_sizes=tuple(len(s & free_pcpus) for s in siblings),
        pages=tuple(pages), pci_devices=pci_devices)


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
    limits.  Never raises: a host outside the subset is HOST_UNSUPPORTED.
    """
    if not numa_topology:
        return m.Host(cells=(), status=m.HOST_NO_TOPOLOGY)
    try:
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
    except Exception:
        return engine.UNSUPPORTED_HOST
    return m.Host(cells=model_cells, status=m.HOST_OK,
                  cpu_allocation_ratio=cpu_allocation_ratio,
                  ram_allocation_ratio=ram_allocation_ratio,
                  has_pci_stats=pci_stats is not None,
                  candidates=candidates)


_NO_TOPOLOGY = engine.prepare(m.Host(cells=(), status=m.HOST_NO_TOPOLOGY))

# The packed model is cached on the HostState itself, with what it was built
# from. A host with a stamp (``updated`` set) is unchanged while ``updated``,
# the free RAM, used vCPUs and ratios are: Nova's HostManager rebuilds the
# numa_topology and pci_stats objects from the compute node on every request,
# equal when the node's ``updated_at`` did not move (the database moves it on
# every change), and consume_from_request stamps ``updated`` (it also changes
# the PCI pools in place). The usage fields cover two compute node saves in
# the same second (MySQL keeps whole seconds). A host without a stamp (built
# by hand, or a node that never reported) is also compared by the identity
# of its topology and PCI stats objects.
_CACHE_ATTR = '_nova_sched_ext_fit'


def _version(host_state):
    return (host_state.updated, host_state.free_ram_mb,
            host_state.vcpus_used, host_state.cpu_allocation_ratio,
            host_state.ram_allocation_ratio)


def host_room(host_state):
    """Host-level VCPU and MEMORY_MB room, as placement computes it."""
    cpu_ratio = host_state.cpu_allocation_ratio
    ram_ratio = host_state.ram_allocation_ratio
    if cpu_ratio is None or ram_ratio is None:
        return {}
    total_vcpus = int(host_state.vcpus_total * cpu_ratio)
    total_memory = int(host_state.total_usable_ram_mb * ram_ratio)
    used_memory = host_state.total_usable_ram_mb - host_state.free_ram_mb
    return {'total_vcpus': total_vcpus,
            'free_vcpus': total_vcpus - host_state.vcpus_used,
            'total_memory_mb': total_memory,
            'free_memory_mb': total_memory - used_memory}


def _with_candidates(prepared, candidates):
    if prepared.model.status != m.HOST_OK:
        return prepared
    return engine.prepare(prepared.model._replace(candidates=candidates))


def _build(host_state, topology):
    room = host_room(host_state)
    if not topology:
        if not room:
            return _NO_TOPOLOGY
        return engine.prepare(_NO_TOPOLOGY.model._replace(**room))
    if not room:
        # Nova's filter would fail on a host without ratios; stay out.
        return engine.prepare(engine.UNSUPPORTED_HOST)
    host = host_model(topology, host_state.pci_stats,
                      host_state.cpu_allocation_ratio,
                      host_state.ram_allocation_ratio)
    return engine.prepare(host._replace(**room))


def _refresh(host_state):
    topology = host_state.numa_topology
    pci_stats = host_state.pci_stats
    prepared = _build(host_state, topology)
    setattr(host_state, _CACHE_ATTR,
            (topology, pci_stats, _version(host_state), prepared))
    return prepared


def rebuild_prepared_host(host_state):
    """Rebuild the packed model of a ``HostState`` now, for one candidate.

    For callers that keep their own record of what changed (the slot
    arena): it refreshes the per-host cache as a miss would.
    """
    return _refresh(host_state)


def prepared_hosts(host_states):
    """The cached, packed models of many ``HostState`` objects.

    This runs for every host of every request: the cache check is inlined
    (no call per host) to keep it to a few attribute reads.
    """
    result = []
    append = result.append
    attr = _CACHE_ATTR
    for hs in host_states:
        entry = hs.__dict__.get(attr)
        if (entry is not None and
                entry[2] == (hs.updated, hs.free_ram_mb, hs.vcpus_used,
                             hs.cpu_allocation_ratio,
                             hs.ram_allocation_ratio) and
                (hs.updated is not None or
                 (entry[0] is hs.numa_topology and
                  entry[1] is hs.pci_stats))):
            prepared = entry[3]
        else:
            prepared = _refresh(hs)
        if len(hs.allocation_candidates) != 1:
            prepared = _with_candidates(prepared,
                                        len(hs.allocation_candidates))
        append(prepared)
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
        matching = stats._filter_pools_for_spec(pools, pci_request)
        eligible = stats._filter_pools_for_unrequested_pfs(
            matching, pci_request)
        eligible = stats._filter_pools_for_unrequested_vdpa_devices(
            eligible, pci_request)
        eligible = stats._filter_pools_for_unrequested_remote_managed_devices(
            eligible, pci_request)
        eligible = stats._filter_pools_for_live_migratable_devices(
            eligible, pci_request)
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
