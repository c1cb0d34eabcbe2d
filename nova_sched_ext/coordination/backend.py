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


"""One scheduler manager's use of the backend, and the check at start."""

import importlib.metadata
import os
import threading
import uuid

from oslo_log import log as logging

from nova_sched_ext import conf
from nova_sched_ext.coordination import common
from nova_sched_ext.coordination import exception
from nova_sched_ext.coordination import leases
from nova_sched_ext.coordination import locks
from nova_sched_ext.coordination import outage

LOG = logging.getLogger(__name__)
CONF = conf.CONF


class Backend(outage.Outage, locks.Locks, leases.Leases):
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
            self.owner = '%s:%d:%s' % (common.host_name(), self._pid,
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
        return self._url or common.backend_url()

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
            url == common.backend_url():
        _check_lock_dir(os.path.abspath(
            CONF.nova_sched_ext.deployment_set_lock_dir))
        return
    option = '[nova_sched_ext] coordination_url'
    scheme = url.partition('://')[0] if '://' in url else ''
    known = sorted(ep.name for ep in
                   importlib.metadata.entry_points(group='tooz.backends'))
    if scheme not in known:
        raise exception.BackendUnusable(
            '%s = %s names no coordination backend: the URL must start '
            'with one of %s (for example redis://host:6379)'
            % (option, common.safe_url(url),
               ', '.join('%s://' % name for name in known)))
    try:
        coordinator = locks.started_coordinator(url, backend.owner + ':check')
    except (ValueError, TypeError) as exc:
        # What the backend's driver makes of the URL's options.
        raise exception.BackendUnusable(
            '%s = %s cannot be used: %s'
            % (option, common.safe_url(url), common.describe(exc)))
    except Exception as exc:
        LOG.warning('%(option)s: the coordination backend %(url)s does '
                    'not answer at start (%(exc)s). Until it does, '
                    'requests for deployment sets, preemptible requests '
                    'under a cap and evictions fail with NoValidHost.',
                    {'option': option, 'url': common.safe_url(url),
                     'exc': common.describe(exc)})
        return
    try:
        coordinator.stop()
    except Exception as exc:
        LOG.debug('Could not stop the coordinator of the start check: %s',
                  common.describe(exc))


def _check_lock_dir(directory):
    """WARN, naming the option, if the file backend cannot use its dir."""
    try:
        os.makedirs(directory, exist_ok=True)
        writable = os.access(directory, os.W_OK | os.X_OK)
        problem = None if writable else 'permission denied'
    except OSError as exc:
        problem = exc.strerror or common.describe(exc)
    if problem:
        LOG.warning('[nova_sched_ext] deployment_set_lock_dir: the scheduler '
                    'cannot write its lock directory %(dir)s (%(problem)s). '
                    'Until it can, requests for deployment sets, '
                    'preemptible requests under a cap and evictions fail '
                    'with NoValidHost.',
                    {'dir': directory, 'problem': problem})
