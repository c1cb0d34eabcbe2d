"""nova-sched-ext-bench: figures for the fit engine and NUMAFitFilter.

``nova-sched-ext-bench fit``
    Per-host fit check, the engine (C, or the Python twin with
    ``--backend python``) against Nova's ``numa_fit_instance_to_host`` on
    2-, 4- and 8-cell hosts, for requests that fit and requests that do not.
    Prints the time per host of each, the speedup, and the number of
    disagreements with Nova over a randomized corpus (must be 0).

``nova-sched-ext-bench filter --hosts 10000``
    One filtering pass over 1,000 and 10,000 ``HostState`` objects of a
    nearly full cloud, refreshed before each pass as Nova's ``HostManager``
    does: ``NUMAFitFilter + NUMATopologyFilter`` against
    ``NUMATopologyFilter`` alone, in the same run, alternating, and checks
    both keep the same hosts.

The machine is shared and noisy: every figure is a median of repeats, and
the two sides are measured alternately so that a slow moment hits both.
``nova-sched-ext-bench weigher --hosts 10000 --flavors 8``
    The time NUMASlotWeigher adds to one request over 1,000 and 10,000
    ``HostState`` objects with 8 reference flavors, as in a running
    scheduler (before each request Nova refreshed every host from its
    compute node and one host was consumed; four request shapes in turn):
    its ``weigh_objects``, what Nova's ``HostWeightHandler`` charges any
    weigher (one that costs nothing), and what NUMASlotWeigher and Nova's
    ``RAMWeigher`` add over that. The first, cache-filling call is reported
    apart, and the verdict on the target (at most 2 ms at 10,000 hosts with
    8 reference flavors) is printed. Figures are CPU time (the machine may
    be shared).

``nova-sched-ext-bench capacity --hosts 10000 --flavors 20``
    One full pass of the NUMA-exact capacity count (how many instances of
    each flavor each host takes at once) in the C engine, against the same
    counts by Nova's ``numa_fit_instance_to_host`` loop on a sample of
    hosts, extrapolated; the ratio, the pass's wall time and the
    disagreements with Nova (must be 0). See
    :mod:`nova_sched_ext_tools.bench.capacity`.

``nova-sched-ext-bench scale --hosts 1000,10000 --requests 30``
    The whole ``select_destinations`` on real services: placement's WSGI
    app and Nova's databases on the machine's MariaDB (sqlite if it cannot
    be used), 1,000 and 10,000 compute nodes with NUMA topologies and
    their resource providers, a stream of boots replayed through stock
    Nova's ``SchedulerManager`` and through ``nova-sched-ext-scheduler``'s
    manager on the same state; p50/p95/p99 per phase (placement query,
    host state refresh, filters, weighers, claims) and what each placed.
    See :mod:`nova_sched_ext_tools.bench.scale`.

``--json`` prints the figures as JSON.
"""

import argparse
import json
import random
import statistics
import sys
import time

from nova_sched_ext import cli
from nova_sched_ext import version
from nova_sched_ext_tools import hosts
from nova_sched_ext_tools import loader


class _Lazy(object):
    """A fit module imported on first use.

    Importing the fit engine pulls in Nova, futurist and eventlet, which
    print deprecation warnings: ``--help`` and argument errors must not.
    """

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        import importlib
        return getattr(importlib.import_module(self._name), attr)


adapters = _Lazy('nova_sched_ext.fit.adapters')
engine = _Lazy('nova_sched_ext.fit.engine')
model = _Lazy('nova_sched_ext.fit.model')


def _nova():
    """Nova's objects, loaded once by the offline tools' one loader."""
    return loader.load_nova()


def host_topology(objects, cells, cores=16, threads=2, memory_mb=65536,
                  pinned_share=0.0, used_share=0.0, rng=None):
    """A libvirt-like host: dedicated CPUs with SMT siblings, 2M pages.

    Half of each cell's memory is in 2 MiB pages; ``pinned_share`` of its
    cores are pinned (drawn from ``rng``, core by core) and ``used_share``
    of its memory and pages in use.  Built by the tools' one host factory
    (:mod:`nova_sched_ext_tools.hosts`), which loads Nova's objects itself
    (``objects`` is the callers' and unused).
    """
    rng = rng or random.Random(0)
    host_cells = []
    for _cell in range(cells):
        pinned = tuple(core for core in range(cores)
                       if rng.random() < pinned_share)
        pages_2m = memory_mb // 2 // 2
        host_cells.append(hosts.Cell(
            memory_mb=memory_mb, dedicated=cores * threads, threads=threads,
            pages_2m=pages_2m, pinned_cores=pinned,
            memory_usage_mb=int(memory_mb * used_share),
            pages_used=(
                (hosts.PAGE_4K, int(memory_mb * 256 // 2 * used_share)),
                (hosts.PAGE_2M, int(pages_2m * used_share)))))
    return hosts.numa_topology(host_cells)


def instance_topology(objects, cells, vcpus_per_cell, memory_per_cell,
                      pagesize=None):
    return objects.InstanceNUMATopology(cells=[
        objects.InstanceNUMACell(
            id=i, cpuset=set(),
            pcpuset=set(range(i * vcpus_per_cell, (i + 1) * vcpus_per_cell)),
            memory=memory_per_cell, cpu_policy='dedicated',
            pagesize=pagesize)
        for i in range(cells)])


def _median_time(fn, repeats, inner):
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - started) / inner)
    return statistics.median(samples)


def bench_fit(args):
    objects = _nova()
    from nova.virt import hardware
    limits = objects.NUMATopologyLimits(cpu_allocation_ratio=16.0,
                                        ram_allocation_ratio=1.5)
    batch = 1000
    rows = []
    for cells in (2, 4, 8):
        cases = {
            # an emptyish host, a 2-cell dedicated request with 2M pages
            'fits': (host_topology(objects, cells, pinned_share=0.3),
                     instance_topology(objects, 2, 4, 4096, pagesize=2048)),
            # a nearly full host: every cell has too few free cores
            'does not fit': (host_topology(objects, cells,
                                           pinned_share=0.95,
                                           rng=random.Random(cells)),
                             instance_topology(objects, 2, 8, 4096,
                                               pagesize=2048)),
        }
        for case, (host_topo, inst_topo) in cases.items():
            expected = hardware.numa_fit_instance_to_host(
                host_topo, inst_topo.obj_clone(), None, limits=limits)
            host = adapters.host_model(host_topo, None, 16.0, 1.5)
            request = adapters.request_from_topology(inst_topo)
            prepared = [engine.prepare(host)] * batch

            def nova_50():
                # Nova mutates the request: give every call a fresh clone,
                # made outside the timed loop.
                clones = [inst_topo.obj_clone() for _ in range(50)]
                started = time.perf_counter()
                for clone in clones:
                    hardware.numa_fit_instance_to_host(
                        host_topo, clone, None, limits=limits)
                return (time.perf_counter() - started) / 50

            def engine_batch():
                engine.check_hosts(prepared, request)

            nova_s = []
            engine_s = []
            for _ in range(args.repeats):
                nova_s.append(nova_50())
                engine_s.append(_median_time(engine_batch, 1, 3) / batch)
            answer = engine.check_hosts(prepared[:1], request)[0]
            rows.append({
                'cells': cells, 'case': case,
                'nova_us': statistics.median(nova_s) * 1e6,
                'engine_us': statistics.median(engine_s) * 1e6,
                'speedup': statistics.median(nova_s) /
                statistics.median(engine_s),
                'nova_fits': expected is not None,
                'engine_answer': {model.YES: 'yes', model.NO: 'no',
                                  model.UNKNOWN: 'unknown'}[answer],
            })
    disagreements, checked, undecided = _random_corpus(
        objects, hardware, args.corpus)
    result = {'backend': engine.backend_name(), 'rows': rows,
              'corpus': checked, 'undecided': undecided,
              'disagreements': disagreements}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print('NUMA fit per host, backend %s (median of %d repeats)'
              % (result['backend'], args.repeats))
        print('%-6s %-13s %12s %12s %9s %6s' % (
            'cells', 'case', 'nova us', 'engine us', 'speedup', 'fits'))
        for r in rows:
            print('%-6d %-13s %12.1f %12.3f %8.0fx %6s' % (
                r['cells'], r['case'], r['nova_us'], r['engine_us'],
                r['speedup'], r['engine_answer']))
        print('randomized corpus: %d cases, %d undecided, %d disagreements '
              'with Nova' % (checked, undecided, disagreements))
    return 1 if disagreements else 0


def _random_corpus(objects, hardware, size):
    """Random hosts and requests; count answers that differ from Nova."""
    rng = random.Random(42)
    disagreements = undecided = 0
    for _ in range(size):
        cells = rng.choice([1, 2, 2, 4, 8])
        host_topo = host_topology(
            objects, cells, cores=rng.choice([2, 4, 8]),
            threads=rng.choice([1, 2]), memory_mb=rng.choice([4096, 16384]),
            pinned_share=rng.random(), used_share=rng.random() * 0.9,
            rng=rng)
        inst_topo = instance_topology(
            objects, rng.randint(1, min(cells, 3)), rng.randint(1, 6),
            rng.choice([512, 1024, 2048, 4096]),
            pagesize=rng.choice([None, 2048, -1, -2, -3]))
        ratio = rng.choice([1.0, 16.0])
        limits = objects.NUMATopologyLimits(cpu_allocation_ratio=ratio,
                                            ram_allocation_ratio=1.0)
        expected = hardware.numa_fit_instance_to_host(
            host_topo, inst_topo.obj_clone(), None, limits=limits)
        answer = engine.fits(adapters.host_model(host_topo, None, ratio, 1.0),
                             adapters.request_from_topology(inst_topo))
        if answer == model.UNKNOWN:
            undecided += 1
        elif (answer == model.YES) != (expected is not None):
            disagreements += 1
    return disagreements, size, undecided


def _cloud(objects, count, rng):
    """HostStates of a nearly full cloud: 2% of hosts still have room."""
    from nova.scheduler import host_manager
    hosts = []
    for i in range(count):
        roomy = rng.random() < 0.02
        state = host_manager.HostState('host%d' % i, 'node%d' % i, None)
        state.numa_topology = host_topology(
            objects, 2, pinned_share=0.2 if roomy else 0.9,
            used_share=0.2 if roomy else 0.8, rng=rng)
        state.pci_stats = None
        state.cpu_allocation_ratio = 16.0
        state.ram_allocation_ratio = 1.5
        hosts.append(state)
    return hosts


def bench_filter(args):
    objects = _nova()
    from nova.scheduler.filters import numa_topology_filter
    from nova_sched_ext.filters import numa_fit
    from oslo_utils import timeutils
    rng = random.Random(7)
    nova_filter = numa_topology_filter.NUMATopologyFilter()
    our_filter = numa_fit.NUMAFitFilter()
    spec = objects.RequestSpec(
        numa_topology=instance_topology(objects, 2, 8, 8192, pagesize=2048),
        pci_requests=None, instance_uuid='bench',
        flavor=objects.Flavor(extra_specs={}),
        image=objects.ImageMeta(properties=objects.ImageMetaProps()))
    sizes = sorted({1000, args.hosts})
    rows = []
    for size in sizes:
        hosts = _cloud(objects, size, rng)
        for h in hosts:
            h.updated = timeutils.utcnow(with_timezone=True)
        topologies = [(h.numa_topology, h.numa_topology.obj_clone())
                      for h in hosts]

        def reset():
            # As before every request in a running scheduler: Nova
            # refreshed every host from its compute node (new, equal
            # objects). NUMATopologyFilter prunes allocation candidates in
            # place.
            _nova_refresh(hosts, topologies)
            for h in hosts:
                h.allocation_candidates = [{'mappings': {}}]

        def nova_pass():
            reset()
            return list(nova_filter.filter_all(hosts, spec))

        def our_pass():
            reset()
            kept = our_filter.filter_all(hosts, spec)
            return list(nova_filter.filter_all(kept, spec))

        # The first pass fills the per-host cache, as the first request
        # after a compute node update does in a running scheduler.
        first_started = time.perf_counter()
        ours = our_pass()
        first = time.perf_counter() - first_started
        theirs = nova_pass()
        nova_s, ours_s = [], []
        repeats = args.repeats if size <= 1000 else max(1, args.repeats // 2)
        for _ in range(repeats):
            nova_s.append(_median_time(nova_pass, 1, 1))
            ours_s.append(_median_time(our_pass, 1, 1))
        rows.append({
            'hosts': size, 'kept': len(ours),
            'same_hosts': [h.host for h in ours] == [h.host for h in theirs],
            'nova_ms': statistics.median(nova_s) * 1e3,
            'ours_ms': statistics.median(ours_s) * 1e3,
            'ours_first_pass_ms': first * 1e3,
            'speedup': statistics.median(nova_s) / statistics.median(ours_s),
        })
    result = {'backend': engine.backend_name(), 'rows': rows}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print('One filtering pass, nearly full cloud, backend %s (median)'
              % result['backend'])
        print('%7s %6s %14s %22s %9s %6s' % (
            'hosts', 'kept', 'NUMATopology ms', 'NUMAFit+NUMATopology ms',
            'speedup', 'same'))
        for r in rows:
            print('%7d %6d %14.1f %22.1f %8.1fx %6s' % (
                r['hosts'], r['kept'], r['nova_ms'], r['ours_ms'],
                r['speedup'], r['same_hosts']))
        print('(first pass, filling the per-host cache: %s)' % ', '.join(
            '%d hosts %.1f ms' % (r['hosts'], r['ours_first_pass_ms'])
            for r in rows))
    return 0 if all(r['same_hosts'] for r in rows) else 1


def _weigher_specs(objects, hardware, image):
    """Requests of four shapes, taken in turn.

    Each request then meets the hosts changed since the last request of its
    shape, as in a scheduler serving several flavors.
    """
    specs = []
    for vcpus, cells in ((2, 1), (4, 1), (8, 2), (1, 1)):
        flavor = objects.Flavor(
            name='req%d' % vcpus, flavorid='req%d' % vcpus, vcpus=vcpus,
            memory_mb=vcpus * 2048, root_gb=0, ephemeral_gb=0, swap=0,
            extra_specs={'hw:cpu_policy': 'dedicated',
                         'hw:numa_nodes': str(cells)})
        specs.append(objects.RequestSpec(
            flavor=flavor, image=image, num_instances=1,
            instance_uuid='00000000-0000-0000-0000-%012d' % vcpus,
            pci_requests=None,
            numa_topology=hardware.numa_get_constraints(flavor, image)))
    return specs


def _cpu_time(fn):
    """CPU seconds of one call of ``fn`` (this process, all threads).

    On a shared machine the wall time of a few milliseconds mostly measures
    when the kernel happened to preempt the process; the CPU time is the
    cost.
    """
    started = time.process_time()
    fn()
    return time.process_time() - started


class _FreeWeigher(object):
    """A weigher that costs nothing: Nova's floor for any weigher.

    It returns a list of distinct weights made in advance, so that Nova's
    handler normalises and multiplies them as it does real ones; its
    multiplier is the base class's constant.
    """

    minval = maxval = None

    def __init__(self, count):
        self._weights = [float(i % 97) for i in range(count)]

    def weigh_objects(self, weighed_obj_list, weight_properties):
        return self._weights[:len(weighed_obj_list)]

    def weight_multiplier(self, host_state):
        return 1.0


#: NUMASlotWeigher's cost target: added to one request at 10,000 hosts with
#: 8 reference flavors, over what Nova's handler charges any weigher.
WEIGHER_TARGET_MS = 2.0
REPEATS_HELP = ('times each side is measured, alternately; the figures are '
                'the medians (default 5)')


def _nova_refresh(hosts, topologies):
    """What Nova's HostManager does to every host before each request.

    It reloads each compute node and, unless the host was consumed since,
    sets a new ``updated`` object (the compute node's ``updated_at``, a
    UTC-aware datetime like the ones ``consume_from_request`` sets) and new
    NUMA topology and PCI stats objects, equal to the previous ones when
    nothing changed. ``topologies`` holds two equal copies per host.
    """
    for i, host in enumerate(hosts):
        host.updated = host.updated.replace()
        pair = topologies[i]
        host.numa_topology = pair[0] if host.numa_topology is pair[1] \
            else pair[1]


def bench_weigher(args):
    """What NUMASlotWeigher adds to one request, next to RAMWeigher."""
    objects = _nova()
    from nova.scheduler import weights
    from nova.scheduler.weights import ram
    from nova.virt import hardware
    from nova_sched_ext.weighers import numa_slot
    from oslo_utils import timeutils
    rng = random.Random(11)
    flavors = []
    for i in range(args.flavors):
        vcpus = 4 * (i + 1)
        flavors.append(objects.Flavor(
            name='ref%d' % i, flavorid='ref%d' % i, vcpus=vcpus,
            memory_mb=vcpus * 2048, root_gb=0, ephemeral_gb=0, swap=0,
            disabled=False, extra_specs={
                'hw:cpu_policy': 'dedicated',
                'hw:numa_nodes': '2' if i % 2 else '1'}))
    weigher = numa_slot.NUMASlotWeigher()
    weigher.references = numa_slot.ReferenceFlavors(loader=lambda: flavors)
    ram_weigher = ram.RAMWeigher()
    handler = weights.HostWeightHandler()
    image = objects.ImageMeta(properties=objects.ImageMetaProps())
    specs = _weigher_specs(objects, hardware, image)
    rows = []
    for size in sorted({1000, args.hosts}):
        hosts = _cloud(objects, size, rng)
        free = _FreeWeigher(size)
        for h in hosts:
            h.vcpus_total, h.vcpus_used = 64, rng.randint(8, 56)
            h.total_usable_ram_mb, h.free_ram_mb = 131072, 65536
            h.allocation_candidates = [{'mappings': {}}]
            h.updated = timeutils.utcnow(with_timezone=True)
        topologies = [(h.numa_topology, h.numa_topology.obj_clone())
                      for h in hosts]
        weighed = [weights.WeighedHost(h, 0.0) for h in hosts]
        turn = [0]

        def next_request():
            # As in a running scheduler: Nova refreshed every host from its
            # compute node, and the previous request consumed one host
            # (Nova stamps 'updated' and replaces the usage).
            turn[0] += 1
            _nova_refresh(hosts, topologies)
            host = hosts[rng.randrange(size)]
            host.vcpus_used = (host.vcpus_used + 1) % 64
            host.free_ram_mb -= 512
            host.updated = timeutils.utcnow(with_timezone=True)
            return specs[turn[0] % len(specs)]

        first = _cpu_time(lambda: weigher.weigh_objects(weighed, specs[0]))
        for spec in specs:         # each shape once: the memo is warm
            weigher.weigh_objects(weighed, spec)
        sides = (('handler_none', []), ('handler_free', [free]),
                 ('handler_ours', [weigher]), ('handler_ram', [ram_weigher]))
        figures = {'ours': [], 'ram': []}
        figures.update((key, []) for key, _used in sides)
        for _ in range(args.repeats * 4):
            # alternate, so that a slow moment hits every side
            spec = next_request()
            figures['ours'].append(_cpu_time(
                lambda: weigher.weigh_objects(weighed, spec)))
            figures['ram'].append(_cpu_time(
                lambda: ram_weigher.weigh_objects(weighed, spec)))
            spec = next_request()
            for key, used in sides:
                figures[key].append(_cpu_time(
                    lambda: handler.get_weighed_objects(used, hosts,
                                                        spec)))
        ms = {k: statistics.median(v) * 1e3 for k, v in figures.items()}
        rows.append({
            'hosts': size, 'flavors': len(flavors),
            'weigh_objects_ms': ms['ours'],
            'ram_weigh_objects_ms': ms['ram'],
            'nova_floor_ms': ms['handler_free'] - ms['handler_none'],
            'added_over_floor_ms': ms['handler_ours'] - ms['handler_free'],
            'ram_added_over_floor_ms': (ms['handler_ram'] -
                                        ms['handler_free']),
            'first_ms': first * 1e3,
        })
    at_target = [r for r in rows if r['hosts'] == 10000 and
                 r['flavors'] == 8]
    result = {'backend': engine.backend_name(), 'rows': rows,
              'target_ms': WEIGHER_TARGET_MS,
              'target_met': (all(r['added_over_floor_ms'] <=
                                 WEIGHER_TARGET_MS for r in at_target)
                             if at_target else None)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print('NUMASlotWeigher, %d reference flavors, backend %s. Before each '
          'request Nova refreshed every host and one host was consumed; '
          'four request shapes in turn. Medians of %d requests, CPU ms per '
          'request.' % (args.flavors, result['backend'], args.repeats * 4))
    print('%7s %14s %11s %15s %13s %15s %11s' % (
        'hosts', 'weigh_objects', 'RAMWeigher', 'Nova per weigher',
        'ours adds', 'RAMWeigher adds', 'first call'))
    for r in rows:
        print('%7d %14.2f %11.2f %15.2f %13.2f %15.2f %11.1f' % (
            r['hosts'], r['weigh_objects_ms'], r['ram_weigh_objects_ms'],
            r['nova_floor_ms'], r['added_over_floor_ms'],
            r['ram_added_over_floor_ms'], r['first_ms']))
    print('"Nova per weigher": what Nova\'s HostWeightHandler charges a '
          'weigher that costs nothing; "adds": over that.')
    if result['target_met'] is not None:
        print('target: at most %.1f ms added at 10,000 hosts with 8 '
              'reference flavors: %s' % (
                  WEIGHER_TARGET_MS,
                  'met' if result['target_met'] else 'NOT met'))
    return 0


def _output_options(parser, default):
    # The same options before or after the subcommand; after it they are
    # SUPPRESSed so that an absent one leaves the value given before it.
    parser.add_argument('--json', action='store_true', default=default,
                        help='print the figures as JSON')
    parser.add_argument('--backend', choices=['c', 'python'],
                        default=None if default is False else default,
                        help='fit engine backend (default: as configured)')


def build_parser():
    # One-line errors, as the package's other commands (nova_sched_ext.cli).
    parser = cli.Parser(
        prog='nova-sched-ext-bench', description=__doc__.split('\n')[0],
        help_hint='nova-sched-ext-bench --help', exits=True)
    version.add_version_option(parser)
    _output_options(parser, False)
    common = argparse.ArgumentParser(add_help=False)
    _output_options(common, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest='command', required=True)
    fit = sub.add_parser('fit', help='per-host fit: engine vs Nova',
                         parents=[common])
    fit.add_argument('--repeats', type=int, default=5,
                     help=REPEATS_HELP)
    fit.add_argument('--corpus', type=int, default=2000,
                     help='random cases checked against Nova')
    filt = sub.add_parser('filter', help='one filtering pass over many hosts',
                          parents=[common])
    filt.add_argument('--hosts', type=int, default=10000,
                      help='the larger cloud filtered, beside 1000 hosts '
                           '(default 10000)')
    filt.add_argument('--repeats', type=int, default=5,
                      help=REPEATS_HELP)
    weigher = sub.add_parser('weigher',
                             help='NUMASlotWeigher cost per request',
                             parents=[common])
    weigher.add_argument('--hosts', type=int, default=10000,
                         help='the larger cloud weighed, beside 1000 hosts '
                              '(default 10000)')
    weigher.add_argument('--flavors', type=int, default=8,
                         help='reference flavors whose slots the weigher '
                              'counts (default 8)')
    weigher.add_argument('--repeats', type=int, default=5,
                         help=REPEATS_HELP)
    capacity = sub.add_parser(
        'capacity', help='one full capacity pass: the C engine vs Nova\'s '
                         'numa_fit_instance_to_host loop',
        parents=[common])
    capacity.add_argument('--hosts', type=int, default=10000,
                          help='hosts counted by the C engine (default '
                               '10000)')
    capacity.add_argument('--flavors', type=int, default=20,
                          help='flavors counted (at most 20)')
    capacity.add_argument('--nova-hosts', type=int, default=50,
                          help='hosts sampled for Nova\'s loop per repeat')
    capacity.add_argument('--repeats', type=int, default=5,
                          help=REPEATS_HELP)
    victims = sub.add_parser(
        'victims', help='preemption victim selection: victims chosen vs '
                        'the brute-force optimum, and decision time',
        parents=[common])
    victims.add_argument('--clusters', type=int, default=200,
                         help='random small clusters compared with the '
                              'brute-force optimum')
    victims.add_argument('--seed', type=int, default=1,
                         help='seed of the random clusters (default 1)')
    victims.add_argument('--hosts', type=int, default=1000,
                         help='hosts of the decision-time cluster')
    victims.add_argument('--per-host', type=int, default=20,
                         help='preemptible instances on each of those hosts')
    victims.add_argument('--repeats', type=int, default=5,
                         help=REPEATS_HELP)
    scale = sub.add_parser(
        'scale', help='the whole select_destinations on real placement '
                      'and databases: stock Nova vs the package',
        parents=[common])
    from nova_sched_ext_tools.bench import scale as scale_bench
    scale_bench.add_arguments(scale)
    placement_read = sub.add_parser(
        'placement-read', help='what reading placement costs: the capacity '
                               'count\'s read, the cheapest listing, '
                               'placement\'s candidates query and the same '
                               'answered from kept state',
        parents=[common])
    from nova_sched_ext_tools.bench import placement_read as read_bench
    read_bench.add_arguments(placement_read)
    placement_claims = sub.add_parser(
        'placement-claims', help='claims that race on one provider: '
                                 'does placement refuse the ones that no '
                                 'longer fit, for each '
                                 'allocation_conflict_retry_count',
        parents=[common])
    from nova_sched_ext_tools.bench import placement_claims as claims_bench
    claims_bench.add_arguments(placement_claims)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    import logging as std_logging
    std_logging.getLogger().setLevel(std_logging.WARNING)
    import warnings
    warnings.simplefilter('ignore')
    if args.backend:
        from nova_sched_ext import conf
        conf.CONF.set_override('fit_backend', args.backend,
                               group='nova_sched_ext')
    if args.command == 'fit':
        return bench_fit(args)
    if args.command == 'weigher':
        return bench_weigher(args)
    if args.command == 'capacity':
        from nova_sched_ext_tools.bench import capacity as capacity_bench
        return capacity_bench.run(args)
    if args.command == 'scale':
        from nova_sched_ext_tools.bench import burst
        from nova_sched_ext_tools.bench import scale as scale_bench
        return scale_bench.run(args, burst=burst.several_schedulers)
    if args.command == 'placement-read':
        from nova_sched_ext_tools.bench import placement_read as read_bench
        return read_bench.run(args)
    if args.command == 'placement-claims':
        from nova_sched_ext_tools.bench import placement_claims
        return placement_claims.run(args)
    if args.command == 'victims':
        from nova_sched_ext_tools.bench import victims as victims_bench
        return victims_bench.run(args)
    return bench_filter(args)


if __name__ == '__main__':
    sys.exit(main())
