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


def instance_topology(vcpus, memory_mb, specs):
    """Nova's instance NUMA topology of a flavor, with no image properties.

    ``hardware.numa_get_constraints``: None for a flavor without one; what
    Nova raises for a flavor it refuses.
    """
    flavor = objects.Flavor(vcpus=vcpus, memory_mb=memory_mb,
                            extra_specs=specs)
    return hardware.numa_get_constraints(
        flavor, objects.ImageMeta.from_dict({'properties': {}}))


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
    try:
        topology = instance_topology(vcpus, memory, specs)
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
    return specs, instance_topology(4, 2048, specs)


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


# --- uneven dual-NUMA variants (issue 28) ----------------------------------

#: the splits an operator declares for a family (3:1, 1:3, 2:1 ...), and
#: None for any split
UNEVEN_SHARES = (0.25, 0.75, 1 / 3, 2 / 3, 0.5, None, None)
#: how full a host cell already is: one node nearly full and the other
#: nearly free is the host uneven variants are for
FILL = (0, 0, 0.25, 0.5, 0.75, 0.9, 1)


def _split(draw, total, nodes, share):
    """``nodes`` positive parts adding up to ``total``."""
    if nodes == 2 and share is not None:
        first = min(max(int(round(total * share)), 1), total - 1)
        return [first, total - first]
    cuts = sorted(draw(st.sets(st.integers(1, total - 1),
                               min_size=nodes - 1, max_size=nodes - 1)))
    bounds = [0] + cuts + [total]
    return [b - a for a, b in zip(bounds, bounds[1:])]


@st.composite
def uneven_host_cells(draw, cell_id, first_cpu):
    """A host cell of 2-16 CPUs, already filled to a drawn share.

    The pinned CPUs, shared CPU usage, memory and huge pages in use all
    follow one drawn fill (memory sometimes its own), so that the two
    cells of a host often differ a lot: 12 pinned CPUs free on one and 4
    on the other, the leftovers of single-NUMA guests.
    """
    threads = draw(st.sampled_from([1, 1, 2]))
    # (Hypothesis favours the first of a choice: not the smallest cell)
    cores = draw(st.sampled_from([16, 12, 8, 6, 4, 2])) // threads
    cpus = list(range(first_cpu, first_cpu + threads * cores))
    siblings = [set(cpus[i:i + threads])
                for i in range(0, len(cpus), threads)]
    # (Hypothesis favours the first of a choice: a cell with both roles)
    mode = draw(st.sampled_from(('split', 'dedicated', 'split', 'legacy',
                                 'dedicated', 'split', 'shared')))
    if mode == 'legacy':
        cpuset = pcpuset = set(cpus)
    elif mode == 'dedicated':
        cpuset, pcpuset = set(), set(cpus)
    elif mode == 'shared':
        cpuset, pcpuset = set(cpus), set()
    elif cores < 2:
        cpuset, pcpuset = set(), set(cpus)
    else:
        shared_cores = draw(st.integers(1, cores - 1))
        cpuset = set(cpus[:shared_cores * threads])
        pcpuset = set(cpus) - cpuset
    fill = draw(st.sampled_from(FILL))
    mem_fill = min(fill, 0.5) if draw(st.booleans()) else \
        draw(st.sampled_from(FILL))
    ordered = sorted(pcpuset)
    if draw(st.booleans()):
        # whole cores first (the require / isolate guests), else any CPUs
        ordered = sorted(ordered, key=lambda c: (c % threads, c))
    pinned = set(ordered[:int(len(ordered) * fill)])
    memory = draw(st.sampled_from([4096, 8192, 8192, 16384]))
    memory_usage = int(memory * mem_fill)
    small_total = memory * 256
    mempages = [objects.NUMAPagesTopology(
        size_kb=PAGE_4K, total=small_total,
        used=int(small_total * mem_fill), reserved=0)]
    if draw(st.booleans()):
        total = draw(st.sampled_from([memory // 8, memory // 4,
                                      memory // 2]))
        mempages.append(objects.NUMAPagesTopology(
            size_kb=PAGE_2M, total=total, used=int(total * mem_fill),
            reserved=0))
    if draw(st.integers(0, 3)) == 0:
        total = draw(st.sampled_from([1, 2, 4]))
        mempages.append(objects.NUMAPagesTopology(
            size_kb=PAGE_1G, total=total, used=int(total * mem_fill),
            reserved=0))
    return objects.NUMACell(
        id=cell_id, cpuset=cpuset, pcpuset=pcpuset, memory=memory,
        cpu_usage=int(2 * len(cpuset) * fill), memory_usage=memory_usage,
        pinned_cpus=pinned, siblings=siblings, socket=0, mempages=mempages,
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


@st.composite
def uneven_host_topologies(draw, min_cells=2, max_cells=2):
    """A host whose cells are filled to different shares (mostly 2)."""
    n = draw(st.integers(min_cells, max_cells))
    return objects.NUMATopology(cells=[
        draw(uneven_host_cells(i, 64 * i)) for i in range(n)])


def even_twin(specs):
    """The extra specs of the even split of an uneven variant."""
    return {k: v for k, v in specs.items()
            if not k.startswith(('hw:numa_cpus.', 'hw:numa_mem.'))}


@st.composite
def uneven_flavor_topologies(draw, min_nodes=2, max_nodes=2,
                             policies=None, pagesizes=None):
    """``(extra_specs, InstanceNUMATopology)`` of an uneven variant.

    ``hw:numa_nodes`` (mostly 2) with ``hw:numa_cpus.N`` and
    ``hw:numa_mem.N`` split by a family's rule (3:1, 1:3, 2:1, 1:2, even,
    or any split), the memory in proportion to the CPUs or split on its
    own, guest CPUs numbered in order or interleaved over the nodes; the
    pinned (``dedicated``, ``mixed``), shared and huge-page variants, thread
    and emulator thread policies (``policies`` and ``pagesizes`` narrow
    the choice).  Up to 16 vCPUs: hosts of
    :func:`uneven_host_topologies` have up to 16 CPUs per cell.  Flavors
    Nova refuses (memory not a multiple of the page size is not refused
    here: Nova's fit decides it) are drawn again.
    """
    nodes = draw(st.integers(min_nodes, max_nodes))
    if draw(st.integers(0, 3)):
        # mostly sizes Nova can also split evenly: the even twin exists
        vcpus = nodes * draw(st.sampled_from([1, 2, 2, 3, 4, 4, 6, 8][
            :16 // nodes]))
    else:
        vcpus = draw(st.integers(nodes, 16))
    memory = nodes * draw(st.sampled_from([256, 512, 1024, 1536, 2048]))
    share = draw(st.sampled_from(UNEVEN_SHARES))
    cpu_parts = _split(draw, vcpus, nodes, share)
    if draw(st.booleans()):
        mem_parts = [memory * c // vcpus for c in cpu_parts]
        mem_parts[-1] += memory - sum(mem_parts)
    else:
        mem_parts = _split(draw, memory // 128, nodes,
                           draw(st.sampled_from(UNEVEN_SHARES)))
        mem_parts = [p * 128 for p in mem_parts]
        mem_parts[-1] += memory - sum(mem_parts)
    order = list(range(vcpus))
    if draw(st.integers(0, 3)) == 0:
        order = draw(st.permutations(order))
    specs = {'hw:numa_nodes': str(nodes)}
    first = 0
    for node, (cpus, mem) in enumerate(zip(cpu_parts, mem_parts)):
        specs['hw:numa_cpus.%d' % node] = ','.join(
            str(c) for c in sorted(order[first:first + cpus]))
        specs['hw:numa_mem.%d' % node] = str(mem)
        first += cpus
    policy = draw(st.sampled_from(policies or [
        'dedicated', 'dedicated', 'dedicated', None, 'shared', 'mixed']))
    if policy:
        specs['hw:cpu_policy'] = policy
    if policy == 'mixed':
        mask = draw(st.sets(st.integers(0, vcpus - 1), min_size=1,
                            max_size=vcpus - 1))
        specs['hw:cpu_dedicated_mask'] = ','.join(map(str, sorted(mask)))
    if policy in ('dedicated', 'mixed'):
        thread = draw(st.sampled_from([None, None, 'prefer', 'require',
                                       'isolate']))
        if thread:
            specs['hw:cpu_thread_policy'] = thread
        if draw(st.integers(0, 4)) == 0:
            specs['hw:emulator_threads_policy'] = 'isolate'
    pagesize = draw(st.sampled_from(pagesizes or [
        None, None, None, 'small', 'large', 'any', '2MB', '1GB']))
    if pagesize:
        specs['hw:mem_page_size'] = pagesize
    try:
        topology = instance_topology(vcpus, memory, specs)
    except exception.Invalid:
        reject()
    return specs, topology


def even_twin_topology(specs, topology):
    """The even split of the same flavor, or None where Nova has none.

    Nova splits ``hw:numa_nodes=N`` evenly only when N divides the vCPUs
    and the memory (else ``numa_get_constraints`` refuses the flavor).
    """
    vcpus = sum(len(c.cpuset) + len(c.pcpuset) for c in topology.cells)
    memory = sum(c.memory for c in topology.cells)
    twin = even_twin(specs)
    try:
        return twin, instance_topology(vcpus, memory, twin)
    except exception.Invalid:
        return twin, None
