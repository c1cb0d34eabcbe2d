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

"""The coordination backend that every scheduler process shares.

Several ``nova-sched-ext-scheduler`` processes, on several hosts and each
with several workers, keep the package's guarantees only through one
shared backend:

- the lock of a deployment set
  (:mod:`nova_sched_ext.deployment_set.lock`);
- the lock around the count-and-claim of a preemptible request, and the
  preemptible placements the cells do not show yet
  (:mod:`nova_sched_ext.preemption.caps`);
- the record of every eviction in progress, which another scheduler rolls
  back when its owner dies (:mod:`nova_sched_ext.preemption.journal`).

The backend is the `tooz <https://docs.openstack.org/tooz/>`_ URL of
``[nova_sched_ext] coordination_url`` (``redis://host:6379`` is the
tested one for several hosts), or, unset, the file backend in
``deployment_set_lock_dir`` (the scheduler processes of one host only).
Locks are tooz locks, on any backend tooz has.  Records live beside them:
on redis a hash per kind of record and one key with a time to live per
*lease* (redis's own clock expires it, so the schedulers' clocks do not
matter); with the file backend, one JSON file per record.  Other tooz
backends hold locks only (:class:`BackendUnsupported` for records).

A record has a lease held by the scheduler process that wrote it: while
the process lives it renews the lease (:meth:`Backend.put` with
``keep_alive``); when the process dies the lease runs out, and another
process may :meth:`~Backend.take_over` the record, which succeeds for one
process only.  Updates and deletions by the owner check, atomically, that
nobody took the record over.

Outages: the first failure of the backend marks it down and logs one
ERROR line; while it is down every use fails at once with
:class:`CoordinationBackendUnavailable` (no request waits on a dead
backend), and a thread probes it every :data:`PROBE_INTERVAL` seconds;
the first answer logs one INFO line and lifts the mark.  What a failure
refuses is the caller's choice: the deployment-set lock, the preemptible
caps and the eviction refuse their requests with NoValidHost; requests
that need none of them never touch the backend.
"""

import contextlib
import fcntl
import importlib.metadata
import json
import os
import re
import socket
import threading
import time
import urllib.parse
import uuid

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import encodeutils
from oslo_utils import netutils
from stevedore import exception as stevedore_exception
from tooz import coordination

from nova_sched_ext.compat import tooz as tooz_compat
from nova_sched_ext import conf
from nova_sched_ext import exception as sched_ext_exception

LOG = logging.getLogger(__name__)
CONF = conf.CONF

#: seconds between two probes of a backend that is down
PROBE_INTERVAL = 1.0
#: seconds between two heartbeats when neither tooz nor a lease asks for
#: less
HEARTBEAT_INTERVAL = 10.0
#: prefix of every key the package writes on a redis backend
REDIS_NAMESPACE = 'nova_sched_ext'
#: seconds a redis client waits for a connection, unless the URL says
#: (``socket_connect_timeout``); tooz tries an operation 15 times
REDIS_CONNECT_TIMEOUT = 2.0
#: what record kinds and keys may be made of (they name files, too)
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')


class LockUnavailable(sched_ext_exception.NovaSchedExtError):
    """A lock could not be taken; the message says why."""


class LockTimeout(LockUnavailable):
    """Someone else held the lock longer than the caller would wait."""


class CoordinationBackendUnavailable(
        LockUnavailable, sched_ext_exception.UpstreamUnavailable):
    """The backend failed or cannot be reached; the message says why."""


#: The old name, kept for the callers that catch it (deprecated: it was
#: also the name of the capacity count's unreachable-backend error).
BackendUnavailable = CoordinationBackendUnavailable


class BackendUnsupported(sched_ext_exception.UserFacingError):
    """The backend holds locks only, no records."""


class BackendUnusable(sched_ext_exception.UserFacingError):
    """The backend URL cannot work at all: a restart with another is needed."""


def backend_url():
    """The tooz URL of the backend: the option, else the file backend."""
    opts = CONF.nova_sched_ext
    if opts.coordination_url:
        return opts.coordination_url
    return 'file://%s' % os.path.abspath(opts.deployment_set_lock_dir)


def safe_url(url):
    """The backend URL without credentials or options, for log lines."""
    scheme, sep, rest = url.partition('://')
    if '@' in rest:
        rest = rest.split('@', 1)[1]
    return scheme + sep + rest.split('?', 1)[0]


def has_records(url):
    """Whether the backend of ``url`` can hold records."""
    return url.partition('://')[0] in _STORES


def _host_name():
    try:
        return CONF.host
    except cfg.NoSuchOptError:
        return socket.gethostname()


class Backend(object):
    """One scheduler manager's use of the coordination backend.

    Thread-safe; shared by the request wrappers of one manager
    (:func:`for_manager`).  The tooz coordinator, the record store and the
    heartbeat thread are made on first use in each process:
    ``nova-scheduler`` forks its workers after the manager is built, and
    none of them may cross a fork.

    :param url: a tooz URL; None means :func:`backend_url`, read when the
        coordinator and the record store are made (first use; again after
        :meth:`stop`)
    """

    def __init__(self, url=None):
        self._url = url
        self._guard = threading.RLock()
        # Made once: a coordinator being started (slow on a dead backend)
        # must not hold up the local locks that _guard protects.
        self._start_lock = threading.Lock()
        self._pid = None
        self._check_fork()

    def _check_fork(self):
        with self._guard:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            #: who holds this process's leases and tooz locks
            self.owner = '%s:%d:%s' % (_host_name(), self._pid,
                                       uuid.uuid4().hex[:8])
            self._coordinator = None
            self._store = None
            # name -> [threading.Lock, users]
            self._local = {}
            # (kind, key) -> ttl: leases the heartbeat renews
            self._leases = {}
            self._heart = None
            self._heart_generation = 0
            self._wake = threading.Event()
            self._down_since = None
            #: why the URL cannot work at all (no such tooz driver): no
            #: probe can help, and each would log the loader's warning
            self._unusable = None

    @property
    def url(self):
        return self._url or backend_url()

    # --- health ---------------------------------------------------------

    @property
    def down(self):
        """Whether the backend failed and has not answered since."""
        return self._down_since is not None

    def _failed(self, exc, what):
        """Note a failure; log it if it starts an outage.

        :returns: the :class:`CoordinationBackendUnavailable` to raise
        """
        with self._guard:
            first = self._down_since is None
            if first:
                self._down_since = time.monotonic()
            if isinstance(exc, stevedore_exception.NoMatches):
                self._unusable = _describe(exc)
        url = safe_url(self.url)
        if first:
            LOG.error('The coordination backend %(url)s failed (%(what)s: '
                      '%(exc)s). Until it answers again, requests for '
                      'deployment sets, preemptible requests under a cap '
                      'and evictions are refused with NoValidHost; other '
                      'requests are scheduled as usual. This is logged '
                      'once per outage.',
                      {'url': url, 'what': what, 'exc': _describe(exc)})
            self._ensure_heart()
            self._wake.set()
        else:
            LOG.debug('The coordination backend %(url)s is still down '
                      '(%(what)s: %(exc)s).',
                      {'url': url, 'what': what, 'exc': _describe(exc)})
        return CoordinationBackendUnavailable(
            'the coordination backend %s is unreachable (%s)'
            % (url, _describe(exc)))

    def _answered(self, started):
        """Note an answer to an operation begun at ``started``.

        An answer to an operation older than the last failure says
        nothing about the outage.
        """
        if self._down_since is None:
            return
        with self._guard:
            since = self._down_since
            if since is None or since > started:
                return
            self._down_since = None
        if since is not None:
            LOG.info('The coordination backend %(url)s answers again, '
                     'after %(s).1f s: requests that need it are scheduled '
                     'again.', {'url': safe_url(self.url),
                                's': time.monotonic() - since})

    def _check_up(self):
        """Fail at once while the backend is down."""
        since = self._down_since
        if self._unusable:
            raise CoordinationBackendUnavailable(
                'the coordination backend %s cannot be used (%s): fix '
                '[nova_sched_ext] coordination_url and restart'
                % (safe_url(self.url), self._unusable))
        if since is not None:
            raise CoordinationBackendUnavailable(
                'the coordination backend %s has been unreachable for '
                '%.0f s' % (safe_url(self.url), time.monotonic() - since))

    # --- locks ----------------------------------------------------------

    def _get_coordinator(self):
        self._check_fork()
        with self._start_lock:
            if self._coordinator is None:
                coordinator = _started_coordinator(self.url, self.owner)
                self._coordinator = coordinator
            coordinator = self._coordinator
        self._ensure_heart()
        return coordinator

    def _local_lock(self, name):
        with self._guard:
            entry = self._local.setdefault(name, [threading.Lock(), 0])
            entry[1] += 1
            return entry[0]

    def _drop_local(self, name):
        with self._guard:
            entry = self._local.get(name)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._local[name]

    def acquire(self, names, timeout, label):
        """Take the locks ``names``, inside this process and across them.

        The names are taken in sorted order, so two callers that want
        some of the same locks never wait for each other in a circle.

        :param label: what the locks protect, for messages ("of
            deployment set <uuid>")
        :returns: what :meth:`release` needs
        :raises LockTimeout: another request held one for ``timeout`` s
        :raises CoordinationBackendUnavailable: the backend is down or failed
        """
        self._check_fork()
        deadline = time.monotonic() + timeout
        held = []
        try:
            for name in sorted(set(names)):
                local = self._local_lock(name)
                if not local.acquire(
                        timeout=max(0.0, deadline - time.monotonic())):
                    self._drop_local(name)
                    raise LockTimeout(
                        'another request of this scheduler process held '
                        'the lock %s for more than %s s' % (label, timeout))
                entry = [name, local, None]
                held.append(entry)
                self._check_up()
                started = time.monotonic()
                try:
                    lock = self._get_coordinator().get_lock(
                        encodeutils.safe_encode(name))
                    got = lock.acquire(blocking=max(
                        0.0, deadline - time.monotonic()) or False)
                except Exception as exc:
                    raise self._failed(exc, 'taking the lock %s' % label)
                self._answered(started)
                if not got:
                    raise LockTimeout(
                        'another scheduler held the lock %s on %s for more '
                        'than %s s' % (label, safe_url(self.url), timeout))
                entry[2] = lock
        except BaseException:
            self.release(held)
            raise
        return held

    def release(self, held):
        """Release what :meth:`acquire` took; never raises."""
        for name, local, lock in reversed(held):
            try:
                if lock is not None and not lock.release():
                    LOG.warning('The lock %s was no longer held when it was '
                                'released: its backend may have expired it.',
                                name)
            except Exception as exc:
                self._failed(exc, 'releasing the lock %s' % name)
            finally:
                local.release()
                self._drop_local(name)

    # --- records --------------------------------------------------------

    def check_records(self):
        """Raise :class:`BackendUnsupported` unless it can hold records."""
        url = self.url
        if not has_records(url):
            raise BackendUnsupported(
                'the coordination backend %s ([nova_sched_ext] '
                'coordination_url) holds locks only, not the records '
                'the preemption driver keeps (its preemptible placements '
                'and its evictions in progress): use redis://, or leave the '
                'option unset for file records (one scheduler host only)'
                % safe_url(url))

    def _get_store(self):
        self._check_fork()
        with self._start_lock:
            if self._store is None:
                self.check_records()
                url = self.url
                self._store = _STORES[url.partition('://')[0]](url)
            return self._store

    def _use(self, what, method, *args):
        self._check_up()
        store = self._get_store()
        started = time.monotonic()
        try:
            result = getattr(store, method)(*args)
        except Exception as exc:
            raise self._failed(exc, what)
        self._answered(started)
        return result

    def put(self, kind, key, record, ttl, keep_alive=False, replace=False):
        """Write a new record with a lease of ``ttl`` s held by this process.

        :param keep_alive: renew the lease until :meth:`delete` or
            :meth:`drop_lease`
        :param replace: overwrite a record of that key (and its lease)
        :returns: False if the key exists (unless ``replace``)
        :raises CoordinationBackendUnavailable:
        """
        _check_name(kind, key)
        done = self._use('writing the record %s/%s' % (kind, key), 'put',
                         kind, key, _dumps(record), self.owner, ttl, replace)
        if done and keep_alive:
            self._keep(kind, key, ttl)
        return done

    def update(self, kind, key, record, ttl):
        """Replace a record this process holds; renew its lease.

        :returns: False if another process took it over, or it is gone
        """
        done = self._use('writing the record %s/%s' % (kind, key), 'update',
                         kind, key, _dumps(record), self.owner, ttl)
        if not done:
            self.drop_lease(kind, key)
        return done

    def delete(self, kind, key, owned=True):
        """Delete a record (``owned``: only if this process holds it).

        :returns: False if another process holds it (or it was gone)
        """
        try:
            return self._use('deleting the record %s/%s' % (kind, key),
                             'delete', kind, key,
                             self.owner if owned else '')
        finally:
            self.drop_lease(kind, key)

    def take_over(self, kind, key, ttl, keep_alive=True):
        """Hold the record whose lease ran out; one process succeeds.

        :returns: whether this process holds it now
        """
        done = self._use('taking over the record %s/%s' % (kind, key),
                         'take_over', kind, key, self.owner, ttl)
        if done and keep_alive:
            self._keep(kind, key, ttl)
        return done

    def items(self, kind):
        """``[(key, record, lease holder or None if it ran out)]``"""
        return [(key, json.loads(value), holder) for key, value, holder in
                self._use('reading the records %s' % kind, 'items', kind)]

    def _keep(self, kind, key, ttl):
        with self._guard:
            self._leases[kind, key] = ttl
        self._ensure_heart()
        self._wake.set()

    def drop_lease(self, kind, key):
        """Stop renewing a lease: it runs out ``ttl`` s after the last."""
        with self._guard:
            self._leases.pop((kind, key), None)

    # --- heartbeat ------------------------------------------------------

    def _ensure_heart(self):
        with self._guard:
            if self._heart is not None and self._heart.is_alive():
                return
            self._heart = threading.Thread(
                target=self._beat, args=(self._heart_generation,),
                name='nova-sched-ext-coordination', daemon=True)
            self._heart.start()

    def _beat(self, generation):
        while True:
            with self._guard:
                if generation != self._heart_generation or \
                        self._pid != os.getpid():
                    return
                if self._coordinator is None and not self._leases and \
                        not self.down:
                    # Nothing to keep alive: a new use starts a new one.
                    self._heart = None
                    return
                if self._unusable:
                    # A configuration error: a restart fixes it, no probe.
                    self._heart = None
                    return
            # Cleared first: a wake-up while this beat runs is not lost.
            self._wake.clear()
            if self.down:
                self._probe()
                wait = PROBE_INTERVAL
            else:
                wait = self._heartbeat()
            self._wake.wait(wait)

    def _heartbeat(self):
        """Keep the tooz membership, locks and leases alive.

        :returns: seconds until the next beat
        """
        interval = HEARTBEAT_INTERVAL
        coordinator = self._coordinator
        started = time.monotonic()
        try:
            if coordinator is not None:
                # A tooz coordinator renews the locks it holds (a redis
                # lock expires otherwise) and says when to beat again.
                wait = coordinator.heartbeat()
                if wait:
                    interval = min(interval, wait / 2.0)
            with self._guard:
                leases = dict(self._leases)
            if leases:
                store = self._get_store()
                for (kind, key), ttl in sorted(leases.items()):
                    interval = min(interval, ttl / 3.0)
                    if not store.renew(kind, key, self.owner, ttl):
                        self.drop_lease(kind, key)
                        LOG.warning('The record %s/%s is no longer held by '
                                    'this scheduler: it is gone, or its '
                                    'lease ran out and another scheduler '
                                    'took it over.', kind, key)
        except Exception as exc:
            self._failed(exc, 'heartbeat')
            return PROBE_INTERVAL
        self._answered(started)
        return interval

    def _probe(self):
        started = time.monotonic()
        try:
            self._get_coordinator().heartbeat()
            if self._store is not None:
                self._store.ping()
        except Exception as exc:
            LOG.debug('The coordination backend %s is still down: %s',
                      safe_url(self.url), _describe(exc))
            return
        self._answered(started)

    def stop(self):
        """Stop the heartbeat and the coordinator; keep the records.

        A later use starts them again.
        """
        with self._guard:
            self._heart_generation += 1
            coordinator, self._coordinator = self._coordinator, None
            store, self._store = self._store, None
            self._leases.clear()
            self._heart = None
            # A later use tries afresh.
            self._down_since = self._unusable = None
            mine = self._pid == os.getpid()
        self._wake.set()
        if coordinator is not None and mine:
            try:
                coordinator.stop()
            except Exception:
                LOG.exception('Could not stop the tooz coordinator.')
        if store is not None and mine:
            store.close()


#: the attribute of a manager that holds its Backend
_MANAGER_ATTR = '_nova_sched_ext_coordination'


def for_manager(manager):
    """The :class:`Backend` the request wrappers of ``manager`` share."""
    backend = getattr(manager, _MANAGER_ATTR, None)
    if not isinstance(backend, Backend):
        backend = Backend()
        setattr(manager, _MANAGER_ATTR, backend)
    return backend


def check_at_start(manager):
    """Report, before any request, a backend that cannot serve the manager.

    Requests that need the backend fail with NoValidHost while it cannot be
    used, and say so only then; a mistyped URL or a directory the scheduler
    cannot write would otherwise go unnoticed until the first deployment
    set.  A URL that can never work (no tooz backend of that scheme, a
    malformed option) stops the service; a backend that does not answer,
    or a lock directory that cannot be written, is one WARNING naming the
    option (the backend may come up later: requests then use it).  Nothing
    is checked when no request wrapper of the manager uses the backend.

    :raises BackendUnusable:
    """
    backend = getattr(manager, _MANAGER_ATTR, None)
    if not isinstance(backend, Backend):
        return
    url = backend.url
    if not CONF.nova_sched_ext.coordination_url and \
            url == backend_url():
        _check_lock_dir(os.path.abspath(
            CONF.nova_sched_ext.deployment_set_lock_dir))
        return
    option = '[nova_sched_ext] coordination_url'
    scheme = url.partition('://')[0] if '://' in url else ''
    known = sorted(ep.name for ep in
                   importlib.metadata.entry_points(group='tooz.backends'))
    if scheme not in known:
        raise BackendUnusable(
            '%s = %s names no coordination backend: the URL must start '
            'with one of %s (for example redis://host:6379)'
            % (option, safe_url(url), ', '.join('%s://' % name
                                                for name in known)))
    try:
        coordinator = _started_coordinator(url, backend.owner + ':check')
    except (ValueError, TypeError) as exc:
        # What the backend's driver makes of the URL's options.
        raise BackendUnusable('%s = %s cannot be used: %s'
                              % (option, safe_url(url), _describe(exc)))
    except Exception as exc:
        LOG.warning('%(option)s: the coordination backend %(url)s does '
                    'not answer at start (%(exc)s). Until it does, '
                    'requests for deployment sets, preemptible requests '
                    'under a cap and evictions fail with NoValidHost.',
                    {'option': option, 'url': safe_url(url),
                     'exc': _describe(exc)})
        return
    try:
        coordinator.stop()
    except Exception as exc:
        LOG.debug('Could not stop the coordinator of the start check: %s',
                  _describe(exc))


def _check_lock_dir(directory):
    """WARN, naming the option, if the file backend cannot use its dir."""
    try:
        os.makedirs(directory, exist_ok=True)
        writable = os.access(directory, os.W_OK | os.X_OK)
        problem = None if writable else 'permission denied'
    except OSError as exc:
        problem = exc.strerror or _describe(exc)
    if problem:
        LOG.warning('[nova_sched_ext] deployment_set_lock_dir: the scheduler '
                    'cannot write its lock directory %(dir)s (%(problem)s). '
                    'Until it can, requests for deployment sets, '
                    'preemptible requests under a cap and evictions fail '
                    'with NoValidHost.',
                    {'dir': directory, 'problem': problem})


def _started_coordinator(url, member):
    """A started tooz coordinator of ``url``, with the package's defaults."""
    coordinator = coordination.get_coordinator(
        url, encodeutils.safe_encode(member), **_redis_defaults(url))
    _quick_redis_retries(coordinator)
    # Our heartbeat thread, not tooz's: tooz's logs a warning a second
    # while the backend is down.
    coordinator.start(start_heart=False)
    return coordinator


def _redis_defaults(url):
    """Client options a redis URL gets unless it sets them itself."""
    parsed = netutils.urlsplit(url)
    if parsed.scheme != 'redis' or \
            'socket_connect_timeout' in urllib.parse.parse_qs(parsed.query):
        return {}
    return {'socket_connect_timeout': REDIS_CONNECT_TIMEOUT}


def _quick_redis_retry():
    from redis import backoff
    from redis import retry

    return retry.Retry(backoff.NoBackoff(), 1)


def _quick_redis_retries(coordinator):
    """Make the redis client of a tooz coordinator retry once, at once.

    tooz tries each operation up to 15 times; the redis client's default
    (3 retries with a growing backoff, in redis-py 6 and later) would make
    the first request after redis died wait close to a minute.  tooz makes
    its client in ``start()``; nothing public sets its retry policy, so
    the seam wraps the factory it calls.
    """

    def quick_client(client):
        client.set_retry(_quick_redis_retry())
        return client

    tooz_compat.wrap_client_factory(coordinator, quick_client)


def _describe(exc):
    text = str(exc) or type(exc).__name__
    return ' '.join(text.split())


def _check_name(*names):
    for name in names:
        if not _NAME.match(name):
            raise ValueError('bad record kind or key %r' % name)


def _dumps(record):
    return json.dumps(record, sort_keys=True)


# --- record stores ------------------------------------------------------
#
# Each store has the same operations; values are JSON text, owners and
# keys plain strings, ttl in seconds.  An owner '' for delete means
# anyone.  A record whose lease ran out is still the owner's to update or
# delete until someone takes it over: nobody else acted on it.


_REDIS_PUT = """
if ARGV[5] == '0' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
    return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
"""

_REDIS_UPDATE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
"""

_REDIS_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
"""

_REDIS_TAKE_OVER = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then
    return 1
end
return 0
"""

_REDIS_DELETE = """
if ARGV[2] ~= '' then
    local holder = redis.call('GET', KEYS[2])
    if holder and holder ~= ARGV[2] then return 0 end
end
local deleted = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return deleted
"""


class RedisRecords(object):
    """Records in redis: a hash per kind, a key with a TTL per lease.

    The keys of one kind share a hash tag, so the scripts work on a
    redis cluster too.  The client is made from the tooz URL the way
    tooz's redis driver makes its own (host, password, sentinel, ssl and
    socket options).
    """

    def __init__(self, url):
        # The redis client is an optional requirement, as for tooz.
        self._client = tooz_compat.redis_client(url, _redis_defaults(url))
        self._client.set_retry(_quick_redis_retry())
        self._scripts = {
            name: self._client.register_script(source) for name, source in (
                ('put', _REDIS_PUT), ('update', _REDIS_UPDATE),
                ('renew', _REDIS_RENEW), ('take_over', _REDIS_TAKE_OVER),
                ('delete', _REDIS_DELETE))}

    @staticmethod
    def _hash(kind):
        return '%s:{%s}:records' % (REDIS_NAMESPACE, kind)

    @staticmethod
    def _lease(kind, key):
        return '%s:{%s}:lease:%s' % (REDIS_NAMESPACE, kind, key)

    def _run(self, script, kind, key, *args):
        return bool(self._scripts[script](
            keys=[self._hash(kind), self._lease(kind, key)],
            args=[key] + list(args)))

    def ping(self):
        self._client.ping()

    def put(self, kind, key, value, owner, ttl, replace):
        return self._run('put', kind, key, value, owner, _ms(ttl),
                         '1' if replace else '0')

    def update(self, kind, key, value, owner, ttl):
        return self._run('update', kind, key, value, owner, _ms(ttl))

    def renew(self, kind, key, owner, ttl):
        return bool(self._scripts['renew'](
            keys=[self._lease(kind, key), self._hash(kind)],
            args=[owner, key, _ms(ttl)]))

    def take_over(self, kind, key, owner, ttl):
        return self._run('take_over', kind, key, owner, _ms(ttl))

    def delete(self, kind, key, owner):
        return self._run('delete', kind, key, owner)

    def items(self, kind):
        values = self._client.hgetall(self._hash(kind))
        keys = sorted(_text(k) for k in values)
        holders = self._client.mget(
            [self._lease(kind, k) for k in keys]) if keys else []
        by_key = {_text(k): _text(v) for k, v in values.items()}
        return [(k, by_key[k], _text(h) if h is not None else None)
                for k, h in zip(keys, holders)]

    def close(self):
        try:
            self._client.close()
        except Exception:
            LOG.debug('Could not close the redis client.', exc_info=True)


class FileRecords(object):
    """Records as JSON files, for the file backend (one host).

    ``<dir>/records/<kind>/<key>.json`` holds the value, the lease holder
    and the lease's end (wall clock: one host, one clock).  Every
    operation of a kind runs under an exclusive ``flock`` of the kind's
    ``.lock`` file, so it is atomic across the processes of the host.
    """

    def __init__(self, url):
        path = netutils.urlsplit(url).path
        self._root = os.path.join(path, 'records')

    @contextlib.contextmanager
    def _locked(self, kind):
        directory = os.path.join(self._root, kind)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, '.lock'), 'a') as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            yield directory

    @staticmethod
    def _read(directory, key):
        try:
            with open(os.path.join(directory, key + '.json')) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    @staticmethod
    def _write(directory, key, entry):
        path = os.path.join(directory, key + '.json')
        temp = '%s.%d.tmp' % (path, os.getpid())
        with open(temp, 'w') as f:
            json.dump(entry, f)
        os.replace(temp, path)

    @staticmethod
    def _holder(entry):
        if entry is None or entry['expires'] <= wall_clock():
            return None
        return entry['holder']

    def ping(self):
        os.makedirs(self._root, exist_ok=True)

    def put(self, kind, key, value, owner, ttl, replace):
        with self._locked(kind) as directory:
            if not replace and self._read(directory, key) is not None:
                return False
            self._write(directory, key, {'value': value, 'holder': owner,
                                         'expires': wall_clock() + ttl})
            return True

    def update(self, kind, key, value, owner, ttl):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or self._holder(entry) not in (None, owner):
                return False
            self._write(directory, key, {'value': value, 'holder': owner,
                                         'expires': wall_clock() + ttl})
            return True

    def renew(self, kind, key, owner, ttl):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or self._holder(entry) not in (None, owner):
                return False
            entry.update(holder=owner, expires=wall_clock() + ttl)
            self._write(directory, key, entry)
            return True

    def take_over(self, kind, key, owner, ttl):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or self._holder(entry) is not None:
                return False
            entry.update(holder=owner, expires=wall_clock() + ttl)
            self._write(directory, key, entry)
            return True

    def delete(self, kind, key, owner):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or owner and \
                    self._holder(entry) not in (None, owner):
                return False
            os.unlink(os.path.join(directory, key + '.json'))
            return True

    def items(self, kind):
        with self._locked(kind) as directory:
            found = []
            for name in sorted(os.listdir(directory)):
                if not name.endswith('.json'):
                    continue
                key = name[:-len('.json')]
                entry = self._read(directory, key)
                if entry is not None:
                    found.append((key, entry['value'], self._holder(entry)))
            return found

    def close(self):
        pass


#: the record store of each tooz scheme that has one
_STORES = {'redis': RedisRecords, 'file': FileRecords}


def wall_clock():
    """Seconds since the epoch: the clock of the file store's leases.

    One host, one clock; a test replaces this to drive the leases' time
    instead of sleeping through them.
    """
    return time.time()


def _ms(seconds):
    return str(max(1, int(seconds * 1000)))


def _text(value):
    return value.decode('utf-8') if isinstance(value, bytes) else value
