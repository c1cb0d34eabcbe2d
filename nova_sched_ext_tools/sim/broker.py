# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""``nova-sched-ext-sim --broker``: the broker's decision on the trace.

The trace's hosts are split into clusters by rack ranges (the racks in
ascending order, cut into ``clusters`` runs of as even a size as
possible); each request of a trace is then decided by the broker's own
planning function (:func:`nova_sched_ext.broker.planning.plan`) on the
clusters' capacity, counted exactly as the capacity API counts it (the
package's fit engine, :func:`nova_sched_ext.fit.engine.place_counts`,
capped by each host's free VCPU and MEMORY_MB), and placed in the chosen
cluster on the host with the fewest instances of its shape left (a
best fit), with the fit engine's own placement.  Four runs per trace:

``fixed``
    each request's NUMA kind as the trace gives it (one variant);
``conversion``
    the broker's conversion: the request's kind first, then the other one
    (a single-NUMA request may become dual-NUMA and the reverse; a
    dual-NUMA variant only where vCPUs and RAM split evenly over two
    nodes, as Nova requires), tried in that order (``broker.conversion:
    priority``, the seed's greedy rule);
``conversion-most-room``
    the same variants, the one the clusters have most room for first
    (``broker.conversion: most-room``);

each with cluster choice by ``most-capacity``, ``round-robin`` and
``best-fit`` (the chooser plugins of
:mod:`nova_sched_ext.broker.choosers`).

With ``uneven`` (a percent, ``--broker-uneven``), each mode runs once
more as ``<mode>+uneven``: every dual-NUMA variant of a family also
gets the uneven splits the broker's ``min_share`` rule makes of it
(each node at least that percent of the vCPUs, the RAM in the same
proportion: :func:`nova_sched_ext.broker.config.uneven_variants`),
tried after the even split, the one the clusters have most room for
first.  After every run, :func:`leftover` counts what the cloud still
takes of the trace's dual-NUMA sizes, even and uneven, with the same
count as the clusters' capacity, and :func:`end_fill` places what it can
of the run's rejected dual-NUMA requests, with uneven splits, in the
room left at its end: the uneven variants' gain for a broker that knew
no other request was coming (an upper bound the online broker, which
cannot know it, is measured against).

What is left out, and why: the trace's server groups (affinity,
anti-affinity, fault domains) are each cluster's scheduler's business,
not the broker's, so every request is placed on its own; one request is
one server (the trace has no counts).  The fallback here is the
broker's walk of the candidates (:mod:`nova_sched_ext.broker.service`
does the real boots and clean-ups, which the unit tests exercise).
``passes`` replays the trace that many times back to back: once, the
trace asks for less than the hosts hold and every mode places nearly
everything.

``refresh`` models the seed's stale numbers: the broker reads each
cluster's capacity only every ``refresh`` requests (as a capacity API
serving cached reports would answer) and decides on that picture; a boot
in a cluster that has no room left for the variant fails (Nova's
NoValidHost), is counted in ``failed_boots``, and the next candidate is
tried, at most ``broker.max_attempts`` boots (4) per request.  With
``refresh`` 1 the counts are fresh and no boot fails.
"""

import dataclasses

from nova_sched_ext.broker import choosers
from nova_sched_ext.broker import config as broker_config
from nova_sched_ext.broker import planning
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import pyfit

#: {mode: the broker.conversion it runs with}
MODES = {'fixed': broker_config.PRIORITY,
         'conversion': broker_config.PRIORITY,
         'conversion-most-room': broker_config.MOST_ROOM}
#: the suffix of a mode run with uneven variants
UNEVEN_SUFFIX = '+uneven'
#: the default ``min_share`` of the uneven runs (percent)
DEFAULT_UNEVEN_SHARE = 25
CHOOSERS = {'most-capacity': choosers.MostCapacity,
            'round-robin': choosers.RoundRobin,
            'best-fit': choosers.BestFit}
POOL = 'normal'
DATACENTER = 'dc'
KIND = {1: broker_config.SINGLE, 2: broker_config.DUAL}
NODES = {broker_config.SINGLE: 1, broker_config.DUAL: 2,
         broker_config.UNEVEN: 2}


@dataclasses.dataclass
class RunResult:
    trace: str
    mode: str
    chooser: str
    requests: int = 0
    placed: int = 0
    placed_vcpus: int = 0
    #: placed with the other NUMA kind than the trace asked for
    converted: int = 0
    #: placed with an uneven variant (a dual-NUMA request's, or a
    #: converted single-NUMA one's)
    uneven: int = 0
    #: what the cloud takes after the run: ``[(size, even, uneven)]``,
    #: see :func:`leftover`
    leftover: list = dataclasses.field(default_factory=list)
    #: the rejected dual-NUMA requests an uneven split places in the room
    #: left at the end: ``(requests, vCPUs)``, see :func:`end_fill`
    end_fill: tuple = (0, 0)
    #: boots that found no room (stale capacity), each followed by the
    #: next candidate
    failed_boots: int = 0
    #: {cluster: placed}
    by_cluster: dict = dataclasses.field(default_factory=dict)

    @property
    def rejected(self):
        return self.requests - self.placed

    def to_dict(self):
        return {'trace': self.trace, 'mode': self.mode,
                'chooser': self.chooser, 'requests': self.requests,
                'placed': self.placed, 'placed_vcpus': self.placed_vcpus,
                'rejected': self.rejected, 'converted': self.converted,
                'uneven': self.uneven,
                'leftover': [{'size': size, 'even': even,
                              'best_uneven': uneven}
                             for size, even, uneven in self.leftover],
                'end_fill': {'placed': self.end_fill[0],
                             'placed_vcpus': self.end_fill[1]},
                'failed_boots': self.failed_boots,
                'by_cluster': dict(self.by_cluster)}


def split_by_racks(hosts, clusters):
    """``{cluster name: [TraceHost]}``: ``clusters`` runs of racks."""
    def rack_key(rack):
        return (0, int(rack), '') if rack.isdigit() else (1, 0, rack)
    racks = sorted({h.rack for h in hosts}, key=rack_key)
    if clusters > len(racks):
        raise ValueError('%d clusters but only %d racks'
                         % (clusters, len(racks)))
    cluster_of = {}
    for i, rack in enumerate(racks):
        cluster_of[rack] = 'cluster-%d' % (i * clusters // len(racks) + 1)
    result = {'cluster-%d' % (i + 1): [] for i in range(clusters)}
    for host in hosts:
        result[cluster_of[host.rack]].append(host)
    return result


def host_model(trace_host):
    """The fit engine's model of an empty trace host (shared CPUs)."""
    cells = tuple(m.HostCell(
        id=i, cpus=vcpus, pcpus=0, free_pcpus=0, cpu_usage=0,
        memory=memory_mb, memory_usage=0, threads_per_core=1,
        pcpus_are_cpus=False, free_sibling_sizes=(), pages=(),
        pci_devices=0) for i, (vcpus, memory_mb) in enumerate(
            trace_host.cells))
    return m.Host(cells=cells, cpu_allocation_ratio=1.0,
                  ram_allocation_ratio=1.0,
                  total_vcpus=trace_host.vcpus, free_vcpus=trace_host.vcpus,
                  total_memory_mb=trace_host.memory_mb,
                  free_memory_mb=trace_host.memory_mb)


def variant_shape(vcpus, memory_mb, kind):
    """The fit engine's shape of a variant, or None if Nova refuses it.

    Nova splits a flavor's vCPUs and RAM evenly over ``hw:numa_nodes``
    and refuses a flavor they do not divide.
    """
    nodes = NODES[kind]
    if vcpus % nodes or memory_mb % nodes:
        return None
    cells = tuple(m.RequestCell(
        id=i, cpus=vcpus // nodes, pcpus=0, memory=memory_mb // nodes,
        pagesize=m.PAGESIZE_NONE, cpu_policy=m.CPU_SHARED,
        thread_policy=m.THREAD_PREFER) for i in range(nodes))
    return m.Shape(vcpus=vcpus, memory_mb=memory_mb,
                   numa=m.Request(cells=cells))


def uneven_shape(cells):
    """The fit engine's shape of an uneven variant's two cells."""
    return m.Shape(
        vcpus=sum(c[0] for c in cells), memory_mb=sum(c[1] for c in cells),
        numa=m.Request(cells=tuple(m.RequestCell(
            id=i, cpus=cpus, pcpus=0, memory=memory,
            pagesize=m.PAGESIZE_NONE, cpu_policy=m.CPU_SHARED,
            thread_policy=m.THREAD_PREFER)
            for i, (cpus, memory) in enumerate(cells))))


def shape_of(variant):
    """The fit engine's shape of a replay's variant."""
    if variant.numa == broker_config.UNEVEN:
        return uneven_shape(variant.cells)
    flavor_vcpus, memory_gb = variant.flavor.split('-')[0][
        :-1].split('c')
    return variant_shape(int(flavor_vcpus), int(memory_gb) * 1024,
                         variant.numa)


def variant_name(vcpus, memory_mb, kind):
    return '%dc%dg-%dn' % (vcpus, memory_mb // 1024, NODES[kind])


def uneven_section(vcpus, memory_mb, share):
    """The ``uneven`` rule of a dual variant of this size, or None.

    None when the rule makes no split of it (too few vCPUs).
    """
    section = {'vcpus': vcpus, 'ram': memory_mb, 'min_share': share}
    check = broker_config._Checker('<nova-sched-ext-sim --broker>')
    base = broker_config.Variant(
        flavor=variant_name(vcpus, memory_mb, broker_config.DUAL),
        pool=POOL, numa=broker_config.DUAL)
    try:
        broker_config.uneven_variants(check, base, section, 'uneven')
    except broker_config.BrokerConfigError:
        return None
    return section


def broker_config_for(cluster_names, requests, mode, uneven=None):
    """The broker configuration of a replay: one family per trace flavor.

    A family is named after the flavor the trace asks for; its variants
    are that flavor and, in the conversion modes, the same size in the
    other NUMA kind after it.  With ``uneven`` (a percent), the dual
    variant gets the uneven splits of that ``min_share`` rule.
    """
    families = {}
    for request in requests:
        flavor = request.flavor
        family = flavor.name
        if family in families:
            continue
        own = KIND[flavor.numa_nodes]
        kinds = [own]
        if mode != 'fixed':
            kinds += [k for k in broker_config.DECLARED_KINDS
                      if k != own]
        variants = [{'flavor': variant_name(flavor.vcpus, flavor.memory_mb,
                                            k), 'pool': POOL, 'numa': k}
                    for k in kinds if variant_shape(
                        flavor.vcpus, flavor.memory_mb, k) is not None]
        if uneven is not None:
            for variant in variants:
                if variant['numa'] != broker_config.DUAL:
                    continue
                section = uneven_section(flavor.vcpus, flavor.memory_mb,
                                         uneven)
                if section is not None:
                    variant['uneven'] = section
        families[family] = {'variants': variants}
    return broker_config.parse({
        'broker': {'conversion': MODES[mode]},
        'clusters': {name: {'region': name, 'datacenter': DATACENTER,
                            'pools': [POOL]} for name in cluster_names},
        'flavor_families': families,
    }, '<nova-sched-ext-sim --broker>')


class SimulatedClusters:
    """The clusters' hosts and their capacity, kept up to date."""

    def __init__(self, by_cluster, shapes):
        #: {variant flavor name: index into the shapes}
        self.shape_index = {name: i for i, name in enumerate(shapes)}
        self.shapes = list(shapes.values())
        self.hosts = {}
        self.counts = {}
        self.totals = {}
        for name, trace_hosts in by_cluster.items():
            models = [host_model(h) for h in trace_hosts]
            self.hosts[name] = models
            self.counts[name] = self._count(models)
            self.totals[name] = [sum(c[k] for c in self.counts[name])
                                 for k in range(len(self.shapes))]

    def _count(self, models):
        prepared = [engine.prepare(h) for h in models]
        limits = []
        for host in models:
            for shape in self.shapes:
                room = min(host.free_vcpus // shape.vcpus,
                           host.free_memory_mb // shape.memory_mb)
                limits.append(max(0, min(room, m.MAX_INSTANCES)))
        flat = engine.place_counts(prepared, self.shapes, limits)
        n = len(self.shapes)
        return [flat[i * n:(i + 1) * n] for i in range(len(models))]

    def snapshot(self):
        """What a capacity read returns now: ``{cluster: totals}``."""
        return {name: list(totals) for name, totals in self.totals.items()}

    def view(self, conf, name, variants, snapshot=None):
        """The broker's view of cluster ``name``.

        From ``snapshot`` (an earlier :meth:`snapshot`) if given, else
        the exact counts of now.
        """
        totals = (snapshot or self.totals)[name]
        return planning.ClusterView(
            cluster=conf.clusters[name], image_present=True,
            # the trace has no networks: addresses never run out
            free_ips=planning.MAX_COUNT,
            capacity={v.flavor: totals[self.shape_index[v.flavor]]
                      for v in variants})

    def place(self, name, flavor):
        """Place one instance of ``flavor`` in cluster ``name``.

        On the host with the fewest instances of the shape left (best
        fit); False if no host takes it (the capacity said one does).
        """
        k = self.shape_index[flavor]
        counts = self.counts[name]
        best = None
        for i, row in enumerate(counts):
            if row[k] > 0 and (best is None or row[k] < counts[best][k]):
                best = i
        if best is None:
            return False
        host = self.hosts[name][best]
        after = pyfit.place(host, self.shapes[k])
        if after is None:
            return False
        self.hosts[name][best] = after
        new_row = self._count([after])[0]
        self.totals[name] = [t - old + new for t, old, new in zip(
            self.totals[name], counts[best], new_row)]
        counts[best] = new_row
        return True


def dual_sizes(requests, largest=None):
    """The trace's dual-NUMA sizes ``(vcpus, memory_mb)``, largest first."""
    sizes = sorted({(r.flavor.vcpus, r.flavor.memory_mb) for r in requests
                    if r.flavor.numa_nodes == 2}, reverse=True)
    return sizes[:largest] if largest else sizes


def leftover(world, sizes, share=DEFAULT_UNEVEN_SHARE):
    """What the cloud still takes of each size: ``[(name, even, uneven)]``.

    ``even``: instances of the evenly split flavor, ``uneven``: of the
    uneven variant (``share`` rule) the cloud takes most of, each counted
    alone on every host as the capacity API counts them
    (:func:`~nova_sched_ext.fit.engine.place_counts`).
    """
    shapes = []
    for vcpus, memory_mb in sizes:
        shapes.append(variant_shape(vcpus, memory_mb, broker_config.DUAL))
        section = uneven_section(vcpus, memory_mb, share)
        variants = [] if section is None else broker_config.uneven_variants(
            broker_config._Checker('leftover'), broker_config.Variant(
                flavor='x', pool=POOL, numa=broker_config.DUAL),
            section, 'uneven')
        shapes.extend(uneven_shape(v.cells) for v in variants)
    counter = SimulatedClusters({}, {})
    counter.shapes = shapes
    totals = [0] * len(shapes)
    for models in world.hosts.values():
        for row in counter._count(models):
            totals = [t + c for t, c in zip(totals, row)]
    result = []
    k = 0
    for vcpus, memory_mb in sizes:
        section = uneven_section(vcpus, memory_mb, share)
        n = 0 if section is None else len(broker_config.uneven_variants(
            broker_config._Checker('leftover'), broker_config.Variant(
                flavor='x', pool=POOL, numa=broker_config.DUAL),
            section, 'uneven'))
        result.append(('%dc%dg' % (vcpus, memory_mb // 1024), totals[k],
                       max(totals[k + 1:k + 1 + n], default=0)))
        k += 1 + n
    return result


def end_fill(world, rejected, share=DEFAULT_UNEVEN_SHARE):
    """Place rejected requests with uneven splits in what is left.

    ``rejected``: ``(vcpus, memory_mb)`` of the run's rejected requests
    that had a dual-NUMA variant, in the order they came.  Each is tried,
    in that order, with the uneven splits of the ``share`` rule (the one
    the clouds' clusters take most of first, in the cluster with most
    room for it first) and placed as the replay places (best fit), on a
    copy of ``world``'s hosts.  Returns ``(requests, vCPUs)`` placed.

    No request comes after these, so this is what uneven splits gain on
    the room the run stranded, with none of the cost an online broker
    pays when a smaller request would have used that room later.
    """
    shapes = {}
    by_size = {}
    for vcpus, memory_mb in rejected:
        if (vcpus, memory_mb) in by_size:
            continue
        section = uneven_section(vcpus, memory_mb, share)
        names = []
        if section is not None:
            for variant in broker_config.uneven_variants(
                    broker_config._Checker('end fill'), broker_config.Variant(
                        flavor='x', pool=POOL, numa=broker_config.DUAL),
                    section, 'uneven'):
                name = '%dc%dg:%s' % (vcpus, memory_mb, variant.cells)
                shapes[name] = uneven_shape(variant.cells)
                names.append(name)
        by_size[(vcpus, memory_mb)] = names
    if not shapes:
        return (0, 0)
    filler = SimulatedClusters({}, shapes)
    for name, models in world.hosts.items():
        filler.hosts[name] = list(models)
        filler.counts[name] = filler._count(models)
        filler.totals[name] = [sum(c[k] for c in filler.counts[name])
                               for k in range(len(filler.shapes))]
    placed = vcpus_placed = 0
    for vcpus, memory_mb in rejected:
        names = by_size[(vcpus, memory_mb)]

        def room(name):
            k = filler.shape_index[name]
            return sum(totals[k] for totals in filler.totals.values())
        done = False
        for name in sorted(names, key=room, reverse=True):
            k = filler.shape_index[name]
            for cluster in sorted(filler.totals,
                                  key=lambda c: -filler.totals[c][k]):
                if filler.totals[cluster][k] and filler.place(cluster, name):
                    done = True
                    break
            if done or not room(name):
                break
        if done:
            placed += 1
            vcpus_placed += vcpus
    return (placed, vcpus_placed)


def replay(label, hosts, requests, mode, chooser_name, clusters=3,
           refresh=1, uneven=None, leftover_sizes=()):
    """One run: a :class:`RunResult`.

    ``mode``: one of :data:`MODES`, with :data:`UNEVEN_SUFFIX` for the
    uneven variants of ``uneven`` percent (default
    :data:`DEFAULT_UNEVEN_SHARE`); ``leftover_sizes``: the ``(vcpus,
    memory_mb)`` whose :func:`leftover` is counted after the run; with
    them, :func:`end_fill` is measured after the run too.
    """
    by_cluster = split_by_racks(hosts, clusters)
    base_mode = mode
    share = None
    if mode.endswith(UNEVEN_SUFFIX):
        base_mode = mode[:-len(UNEVEN_SUFFIX)]
        share = uneven if uneven is not None else DEFAULT_UNEVEN_SHARE
    conf = broker_config_for(list(by_cluster), requests, base_mode, share)
    shapes = {}
    for family in conf.families.values():
        for variant in family.variants:
            if variant.flavor not in shapes:
                shapes[variant.flavor] = shape_of(variant)
    world = SimulatedClusters(by_cluster, shapes)
    chooser = CHOOSERS[chooser_name](conf)
    result = RunResult(trace=label, mode=mode, chooser=chooser_name,
                       by_cluster={name: 0 for name in by_cluster})
    snapshot = None
    rejected = []
    for i, trace_request in enumerate(requests):
        if refresh > 1 and i % refresh == 0:
            snapshot = world.snapshot()
        result.requests += 1
        request = planning.Request(
            family=trace_request.flavor.name, image='trace',
            network='trace', count=1)
        variants = conf.families[request.family].variants
        views = {name: world.view(conf, name, variants, snapshot)
                 for name in by_cluster}
        plan = planning.plan(conf, request, views, chooser)
        for candidate in plan.candidates[:conf.max_attempts]:
            if not world.place(candidate.cluster, candidate.variant.flavor):
                result.failed_boots += 1
            else:
                chooser.placed(candidate)
                result.placed += 1
                result.placed_vcpus += trace_request.flavor.vcpus
                result.by_cluster[candidate.cluster] += 1
                if NODES[candidate.variant.numa] != \
                        trace_request.flavor.numa_nodes:
                    result.converted += 1
                if candidate.variant.numa == broker_config.UNEVEN:
                    result.uneven += 1
                break
        else:
            if any(v.numa == broker_config.DUAL for v in variants):
                rejected.append((trace_request.flavor.vcpus,
                                 trace_request.flavor.memory_mb))
    if leftover_sizes:
        share = uneven if uneven is not None else DEFAULT_UNEVEN_SHARE
        result.leftover = leftover(world, leftover_sizes, share)
        result.end_fill = end_fill(world, rejected, share)
    return result


def table(results):
    """The runs side by side, one row per trace, mode and chooser."""
    headers = ('trace', 'mode', 'chooser', 'requests', 'placed',
               'placed vCPUs', 'rejected', 'converted', 'uneven',
               'failed boots')
    rows = [(r.trace, r.mode, r.chooser, str(r.requests), str(r.placed),
             str(r.placed_vcpus), str(r.rejected), str(r.converted),
             str(r.uneven), str(r.failed_boots))
            for r in results]
    if any(r.leftover for r in results):
        sizes = [size for size, _e, _u in next(
            r.leftover for r in results if r.leftover)]
        headers += tuple('left %s even/uneven' % size for size in sizes)
        rows = [row + tuple('%d/%d' % (even, uneven)
                            for _s, even, uneven in r.leftover)
                for row, r in zip(rows, results)]
        headers += ('end fill', 'end fill vCPUs')
        rows = [row + (str(r.end_fill[0]), str(r.end_fill[1]))
                for row, r in zip(rows, results)]
    widths = [max(len(h), *(len(row[i]) for row in rows))
              for i, h in enumerate(headers)]
    line = '  '.join('-' * w for w in widths)
    out = [line, '  '.join(h.ljust(w) for h, w in zip(headers,
                                                      widths)).rstrip(),
           line]
    out += ['  '.join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
            for row in rows]
    out.append(line)
    return '\n'.join(out)
