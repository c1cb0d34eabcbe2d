"""Hypothesis strategies: random Nova host and instance NUMA topologies.

They build Nova's own objects (``NUMATopology``, ``InstanceNUMATopology``,
``PciDeviceStats``, ``InstancePCIRequest``) so that Nova's
``numa_fit_instance_to_host`` can serve as the oracle for the fit engine.
The ranges are small on purpose: small hosts hit the corner cases (full
cells, no free sibling set, exact page counts) far more often than big ones.
"""

import uuid

from hypothesis import reject
from hypothesis import strategies as st
from nova import exception
from nova import objects
from nova.objects import fields
from nova.pci import stats as pci_stats
from nova.virt import hardware

objects.register_all()

PAGE_4K, PAGE_2M, PAGE_1G = 4, 2048, 1048576


def _part(draw, total, roomy=False):
    """A share of total, biased to the interesting ends."""
    if roomy and draw(st.integers(0, 3)):
        return 0
    share = draw(st.sampled_from([0, 0, 0.25, 0.5, 0.75, 0.9, 1]))
    if draw(st.integers(0, 3)) == 0:
        return draw(st.integers(0, total))
    return int(total * share)


MODES = ('split', 'split', 'legacy', 'dedicated', 'shared')


@st.composite
def host_cells(draw, cell_id, first_cpu, roomy=False, small=False,
               modes=MODES, threads=None):
    if small:
        threads = draw(st.sampled_from(threads or [1, 1, 2]))
        cores = draw(st.integers(1, 3))
    else:
        threads = draw(st.sampled_from(threads or [1, 1, 2, 2, 4]))
        cores = draw(st.integers(1, 6))
    cpus = list(range(first_cpu, first_cpu + threads * cores))
    siblings = [set(cpus[i:i + threads])
                for i in range(0, len(cpus), threads)]
    mode = draw(st.sampled_from(modes))
    if mode == 'legacy':
        cpuset = pcpuset = set(cpus)
    elif mode == 'dedicated':
        cpuset, pcpuset = set(), set(cpus)
    elif mode == 'shared':
        cpuset, pcpuset = set(cpus), set()
    else:
        role = draw(st.lists(st.sampled_from('sdn'), min_size=len(cpus),
                             max_size=len(cpus)))
        cpuset = {c for c, r in zip(cpus, role) if r == 's'}
        pcpuset = {c for c, r in zip(cpus, role) if r == 'd'}
    pinned = {c for c in sorted(pcpuset)
              if draw(st.integers(0, 7 if roomy else 3)) == 0}
    memory = draw(st.sampled_from([1024, 2048, 4096, 8192]))
    memory_usage = _part(draw, memory, roomy)
    mempages = []
    if draw(st.integers(0, 4)):
        mempages.append(objects.NUMAPagesTopology(
            size_kb=PAGE_4K, total=memory * 256,
            used=_part(draw, memory * 256, roomy), reserved=0))
        for size, most in ((PAGE_2M, 2048), (PAGE_1G, 4)):
            if draw(st.integers(0, 3)):
                total = draw(st.sampled_from([0, most // 4, most // 2, most]))
                used = _part(draw, total, roomy)
                reserved = _part(draw, total - used) if draw(
                    st.booleans()) else 0
                mempages.append(objects.NUMAPagesTopology(
                    size_kb=size, total=total, used=used, reserved=reserved))
        if draw(st.booleans()):
            mempages.reverse()
    # Shared CPUs already over the limit of small ratios: a mixed cell can
    # then pin its dedicated CPUs and fail only on its shared ones, the one
    # place where Nova keeps a changed instance cell id after a failure.
    if draw(st.integers(0, 2 if small else 5)) == 0:
        cpu_usage = len(cpuset) + draw(st.integers(1, 4))
    else:
        cpu_usage = _part(draw, 2 * len(cpuset), roomy)
    return objects.NUMACell(
        id=cell_id, cpuset=cpuset, pcpuset=pcpuset, memory=memory,
        cpu_usage=cpu_usage,
        memory_usage=memory_usage, pinned_cpus=pinned, siblings=siblings,
        socket=0,
        mempages=mempages,
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


@st.composite
def host_topologies(draw, max_cells=4, min_cells=1, small=False,
                    modes=MODES, threads=None, first_id=0, roomy=None):
    """A host of ``min_cells..max_cells`` cells.

    ``small`` cells (1-3 cores) are nearly full with little to pin: tight
    hosts where only few permutations fit, so that a stale entry of Nova's
    pair cache decides the answer.  ``modes`` are the cells' CPU roles
    (``split``: ``cpu_shared_set`` / ``cpu_dedicated_set``), ``threads``
    the threads per core to draw from, ``first_id`` the first cell id:
    ids other than the instance cells' 0.. make Nova's pair cache mix
    host and instance cell ids differently, as on a host whose cells are
    numbered from 4.  ``roomy`` (None: drawn) hosts have little usage:
    they take many instances, for counts that go to exhaustion.
    """
    n = draw(st.integers(min_cells, max_cells))
    cells, first = [], 0
    ids = list(range(first_id, first_id + n))
    if draw(st.integers(0, 4)) == 0:
        ids = draw(st.permutations(ids))
    # Roomy hosts (little usage) make "fits" as common as "does not fit".
    if roomy is None:
        roomy = draw(st.booleans())
    for i in range(n):
        cell = draw(host_cells(ids[i], first, roomy, small, modes, threads))
        first += 64
        cells.append(cell)
    return objects.NUMATopology(cells=cells)


@st.composite
def instance_topologies(draw, max_cells=4):
    n = draw(st.integers(1, max_cells))
    policy = draw(st.sampled_from([
        None, fields.CPUAllocationPolicy.SHARED,
        fields.CPUAllocationPolicy.DEDICATED,
        fields.CPUAllocationPolicy.DEDICATED,
        fields.CPUAllocationPolicy.MIXED]))
    thread_policy = None
    if policy in (fields.CPUAllocationPolicy.DEDICATED,
                  fields.CPUAllocationPolicy.MIXED):
        thread_policy = draw(st.sampled_from([
            None, fields.CPUThreadAllocationPolicy.PREFER,
            fields.CPUThreadAllocationPolicy.REQUIRE,
            fields.CPUThreadAllocationPolicy.ISOLATE]))
    pagesize = draw(st.sampled_from([None, None, -1, -2, -3, PAGE_4K,
                                     PAGE_2M, PAGE_1G]))
    cells, vcpu = [], 0
    for i in range(n):
        shared = dedicated = 0
        if policy in (None, fields.CPUAllocationPolicy.SHARED):
            shared = draw(st.integers(1, 4))
        elif policy == fields.CPUAllocationPolicy.DEDICATED:
            dedicated = draw(st.integers(1, 4))
        else:
            shared = draw(st.integers(1, 3))
            dedicated = draw(st.integers(0, 3))
        cpuset = set(range(vcpu, vcpu + shared))
        vcpu += shared
        pcpuset = set(range(vcpu, vcpu + dedicated))
        vcpu += dedicated
        memory = draw(st.sampled_from([128, 256, 512, 512, 1000, 1024,
                                       2048]))
        cells.append(objects.InstanceNUMACell(
            id=i, cpuset=cpuset, pcpuset=pcpuset, memory=memory,
            pagesize=pagesize, cpu_policy=policy,
            cpu_thread_policy=thread_policy))
    emulator = draw(st.sampled_from([
        None, fields.CPUEmulatorThreadsPolicy.SHARE,
        fields.CPUEmulatorThreadsPolicy.ISOLATE]))
    kwargs = {}
    if emulator and policy == fields.CPUAllocationPolicy.DEDICATED:
        kwargs['emulator_threads_policy'] = emulator
    return objects.InstanceNUMATopology(cells=cells, **kwargs)


@st.composite
def flavor_topologies(draw, max_cells=4, min_cells=1, policies=None,
                      max_node_cpus=4):
    """``(extra_specs, InstanceNUMATopology)`` the way nova-api builds them.

    The topology comes from ``hardware.numa_get_constraints`` on a flavor
    with ``hw:`` extra specs, so it has the shapes real requests have and
    :func:`instance_topologies` does not draw: ``hw:cpu_dedicated_mask``
    puts the dedicated CPUs of a mixed flavor in some cells only (the others
    are mixed cells without one; few CPUs per node, ``max_node_cpus``,
    make cells with dedicated CPUs only), asymmetric ``hw:numa_cpus.N`` /
    ``hw:numa_mem.N``, emulator threads on a mixed flavor.  Flavors Nova
    refuses are drawn again.
    """
    nodes = draw(st.integers(min_cells, max_cells))
    policy = draw(st.sampled_from(policies or [
        None, 'shared', 'dedicated', 'mixed', 'mixed', 'mixed']))
    per_node_cpus = draw(st.lists(st.integers(1, max_node_cpus),
                                  min_size=nodes,
                                  max_size=nodes))
    per_node_mem = draw(st.lists(st.sampled_from([128, 256, 512, 1024,
                                                  1536, 2048]),
                                 min_size=nodes, max_size=nodes))
    specs = {'hw:numa_nodes': str(nodes)}
    if nodes > 1 and draw(st.booleans()):
        first = 0
        for node, (cpus, mem) in enumerate(zip(per_node_cpus,
                                               per_node_mem)):
            specs['hw:numa_cpus.%d' % node] = ','.join(
                str(c) for c in range(first, first + cpus))
            specs['hw:numa_mem.%d' % node] = str(mem)
            first += cpus
        vcpus, memory = first, sum(per_node_mem)
    else:
        vcpus = nodes * per_node_cpus[0]
        memory = nodes * per_node_mem[0]
    if policy:
        specs['hw:cpu_policy'] = policy
    if policy == 'mixed':
        if vcpus < 2:
            reject()
        mask = draw(st.sets(st.integers(0, vcpus - 1), min_size=1,
                            max_size=vcpus - 1))
        if draw(st.booleans()):
            specs['hw:cpu_dedicated_mask'] = ','.join(map(str, sorted(mask)))
        else:
            shared = sorted(set(range(vcpus)) - mask)
            specs['hw:cpu_dedicated_mask'] = ','.join(
                '^%d' % c for c in shared)
    if policy in ('dedicated', 'mixed'):
        thread = draw(st.sampled_from([None, 'prefer', 'require',
                                       'isolate']))
        if thread:
            specs['hw:cpu_thread_policy'] = thread
        emulator = draw(st.sampled_from([None, 'share', 'isolate']))
        if emulator:
            specs['hw:emulator_threads_policy'] = emulator
    pagesize = draw(st.sampled_from([None, None, 'small', 'large', 'any',
                                     '4', '2MB']))
    if pagesize:
        specs['hw:mem_page_size'] = pagesize
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=memory, extra_specs=specs)
    try:
        topology = hardware.numa_get_constraints(
            flavor, objects.ImageMeta.from_dict({'properties': {}}))
    except exception.Invalid:
        reject()
    if topology is None:
        reject()
    return specs, topology


@st.composite
def split_host_topologies(draw, min_cells=3, max_cells=4):
    """A host with ``cpu_shared_set`` / ``cpu_dedicated_set`` split.

    Every CPU is shared or dedicated (either role on each thread of a
    core), cells of 1-3 cores of mostly 2 threads, a few CPUs already
    pinned, little memory used and only small pages: hosts that take
    several multi-cell ``mixed`` instances, where Nova's fit walks many
    permutations as they fill up, so that its pair cache hands a cell the
    pinning it got in another host cell (issue 31).  Cell ids start at 0,
    2 or 4 so that host and instance cell ids mix differently.
    """
    n = draw(st.integers(min_cells, max_cells))
    first_id = draw(st.sampled_from([0, 2, 4]))
    threads = draw(st.sampled_from([2, 2, 1, 4]))
    cells = []
    for i in range(n):
        first = 64 * i
        cpus = list(range(first,
                          first + threads * draw(st.integers(1, 3))))
        roles = draw(st.lists(st.booleans(), min_size=len(cpus),
                              max_size=len(cpus)))
        pcpus = {c for c, dedicated in zip(cpus, roles) if dedicated}
        pinned = {c for c in sorted(pcpus)
                  if draw(st.integers(0, 4)) == 0}
        memory = draw(st.sampled_from([2048, 4096]))
        shared = len(cpus) - len(pcpus)
        cells.append(objects.NUMACell(
            id=first_id + i, cpuset=set(cpus) - pcpus, pcpuset=pcpus,
            memory=memory, cpu_usage=draw(st.integers(0, shared)),
            memory_usage=0, pinned_cpus=pinned,
            siblings=[set(cpus[j:j + threads])
                      for j in range(0, len(cpus), threads)],
            socket=0,
            mempages=[objects.NUMAPagesTopology(
                size_kb=PAGE_4K, total=memory * 256, used=0, reserved=0)],
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False)))
    return objects.NUMATopology(cells=cells)


def _split_cell(cell_id, siblings, pcpus, pinned=()):
    cpus = set().union(*siblings)
    return objects.NUMACell(
        id=cell_id, cpuset=cpus - set(pcpus), pcpuset=set(pcpus),
        memory=2048, cpu_usage=0, memory_usage=0, pinned_cpus=set(pinned),
        siblings=[set(s) for s in siblings], socket=0,
        mempages=[objects.NUMAPagesTopology(size_kb=PAGE_4K,
                                            total=2048 * 256, used=0,
                                            reserved=0)],
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


def split_host_with_four_cells():
    """Issue 31: a split shared/dedicated host, cells 4-7, 2 threads/core.

    With :func:`mixed_flavor_with_mask` (allocation ratios 2.0 / 1.0),
    Nova's fit answers a topology for the fourth instance in which an
    instance cell placed through its (host cell id, instance cell id) pair
    cache still carries the pinning it got in another host cell: the
    claim's ``numa_usage_from_instance_numa`` raises
    ``CPUPinningUnknown``, so three instances can be booked.
    """
    return objects.NUMATopology(cells=[
        _split_cell(4, [(0, 1), (2, 3), (4, 5)], (1, 2)),
        _split_cell(5, [(64, 65), (66, 67)], (65,), pinned={65}),
        _split_cell(6, [(128, 129), (130, 131)], (128, 130, 131)),
        _split_cell(7, [(192, 193), (194, 195), (196, 197)],
                    (192, 193, 194, 196), pinned={194})])


def mixed_flavor_with_mask():
    """``(extra specs, topology)``: 4 vCPUs on 4 cells, 2 of them pinned."""
    specs = {'hw:numa_nodes': '4', 'hw:cpu_policy': 'mixed',
             'hw:cpu_dedicated_mask': '2,3'}
    flavor = objects.Flavor(vcpus=4, memory_mb=2048, extra_specs=specs)
    return specs, hardware.numa_get_constraints(
        flavor, objects.ImageMeta.from_dict({'properties': {}}))


PRODUCTS = ['1111', '2222']


@st.composite
def pci_setups(draw, host_topology):
    """(PciDeviceStats or None, [InstancePCIRequest] or None)."""
    if draw(st.integers(0, 2)) == 0:
        return None, None
    stats = pci_stats.PciDeviceStats(host_topology)
    if draw(st.integers(0, 5)) == 0:
        # Nova skips the PCI check on a host without PCI stats.
        stats = None
    nodes = [c.id for c in host_topology.cells] + [None, 7]
    pools = []
    for _ in range(draw(st.integers(0, 4))):
        pools.append({
            'vendor_id': '8086',
            'product_id': draw(st.sampled_from(PRODUCTS)),
            'numa_node': draw(st.sampled_from(nodes)),
            'dev_type': draw(st.sampled_from([
                fields.PciDeviceType.STANDARD, fields.PciDeviceType.SRIOV_VF,
                fields.PciDeviceType.SRIOV_PF])),
            'count': draw(st.integers(1, 3)),
            'devices': [],
        })
    if stats is not None:
        stats.pools = pools
    if draw(st.integers(0, 3)) == 0:
        return stats, None
    request = objects.InstancePCIRequest(
        count=draw(st.integers(1, 3)),
        spec=[{'vendor_id': '8086',
               'product_id': draw(st.sampled_from(PRODUCTS))}],
        request_id=str(uuid.uuid4()),
        numa_policy=draw(st.sampled_from([
            None, fields.PCINUMAAffinityPolicy.LEGACY,
            fields.PCINUMAAffinityPolicy.REQUIRED,
            fields.PCINUMAAffinityPolicy.PREFERRED])))
    return stats, [request]
