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

"""``nova-sched-ext-bench scale``: the whole ``select_destinations``.

What runs, per size of ``--hosts`` (each size in a process of its own,
with databases of its own, dropped at the end, also on failure):

* **Databases**: an API database and one cell database on the MariaDB of
  ``--db-url`` (default ``mysql+pymysql://root@127.0.0.1:3306/``), each
  named ``nse_scale_<pid>_...``, made by Nova's own migrations; placement's
  database next to them, made by placement's.  If that server or PyMySQL
  is not there (or with ``--db sqlite``) the databases are sqlite files in
  a temporary directory, and the output says so.
* **Placement**: openstack-placement's WSGI application, served in this
  process by a threaded HTTP server on 127.0.0.1, with ``noauth2``; Nova's
  report client reaches it through ``[placement]`` options
  (``auth_type = admin_token``, ``endpoint_override``), over HTTP.
* **The cloud** (not timed): the hosts of the capacity bench
  (:func:`nova_sched_ext_tools.bench.capacity.build_cloud`: the NUMA
  cells of the trace's ``hosts.csv``, one host in four split into four
  cells, whole cores half shared and half dedicated, two threads per core,
  2 MiB huge pages on every other host, each host 40 to 70% used, the
  pinned cores picked at random: fragmented).  Each host is a
  ``nova-compute`` service (up: its heartbeat is renewed before every
  request, as computes do), a ``ComputeNode`` record with its
  ``numa_topology`` (the columns Nova's ``ComputeNode.create`` writes,
  inserted in bulk), a host mapping, and a resource provider with VCPU
  (allocation ratio 4.0), PCPU, MEMORY_MB and DISK_GB inventories whose
  usage is held by 2 to 6 existing instances (rows in the cell database and
  allocations in placement, inserted in bulk into placement's tables), and
  the traits Nova's libvirt driver reports (``OWNER_NOVA``, which every
  request of Nova 34 requires, ``COMPUTE_*``, two CPU flags).  The
  schedulers learn each host's instances as Nova's computes tell them
  (``update_instance_info``, then ``sync_instance_info``), so that they
  read no instance list per request, as in a running cloud.
* **The requests**: ``--requests`` boots, the trace's flavors in arrival
  order (``requests_C1..C3.csv`` taken in turn; ``hw:numa_nodes`` from the
  trace), every other one turned into a pinned (``hw:cpu_policy =
  dedicated``), a 2 MiB huge-page or a pinned huge-page flavor; no server
  groups.  Built as Nova's API builds them (``RequestSpec.from_components``)
  and passed as the conductor passes them (``instance_uuids``,
  ``return_objects``, ``return_alternates``).
* **The two schedulers**, built in the same process on the same data:
  stock ``nova.scheduler.manager.SchedulerManager`` with Nova's default
  filters plus ``PciPassthroughFilter`` and ``NUMATopologyFilter`` (what a
  cloud with NUMA flavors enables) and Nova's weighers; and the manager of
  ``nova-sched-ext-scheduler``
  (:class:`nova_sched_ext.manager.SchedulerManager`) with the package's
  filters (``FastNUMATopologyFilter`` in place of ``NUMATopologyFilter``;
  ``--package-numa-filter prefilter``: ``NUMAFitFilter`` right before
  ``NUMATopologyFilter``, as the devstack plugin sets them up) and
  weigher (``NUMASlotWeigher`` after Nova's, its options at their
  defaults), as the devstack plugin configures them;
  ``--package-weighers nova`` leaves the weigher out, and then both
  schedulers must choose the same hosts.  The package's manager keeps the
  host state between requests (``[nova_sched_ext] keep_host_state``,
  :mod:`nova_sched_ext.host_state`: its ``refresh_db`` is the narrow reads
  and the reload of the changed rows); ``--package-host-state reload``
  builds it as Nova does.  Both with ``host_subset_size =
  1`` and no shuffling, Nova's other defaults (``max_placement_results =
  1000``, or each value of ``--max-placement-results`` in turn: what a
  deployer who raises the limit pays).  Each first answers ``--warmup``
  requests (default 1) that are not counted: a running scheduler's caches
  and connections are warm.

**Same state for both**: each request goes to both schedulers in turn (the
first one alternating), each on the same cloud: the claim the first one
made is deleted from placement before the second one runs (and the
second one's after it).  Then the request is *committed* as a compute
would: Nova's choice (or, if Nova found none, the package's) is claimed
again, the compute node record gets the instance's NUMA usage
(``numa_fit_instance_to_host`` and ``numa_usage_from_instance_numa``, as
the resource tracker does) and the schedulers hear of the instance.  None
of this is timed.  So the cloud fills as stock Nova would fill it, and
"same host" compares the two choices on identical state.

**What is timed**, per request and scheduler, by wrapping Nova's own
methods (nothing in Nova is edited):

``total``
    ``select_destinations``, all of it.
``placement``
    the report client's ``get_allocation_candidates`` (two calls for a
    pinned flavor: Nova asks again with VCPU instead of PCPU).
``refresh``
    the host state refresh: the manager's ``_get_all_host_states``
    (``HostManager.get_host_states_by_uuids``: the compute nodes and
    services read from the cell database, ``refresh_db``, and a new
    ``HostState`` with its ``NUMATopology``/``PciDeviceStats`` per
    candidate, ``refresh_objects``), plus ``candidate_copy``: the deep copy
    of each host's allocation candidates that Nova makes as the filters
    pull the hosts in.
``filters``
    ``HostManager.get_filtered_hosts`` without those copies; per filter
    too (``filters_by_name_ms``: each filter's ``filter_all``, made a list
    at once, as Nova's handler makes it one right after).
``weighers``
    ``HostManager.get_weighed_hosts``; each weigher's ``weigh_objects``
    too (``weighers_by_name_ms``; the normalisation and sorting are the
    handler's).
``claims``
    ``nova.scheduler.utils.claim_resources`` (the allocation PUT to
    placement).
``own``
    refresh + filters + weighers + claims: the scheduler's own time, the
    part a scheduler can make faster (placement's query is placement's).
``other``
    total minus the phases: request filters, the placement request's
    making, notifications, Selection objects.

``--schedulers N`` then starts N scheduler processes of the package on
the cloud the replay left, each with its own kept state, and sends them
boots at once for ``--burst-seconds``
(:mod:`nova_sched_ext_tools.bench.burst`).

Figures are wall-clock milliseconds, p50/p95/p99 by nearest rank over the
requests (with fewer than 100 requests p99 is the slowest one).
Placement runs in this process, so its time competes for the same
interpreter as the scheduler's, as a co-located placement would compete
for the CPU.
"""

import argparse
import collections
import contextlib
import dataclasses
import datetime
import functools
import gc
import json
import math
import os
import random
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuid_lib
from wsgiref import simple_server

from nova_sched_ext import exception as sched_ext_exception
from nova_sched_ext_tools.sim import trace as trace_mod

DEFAULT_DB_URL = 'mysql+pymysql://root@127.0.0.1:3306/'
DEFAULT_REQUESTS = 30
#: Allocation ratios of every host, as in the capacity bench's cloud.
CPU_ALLOCATION_RATIO = 4.0
RAM_ALLOCATION_RATIO = 1.0
DISK_GB = 2000
INSTANCE_DISK_GB = 20
PROJECT_ID = 'bench-project'
#: how long before the bench's start its compute nodes were last saved
NODES_SAVED_BEFORE_S = 3600
USER_ID = 'bench-user'
#: the flavor variants, in turn, of the trace's requests
VARIANTS = ('trace', 'pinned', 'trace', 'huge', 'trace', 'pinned', 'trace',
            'pinned+huge')
VARIANT_SPECS = {
    'trace': {},
    'pinned': {'hw:cpu_policy': 'dedicated'},
    'huge': {'hw:mem_page_size': '2MB'},
    'pinned+huge': {'hw:cpu_policy': 'dedicated',
                    'hw:mem_page_size': '2MB'},
}
PHASES = ('total', 'placement', 'kept', 'refresh', 'refresh_db',
          'refresh_objects', 'candidate_copy', 'filters', 'weighers',
          'claims', 'own', 'other', 'gc')
NOVA = 'nova'
PACKAGE = 'package'
SIDES = (NOVA, PACKAGE)
SIDE_TITLES = {NOVA: 'stock nova.scheduler.manager.SchedulerManager',
               PACKAGE: 'nova-sched-ext-scheduler\'s manager'}
#: traits Nova's libvirt driver reports on every compute node provider
#: (OWNER_NOVA is required by every request of Nova 34)
TRAITS = ('OWNER_NOVA', 'COMPUTE_NODE', 'COMPUTE_IMAGE_TYPE_QCOW2',
          'COMPUTE_IMAGE_TYPE_RAW', 'COMPUTE_NET_VIF_MODEL_VIRTIO',
          'COMPUTE_DEVICE_TAGGING', 'COMPUTE_VOLUME_ATTACH_WITH_TAG',
          'COMPUTE_VOLUME_EXTEND', 'COMPUTE_TRUSTED_CERTS',
          'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42')
_NAMESPACE = uuid_lib.UUID('6f1f3c0e-5b1a-4b8e-9d59-2f7f1c3a0b11')
BATCH = 2000
#: requests of the trace the --schedulers burst takes after the replay's
#: (its processes start from the first again if they send more)
BURST_STREAM = 6000


_STARTED = time.perf_counter()
_PREFIX = ['']


def progress(message):
    """One line on stderr: where a long run is (stdout holds the figures)."""
    sys.stderr.write('%s[scale %6.1f s] %s\n'
                     % (_PREFIX[0], time.perf_counter() - _STARTED, message))
    sys.stderr.flush()


def progress_prefix(prefix):
    """Start every later progress line with ``prefix`` (a process's name)."""
    _PREFIX[0] = prefix


def quiet_logs():
    """Only errors from the loggers that are noise in a bench.

    Nova's fit warns about hosts on vcpu_pin_set for isolate policies;
    placement logs each request.
    """
    import logging
    for name in ('nova', 'placement', 'nova_sched_ext', 'oslo_db',
                 'keystoneauth', 'stevedore'):
        logging.getLogger(name).setLevel(logging.ERROR)


def stable_uuid(*parts):
    return str(uuid_lib.uuid5(_NAMESPACE, '/'.join(str(p) for p in parts)))


def percentile(values, q):
    """Nearest-rank percentile ``q`` (0..100) of ``values``."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(math.ceil(q / 100.0 * len(ordered))))
    return ordered[rank - 1]


def summary(values):
    return {'p50': percentile(values, 50), 'p95': percentile(values, 95),
            'p99': percentile(values, 99)}


class BenchError(sched_ext_exception.NovaSchedExtError):
    """The bench cannot run; the message says why, in one line."""


# ---------------------------------------------------------------------------
# Databases


class Databases(object):
    """The API, cell and placement databases of one run, and their end."""

    KINDS = ('api', 'cell', 'placement')

    def __init__(self, kind, server_url, prefix):
        self.requested = kind
        self.server_url = server_url
        self.prefix = prefix
        self.kind = None
        self.note = None
        self.urls = {}
        self._tmpdir = None
        self._created = []

    def create(self):
        if self.requested in ('auto', 'mysql'):
            problem = self._create_mysql()
            if problem is None:
                self.kind = 'mysql'
                return
            if self.requested == 'mysql':
                raise BenchError('cannot use the MariaDB/MySQL server %s: %s'
                                 % (self.server_url, problem))
            self.note = ('MariaDB/MySQL not used (%s): sqlite files instead; '
                         'the database figures are not a server\'s'
                         % problem)
        self._tmpdir = tempfile.mkdtemp(prefix='%s_' % self.prefix)
        self.urls = {kind: 'sqlite:///%s/%s.db' % (self._tmpdir, kind)
                     for kind in self.KINDS}
        self.kind = 'sqlite'

    def _create_mysql(self):
        try:
            import pymysql  # noqa: F401
        except ImportError:
            return 'PyMySQL is not installed (pip install PyMySQL)'
        import sqlalchemy as sa
        try:
            engine = sa.create_engine(self.server_url)
            with engine.connect() as conn:
                for kind in self.KINDS:
                    name = '%s_%s' % (self.prefix, kind)
                    conn.execute(sa.text(
                        'CREATE DATABASE `%s` CHARACTER SET utf8mb4' % name))
                    self._created.append(name)
            engine.dispose()
        except Exception as exc:
            self.drop()
            return str(exc).splitlines()[0]
        base = self.server_url.rstrip('/')
        self.urls = {
            kind: '%s/%s_%s?charset=utf8mb4' % (base, self.prefix, kind)
            for kind in self.KINDS}
        self.version = self._server_version()
        return None

    def _server_version(self):
        import sqlalchemy as sa
        engine = sa.create_engine(self.server_url)
        try:
            with engine.connect() as conn:
                return conn.execute(sa.text('SELECT VERSION()')).scalar()
        finally:
            engine.dispose()

    def describe(self):
        if self.kind == 'mysql':
            return 'MariaDB/MySQL %s' % self.version
        return 'sqlite'

    def drop(self):
        """Drop what :meth:`create` made; safe to call twice."""
        if self._created:
            drop_databases(self.server_url, self._created)
            self._created = []
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None


def drop_databases(server_url, names=None, prefix=None):
    """Drop ``names``, or every database whose name starts with ``prefix``.

    :returns: the names dropped
    """
    import sqlalchemy as sa
    dropped = []
    engine = sa.create_engine(server_url)
    try:
        with engine.connect() as conn:
            if prefix is not None:
                names = [row[0] for row in conn.execute(
                    sa.text('SHOW DATABASES LIKE :p'),
                    {'p': prefix.replace('_', '\\_') + '\\_%'})]
            for name in names or ():
                conn.execute(sa.text('DROP DATABASE IF EXISTS `%s`' % name))
                dropped.append(name)
    finally:
        engine.dispose()
    return dropped


# ---------------------------------------------------------------------------
# Nova and placement


def configure_nova(urls, sync=True):
    """Nova's options for a scheduler on these databases; the schemas.

    ``sync=False``: the schemas are there already (a scheduler process of
    ``--schedulers``, started on the bench's databases).
    """
    from nova import config as nova_config
    from nova.db.api import api as api_db
    from nova.db.main import api as main_db
    from nova.db import migration

    from nova_sched_ext import conf as ext_conf
    import oslo_messaging.opts
    # Nova's options (nova.config registers them) and the package's.
    conf = ext_conf.CONF
    # oslo.messaging's options, registered as it would when the transport
    # and the notifier are made, so that the fake transport and the noop
    # notifier can be named first.
    for group, opts in oslo_messaging.opts.list_opts():
        conf.register_opts(opts, group=group)
    # What Nova's own start (nova.config.parse_args) registers besides
    # nova.conf's options: [profiler], when osprofiler can be imported;
    # Nova's database code then reads it.
    if nova_config.profiler:
        nova_config.profiler.set_defaults(conf)
    conf([], project='nova', default_config_files=[])
    conf.set_override('connection', urls['api'], group='api_database')
    conf.set_override('connection', urls['cell'], group='database')
    conf.set_override('transport_url', 'fake:/')
    conf.set_override('driver', ['noop'],
                      group='oslo_messaging_notifications')
    conf.set_override('host_subset_size', 1, group='filter_scheduler')
    conf.set_override('shuffle_best_same_weighed_hosts', False,
                      group='filter_scheduler')
    conf.set_override('host', 'nse-scale-scheduler')
    # Every heartbeat is renewed right before a request; on a loaded
    # machine one request can outlast Nova's 60 s, and ComputeFilter would
    # then find every compute down.
    conf.set_override('service_down_time', 3600)
    main_db.configure(conf)
    api_db.configure(conf)
    if sync:
        migration.db_sync(database='api')
        migration.db_sync(database='main')
    from nova import rpc
    rpc.init(conf)
    return conf


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class _ThreadingServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class Placement(object):
    """openstack-placement's WSGI app on its own database, over HTTP.

    ``one_at_a_time``: requests are served one after the other (sqlite
    has one writer: two claims at once from ``--schedulers`` processes
    would fail with "database is locked" where MariaDB lets one wait).
    """

    def __init__(self, url, one_at_a_time=False, conflict_retries=None):
        from oslo_config import cfg
        from placement import conf as placement_conf
        from placement import db_api
        from placement import deploy
        conf = cfg.ConfigOpts()
        placement_conf.register_opts(conf)
        conf.set_default('connection', url, group='placement_database')
        conf([], default_config_files=[])
        conf.set_override('auth_strategy', 'noauth2', group='api')
        conf.set_override('sync_on_startup', True,
                          group='placement_database')
        # One connection per request thread that is served at once: with
        # oslo.db's default pool of 5, the requests of several schedulers
        # opened and closed a connection each (a fifth of placement's
        # time in a burst).
        conf.set_override('max_pool_size', 32, group='placement_database')
        if conflict_retries is not None:
            conf.set_override('allocation_conflict_retry_count',
                              conflict_retries, group='placement')
        db_api.configure(conf)
        deploy.update_database(conf)
        #: placement reads its options per request: an override made
        #: here holds from the next request on
        self.conf = conf
        app = deploy.loadapp(conf)
        if one_at_a_time:
            app = _one_at_a_time(app)
        self.server = simple_server.make_server(
            '127.0.0.1', 0, app, server_class=_ThreadingServer,
            handler_class=_QuietHandler)
        self.endpoint = 'http://127.0.0.1:%d' % self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       name='placement', daemon=True)
        self.thread.start()

    def engine(self):
        from placement import db_api
        return db_api.placement_context_manager.writer.get_engine()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _one_at_a_time(app):
    lock = threading.Lock()

    def serve(environ, start_response):
        with lock:
            # The body is read whole inside the lock: the app's work ends
            # with its iterable.
            return list(app(environ, start_response))
    return serve


def point_nova_at(conf, endpoint):
    """Nova's report client talks to ``endpoint`` as admin (noauth2)."""
    from keystoneauth1 import loading as ks_loading
    conf.set_override('auth_type', 'admin_token', group='placement')
    for opt in ks_loading.get_auth_plugin_conf_options('admin_token'):
        with contextlib.suppress(Exception):
            conf.register_opt(opt, group='placement')
    conf.set_override('endpoint', endpoint, group='placement')
    conf.set_override('token', 'admin', group='placement')
    conf.set_override('endpoint_override', endpoint, group='placement')


# ---------------------------------------------------------------------------
# The cloud


class CloudHost(object):
    """One host of the bench: its records and its current NUMA usage."""

    def __init__(self, number, host):
        self.number = number
        self.name = host.name
        self.uuid = stable_uuid('compute', host.name)
        self.cells = host.cells
        self.topology = host.topology
        from nova_sched_ext_tools import hosts as host_factory
        self.resources = host_factory.placement_resources(host.cells)
        self.instances = []
        self.vcpus_used = 0
        self.memory_used = 0
        self.disk_used = 0


def _split(total, parts):
    """``total`` in ``parts`` whole shares, the first taking the rest."""
    share = total // parts
    return [total - share * (parts - 1)] + [share] * (parts - 1)


def build_cloud(count, rng):
    from nova_sched_ext_tools.bench import capacity
    hosts, source = capacity.build_cloud(count)
    cloud = [CloudHost(number, host) for number, host in enumerate(hosts)]
    for host in cloud:
        parts = rng.randint(2, 6)
        vcpu = _split(host.resources['VCPU'][1], parts)
        pcpu = _split(host.resources['PCPU'][1], parts)
        memory = _split(host.resources['MEMORY_MB'][1], parts)
        for i in range(parts):
            use = {'VCPU': vcpu[i], 'PCPU': pcpu[i], 'MEMORY_MB': memory[i],
                   'DISK_GB': INSTANCE_DISK_GB}
            host.instances.append(
                (stable_uuid('instance', host.name, i),
                 {rc: used for rc, used in use.items() if used}))
        host.vcpus_used = sum(vcpu) + sum(pcpu)
        host.memory_used = sum(memory)
        host.disk_used = INSTANCE_DISK_GB * parts
    return cloud, source


def _compute_node_row(objects, host, now):
    """The row Nova's ``ComputeNode.create`` writes for ``host``."""
    cn = objects.ComputeNode(
        uuid=host.uuid, host=host.name, hypervisor_hostname=host.name,
        vcpus=host.resources['VCPU'][0] + host.resources['PCPU'][0],
        memory_mb=host.resources['MEMORY_MB'][0], local_gb=DISK_GB,
        vcpus_used=host.vcpus_used, memory_mb_used=host.memory_used,
        local_gb_used=host.disk_used,
        free_ram_mb=host.resources['MEMORY_MB'][0] - host.memory_used,
        free_disk_gb=DISK_GB - host.disk_used,
        disk_available_least=DISK_GB - host.disk_used,
        current_workload=0, running_vms=len(host.instances),
        hypervisor_type='QEMU', hypervisor_version=8002000,
        cpu_info='{"arch": "x86_64", "model": "Cascadelake-Server"}',
        host_ip='192.0.2.%d' % (host.number % 250 + 1),
        supported_hv_specs=[objects.HVSpec(arch='x86_64', hv_type='kvm',
                                           vm_mode='hvm')],
        metrics='[]',
        pci_device_pools=objects.PciDevicePoolList(objects=[]),
        extra_resources=None,
        stats=_stats(host),
        numa_topology=host.topology._to_json(),
        cpu_allocation_ratio=CPU_ALLOCATION_RATIO,
        ram_allocation_ratio=RAM_ALLOCATION_RATIO,
        disk_allocation_ratio=1.0, mapped=1)
    updates = cn.obj_get_changes()
    objects.ComputeNode._convert_stats_to_db_format(updates)
    objects.ComputeNode._convert_host_ip_to_db_format(updates)
    objects.ComputeNode._convert_supported_instances_to_db_format(updates)
    objects.ComputeNode._convert_pci_stats_to_db_format(updates)
    updates.update(created_at=now, updated_at=now, deleted=0)
    return updates


def _stats(host):
    count = len(host.instances)
    return {'num_instances': str(count), 'num_vm_active': str(count),
            'num_task_None': str(count), 'num_os_type_None': str(count),
            'num_proj_%s' % PROJECT_ID: str(count), 'io_workload': '0',
            'failed_builds': '0'}


def _insert(conn, table, rows):
    rows = list(rows)
    for start in range(0, len(rows), BATCH):
        conn.execute(table.insert(), rows[start:start + BATCH])


def populate(ctx, objects, cloud, placement, flavors, cell=None):
    """Write the cloud into the databases (bulk where objects are slow).

    :param cell: the cell mapping of the cell database the cloud goes to;
        None makes one for ``[database] connection``
    """
    import nova.conf
    from nova.db.api import api as api_db
    from nova.db.api import models as api_models
    from nova.db.main import api as main_db
    from nova.db.main import models
    from nova.objects import service as service_obj
    from oslo_utils import timeutils
    from placement.db.sqlalchemy import models as pl_models
    import sqlalchemy as sa

    conf = nova.conf.CONF
    if cell is None:
        cell = objects.CellMapping(
            ctx, uuid=stable_uuid('cell', 'cell1'), name='cell1',
            transport_url='fake:/',
            database_connection=conf.database.connection)
        cell.create()
    for flavor in flavors:
        flavor._context = ctx
        flavor.create()
    now = timeutils.utcnow()

    with main_db.get_engine().begin() as conn:
        _insert(conn, models.Service.__table__, (
            {'uuid': stable_uuid('service', h.name), 'host': h.name,
             'binary': 'nova-compute', 'topic': 'compute',
             'report_count': 1, 'disabled': False, 'forced_down': False,
             'version': service_obj.SERVICE_VERSION, 'created_at': now,
             'updated_at': now, 'last_seen_up': now, 'deleted': 0}
            for h in cloud))
        # A cloud that ran before the scheduler started: its compute
        # nodes last saved a while ago (older than [nova_sched_ext]
        # host_state_clock_margin), not in the instant the scheduler
        # reads them.
        saved = now - datetime.timedelta(seconds=NODES_SAVED_BEFORE_S)
        _insert(conn, models.ComputeNode.__table__,
                (_compute_node_row(objects, h, saved) for h in cloud))
        _insert(conn, models.Instance.__table__, (
            {'uuid': inst_uuid, 'host': h.name, 'node': h.name,
             'hostname': 'vm-%s' % inst_uuid[:8], 'display_name': inst_uuid,
             'vm_state': 'active', 'power_state': 1,
             'project_id': PROJECT_ID, 'user_id': USER_ID,
             'vcpus': use.get('VCPU', 0) + use.get('PCPU', 0),
             'memory_mb': use.get('MEMORY_MB', 0),
             'root_gb': INSTANCE_DISK_GB, 'created_at': now, 'deleted': 0,
             'cell_name': None}
            for h in cloud for inst_uuid, use in h.instances))
    with api_db.get_engine().begin() as conn:
        _insert(conn, api_models.HostMapping.__table__, (
            {'cell_id': cell.id, 'host': h.name, 'created_at': now}
            for h in cloud))

    with placement.engine().begin() as conn:
        rc_ids = dict(conn.execute(sa.text(
            'SELECT name, id FROM resource_classes')).fetchall())
        _insert(conn, pl_models.Project.__table__,
                [{'id': 1, 'external_id': PROJECT_ID, 'created_at': now}])
        _insert(conn, pl_models.User.__table__,
                [{'id': 1, 'external_id': USER_ID, 'created_at': now}])
        _insert(conn, pl_models.ConsumerType.__table__,
                [{'id': 1, 'name': 'INSTANCE', 'created_at': now}])
        _insert(conn, pl_models.ResourceProvider.__table__, (
            {'id': h.number + 1, 'uuid': h.uuid, 'name': h.name,
             'generation': 1, 'root_provider_id': h.number + 1,
             'parent_provider_id': None, 'created_at': now}
            for h in cloud))
        trait_ids = dict(conn.execute(sa.text(
            'SELECT name, id FROM traits')).fetchall())
        missing = [t for t in TRAITS if t not in trait_ids]
        if missing:
            raise BenchError('placement does not know the traits %s'
                             % ', '.join(missing))
        _insert(conn, pl_models.ResourceProviderTrait.__table__, (
            {'resource_provider_id': h.number + 1,
             'trait_id': trait_ids[t], 'created_at': now}
            for h in cloud for t in TRAITS))
        inventories = []
        for h in cloud:
            totals = dict((rc, total) for rc, (total, _u) in
                          h.resources.items())
            totals['DISK_GB'] = DISK_GB
            for rc, total in totals.items():
                if not total:
                    continue
                ratio = {'VCPU': CPU_ALLOCATION_RATIO,
                         'MEMORY_MB': RAM_ALLOCATION_RATIO}.get(rc, 1.0)
                inventories.append({
                    'resource_provider_id': h.number + 1,
                    'resource_class_id': rc_ids[rc], 'total': total,
                    'reserved': 0, 'min_unit': 1, 'max_unit': total,
                    'step_size': 1, 'allocation_ratio': ratio,
                    'created_at': now})
        _insert(conn, pl_models.Inventory.__table__, inventories)
        _insert(conn, pl_models.Consumer.__table__, (
            {'uuid': inst_uuid, 'project_id': 1, 'user_id': 1,
             'generation': 1, 'consumer_type_id': 1, 'created_at': now}
            for h in cloud for inst_uuid, _use in h.instances))
        _insert(conn, pl_models.Allocation.__table__, (
            {'resource_provider_id': h.number + 1, 'consumer_id': inst_uuid,
             'resource_class_id': rc_ids[rc], 'used': used,
             'created_at': now}
            for h in cloud for inst_uuid, use in h.instances
            for rc, used in use.items()))


def check_placement(rc, ctx, cloud):
    """Placement reports what was written (a few hosts, through its API)."""
    for host in cloud[:3]:
        usages = rc.get('/resource_providers/%s/usages' % host.uuid,
                        version='1.9').json()['usages']
        expected = {rc_name: sum(use.get(rc_name, 0)
                                 for _u, use in host.instances)
                    for rc_name in usages}
        if usages != expected:
            raise BenchError('placement reports usages %s for %s, %s were '
                             'written' % (usages, host.name, expected))


def heartbeat():
    """Every compute reports in (ComputeFilter checks the services)."""
    from nova.db.main import api as main_db
    from nova.db.main import models
    from oslo_utils import timeutils
    now = timeutils.utcnow()
    table = models.Service.__table__
    with main_db.get_engine().begin() as conn:
        conn.execute(table.update().where(
            table.c.binary == 'nova-compute').values(
                updated_at=now, last_seen_up=now,
                report_count=table.c.report_count + 1))


# ---------------------------------------------------------------------------
# Requests


class Request(object):
    def __init__(self, number, flavor, variant):
        self.number = number
        self.flavor = flavor
        self.variant = variant


def request_stream(objects, count):
    """``(flavors, requests)``: the trace's flavors and their variants."""
    data_dir = trace_mod.default_data_dir()
    if data_dir is None:
        shapes = [trace_mod.Flavor(4, 8192, 1), trace_mod.Flavor(8, 16384, 2),
                  trace_mod.Flavor(2, 4096, 1)]
        streams = [[trace_mod.Request(i, shapes[i % 3])
                    for i in range(count)]]
        source = 'built-in flavors (trace not found)'
    else:
        streams = [trace_mod.read_requests(os.path.join(
            data_dir, 'requests_C%d.csv' % n)) for n in (1, 2, 3)]
        source = data_dir
    flavors = {}
    requests = []
    for i in range(count):
        stream = streams[i % len(streams)]
        shape = stream[(i // len(streams)) % len(stream)].flavor
        variant = VARIANTS[i % len(VARIANTS)]
        key = (shape.vcpus, shape.memory_mb, shape.numa_nodes, variant)
        if key not in flavors:
            name = '%dc%dg-%dn-%s' % (shape.vcpus, shape.memory_mb // 1024,
                                      shape.numa_nodes, variant)
            extra = {'hw:numa_nodes': str(shape.numa_nodes)}
            extra.update(VARIANT_SPECS[variant])
            flavors[key] = objects.Flavor(
                name=name, flavorid=name, vcpus=shape.vcpus,
                memory_mb=shape.memory_mb, root_gb=INSTANCE_DISK_GB,
                ephemeral_gb=0, swap=0, rxtx_factor=1.0, vcpu_weight=0,
                disabled=False, is_public=True, extra_specs=extra)
        requests.append(Request(i, flavors[key], variant))
    return list(flavors.values()), requests, source


def request_spec(ctx, objects, hardware, flavor, instance_uuid):
    """The RequestSpec Nova's API builds for one boot of ``flavor``."""
    image = objects.ImageMeta.from_dict({
        'id': stable_uuid('image'), 'name': 'cirros', 'size': 0,
        'disk_format': 'qcow2', 'container_format': 'bare',
        'min_ram': 0, 'min_disk': 0, 'status': 'active', 'properties': {}})
    spec = objects.RequestSpec.from_components(
        ctx, instance_uuid, image, flavor,
        hardware.numa_get_constraints(flavor, image),
        objects.InstancePCIRequests(requests=[]), {}, None, None,
        project_id=PROJECT_ID, user_id=USER_ID)
    spec.is_bfv = False
    return spec


# ---------------------------------------------------------------------------
# Timing


class Clock(object):
    """Time spent in wrapped methods, for the request being measured.

    Also ``gc``: the time the process spent in Python's cyclic garbage
    collections while the request ran (in whichever phase they
    interrupted, so not part of ``own``): both schedulers run in this one
    process, and what one leaves for the collector would otherwise be
    collected in the other's time.
    """

    def __init__(self):
        self.current = None
        self.names = None
        self._gc_started = None
        gc.callbacks.append(self._gc_callback)

    def _gc_callback(self, phase, info):
        if phase == 'start':
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            self.add('gc', time.perf_counter() - self._gc_started)
            self._gc_started = None

    def close(self):
        """Stop timing the collections."""
        if self._gc_callback in gc.callbacks:
            gc.callbacks.remove(self._gc_callback)

    def start(self):
        self.current = collections.defaultdict(float)
        self.names = {'filters': collections.defaultdict(float),
                      'weighers': collections.defaultdict(float),
                      'counts': collections.defaultdict(int)}

    def counted(self, name, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if self.names is not None:
                self.names['counts'][name] += 1
            return fn(*args, **kwargs)
        return wrapper

    def stop(self):
        current, names = self.current, self.names
        self.current = self.names = None
        return current, names

    def add(self, phase, seconds):
        if self.current is not None:
            self.current[phase] += seconds

    def timed(self, phase, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(phase, time.perf_counter() - started)
        return wrapper

    def timed_filter(self, name, filter_all):
        def wrapper(objs, spec_obj):
            copies = self.current['candidate_copy'] if self.current else 0.0
            started = time.perf_counter()
            # Nova's handler makes a list of what each filter returns; so
            # does this, to time the filter's work, not its generator's.
            result = list(filter_all(objs, spec_obj))
            elapsed = time.perf_counter() - started
            if self.names is not None:
                self.names['filters'][name] += elapsed - (
                    self.current['candidate_copy'] - copies)
            return result
        return wrapper

    def timed_weigher(self, name, weigh_objects):
        def wrapper(weighed_obj_list, weight_properties):
            started = time.perf_counter()
            try:
                return weigh_objects(weighed_obj_list, weight_properties)
            finally:
                if self.names is not None:
                    self.names['weighers'][name] += (time.perf_counter() -
                                                     started)
        return wrapper


class _TimedCopy(object):
    """``copy`` as Nova's manager module uses it, its deep copies timed."""

    def __init__(self, clock):
        import copy
        self._copy = copy
        self._clock = clock

    def deepcopy(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return self._copy.deepcopy(*args, **kwargs)
        finally:
            self._clock.add('candidate_copy', time.perf_counter() - started)

    def __getattr__(self, name):
        return getattr(self._copy, name)


def instrument(manager, clock):
    hm = manager.host_manager
    manager._get_all_host_states = clock.timed(
        'refresh', manager._get_all_host_states)
    hm._get_computes_for_cells = clock.timed(
        'refresh_db', hm._get_computes_for_cells)
    hm.get_filtered_hosts = clock.timed('filters', hm.get_filtered_hosts)
    hm.get_weighed_hosts = clock.timed('weighers', hm.get_weighed_hosts)
    for filter_ in hm.enabled_filters:
        filter_.filter_all = clock.timed_filter(type(filter_).__name__,
                                                filter_.filter_all)
    for weigher in hm.weighers:
        weigher.weigh_objects = clock.timed_weigher(type(weigher).__name__,
                                                    weigher.weigh_objects)


# ---------------------------------------------------------------------------
# The schedulers


def nova_filters(defaults):
    """Nova's default filters, then the PCI and NUMA ones if missing."""
    names = list(defaults)
    for name in ('PciPassthroughFilter', 'NUMATopologyFilter'):
        if name not in names:
            names.append(name)
    return names


def package_filters(defaults, numa_filter='fast'):
    """Nova's list with the package's NUMA filter.

    ``fast``: FastNUMATopologyFilter in place of NUMATopologyFilter;
    ``prefilter``: NUMAFitFilter right before it.
    """
    names = nova_filters(defaults)
    at = names.index('NUMATopologyFilter')
    if numa_filter == 'fast':
        names[at] = 'FastNUMATopologyFilter'
    else:
        names.insert(at, 'NUMAFitFilter')
    return names


def make_manager(conf, side, package_weighers='package',
                 package_host_state='kept', package_numa_filter='fast',
                 package_candidates='placement'):
    from nova.scheduler import host_manager
    from nova.scheduler import manager as nova_manager
    from unittest import mock

    from nova_sched_ext import manager as ext_manager
    # No override is set here: this is Nova's default list.
    defaults = conf.filter_scheduler.enabled_filters
    if side == NOVA:
        cls = nova_manager.SchedulerManager
        filters = nova_filters(defaults)
        available = ['nova.scheduler.filters.all_filters']
        weighers = ['nova.scheduler.weights.all_weighers']
    else:
        cls = ext_manager.SchedulerManager
        filters = package_filters(defaults, package_numa_filter)
        available = ['nova.scheduler.filters.all_filters',
                     'nova_sched_ext.filters.all_filters']
        weighers = ['nova.scheduler.weights.all_weighers']
        if package_weighers == 'package':
            weighers.append('nova_sched_ext.weighers.all_weighers')
    overrides = {'enabled_filters': filters,
                 'available_filters': available, 'weight_classes': weighers}
    for name, value in overrides.items():
        conf.set_override(name, value, group='filter_scheduler')
    # Read when the package's manager is built (stock Nova ignores it).
    conf.set_override('keep_host_state', package_host_state == 'kept',
                      group='nova_sched_ext')
    conf.set_override('kept_candidates', package_candidates == 'kept',
                      group='nova_sched_ext')
    try:
        # The async load of every instance of the cloud is replaced by
        # what the computes tell the scheduler (seed_instance_info), so
        # that it does not run during the measurements.
        with mock.patch.object(host_manager.HostManager,
                               '_init_instance_info'):
            manager = cls()
    finally:
        for name in overrides:
            conf.clear_override(name, group='filter_scheduler')
        conf.clear_override('keep_host_state', group='nova_sched_ext')
        conf.clear_override('kept_candidates', group='nova_sched_ext')
    manager.bench_filters = [type(f).__name__
                             for f in manager.host_manager.enabled_filters]
    manager.bench_weighers = [type(w).__name__
                              for w in manager.host_manager.weighers]
    return manager


def seed_instance_info(ctx, objects, manager, cloud):
    """What each nova-compute sends the scheduler about its instances."""
    hm = manager.host_manager
    for host in cloud:
        instances = objects.InstanceList(objects=[
            objects.Instance(uuid=u, host=host.name, node=host.name)
            for u, _use in host.instances])
        hm.update_instance_info(ctx, host.name, instances)
        # The periodic sync that confirms the list.
        hm.sync_instance_info(ctx, host.name,
                              [u for u, _use in host.instances])


@dataclasses.dataclass
class Outcome:
    """One scheduler's answer to one request, and what it cost."""

    side: str
    request: Request
    instance_uuid: str
    spec: object
    #: seconds per phase (:data:`PHASES`, before :func:`_net_phases`)
    phases: dict
    #: seconds per filter and weigher, and counts
    names: dict
    #: the selected host's ``Selection``, None for NoValidHost
    selection: object
    error: object

    @property
    def host(self):
        return self.selection.service_host if self.selection else None

    @property
    def node_uuid(self):
        return self.selection.compute_node_uuid if self.selection else None


def schedule(ctx, objects, hardware, manager, clock, side, request, rc):
    from nova import exception
    import oslo_messaging as messaging
    instance_uuid = stable_uuid('boot', request.number, side)
    spec = request_spec(ctx, objects, hardware, request.flavor,
                        instance_uuid)
    heartbeat()
    # The garbage the last request left (either scheduler's) is collected
    # now, untimed: at 1,000 hosts stock Nova leaves about 190,000 objects
    # in reference cycles per request (its NUMA topology objects, built
    # again for every candidate), the package about 1,500, and a full
    # collection then took 0.3 to 1.5 s of whichever request ran next.
    gc.collect()
    clock.start()
    started = time.perf_counter()
    selection = error = None
    try:
        selections = manager.select_destinations(
            ctx, spec_obj=spec, instance_uuids=[instance_uuid],
            return_objects=True, return_alternates=True)
        selection = selections[0][0]
    except (exception.NoValidHost, messaging.ExpectedException) as exc:
        error = getattr(exc, 'exc_info', None)
        error = type(error[1]).__name__ if error else type(exc).__name__
    total = time.perf_counter() - started
    phases, names = clock.stop()
    phases['total'] = total
    if selection is not None:
        # Before the other scheduler runs: the same cloud for both.
        rc.delete_allocation_for_instance(ctx, instance_uuid, force=True)
    return Outcome(side, request, instance_uuid, spec, phases, names,
                   selection, error)


def commit(ctx, objects, hardware, rc, managers, cloud_by_uuid, outcome):
    """The chosen host takes the instance, as its compute would record it."""
    from nova.db.main import api as main_db
    from nova.db.main import models
    from nova.scheduler import utils as scheduler_utils
    from oslo_serialization import jsonutils
    from oslo_utils import timeutils

    selection = outcome.selection
    alloc_req = jsonutils.loads(selection.allocation_request)
    if not scheduler_utils.claim_resources(
            ctx, rc, outcome.spec, outcome.instance_uuid, alloc_req,
            allocation_request_version=selection.allocation_request_version):
        raise BenchError('placement refused the claim of %s on %s again'
                         % (outcome.instance_uuid, outcome.host))
    host = cloud_by_uuid[selection.compute_node_uuid]
    flavor = outcome.request.flavor
    image = objects.ImageMeta(properties=objects.ImageMetaProps())
    wanted = hardware.numa_get_constraints(flavor, image)
    if wanted is not None:
        limits = objects.NUMATopologyLimits(
            cpu_allocation_ratio=CPU_ALLOCATION_RATIO,
            ram_allocation_ratio=RAM_ALLOCATION_RATIO)
        fitted = hardware.numa_fit_instance_to_host(
            host.topology, wanted, None, limits=limits)
        if fitted is None:
            raise BenchError('%s chose %s for %s, which does not fit it'
                             % (outcome.side, host.name, flavor.name))
        host.topology = hardware.numa_usage_from_instance_numa(
            host.topology, fitted)
    use = {rc_name: amount
           for rp in alloc_req['allocations'].values()
           for rc_name, amount in rp['resources'].items()}
    host.instances.append((outcome.instance_uuid, use))
    host.vcpus_used += flavor.vcpus
    host.memory_used += flavor.memory_mb
    host.disk_used += flavor.root_gb
    now = timeutils.utcnow()
    row = _compute_node_row(objects, host, now)
    table = models.ComputeNode.__table__
    with main_db.get_engine().begin() as conn:
        conn.execute(table.update().where(table.c.uuid == host.uuid).values(
            {k: row[k] for k in (
                'vcpus_used', 'memory_mb_used', 'local_gb_used',
                'free_ram_mb', 'free_disk_gb', 'disk_available_least',
                'running_vms', 'stats', 'numa_topology', 'updated_at')}))
        conn.execute(models.Instance.__table__.insert(), [{
            'uuid': outcome.instance_uuid, 'host': host.name,
            'node': host.name, 'vm_state': 'active', 'power_state': 1,
            'project_id': PROJECT_ID, 'user_id': USER_ID,
            'vcpus': flavor.vcpus, 'memory_mb': flavor.memory_mb,
            'root_gb': flavor.root_gb, 'created_at': now, 'deleted': 0}])
    instance = objects.Instance(uuid=outcome.instance_uuid, host=host.name,
                                node=host.name)
    for manager in managers:
        manager.host_manager.update_instance_info(
            ctx, host.name, objects.InstanceList(objects=[instance]))


def polled_warm(kept, manager):
    """Poll until the host state is warm; the seconds it took.

    What the service's poller does after its first read, before the
    requests of a running scheduler: it reads and builds
    ``[nova_sched_ext] host_state_warm_up_nodes`` compute nodes a poll
    until none is left.
    """
    started = time.perf_counter()
    kept.poll()
    while getattr(manager.host_manager, 'warm_up_pending', 0):
        kept.poll()
    return time.perf_counter() - started


def caught_up(kept, side):
    """Before the package's request: the poll its thread would have made.

    The service polls every ``kept_state_poll_interval`` whatever else
    runs; here stock Nova's request before it (seconds at 10,000 hosts)
    would otherwise leave the state older than ``kept_state_max_age``.
    Not timed, not counted among the polls between requests.
    """
    if kept is not None and side == PACKAGE:
        kept.poll()


def check_kept_answer(ctx, manager, spec, rc, hosts):
    """Placement's own answer against the kept state's, '' if equal.

    The request's first query (as Nova builds it), with a limit of every
    host, asked of both, on the state the poll just read: the same
    providers and the same allocation requests, the same summaries.
    """
    from nova.scheduler import utils as scheduler_utils

    resources = scheduler_utils.resources_from_request_spec(
        ctx, spec, manager.host_manager, enable_pinning_translate=True)
    resources._limit = hosts
    kept = manager.candidate_limit.kept
    ours = kept.answer(resources)
    if ours is None:
        return ''     # outside the subset: placement answers it anyway
    resp = rc.get('/allocation_candidates?' + resources.to_querystring(),
                  version=ours[2], global_request_id=ctx.global_id)
    theirs = resp.json()

    def requests(alloc_reqs):
        return sorted(json.dumps(ar['allocations'], sort_keys=True)
                      for ar in alloc_reqs)

    if requests(ours[0]) != requests(theirs['allocation_requests']):
        return ('%s: %d allocation requests kept, %d from placement'
                % (resources.to_querystring(), len(ours[0]),
                   len(theirs['allocation_requests'])))

    def summaries(by_uuid):
        # traits are a set: placement lists them in no order
        return {uuid: dict(summary, traits=sorted(summary.get('traits', ())))
                for uuid, summary in by_uuid.items()}

    ours_s, theirs_s = (summaries(ours[1]),
                        summaries(theirs['provider_summaries']))
    if ours_s != theirs_s:
        uuid = next(u for u in sorted(set(ours_s) | set(theirs_s))
                    if ours_s.get(u) != theirs_s.get(u))
        return ('%s: the summaries of %s differ: kept %s, placement %s'
                % (resources.to_querystring(), uuid,
                   json.dumps(ours_s.get(uuid), sort_keys=True),
                   json.dumps(theirs_s.get(uuid), sort_keys=True)))
    return ''


# ---------------------------------------------------------------------------
# One size


def _net_phases(phases):
    """Fill in the derived phases of one request."""
    phases = dict(phases)
    for phase in PHASES:
        phases.setdefault(phase, 0.0)
    phases['filters'] -= phases['candidate_copy']
    phases['refresh_objects'] = phases['refresh'] - phases['refresh_db']
    phases['refresh'] += phases['candidate_copy']
    phases['own'] = (phases['kept'] + phases['refresh'] +
                     phases['filters'] + phases['weighers'] +
                     phases['claims'])
    phases['other'] = phases['total'] - phases['own'] - phases['placement']
    return phases


def _side_figures(outcomes):
    phases = [_net_phases(o.phases) for o in outcomes]
    figures = {
        'placed': sum(1 for o in outcomes if o.selection is not None),
        'refused': sum(1 for o in outcomes if o.selection is None),
        'phases_ms': {phase: summary([p[phase] * 1e3 for p in phases])
                      for phase in PHASES},
    }
    for count in ('fit_models_built', 'placement_queries', 'kept_answers'):
        figures[count] = summary([o.names['counts'][count]
                                  for o in outcomes])
    for kind in ('filters', 'weighers'):
        names = sorted({n for o in outcomes for n in o.names[kind]})
        figures['%s_by_name_ms' % kind] = {
            name: summary([o.names[kind].get(name, 0.0) * 1e3
                           for o in outcomes])
            for name in names}
    return figures


def run_size(args, hosts, limit=None, burst=None):
    """Build the cloud of ``hosts`` hosts, replay, return the figures.

    :param burst: what runs ``--schedulers`` after the replay
        (:func:`nova_sched_ext_tools.bench.burst.several_schedulers`,
        which the command line passes: the burst's processes use this
        module, so this module does not import it)

    Whatever happens, the placement server stops and the databases are
    dropped.
    """
    wall_started = time.perf_counter()
    prefix = args.db_prefix or 'nse_scale_%d' % os.getpid()
    databases = Databases(args.db, args.db_url, prefix)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(databases.drop)
        databases.create()
        return _run_size(args, hosts, databases, wall_started, cleanup,
                         limit, burst)


def _run_size(args, hosts, databases, wall_started, cleanup, limit=None,
              burst=None):
    from nova_sched_ext.compat import release
    if not release.native_threads():
        raise BenchError('the scale bench runs on native threads and this '
                         'process is patched by eventlet already; run it '
                         'as its own command')
    from nova import context as nova_context
    from nova.scheduler.client import report
    from nova.scheduler import manager as nova_manager
    from nova.scheduler import utils as scheduler_utils
    from nova.virt import hardware
    from unittest import mock

    from nova_sched_ext.fit import adapters as fit_adapters
    from nova_sched_ext.fit import engine as fit_engine
    from nova_sched_ext_tools import loader

    quiet_logs()

    setup_started = time.perf_counter()
    progress('%d hosts: databases on %s; Nova\'s and placement\'s schemas'
             % (hosts, databases.describe()))
    conf = configure_nova(databases.urls)
    if limit is not None:
        conf.set_override('max_placement_results', limit, group='scheduler')
    objects = loader.load_nova()
    cleanup.callback(_dispose_engines)
    placement = Placement(databases.urls['placement'],
                          one_at_a_time=databases.kind == 'sqlite',
                          conflict_retries=args.placement_conflict_retries)
    cleanup.callback(placement.stop)
    point_nova_at(conf, placement.endpoint)
    ctx = nova_context.get_admin_context()
    rng = random.Random(args.seed)
    progress('building the hosts\' NUMA topologies')
    cloud, host_source = build_cloud(hosts, rng)
    flavors, requests, request_source = request_stream(objects,
                                                       args.requests)
    progress('writing services, compute nodes, instances, providers, '
             'inventories and allocations')
    populate(ctx, objects, cloud, placement, flavors)
    rc = report.report_client_singleton()
    check_placement(rc, ctx, cloud)
    progress('starting the two scheduler managers')
    managers = {side: make_manager(conf, side, args.package_weighers,
                                   args.package_host_state,
                                   args.package_numa_filter,
                                   args.package_candidates)
                for side in SIDES}
    for manager in managers.values():
        seed_instance_info(ctx, objects, manager, cloud)
    clock = Clock()
    cleanup.callback(clock.close)
    for manager in managers.values():
        instrument(manager, clock)
    capacity_run = None
    if args.capacity_flavors:
        from nova_sched_ext_tools.bench import capacity_kept
        progress('the capacity service\'s kept state: %d flavors, its '
                 'first read and count' % args.capacity_flavors)
        try:
            capacity_run = capacity_kept.CapacityRun(
                ctx, objects, args.capacity_flavors, heartbeat)
        except ValueError as exc:
            raise BenchError(str(exc))
        capacity_run.first_read()
        progress('the kept capacity against a full count')
        capacity_run.check('start')
    kept = managers[PACKAGE].candidate_limit.kept
    kept_load_s = warm_up_s = None
    polls_ms = []
    kept_checks = []
    if kept is not None:
        progress('the package\'s kept provider state: its first read of '
                 'placement')
        started = time.perf_counter()
        kept.poll()
        kept_load_s = time.perf_counter() - started
        # The service's thread polls again right after; so does the
        # bench, or a first read longer than kept_state_max_age would
        # send the first requests to placement.  Its polls also warm the
        # host state ([nova_sched_ext] host_state_warm_up_nodes a poll)
        # before the service's first requests, in its own thread: the
        # bench polls until that is done, untimed.
        warm_up_s = polled_warm(kept, managers[PACKAGE])
        kept.answer = clock.counted('kept_answers',
                                    clock.timed('kept', kept.answer))
    rc.get_allocation_candidates = clock.counted(
        'placement_queries', clock.timed(
            'placement', rc.get_allocation_candidates))
    cloud_by_uuid = {h.uuid: h for h in cloud}
    setup_s = time.perf_counter() - setup_started
    patches = (mock.patch.object(nova_manager, 'copy', _TimedCopy(clock)),
               # How many hosts' packed models the fit engine (re)built.
               mock.patch.object(fit_adapters, '_refresh', clock.counted(
                   'fit_models_built', fit_adapters._refresh)),
               mock.patch.object(scheduler_utils, 'claim_resources',
                                 clock.timed('claims',
                                             scheduler_utils.claim_resources)))
    for patch in patches:
        patch.start()
        cleanup.callback(patch.stop)
    if args.warmup:
        # A running scheduler has answered requests before: what the first
        # one pays once (caches, lazy loads, the first connections) is not
        # a request's cost.  The warm-up claims are deleted; nothing is
        # committed.
        progress('%d warm-up request(s) per scheduler, not counted'
                 % args.warmup)
        for number in range(args.warmup):
            warm = Request(-1 - number, requests[number % len(requests)]
                           .flavor, 'warm-up')
            for side in SIDES:
                caught_up(kept, side)
                schedule(ctx, objects, hardware, managers[side], clock,
                         side, warm, rc)

    outcomes = {side: [] for side in SIDES}
    rows = []
    progress('replaying %d requests' % len(requests))
    replay_started = time.perf_counter()
    for request in requests:
        order = SIDES if request.number % 2 == 0 else SIDES[::-1]
        done = {}
        for side in order:
            caught_up(kept, side)
            done[side] = schedule(ctx, objects, hardware, managers[side],
                                  clock, side, request, rc)
        for side in SIDES:
            outcomes[side].append(done[side])
        progress('request %d (%s): nova %s %.0f ms, package %s %.0f ms'
                 % (request.number, request.flavor.name,
                    done[NOVA].host, done[NOVA].phases['total'] * 1e3,
                    done[PACKAGE].host,
                    done[PACKAGE].phases['total'] * 1e3))
        chosen = done[NOVA] if done[NOVA].selection else done[PACKAGE]
        if chosen.selection is not None:
            with clock_paused(clock):
                commit(ctx, objects, hardware, rc,
                       list(managers.values()), cloud_by_uuid, chosen)
        if kept is not None:
            # What the service's poller does between requests, not timed
            # with them: the package's deleted claim is released as Nova's
            # clean-up releases one, the commit's claim read again.
            kept.released(done[PACKAGE].instance_uuid)
            started = time.perf_counter()
            kept.poll()
            polls_ms.append((time.perf_counter() - started) * 1e3)
            kept_checks.append(check_kept_answer(
                ctx, managers[PACKAGE], done[PACKAGE].spec, rc, hosts))
            # The check's query of every candidate takes seconds at
            # 10,000 hosts on a loaded machine: poll again after it, as
            # the service's thread would have meanwhile, so that the
            # next request does not find the state older than
            # kept_state_max_age.
            kept.poll()
        if capacity_run is not None:
            with clock_paused(clock):
                capacity_run.after_request()
        rows.append({
            'request': request.number, 'flavor': request.flavor.name,
            'variant': request.variant,
            'nova_host': done[NOVA].host,
            'package_host': done[PACKAGE].host,
            'nova_ms': done[NOVA].phases['total'] * 1e3,
            'package_ms': done[PACKAGE].phases['total'] * 1e3,
        })
    replay_s = time.perf_counter() - replay_started
    if capacity_run is not None:
        progress('the kept capacity against a full count, again')
        capacity_run.check('end')
    several = None
    if args.schedulers:
        if burst is None:
            raise BenchError('--schedulers needs the burst of '
                             'nova_sched_ext_tools.bench.burst: run the '
                             'bench as nova-sched-ext-bench scale')
        for patch in patches:
            patch.stop()
        progress('%d scheduler processes at once for %d s: starting them'
                 % (args.schedulers, args.burst_seconds))
        _flavors, following, _source = request_stream(
            objects, args.requests + BURST_STREAM)
        several = burst(
            ctx, args, databases.urls, placement.endpoint,
            [r.flavor for r in following[args.requests:]], cloud, rc,
            limit, kept_providers=(
                kept._state.providers() if kept is not None and
                args.burst_from_snapshot else None))

    both = [r for r in rows if r['nova_host'] and r['package_host']]
    sides = {side: _side_figures(outcomes[side]) for side in SIDES}
    for side in SIDES:
        sides[side]['scheduler'] = SIDE_TITLES[side]
        sides[side]['filters'] = managers[side].bench_filters
        sides[side]['weighers'] = managers[side].bench_weighers
    own = {side: sides[side]['phases_ms']['own']['p50'] for side in SIDES}
    return {
        'hosts': hosts, 'requests': len(requests),
        'database': databases.describe(), 'database_note': databases.note,
        'placement': 'openstack-placement WSGI app in-process, over HTTP '
                     '(127.0.0.1)',
        'host_source': host_source, 'request_source': request_source,
        'four_cell_hosts': sum(1 for h in cloud if len(h.cells) == 4),
        'cloud_used_pct': _used_pct(cloud),
        'backend': fit_engine.backend_name(),
        'max_placement_results': conf.scheduler.max_placement_results,
        'placement_conflict_retries': args.placement_conflict_retries,
        'package_weighers': args.package_weighers,
        'package_host_state': args.package_host_state,
        'package_numa_filter': args.package_numa_filter,
        'package_candidates': args.package_candidates,
        'kept_state': None if kept is None else {
            'first_read_s': kept_load_s,
            'host_state_warm_up_s': warm_up_s,
            'poll_ms': summary(polls_ms),
            'answers': dict(kept.counts),
            'checked_against_placement': len(kept_checks),
            'differences': [d for d in kept_checks if d],
            'note': 'polled between requests, not timed with them; the '
                    'service polls in a thread of its own every '
                    '[nova_sched_ext] kept_state_poll_interval seconds'},
        'warmup': args.warmup, 'seed': args.seed,
        'state': 'each request on the same state for both schedulers (the '
                 'first one\'s claim deleted before the second runs, the '
                 'first one alternating); then Nova\'s choice (else the '
                 'package\'s) committed',
        'sides': sides,
        'both_placed': len(both),
        'same_host': sum(1 for r in both
                         if r['nova_host'] == r['package_host']),
        'only_nova_placed': sum(1 for r in rows
                                if r['nova_host'] and not r['package_host']),
        'only_package_placed': sum(
            1 for r in rows if r['package_host'] and not r['nova_host']),
        'own_p50_ratio': own[NOVA] / own[PACKAGE] if own[PACKAGE] else None,
        'several_schedulers': several,
        'kept_capacity': (None if capacity_run is None
                          else capacity_run.figures(summary)),
        'setup_s': setup_s, 'replay_s': replay_s,
        'wall_s': time.perf_counter() - wall_started,
        'per_request': rows,
    }


def _dispose_engines():
    """Close the pooled connections, so the databases can be dropped."""
    from nova.db.api import api as api_db
    from nova.db.main import api as main_db
    from placement import db_api
    for get_engine in (main_db.get_engine, api_db.get_engine,
                       db_api.placement_context_manager.writer.get_engine):
        with contextlib.suppress(Exception):
            get_engine().dispose()


@contextlib.contextmanager
def clock_paused(clock):
    saved = clock.current, clock.names
    clock.current = clock.names = None
    try:
        yield
    finally:
        clock.current, clock.names = saved


def _used_pct(cloud):
    """Share of each resource class in use at the start, over the cloud."""
    result = {}
    for rc_name in ('VCPU', 'PCPU', 'MEMORY_MB'):
        total = sum(h.resources[rc_name][0] for h in cloud)
        used = sum(h.resources[rc_name][1] for h in cloud)
        if rc_name == 'VCPU':
            total *= CPU_ALLOCATION_RATIO
        result[rc_name] = 100.0 * used / total if total else 0.0
    return result


# ---------------------------------------------------------------------------
# Command line


def add_arguments(parser):
    parser.add_argument('--hosts', default='1000,10000',
                        help='comma-separated numbers of hosts (default '
                             '1000,10000); each in a process of its own')
    parser.add_argument('--requests', type=int, default=DEFAULT_REQUESTS,
                        help='boots replayed at each size (default %d)'
                             % DEFAULT_REQUESTS)
    parser.add_argument('--db', choices=['auto', 'mysql', 'sqlite'],
                        default='auto',
                        help='auto (default): MariaDB/MySQL at --db-url, '
                             'sqlite files if it cannot be used')
    parser.add_argument('--db-url', default=DEFAULT_DB_URL,
                        help='the server, without a database (default %s)'
                             % DEFAULT_DB_URL)
    parser.add_argument('--warmup', type=int, default=1,
                        help='requests each scheduler answers first, not '
                             'counted (default 1)')
    parser.add_argument('--package-weighers', choices=['package', 'nova'],
                        default='package',
                        help='the package\'s scheduler weighs with Nova\'s '
                             'weighers and NUMASlotWeigher (package, the '
                             'default, as the devstack plugin sets it up) '
                             'or with Nova\'s only (nova: then both should '
                             'choose the same hosts)')
    parser.add_argument('--package-host-state', choices=['kept', 'reload'],
                        default='kept',
                        help='the package\'s scheduler keeps the host state '
                             'between requests (kept, the default: '
                             '[nova_sched_ext] keep_host_state = True) or '
                             'reloads it '
                             'on every request as Nova does (reload: '
                             '[nova_sched_ext] keep_host_state = False)')
    parser.add_argument('--package-numa-filter',
                        choices=['fast', 'prefilter'], default='fast',
                        help='the package\'s NUMA filter: '
                             'FastNUMATopologyFilter in place of Nova\'s '
                             'NUMATopologyFilter (fast, the default), or '
                             'NUMAFitFilter before it (prefilter)')
    parser.add_argument('--package-candidates',
                        choices=['placement', 'kept'], default='placement',
                        help='where the package\'s scheduler gets its '
                             'allocation candidates: placement\'s query '
                             '(placement, the default, as [nova_sched_ext] '
                             'kept_candidates = False) or the provider '
                             'state it keeps (kept: kept_candidates = '
                             'True; the state is polled between requests, '
                             'untimed)')
    parser.add_argument('--schedulers', type=int, default=0,
                        help='after the replay, this many package '
                             'scheduler processes (kept candidates, each '
                             'with its own state and poller) receive boots '
                             'at once for --burst-seconds: throughput, '
                             'claim conflicts, over-commits (default 0: '
                             'none)')
    parser.add_argument('--burst-seconds', type=int, default=60,
                        help='length of the --schedulers burst (default 60)')
    parser.add_argument('--burst-window', type=int, default=60,
                        help='the burst\'s requests a second are also given '
                             'per window of this many seconds (default 60; '
                             'at most --burst-seconds): the lowest shows '
                             'whether the rate was sustained')
    parser.add_argument('--burst-host-subset-size', type=int, default=1,
                        help='[filter_scheduler] host_subset_size of the '
                             '--schedulers processes (default 1, Nova\'s: '
                             'each takes the best host; above 1 each picks '
                             'at random among that many best, which Nova '
                             'advises when several schedulers run)')
    parser.add_argument('--burst-poll-interval', type=float, default=None,
                        help='[nova_sched_ext] kept_state_poll_interval of '
                             'the --schedulers processes (default: the '
                             'option\'s default)')
    parser.add_argument('--burst-resync-max-rate', type=float,
                        default=None,
                        help='[nova_sched_ext] kept_state_resync_max_rate of '
                             'the --schedulers processes: at most this many '
                             'usage reads a second each (default: the '
                             'option\'s default; 0: no cap)')
    parser.add_argument('--burst-claim-casts', default=None,
                        metavar='TRANSPORT_URL',
                        help='the --schedulers processes cast their claims '
                             'to each other ([nova_sched_ext] '
                             'kept_state_claim_casts) over this '
                             'oslo.messaging transport, e.g. '
                             'rabbit://guest:guest@127.0.0.1:5672/ '
                             '(default: no casts)')
    parser.add_argument('--burst-from-snapshot', action='store_true',
                        help='the --schedulers processes start from a '
                             'snapshot file of the replay\'s kept provider '
                             'state ([nova_sched_ext] '
                             'kept_state_snapshot_file, no verification: '
                             'nothing was freed since it was saved) '
                             'instead of reading every provider; with '
                             '--package-candidates kept')
    parser.add_argument('--max-placement-results', default=None,
                        help='comma-separated values of [scheduler] '
                             'max_placement_results for both schedulers '
                             '(default: Nova\'s, 1000); each size runs at '
                             'each value, in a process of its own')
    parser.add_argument('--placement-conflict-retries', type=int,
                        default=1,
                        help='placement\'s [placement] '
                             'allocation_conflict_retry_count (default 1, '
                             'as the devstack plugin sets it: placement\'s '
                             'own default, 10, lets claims that race on '
                             'one provider exceed its capacity; see the '
                             'kept candidates\' documentation)')
    parser.add_argument('--seed', type=int, default=3,
                        help='seed of the random cloud and requests '
                             '(default 3)')
    parser.add_argument('--capacity-flavors', type=int, default=0,
                        help='also keep the capacity service\'s state '
                             '([nova_sched_ext_capacity] kept_state) for '
                             'this many flavors of the capacity bench (at '
                             'most 20): its answer after each request, and '
                             'at the start and the end a full count that '
                             'must equal it (default 0: not run)')
    # The parent's name prefix for a child's databases, so that the parent
    # can drop what a child that died left.
    parser.add_argument('--db-prefix', default=None, help=argparse.SUPPRESS)


def parse_sizes(text, option='--hosts'):
    try:
        sizes = [int(part) for part in text.split(',') if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        raise BenchError('%s must be positive whole numbers separated '
                         'by commas, not %r' % (option, text))
    return sizes


def run(args, burst=None):
    """Entry point of ``nova-sched-ext-bench scale``; an exit code."""
    try:
        sizes = parse_sizes(args.hosts)
        limits = [None]
        if args.max_placement_results is not None:
            limits = parse_sizes(args.max_placement_results,
                                 '--max-placement-results')
        if args.requests < 1:
            raise BenchError('--requests must be at least 1')
        if (args.schedulers < 0 or args.burst_seconds < 1 or
                args.burst_window < 1):
            raise BenchError('--schedulers must be 0 or more, '
                             '--burst-seconds and --burst-window at '
                             'least 1')
        if args.burst_host_subset_size < 1:
            raise BenchError('--burst-host-subset-size must be at least 1')
        if args.placement_conflict_retries < 1:
            raise BenchError('--placement-conflict-retries must be at '
                             'least 1')
        if (args.burst_poll_interval is not None and
                args.burst_poll_interval < 0.05):
            raise BenchError('--burst-poll-interval must be at least 0.05 '
                             '(kept_state_poll_interval\'s minimum)')
        if (args.burst_resync_max_rate is not None and
                not (0 <= args.burst_resync_max_rate < float('inf'))):
            raise BenchError('--burst-resync-max-rate must be a finite '
                             'number, 0 or more')
        if args.burst_from_snapshot and (
                args.package_candidates != 'kept' or not args.schedulers):
            raise BenchError('--burst-from-snapshot needs --schedulers and '
                             '--package-candidates kept (the replay\'s kept '
                             'state is what it saves)')
        started = time.perf_counter()
        if len(sizes) == 1 and len(limits) == 1:
            runs = [_in_this_process(args, sizes[0], limits[0], burst)]
        else:
            runs = [_in_a_child(args, size, limit)
                    for size in sizes for limit in limits]
    except BenchError as exc:
        raise SystemExit('nova-sched-ext-bench scale: %s' % exc)
    result = {'runs': runs, 'wall_s': time.perf_counter() - started}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for figures in runs:
            print(render(figures))
        print('wall time of the whole run: %.0f s' % result['wall_s'])
    bursts = [r['several_schedulers'] for r in runs
              if r.get('several_schedulers')]
    if any(b['over_commits'] or b['error_count'] for b in bursts):
        return 1
    if any((r.get('kept_state') or {}).get('differences') for r in runs):
        return 1
    if any((r.get('kept_capacity') or {}).get('differences') for r in runs):
        return 1
    return 0 if all(r['sides'][s]['placed'] for r in runs
                    for s in SIDES) else 1


def _in_this_process(args, size, limit=None, burst=None):
    # SIGTERM ends the run through the finally clauses: the databases go.
    def stop(signum, frame):
        raise SystemExit('nova-sched-ext-bench scale: stopped (signal %d)'
                         % signum)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        return run_size(args, size, limit, burst)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _in_a_child(args, size, limit=None):
    prefix = 'nse_scale_%d_%d_%d' % (os.getpid(), size, limit or 0)
    argv = [sys.executable, '-m', 'nova_sched_ext_tools.bench.cli',
            'scale', '--json', '--hosts', str(size),
            '--requests', str(args.requests), '--db', args.db,
            '--db-url', args.db_url, '--seed', str(args.seed),
            '--warmup', str(args.warmup),
            '--package-weighers', args.package_weighers,
            '--package-host-state', args.package_host_state,
            '--package-numa-filter', args.package_numa_filter,
            '--package-candidates', args.package_candidates,
            '--schedulers', str(args.schedulers),
            '--burst-seconds', str(args.burst_seconds),
            '--burst-window', str(args.burst_window),
            '--burst-host-subset-size', str(args.burst_host_subset_size),
            '--placement-conflict-retries',
            str(args.placement_conflict_retries),
            '--capacity-flavors', str(args.capacity_flavors),
            '--db-prefix', prefix]
    if args.backend:
        argv += ['--backend', args.backend]
    if args.burst_poll_interval is not None:
        argv += ['--burst-poll-interval', str(args.burst_poll_interval)]
    if args.burst_resync_max_rate is not None:
        argv += ['--burst-resync-max-rate', str(args.burst_resync_max_rate)]
    if args.burst_claim_casts:
        argv += ['--burst-claim-casts', args.burst_claim_casts]
    if args.burst_from_snapshot:
        argv += ['--burst-from-snapshot']
    if limit is not None:
        argv += ['--max-placement-results', str(limit)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        out, _err = child.communicate()
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait()
        if args.db != 'sqlite':
            with contextlib.suppress(Exception):
                drop_databases(args.db_url, prefix=prefix)
    if child.returncode not in (0, 1):
        raise BenchError('the run at %d hosts failed (exit status %d)'
                         % (size, child.returncode))
    return json.loads(out)['runs'][0]


def render(figures):
    lines = []
    lines.append(
        'select_destinations at %d hosts, %d requests; %s; placement: %s; '
        'max_placement_results %d; fit backend %s; package host state %s; '
        'package NUMA filter %s; package candidates from %s'
        % (figures['hosts'], figures['requests'], figures['database'],
           figures['placement'], figures['max_placement_results'],
           figures['backend'], figures.get('package_host_state', 'kept'),
           figures.get('package_numa_filter', 'prefilter'),
           figures.get('package_candidates', 'placement')))
    if figures['database_note']:
        lines.append('NOTE: %s' % figures['database_note'])
    used = figures['cloud_used_pct']
    lines.append('cloud: %d four-cell hosts; in use at the start: VCPU '
                 '%.0f%%, PCPU %.0f%%, MEMORY_MB %.0f%%; setup %.0f s '
                 '(not timed), replay %.0f s, wall %.0f s' % (
                     figures['four_cell_hosts'], used['VCPU'], used['PCPU'],
                     used['MEMORY_MB'], figures['setup_s'],
                     figures['replay_s'], figures['wall_s']))
    header = '%-17s' % 'phase (ms)'
    for side in SIDES:
        header += ' | %-26s' % (side + ': p50 / p95 / p99')
    lines.append(header)
    for phase in PHASES:
        line = '%-17s' % phase
        for side in SIDES:
            s = figures['sides'][side]['phases_ms'][phase]
            line += ' | %8.1f %8.1f %8.1f' % (s['p50'], s['p95'], s['p99'])
        lines.append(line)
    for kind in ('filters', 'weighers'):
        for side in SIDES:
            named = figures['sides'][side]['%s_by_name_ms' % kind]
            lines.append('  %s %s p50: %s' % (side, kind, ', '.join(
                '%s %.1f' % (name, s['p50'])
                for name, s in sorted(named.items(),
                                      key=lambda kv: -kv[1]['p50']))))
    for side in SIDES:
        s = figures['sides'][side]
        lines.append('%s (%s): placed %d, NoValidHost %d' % (
            side, s['scheduler'], s['placed'], s['refused']))
    built = figures['sides'][PACKAGE]['fit_models_built']
    lines.append('fit engine host models built per request (package, p50 / '
                 'p99): %d / %d' % (built['p50'], built['p99']))
    lines.append('placement queries per request, p50 / p99: %s' % ', '.join(
        '%s %d / %d' % (side, figures['sides'][side]['placement_queries']
                        ['p50'], figures['sides'][side]
                        ['placement_queries']['p99'])
        for side in SIDES))
    lines.append('both placed %d, same host %d; only Nova placed %d, only '
                 'the package placed %d; own time p50 Nova / package: %s' % (
                     figures['both_placed'], figures['same_host'],
                     figures['only_nova_placed'],
                     figures['only_package_placed'],
                     '%.2fx' % figures['own_p50_ratio']
                     if figures['own_p50_ratio'] else 'n/a'))
    total = {side: figures['sides'][side]['phases_ms']['total']['p50']
             for side in SIDES}
    lines.append('select_destinations p50 Nova / package: %s' % (
        '%.1fx' % (total[NOVA] / total[PACKAGE]) if total[PACKAGE]
        else 'n/a'))
    burst = figures.get('several_schedulers')
    if burst:
        lat = burst['latency_ms']
        lines.append(
            '%d scheduler processes at once, %.0f s: %d requests, %.1f a '
            'second (lowest %.0f s window %.1f; poll every %s s, '
            'resync at most %s reads a second) '
            '(%d placed, %d NoValidHost, %d errors); latency p50 / p95 / '
            'p99 %.0f / %.0f / %.0f ms; claims %d, refused by placement %d '
            '(conflict rate %.1f%%); over-commits in placement: %d' % (
                burst['schedulers'], burst['seconds'], burst['requests'],
                burst['requests_per_second'], burst['window_s'],
                burst['lowest_window_rate'] or 0.0,
                burst['poll_interval_s'], burst.get('resync_max_rate'),
                burst['placed'],
                burst['no_valid_host'], burst['error_count'], lat['p50'],
                lat['p95'], lat['p99'], burst['claims'],
                burst['claims_refused'], 100.0 * burst['conflict_rate'],
                len(burst['over_commits'])))
    kept = figures.get('kept_state')
    if kept:
        lines.append(
            'package candidates from kept state: first read %.1f s, then '
            'the host state warmed in %.1f s; poll between requests p50 / '
            'p99 %.0f / %.0f ms; answers %s' % (
                kept['first_read_s'], kept['host_state_warm_up_s'] or 0.0,
                kept['poll_ms']['p50'],
                kept['poll_ms']['p99'], ', '.join(
                    '%s %d' % item for item in sorted(
                        kept['answers'].items()))))
        lines.append(
            'kept answers checked against placement\'s own (every '
            'candidate): %d, differing: %d%s' % (
                kept['checked_against_placement'],
                len(kept['differences']),
                ''.join('\n  ' + d for d in kept['differences'][:5])))
    cap = figures.get('kept_capacity')
    if cap:
        lines.append(
            'capacity from kept state, %d flavors: first read %.1f s, first '
            'count %.1f s; answer p50 / p95 / p99 %.1f / %.1f / %.1f ms '
            '(hosts counted again p50 %s); poll p50 %.0f ms; full count %s'
            % (cap['flavors'], cap['first_read_s'], cap['first_report_s'],
               cap['answer_ms']['p50'], cap['answer_ms']['p95'],
               cap['answer_ms']['p99'], cap['hosts_counted_again']['p50'],
               cap['poll_ms']['p50'], ', '.join(
                   '%.1f s (%s)' % (c['full_count_s'], c['at'])
                   for c in cap['checks'])))
        lines.append(
            'kept capacity against the full count (every host): %d checks, '
            'differing: %d%s' % (
                len(cap['checks']), len(cap['differences']),
                ''.join('\n  ' + d for d in cap['differences'][:5])))
    return '\n'.join(lines)
