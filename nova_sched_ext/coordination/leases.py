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


"""Records with leases, and the heartbeat that keeps them alive.

A record has a lease held by the scheduler process that wrote it: while
the process lives its heartbeat thread renews the lease (``put`` with
``keep_alive``); when the process dies the lease runs out, and another
process may ``take_over`` the record, which succeeds for one process
only.  The same thread beats the tooz coordinator (a redis lock expires
otherwise) and, while the backend is down, probes it
(:mod:`~nova_sched_ext.coordination.outage`).
"""

import json
import os
import threading
import time

from oslo_log import log as logging

from nova_sched_ext.coordination import common
from nova_sched_ext.coordination import exception
from nova_sched_ext.coordination import outage
from nova_sched_ext.coordination import records

LOG = logging.getLogger(__name__)

#: seconds between two heartbeats when neither tooz nor a lease asks for
#: less
HEARTBEAT_INTERVAL = 10.0


class Leases(object):
    """The record half of :class:`~nova_sched_ext.coordination.Backend`.

    Uses the backend's ``_guard``, ``_start_lock``, ``_store``,
    ``_leases``, ``_heart``, ``_heart_generation``, ``_wake``, ``_pid``,
    ``_coordinator``, ``_unusable``, ``url``, ``owner``, ``down``,
    ``_check_fork``, ``_check_up``, ``_failed``, ``_answered`` and
    ``_probe``.
    """

    def check_records(self):
        """Raise :class:`BackendUnsupported` unless it can hold records."""
        url = self.url
        if not records.has_records(url):
            raise exception.BackendUnsupported(
                'the coordination backend %s ([nova_sched_ext] '
                'coordination_url) holds locks only, not the records '
                'the preemption driver keeps (its preemptible placements '
                'and its evictions in progress): use redis://, or leave the '
                'option unset for file records (one scheduler host only)'
                % common.safe_url(url))

    def _get_store(self):
        self._check_fork()
        with self._start_lock:
            if self._store is None:
                self.check_records()
                url = self.url
                self._store = records.STORES[url.partition('://')[0]](url)
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
        records.check_name(kind, key)
        done = self._use('writing the record %s/%s' % (kind, key), 'put',
                         kind, key, records.dumps(record), self.owner, ttl,
                         replace)
        if done and keep_alive:
            self._keep(kind, key, ttl)
        return done

    def update(self, kind, key, record, ttl):
        """Replace a record this process holds; renew its lease.

        :returns: False if another process took it over, or it is gone
        """
        done = self._use('writing the record %s/%s' % (kind, key), 'update',
                         kind, key, records.dumps(record), self.owner, ttl)
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
                wait = outage.PROBE_INTERVAL
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
            return outage.PROBE_INTERVAL
        self._answered(started)
        return interval
