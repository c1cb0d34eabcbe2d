"""Hypothesis strategies: random Nova host and instance NUMA topologies.

They build Nova's own objects (``NUMATopology``, ``InstanceNUMATopology``,
``PciDeviceStats``, ``InstancePCIRequest``) so that Nova's
``numa_fit_instance_to_host`` can serve as the oracle for the fit engine.
The ranges are small on purpose: small hosts hit the corner cases (full
cells, no free sibling set, exact page counts) far more often than big ones.
"""

import uuid

from hypothesis import strategies as st
from nova import objects
from nova.objects import fields
from nova.pci import stats as pci_stats

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


@st.composite
def host_cells(draw, cell_id, first_cpu, roomy=False):
    threads = draw(st.sampled_from([1, 1, 2, 2, 4]))
    cores = draw(st.integers(1, 6))
    cpus = list(range(first_cpu, first_cpu + threads * cores))
    siblings = [set(cpus[i:i + threads])
                for i in range(0, len(cpus), threads)]
    mode = draw(st.sampled_from(['split', 'split', 'legacy', 'dedicated',
                                 'shared']))
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
    return objects.NUMACell(
        id=cell_id, cpuset=cpuset, pcpuset=pcpuset, memory=memory,
        cpu_usage=_part(draw, 2 * len(cpuset), roomy),
        memory_usage=memory_usage, pinned_cpus=pinned, siblings=siblings,
        socket=0,
        mempages=mempages,
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


@st.composite
def host_topologies(draw, max_cells=4):
    n = draw(st.integers(1, max_cells))
    cells, first = [], 0
    ids = list(range(n))
    if draw(st.integers(0, 4)) == 0:
        ids = draw(st.permutations(ids))
    # Roomy hosts (little usage) make "fits" as common as "does not fit".
    roomy = draw(st.booleans())
    for i in range(n):
        cell = draw(host_cells(ids[i], first, roomy))
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
