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

"""``nova-sched-ext-bench placement-read``: what reading placement costs.

The capacity count reads placement per provider today
(:meth:`nova_sched_ext.cloud.placement.PlacementReader.trees`: one
listing, then inventories, usages and traits of every provider, and the
sharing providers' listing); the real-time state (issue 29) would keep
those figures and answer the scheduler's candidate query from them
(:mod:`nova_sched_ext.cloud.candidate_query`).  For each size, side by
side in one process on the same cloud, the median of ``--repeats`` runs:

``reader``
    the capacity count's read of every compute node's tree (calls:
    2 + 3 per provider);
``listing``
    ``GET /resource_providers``: every provider with its generation in
    one call, the cheapest read that says which providers changed;
``candidates``
    placement's own ``GET /allocation_candidates`` for a small flavor
    (``VCPU:1,MEMORY_MB:512``, disabled computes left out) with a limit
    of every provider, as Nova asks it (microversion 1.36);
``kept``
    the same query answered from the providers the reader read
    (:func:`~nova_sched_ext.cloud.candidate_query.answer`), which must
    give the same candidates: the bench says so, or fails;
``first_poll``
    the kept provider state's first poll
    (:class:`~nova_sched_ext.cloud.provider_state.ProviderState`): the
    listing, then four reads of every provider, what a scheduler with
    ``kept_candidates`` reads when it starts;
``snapshot_save``
    that state saved to a snapshot file
    (:mod:`~nova_sched_ext.cloud.provider_snapshot`; its size is
    ``snapshot_bytes``);
``first_poll_from_snapshot``
    after claims on 1 % of the providers behind the file's back (as the
    other schedulers make them while one restarts), a new state's first
    poll from the file: the file taken, the listing, four reads of each
    provider claimed on (``kept_state_snapshot_verify_per_poll = 0``; the
    verification's reads come at later polls).  Its providers must equal
    a full read's: the bench says so, or fails.

Placement is openstack-placement's own application in this process on an
in-memory sqlite, called without a socket (``placement.direct``,
:mod:`nova_sched_ext_tools.placement_direct`): no network and no
MariaDB, so the figures are placement's own work, a lower bound for a
deployed placement.  The cloud: compute nodes of 64 VCPU (ratio 4.0),
256 GiB and 1 TiB of disk, a quarter to three quarters used, one in four
disabled (``COMPUTE_STATUS_DISABLED``), each in one of eight aggregates.
"""

import json
import os
import random
import statistics
import tempfile
import time
import uuid as uuid_lib

from nova_sched_ext.cloud import candidate_query
from nova_sched_ext.cloud import placement as cloud_placement
from nova_sched_ext.cloud import provider_snapshot
from nova_sched_ext.cloud import provider_state
from nova_sched_ext_tools.bench import scale
from nova_sched_ext_tools import placement_direct

PHASES = ('reader', 'listing', 'candidates', 'kept', 'first_poll',
          'snapshot_save', 'first_poll_from_snapshot')
#: the candidates query of a small flavor, with the disabled computes left
#: out as Nova's request filter leaves them out
QUERY = ('resources=MEMORY_MB:512,VCPU:1'
         '&root_required=!COMPUTE_STATUS_DISABLED')
AGGREGATES = tuple(str(uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS,
                                      'nse-bench-agg%d' % i))
                   for i in range(8))


def add_arguments(parser):
    parser.add_argument('--hosts', default='1000', metavar='N[,N...]',
                        help='comma-separated numbers of compute nodes in '
                             'placement (default 1000)')
    parser.add_argument('--repeats', type=int, default=5,
                        help='runs of each read per size; the median is '
                             'reported (default 5)')
    parser.add_argument('--seed', type=int, default=1,
                        help='seed of the cloud (default 1)')


def cloud(hosts, seed):
    """The compute nodes, as ``placement_direct.Placement.create`` wants."""
    rng = random.Random(seed)
    nodes = []
    for i in range(hosts):
        used = rng.uniform(0.25, 0.75)
        nodes.append({
            'inventories': {
                'VCPU': cloud_placement.Inventory(
                    total=64, max_unit=64, allocation_ratio=4.0),
                'MEMORY_MB': cloud_placement.Inventory(
                    total=262144, reserved=512, max_unit=262144),
                'DISK_GB': cloud_placement.Inventory(total=1024,
                                                     max_unit=1024)},
            'usages': {'VCPU': int(256 * used),
                       'MEMORY_MB': int(261632 * used),
                       'DISK_GB': int(1024 * used)},
            'traits': (frozenset(['COMPUTE_STATUS_DISABLED'])
                       if i % 4 == 3 else frozenset()),
            'aggregates': frozenset([AGGREGATES[i % len(AGGREGATES)]]),
        })
    return nodes


def _timed(function):
    started = time.perf_counter()
    result = function()
    return (time.perf_counter() - started) * 1000.0, result


def run_size(client, hosts, repeats, seed):
    """The figures of one size: ``{phase: median ms, ...}``."""
    client.reset()
    written = client.create(cloud(hosts, seed))
    roots = [p.uuid for p in written]
    querystring = '%s&limit=%d' % (QUERY, hosts)
    query = candidate_query.parse(querystring)
    times = {phase: [] for phase in PHASES}
    calls = {}
    for _ in range(repeats):
        counting = placement_direct.Counting(client)
        reader = cloud_placement.PlacementReader(
            placement_direct.Context('req-nse-bench-placement-read'),
            client=counting)
        ms, trees = _timed(lambda: reader.trees(roots))
        times['reader'].append(ms)
        calls['reader'] = counting.calls
        ms, _listing = _timed(lambda: client.call(
            'get', '/resource_providers', version='1.14'))
        times['listing'].append(ms)
        ms, theirs = _timed(lambda: client.call(
            'get', '/allocation_candidates?' + querystring,
            version=candidate_query.MICROVERSION))
        times['candidates'].append(ms)
        providers = [trees[uuid].root._replace(aggregates=p.aggregates)
                     for uuid, p in zip(roots, written)]
        ms, ours = _timed(lambda: candidate_query.answer(query, providers))
        times['kept'].append(ms)
        their_hosts = sorted(uuid for ar in theirs['allocation_requests']
                             for uuid in ar['allocations'])
        our_hosts = sorted(uuid for ar in ours[0]
                           for uuid in ar['allocations'])
        if their_hosts != our_hosts:
            raise RuntimeError(
                'the kept answer differs from placement\'s: %d candidates '
                'against %d' % (len(our_hosts), len(their_hosts)))
        _time_snapshot(client, roots, times, calls)
    medians = {phase: statistics.median(values)
               for phase, values in times.items()}
    return {
        'hosts': hosts, 'repeats': repeats,
        'candidates': len(their_hosts),
        'ms': medians,
        'reader_calls': calls['reader'],
        'reader_over_listing': medians['reader'] / medians['listing'],
        'candidates_over_kept': medians['candidates'] / medians['kept'],
        'first_poll_calls': calls['first_poll'],
        'first_poll_from_snapshot_calls': calls['first_poll_from_snapshot'],
        'snapshot_bytes': calls['snapshot_bytes'],
        'first_poll_over_snapshot': (
            medians['first_poll'] / medians['first_poll_from_snapshot']),
    }


def _time_snapshot(client, roots, times, calls):
    """A first poll, the save, claims, and a first poll from the file."""
    context = placement_direct.Context('req-nse-bench-placement-read')
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, 'providers.json')

        def state(verify_per_poll=0):
            counting = placement_direct.Counting(client)
            snapshot = provider_snapshot.Snapshot(
                path, 300, 3600, verify_per_poll, 'Bench state')
            return provider_state.ProviderState(
                cloud_placement.PlacementReader(context, client=counting),
                snapshot), counting

        first, counting = state()
        ms, _changes = _timed(first.refresh)
        times['first_poll'].append(ms)
        calls['first_poll'] = counting.calls
        ms, saved = _timed(lambda: first.save_snapshot(force=True))
        if not saved:
            raise RuntimeError('the snapshot could not be saved to %s'
                               % path)
        times['snapshot_save'].append(ms)
        calls['snapshot_bytes'] = os.path.getsize(path)
        for uuid in roots[::100]:
            client.call('put', '/allocations/%s' % uuid_lib.uuid4(), {
                'allocations': {uuid: {'resources': {'VCPU': 1}}},
                'project_id': 'bench', 'user_id': 'bench',
                'consumer_generation': None}, version='1.28')
        started, counting = state()
        ms, _changes = _timed(started.refresh)
        times['first_poll_from_snapshot'].append(ms)
        calls['first_poll_from_snapshot'] = counting.calls
        full, _counting = state()
        os.unlink(path)
        full.refresh()
        if started.providers() != full.providers():
            raise RuntimeError('the state started from the snapshot differs '
                               'from a full read')


def run(args):
    """Entry point of ``nova-sched-ext-bench placement-read``."""
    try:
        sizes = scale.parse_sizes(args.hosts)
    except scale.BenchError as exc:
        raise SystemExit('nova-sched-ext-bench placement-read: %s' % exc)
    if args.repeats < 1:
        raise SystemExit('nova-sched-ext-bench placement-read: --repeats '
                         'must be at least 1, not %d' % args.repeats)
    import logging
    for name in ('placement', 'oslo_concurrency', 'oslo_policy'):
        logging.getLogger(name).setLevel(logging.WARNING)
    results = []
    with placement_direct.running() as client:
        for hosts in sizes:
            results.append(run_size(client, hosts, args.repeats, args.seed))
    if args.json:
        print(json.dumps({'sizes': results}, indent=2, sort_keys=True))
        return 0
    print('Reading placement, in-process placement on sqlite (medians of '
          '%d runs, ms)' % args.repeats)
    print('%8s %10s %6s %10s %12s %10s %10s' % (
        'hosts', 'reader', 'calls', 'listing', 'candidates', 'kept',
        'cand/kept'))
    for r in results:
        print('%8d %10.1f %6d %10.1f %12.1f %10.2f %9.0fx' % (
            r['hosts'], r['ms']['reader'], r['reader_calls'],
            r['ms']['listing'], r['ms']['candidates'], r['ms']['kept'],
            r['candidates_over_kept']))
    print()
    print('The kept state\'s start: a first poll, and one from a snapshot '
          'file after claims on 1 % of the providers (ms)')
    print('%8s %12s %6s %10s %10s %12s %6s %10s' % (
        'hosts', 'first poll', 'calls', 'save', 'file KiB', 'from file',
        'calls', 'ratio'))
    for r in results:
        print('%8d %12.1f %6d %10.1f %10.0f %12.1f %6d %9.1fx' % (
            r['hosts'], r['ms']['first_poll'], r['first_poll_calls'],
            r['ms']['snapshot_save'], r['snapshot_bytes'] / 1024.0,
            r['ms']['first_poll_from_snapshot'],
            r['first_poll_from_snapshot_calls'],
            r['first_poll_over_snapshot']))
    return 0
