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

"""``scale --schedulers N``: N scheduler *processes* on one cloud at once.

After the replay, the bench starts N processes (``python -m
nova_sched_ext_tools.bench.burst SPEC NUMBER``), each one
``nova-sched-ext-scheduler``'s manager with kept candidates
(``[nova_sched_ext] kept_candidates = True``), on the bench's databases
and its placement endpoint, as N ``nova-sched-ext-scheduler`` services
on one cloud would run:

* each keeps its own state: it learns the computes' instances as the
  computes tell every scheduler (``update_instance_info``, then
  ``sync_instance_info``), reads placement's providers once, then its own
  poller thread polls every ``[nova_sched_ext] kept_state_poll_interval``
  (``--burst-poll-interval``) seconds, as in the service;
* when all N are ready, the parent says go; each process's client (a
  conductor) sends boots back to back for ``--burst-seconds``, the
  trace's requests that follow the replay's, in the trace's order and
  shares (process n of N sends every N-th): a request goes out when the
  previous answer came back, so N requests are in flight at any time;
* the claims stay in placement; nothing is committed to the compute node
  records (the NUMA-level usage the filters see does not grow: what is
  measured is the schedulers' and placement's side).

Then the parent gathers what each process counted: requests with their
wall-clock start and end (requests a second over the burst and in each
window of ``--burst-window`` seconds: sustained, not an average over a
fast start), latency, the claims placement refused (two schedulers chose
the same room; Nova goes on to the next host, an alternate), errors, and
reads every provider's usage against its capacity (over-commits: must be
0).

A process that fails to start or dies fails the run with one line and
its exit status; its stderr (progress lines prefixed ``[scheduler N]``)
is the bench's.  Every process is ended, also on failure.
"""

import collections
import contextlib
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
import types
import uuid

from nova_sched_ext_tools.bench import scale

#: how long a scheduler process may take to start (imports, its first
#: read of every provider) before the run gives up
READY_TIMEOUT = 3600
#: how long after the burst's end a process may take to hand in its
#: figures (its last request, stopping its poller)
DONE_TIMEOUT = 900


def burst_spec(args, urls, endpoint, stream, cloud, limit):
    """What every scheduler process needs: a JSON-able dict.

    :param stream: the flavors of the boots, in the trace's order
    """
    flavors = sorted({f.name: f for f in stream}.values(),
                     key=lambda f: f.name)
    index = {f.name: number for number, f in enumerate(flavors)}
    return {
        'urls': urls, 'endpoint': endpoint,
        'burst_seconds': args.burst_seconds,
        'poll_interval': args.burst_poll_interval,
        'resync_max_rate': args.burst_resync_max_rate,
        'claim_casts_url': args.burst_claim_casts,
        'claim_casts_topic': 'nse-bench-scheduler-%s' % uuid.uuid4(),
        'host_subset_size': args.burst_host_subset_size,
        'package_weighers': args.package_weighers,
        'package_host_state': args.package_host_state,
        'package_numa_filter': args.package_numa_filter,
        'max_placement_results': limit,
        'processes': args.schedulers,
        'backend': args.backend,
        'flavors': [{'name': f.name, 'vcpus': f.vcpus,
                     'memory_mb': f.memory_mb, 'root_gb': f.root_gb,
                     'extra_specs': dict(f.extra_specs)}
                    for f in flavors],
        'stream': [index[f.name] for f in stream],
        'instances': {h.name: [u for u, _use in h.instances]
                      for h in cloud},
    }


class _Process(object):
    """One scheduler process, seen from the parent."""

    def __init__(self, number, spec_path):
        self.number = number
        argv = [sys.executable, '-m', 'nova_sched_ext_tools.bench.burst',
                spec_path, str(number)]
        self.child = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, bufsize=1)

    def expect(self, word, timeout):
        """The next line the process writes, which must start ``word``."""
        line = _read_line(self.child.stdout, timeout)
        if line is None or not line.startswith(word):
            if line is None:
                what = 'gave no answer in %d s' % timeout
            elif not line:
                try:
                    what = 'ended with exit status %d' % self.child.wait(30)
                except subprocess.TimeoutExpired:
                    what = 'closed its output'
            else:
                what = 'wrote %r' % line[:80]
            raise scale.BenchError(
                'scheduler process %d %s before it said %r (its stderr '
                'is above)' % (self.number, what, word))
        return line[len(word):].strip()

    def go(self):
        self.child.stdin.write('go\n')
        self.child.stdin.flush()

    def end(self):
        if self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(30)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def _read_line(stream, timeout):
    """A line of ``stream`` within ``timeout`` s; '' if it closed, or None.

    A process writes its lines whole and flushed, so once there is
    something to read the rest of the line follows.
    """
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout):
            return None
    return stream.readline().rstrip('\n')


def several_schedulers(ctx, args, urls, endpoint, stream, cloud, rc,
                       limit=None, kept_providers=None):
    """Start ``args.schedulers`` scheduler processes; the burst's figures.

    :param stream: the flavors of the boots, in the trace's order (after
        the replay's); process ``n`` of ``N`` sends ``stream[n::N]``, from
        the start again if it gets to the end
    :param kept_providers: the replay's kept providers
        (``--burst-from-snapshot``): saved to a snapshot file the
        processes start from
    """
    with tempfile.TemporaryDirectory(prefix='nse-burst-') as tmp:
        spec_path = os.path.join(tmp, 'spec.json')
        spec = burst_spec(args, urls, endpoint, stream, cloud, limit)
        if kept_providers is not None:
            from nova_sched_ext.cloud import provider_snapshot
            spec['snapshot_file'] = os.path.join(tmp, 'providers.json')
            provider_snapshot.Snapshot(
                spec['snapshot_file'], interval=3600, max_age=3600,
                verify_per_poll=0, what='Burst').save(kept_providers)
        with open(spec_path, 'w') as spec_file:
            json.dump(spec, spec_file)
        before = over_commits(rc, cloud)
        if before:
            raise scale.BenchError(
                'the cloud is over-committed in placement before the '
                'burst: %s' % '; '.join(before[:5]))
        processes = []
        with contextlib.ExitStack() as ending:
            for number in range(args.schedulers):
                process = _Process(number, spec_path)
                ending.callback(process.end)
                processes.append(process)
            for process in processes:
                process.expect('ready', READY_TIMEOUT)
            scale.progress('%d scheduler processes ready: go for %d s'
                           % (len(processes), args.burst_seconds))
            went = time.time()
            for process in processes:
                process.go()
            results = [json.loads(process.expect(
                'result', args.burst_seconds + DONE_TIMEOUT))
                for process in processes]
    burst_uuids = frozenset(
        burst_uuid(result['number'], sent) for result in results
        for sent in range(len(result['requests'])))
    return figures(args, results, went,
                   over_commits(rc, cloud, burst_uuids))


def burst_uuid(number, sent):
    """The instance of the ``sent``-th boot of scheduler process number."""
    return scale.stable_uuid('burst', number, sent)


def over_commits(rc, cloud, burst_uuids=frozenset()):
    """Every provider whose usage exceeds its capacity, one line each.

    The line names how much of the usage the burst's consumers hold
    (``burst_uuids``), so that an over-commit the cloud had before the
    burst is told from one it made.
    """
    over = []
    for host in cloud:
        base = '/resource_providers/%s' % host.uuid
        inventories = rc.get(base + '/inventories',
                             version='1.14').json()['inventories']
        usages = rc.get(base + '/usages', version='1.14').json()['usages']
        for rc_name, inv in inventories.items():
            capacity = int((inv['total'] - inv['reserved']) *
                           inv['allocation_ratio'])
            if usages.get(rc_name, 0) > capacity:
                held = rc.get(base + '/allocations',
                              version='1.14').json()['allocations']
                by_burst = sum(
                    a['resources'].get(rc_name, 0)
                    for consumer, a in held.items()
                    if consumer in burst_uuids)
                over.append('%s %s %d > %d (%d consumers; the burst\'s '
                            'hold %d)' % (host.name, rc_name,
                                          usages[rc_name], capacity,
                                          len(held), by_burst))
    return over


def rates_by_window(ends, went, seconds, window):
    """Requests a second in each whole window of the burst, in order.

    ``ends`` are the requests' wall-clock end times; a window is
    ``[went + k * window, went + (k + 1) * window)``; only the windows
    that lie wholly inside the burst count (the tail after the deadline
    holds only the requests in flight).
    """
    whole = int(seconds // window)
    counts = [0] * whole
    for end in ends:
        k = int((end - went) // window)
        if 0 <= k < whole:
            counts[k] += 1
    return [count / window for count in counts]


def figures(args, results, went, over):
    """The burst's figures from what each process handed in."""
    requests = [r for result in results for r in result['requests']]
    ends = [end for _placed, _start, end in requests]
    elapsed = (max(ends) - went) if ends else 0.0
    latencies = [(end - start) * 1e3 for _placed, start, end in requests]
    claims = sum(result['claims_placed'] + result['claims_refused']
                 for result in results)
    refused = sum(result['claims_refused'] for result in results)
    errors = [e for result in results for e in result['errors']]
    window = min(args.burst_window, args.burst_seconds)
    windows = rates_by_window(ends, went, args.burst_seconds, window)
    return {
        'schedulers': args.schedulers, 'processes': len(results),
        'seconds': elapsed, 'requests': len(requests),
        'requests_per_second': len(requests) / elapsed if elapsed else 0.0,
        'window_s': window,
        'requests_per_second_by_window': windows,
        'lowest_window_rate': min(windows) if windows else None,
        'placed': sum(1 for placed, _s, _e in requests if placed),
        'no_valid_host': sum(1 for placed, _s, _e in requests
                             if not placed),
        'latency_ms': scale.summary(latencies),
        'claims': claims, 'claims_refused': refused,
        'conflict_rate': refused / claims if claims else 0.0,
        'over_commits': over,
        'errors': errors[:10], 'error_count': len(errors),
        'answers': [result['answers'] for result in results],
        'poll_interval_s': results[0]['poll_interval'] if results else None,
        'resync_max_rate': (results[0].get('resync_max_rate')
                            if results else None),
        'host_subset_size': args.burst_host_subset_size,
        'poll_ms': [result['poll_ms'] for result in results],
        'claim_casts': [result['casts'] for result in results],
        'placement_gets': [result['placement_gets'] for result in results],
        'placement_gets_per_request': (
            sum(result['placement_gets'] for result in results) /
            len(requests) if requests else None),
        'first_read_s': [result['first_read_s'] for result in results],
        'first_read_from_snapshot': bool(getattr(args, 'burst_from_snapshot',
                                                 False)),
        'note': 'one process per scheduler (nova-sched-ext-scheduler\'s '
                'manager, kept candidates, its own poller thread), one '
                'client each sending boots back to back; claims are not '
                'committed to the compute node records',
    }


# ---------------------------------------------------------------------------
# One scheduler process


def _say(line):
    sys.stdout.write(line + '\n')
    sys.stdout.flush()


def serve(spec, number):
    """Build the scheduler, say ready, wait for go, send boots; figures."""
    from nova import context as nova_context
    from nova import exception
    from nova.scheduler.client import report
    from nova.virt import hardware
    import oslo_messaging as messaging

    from nova_sched_ext_tools import loader

    scale.quiet_logs()
    conf = scale.configure_nova(spec['urls'], sync=False)
    if spec['max_placement_results'] is not None:
        conf.set_override('max_placement_results',
                          spec['max_placement_results'], group='scheduler')
    if spec['poll_interval'] is not None:
        conf.set_override('kept_state_poll_interval',
                          spec['poll_interval'], group='nova_sched_ext')
    if spec.get('resync_max_rate') is not None:
        conf.set_override('kept_state_resync_max_rate',
                          spec['resync_max_rate'], group='nova_sched_ext')
    if spec.get('snapshot_file'):
        # The replay's state, saved just now: its first poll reads what
        # changed since; nothing was freed meanwhile, so no verification.
        for name, value in (('kept_state_snapshot_file',
                             spec['snapshot_file']),
                            ('kept_state_snapshot_verify_per_poll', 0),
                            ('kept_state_snapshot_interval', 3600)):
            conf.set_override(name, value, group='nova_sched_ext')
    conf.set_override('host', 'nse-scale-scheduler-%d' % number)
    conf.set_override('host_subset_size', spec['host_subset_size'],
                      group='filter_scheduler')
    if spec['backend']:
        conf.set_override('fit_backend', spec['backend'],
                          group='nova_sched_ext')
    objects = loader.load_nova()
    scale.point_nova_at(conf, spec['endpoint'])
    ctx = nova_context.get_admin_context()
    manager = scale.make_manager(
        conf, scale.PACKAGE, spec['package_weighers'],
        spec['package_host_state'], spec['package_numa_filter'], 'kept')
    cloud = [types.SimpleNamespace(name=name,
                                   instances=[(u, None) for u in uuids])
             for name, uuids in sorted(spec['instances'].items())]
    scale.seed_instance_info(ctx, objects, manager, cloud)
    kept = manager.candidate_limit.kept
    started = time.perf_counter()
    kept.poll()
    first_read_s = time.perf_counter() - started
    scale.polled_warm(kept, manager)
    flavors = [objects.Flavor(
        name=f['name'], flavorid=f['name'], vcpus=f['vcpus'],
        memory_mb=f['memory_mb'], root_gb=f['root_gb'], ephemeral_gb=0,
        swap=0, rxtx_factor=1.0, vcpu_weight=0, disabled=False,
        is_public=True, extra_specs=f['extra_specs'])
        for f in spec['flavors']]
    rc = report.report_client_singleton()
    casting = _claim_casts(conf, kept, spec, number)
    claims = collections.Counter()
    claim = rc.claim_resources

    def counted_claim(*a, **kw):
        result = claim(*a, **kw)
        claims['refused' if not result else 'placed'] += 1
        return result

    rc.claim_resources = counted_claim
    get = rc.get

    def counted_get(*a, **kw):
        claims['gets'] += 1
        return get(*a, **kw)

    rc.get = counted_get
    polls = []
    poll = kept.poll

    def timed_poll():
        began = time.perf_counter()
        try:
            return poll()
        finally:
            polls.append((time.perf_counter() - began) * 1e3)

    kept.poll = timed_poll
    _say('ready')
    if sys.stdin.readline().strip() != 'go':
        raise scale.BenchError('the bench did not say go')
    kept.start()
    mine = spec['stream'][number::spec['processes']] or spec['stream']
    deadline = time.time() + spec['burst_seconds']
    requests = []
    errors = []
    try:
        while time.time() < deadline:
            flavor = flavors[mine[len(requests) % len(mine)]]
            instance_uuid = burst_uuid(number, len(requests))
            request = scale.request_spec(ctx, objects, hardware, flavor,
                                         instance_uuid)
            began = time.time()
            try:
                manager.select_destinations(
                    ctx, spec_obj=request, instance_uuids=[instance_uuid],
                    return_objects=True, return_alternates=True)
                placed = True
            except (exception.NoValidHost, messaging.ExpectedException):
                placed = False
            except Exception as exc:   # a fault of the bench or the code
                placed = False
                errors.append('%s: %s' % (type(exc).__name__, exc))
            requests.append((placed, began, time.time()))
    finally:
        kept.stop()
        casting.close()
    return {
        'number': number, 'requests': requests,
        'claims_placed': claims['placed'],
        'claims_refused': claims['refused'], 'errors': errors,
        'answers': dict(kept.counts), 'first_read_s': first_read_s,
        'poll_interval': conf.nova_sched_ext.kept_state_poll_interval,
        'resync_max_rate': conf.nova_sched_ext.kept_state_resync_max_rate,
        'poll_ms': scale.summary(polls),
        'casts': dict(kept.casts.counts) if kept.casts else None,
        'placement_gets': claims['gets'],
    }


class _Casting(object):
    """The claim casts of one scheduler process, on a real transport."""

    def __init__(self, transport=None, server=None):
        self.transport, self.server = transport, server

    def close(self):
        if self.server is not None:
            self.server.stop()
            self.server.wait()
        if self.transport is not None:
            self.transport.cleanup()


def _claim_casts(conf, kept, spec, number):
    """``--burst-claim-casts``: cast claims as the service does.

    The bench's Nova runs on the fake transport, which does not cross
    processes: the casts get a transport of their own, and an RPC server
    with only their endpoint, on a topic of this run's own.
    """
    url = spec.get('claim_casts_url')
    if not url:
        return _Casting()
    from nova import rpc
    import oslo_messaging as messaging

    from nova_sched_ext import claim_casts

    transport = messaging.get_rpc_transport(conf, url=url)
    serializer = rpc.RequestContextSerializer(None)
    topic = spec['claim_casts_topic']
    kept.casts = claim_casts.ClaimCasts(
        kept, topic=topic, get_client=lambda target: messaging.
        get_rpc_client(transport, target, serializer=serializer))
    server = messaging.get_rpc_server(
        transport, messaging.Target(topic=topic,
                                    server='nse-scale-scheduler-%d' % number),
        [kept.casts.endpoint], executor='threading', serializer=serializer)
    server.start()
    return _Casting(transport, server)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    spec_path, number = argv[0], int(argv[1])
    with open(spec_path) as spec_file:
        spec = json.load(spec_file)
    scale.progress_prefix('[scheduler %d] ' % number)
    import logging
    import warnings
    logging.getLogger().setLevel(logging.WARNING)
    warnings.simplefilter('ignore')
    try:
        result = serve(spec, number)
    except scale.BenchError as exc:
        sys.stderr.write('scheduler process %d: %s\n' % (number, exc))
        return 1
    _say('result ' + json.dumps(result))
    return 0


if __name__ == '__main__':
    sys.exit(main())
