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

"""nova-sched-ext-capacity-exporter: the NUMA-exact capacity for Prometheus.

::

    nova-sched-ext-capacity-exporter --config-file /etc/nova/nova.conf \\
        --config-file /etc/nova/nova-sched-ext-capacity.conf

Every ``[nova_sched_ext_capacity] refresh_interval`` seconds it counts the
capacity once per grouping of ``exporter_scopes`` (with the per-host
figures too when ``export_per_host`` is set), in a thread of its own, and
serves the last counts on ``http://exporter_host:exporter_port/metrics``:
a scrape never counts. A failed count, or a refresh that outlasts
``exporter_refresh_timeout``, keeps the last good figures, sets
``nova_sched_ext_capacity_up`` to 0, increments
``nova_sched_ext_capacity_refresh_errors_total`` and logs one line; the
age of the figures (since the exporter started, until a refresh succeeds)
tells how stale they are. SIGTERM or SIGINT stops it, whatever a refresh
is waiting for.

Series (``scope`` is cloud, az, aggregate, cell or host; ``name`` the
zone, aggregate, cell or host name, ``cloud`` for the whole cloud)::

    nova_sched_ext_capacity_instances{flavor,scope,name}
    nova_sched_ext_capacity_placement_only_instances{flavor,scope,name}
    nova_sched_ext_capacity_fragmentation_vcpus{scope,name}
    nova_sched_ext_capacity_fragmentation_memory_bytes{scope,name}
    nova_sched_ext_capacity_hosts{scope,name}
    nova_sched_ext_capacity_hosts_skipped{reason}
    nova_sched_ext_capacity_engine_fallbacks
    nova_sched_ext_capacity_up
    nova_sched_ext_capacity_last_refresh_age_seconds
    nova_sched_ext_capacity_last_refresh_timestamp_seconds
    nova_sched_ext_capacity_last_refresh_duration_seconds
    nova_sched_ext_capacity_refresh_errors_total

plus the process and Python series of ``prometheus_client``.
"""

import dataclasses
import signal
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from nova_sched_ext import cli
from nova_sched_ext.cli import config_files
from nova_sched_ext import exception as sched_ext_exception
from nova_sched_ext import version

# prometheus_client is imported where it is used: its HTTP server must be
# imported after main() has chosen Nova's concurrency mode, or under
# eventlet it would block the whole process.

LOG = logging.getLogger(__name__)

PROG = 'nova-sched-ext-capacity-exporter'
#: what ``--help`` says the command is
DESCRIPTION = (
    'Serve the NUMA-exact capacity of the flavors (the counts of '
    'nova-sched-ext-capacity) to Prometheus on http://exporter_host:'
    'exporter_port/metrics, counted again every refresh_interval seconds '
    '(options of [nova_sched_ext_capacity]). Reads the databases and '
    'placement of nova.conf; changes nothing.')
PREFIX = 'nova_sched_ext_capacity_'
MIB = 1024 * 1024
#: seconds between two looks at the stop event while a refresh runs
STOP_POLL = 0.2


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The reports of one successful refresh."""

    reports: tuple
    finished: float  # time.time()
    finished_monotonic: float
    duration: float


def _one_line(exc):
    """The first line of ``exc``'s message, for the log.

    The package's own errors say what failed in their message; another
    library's error is named by its class (``ConnectFailure: ...``).
    """
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ''
    if first and isinstance(exc, sched_ext_exception.NovaSchedExtError):
        return first
    return '%s: %s' % (type(exc).__name__, first) if first else (
        type(exc).__name__)


class CapacityExporter:
    """Counts on an interval; its ``collect`` serves the last counts.

    :param conf: the configuration (``[nova_sched_ext_capacity]``)
    :param context_factory: returns the context a count runs with
    :param registry: where ``collect`` is registered; a new
        ``CollectorRegistry`` with the process and platform collectors by
        default
    """

    def __init__(self, conf, context_factory, registry=None,
                 clock=time.monotonic, wall_clock=time.time, kept=None):
        self._conf = conf.nova_sched_ext_capacity
        #: the :class:`~nova_sched_ext.capacity.kept.KeptCount` refreshes
        #: count from while it is usable (``kept_state``), or None
        self.kept = kept
        self._context_factory = context_factory
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._snapshot = None
        self._errors = 0
        # up: did the last refresh to end count the capacity
        self._up = False
        #: the thread of the last refresh serve() started
        self.refresh_thread = None
        self._started = clock()
        import prometheus_client
        if registry is None:
            registry = prometheus_client.CollectorRegistry()
            prometheus_client.ProcessCollector(registry=registry)
            prometheus_client.PlatformCollector(registry=registry)
            prometheus_client.GCCollector(registry=registry)
        self.registry = registry
        registry.register(self)

    # -- counting --------------------------------------------------------

    def _scopes(self):
        scopes = []
        for by in self._conf.exporter_scopes:
            if by not in scopes:
                scopes.append(by)
        return scopes or ['cloud']

    def refresh(self):
        """Count once per scope; False (figures kept) if a count failed."""
        started = self._clock()
        per_host = self._conf.export_per_host
        reports = []
        try:
            for index, by in enumerate(self._scopes()):
                # The per-host figures come with the first count only: they
                # are the same whatever the grouping.
                report = self._count(by, per_host and index == 0)
                reports.append(report.to_dict())
        except Exception as exc:
            with self._lock:
                self._errors += 1
                self._up = False
                previous = self._snapshot
            LOG.error('Capacity refresh failed, %s: %s',
                      'keeping the figures of %.0f s ago'
                      % (self._clock() - previous.finished_monotonic)
                      if previous else 'no figures yet', _one_line(exc))
            LOG.debug('Capacity refresh failure', exc_info=True)
            return False
        finished = self._clock()
        snapshot = Snapshot(reports=tuple(reports),
                            finished=self._wall_clock(),
                            finished_monotonic=finished,
                            duration=finished - started)
        with self._lock:
            self._snapshot = snapshot
            self._up = True
        LOG.info('Capacity refreshed in %.1f s (%s)', snapshot.duration,
                 ', '.join(self._scopes()))
        return True

    def _count(self, by, per_host):
        from nova_sched_ext import capacity

        if self.kept is not None:
            why = self.kept.unusable()
            if why is None:
                self.kept.counts['kept'] += 1
                return self.kept.report(flavors=None, by=by,
                                        per_host=per_host)
            self.kept.counts[why[0]] += 1
            LOG.debug('Capacity counted in full: the kept state cannot be '
                      'used (%s)', why[1])
        return capacity.compute(self._context_factory(), flavors=None,
                                by=by, per_host=per_host)

    # -- prometheus_client collector ---------------------------------------

    def timed_out(self, timeout):
        """A refresh still runs after ``timeout`` seconds: a failure."""
        with self._lock:
            self._errors += 1
            self._up = False
        LOG.error('Capacity refresh did not finish within %d s '
                  '(exporter_refresh_timeout), keeping the last figures; '
                  'the next one starts when it ends', timeout)

    def describe(self):
        # Names only, so that registering never counts.
        return list(self._families(None, 0, False))

    def collect(self):
        with self._lock:
            snapshot, errors, up = self._snapshot, self._errors, self._up
        return self._families(snapshot, errors, up)

    def _families(self, snapshot, errors, up):
        from prometheus_client import core as prom_core

        per_flavor = ['flavor', 'scope', 'name']
        per_scope = ['scope', 'name']
        gauge = prom_core.GaugeMetricFamily
        instances = gauge(
            PREFIX + 'instances',
            'How many more instances of the flavor the scope can take, '
            'counted NUMA-exact (the CPUs and memory of each NUMA cell), '
            'the instances of one flavor alone.', labels=per_flavor)
        placement_only = gauge(
            PREFIX + 'placement_only_instances',
            'How many more instances of the flavor the scope can take as '
            "counted from placement's inventories alone, without the NUMA "
            'cells; the difference to instances is room the NUMA layout '
            'makes unusable.', labels=per_flavor)
        frag_vcpus = gauge(
            PREFIX + 'fragmentation_vcpus',
            'The fragmentation figure of the scope in vCPUs (see the '
            'capacity documentation).', labels=per_scope)
        frag_memory = gauge(
            PREFIX + 'fragmentation_memory_bytes',
            'The fragmentation figure of the scope in bytes of memory (see '
            'the capacity documentation).', labels=per_scope)
        hosts = gauge(
            PREFIX + 'hosts', 'Compute hosts counted in the scope.',
            labels=per_scope)
        skipped = gauge(
            PREFIX + 'hosts_skipped',
            'Compute hosts the last refresh could not count, by reason.',
            labels=['reason'])
        fallbacks = gauge(
            PREFIX + 'engine_fallbacks',
            'The engine_fallbacks figure of the last refresh (see the '
            'capacity documentation).')
        up_gauge = gauge(
            PREFIX + 'up',
            '1 if the last refresh to end counted the capacity; 0 if it '
            'failed or timed out, or before the first refresh ends.')
        up_gauge.add_metric([], 1 if up else 0)
        age = gauge(
            PREFIX + 'last_refresh_age_seconds',
            'Seconds since the figures were counted; since the exporter '
            'started until a refresh succeeds.')
        timestamp = gauge(
            PREFIX + 'last_refresh_timestamp_seconds',
            'When the figures were counted, in seconds since the epoch.')
        duration = gauge(
            PREFIX + 'last_refresh_duration_seconds',
            'How long the last successful refresh took.')
        refresh_errors = prom_core.CounterMetricFamily(
            PREFIX + 'refresh_errors',
            'Refreshes that failed (the figures of the last good one are '
            'kept).', value=errors)
        if snapshot is not None:
            seen = set()
            for report in snapshot.reports:
                for scope in report.get('scopes', ()):
                    key = (scope['scope'], scope['name'])
                    if key in seen:
                        continue
                    seen.add(key)
                    labels = [str(scope['scope']), str(scope['name'])]
                    for flavor, count in sorted(
                            scope.get('capacity', {}).items()):
                        instances.add_metric([flavor] + labels, count)
                    for flavor, count in sorted(
                            scope.get('placement_only', {}).items()):
                        placement_only.add_metric([flavor] + labels, count)
                    fragmentation = scope.get('fragmentation') or {}
                    if 'vcpus' in fragmentation:
                        frag_vcpus.add_metric(labels,
                                              fragmentation['vcpus'])
                    if 'memory_mb' in fragmentation:
                        frag_memory.add_metric(
                            labels, fragmentation['memory_mb'] * MIB)
                    if 'hosts' in scope:
                        hosts.add_metric(labels, scope['hosts'])
            first = snapshot.reports[0] if snapshot.reports else {}
            for reason, count in sorted(
                    (first.get('hosts_skipped') or {}).items()):
                skipped.add_metric([str(reason)], count)
            fallbacks.add_metric([], first.get('engine_fallbacks', 0))
            timestamp.add_metric([], snapshot.finished)
            duration.add_metric([], snapshot.duration)
        counted = (snapshot.finished_monotonic if snapshot is not None
                   else self._started)
        age.add_metric([], max(0.0, self._clock() - counted))
        return [instances, placement_only, frag_vcpus, frag_memory, hosts,
                skipped, fallbacks, up_gauge, age, timestamp, duration,
                refresh_errors]

    # -- serving ---------------------------------------------------------

    def serve(self, stop):
        """Serve /metrics and refresh until ``stop`` (an Event) is set."""
        import prometheus_client

        host, port = self._conf.exporter_host, self._conf.exporter_port
        server, _thread = prometheus_client.start_http_server(
            port, addr=host, registry=self.registry)
        LOG.info('Serving the capacity metrics on http://%s:%d/metrics, '
                 'refreshed every %d s', host, server.server_port,
                 self._conf.refresh_interval)
        try:
            while not stop.is_set():
                started = self._clock()
                # In a thread of its own: the main thread must stay free
                # to see the stop (SIGTERM) whatever a backend does.
                worker = self.refresh_thread = threading.Thread(
                    target=self.refresh, name='capacity-refresh',
                    daemon=True)
                worker.start()
                if not self._wait_for(worker, stop):
                    break
                wait = self._conf.refresh_interval - (
                    self._clock() - started)
                if stop.wait(max(0.0, wait)):
                    break
        finally:
            server.shutdown()
            server.server_close()
            LOG.info('Capacity exporter stopped')

    def _wait_for(self, worker, stop):
        """Wait for a refresh to end; False if stopped meanwhile.

        A refresh that outlasts ``exporter_refresh_timeout`` is counted
        as failed once, and waited for still: a thread cannot be stopped,
        and two refreshes at once would only load the backends more.
        """
        timeout = self._conf.exporter_refresh_timeout
        waited = 0.0
        while worker.is_alive():
            if stop.wait(STOP_POLL):
                return False
            waited += STOP_POLL
            if timeout is not None and waited >= timeout:
                self.timed_out(timeout)
                timeout = None
        return True


def main(argv=None, stop=None):
    """The console script; ``stop`` (an Event) ends it, as SIGTERM does."""
    from nova_sched_ext.capacity import wsgi
    wsgi.use_native_threads()

    import nova.conf
    from nova import context
    from nova import objects

    from nova_sched_ext.capacity import errors
    from nova_sched_ext.cloud import backends
    from nova_sched_ext.compat import nova as nova_compat

    argv = sys.argv[1:] if argv is None else argv
    conf = nova.conf.CONF
    try:
        # A directory or a file that is not UTF-8 escapes oslo.config.
        config_files.check_command_line(list(argv), prog=PROG)
        # --help and --version first, with this command's description and
        # the package's version (Nova's parse_args would give neither).
        logging.register_options(conf)
        try:
            conf(list(argv), project='nova', prog=PROG,
                 version=version.version_string(), description=DESCRIPTION)
        finally:
            conf.clear()
        # A count reads the databases and placement; it sends no RPC.
        nova_compat.parse_args([PROG] + list(argv), init_rpc=False,
                               prog=PROG, configure_db=False)
    except cfg.Error as exc:
        return cli.report(PROG, exc, 2)
    logging.setup(conf, 'nova-sched-ext')
    try:
        backends.check_options(conf)
    except errors.ConfigError as exc:
        return cli.report(PROG, exc)
    backends.bound(conf)
    backends.configure_databases(conf)
    objects.register_all()

    if stop is None:
        stop = threading.Event()
        try:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_args: stop.set())
        except ValueError:
            # Not the main thread (embedded): the caller stops it.
            pass
    exporter = CapacityExporter(
        conf, context.get_admin_context,
        kept=wsgi.kept_count(conf, context.get_admin_context))
    try:
        exporter.serve(stop)
    except OSError as exc:
        LOG.error('Cannot listen on %s:%s: %s',
                  conf.nova_sched_ext_capacity.exporter_host,
                  conf.nova_sched_ext_capacity.exporter_port, exc)
        return 1
    finally:
        if exporter.kept is not None:
            exporter.kept.stop()
    return 0
