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


"""Tooz locks: inside the process, then across the scheduler processes.

Locks are tooz locks, on any backend tooz has; the coordinator is made
with the package's defaults (a redis client that does not wait long on a
dead redis) and no heartbeat thread of tooz's own.
"""

import threading
import time

from oslo_log import log as logging
from oslo_utils import encodeutils
from tooz import coordination

from nova_sched_ext.compat import tooz as tooz_compat
from nova_sched_ext.coordination import common
from nova_sched_ext.coordination import exception

LOG = logging.getLogger(__name__)


class Locks(object):
    """The lock half of :class:`~nova_sched_ext.coordination.Backend`.

    Uses the backend's ``_guard``, ``_start_lock``, ``_coordinator``,
    ``_local``, ``url``, ``owner``, ``_check_fork``, ``_check_up``,
    ``_failed``, ``_answered`` and ``_ensure_heart``.
    """

    def _get_coordinator(self):
        self._check_fork()
        with self._start_lock:
            if self._coordinator is None:
                coordinator = started_coordinator(self.url, self.owner)
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
                    raise exception.LockTimeout(
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
                    raise exception.LockTimeout(
                        'another scheduler held the lock %s on %s for more '
                        'than %s s' % (label, common.safe_url(self.url),
                                       timeout))
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


def started_coordinator(url, member):
    """A started tooz coordinator of ``url``, with the package's defaults."""
    coordinator = coordination.get_coordinator(
        url, encodeutils.safe_encode(member), **common.redis_defaults(url))
    _quick_redis_retries(coordinator)
    # Our heartbeat thread, not tooz's: tooz's logs a warning a second
    # while the backend is down.
    coordinator.start(start_heart=False)
    return coordinator


def _quick_redis_retries(coordinator):
    """Make the redis client of a tooz coordinator retry once, at once.

    tooz tries each operation up to 15 times; the redis client's default
    (3 retries with a growing backoff, in redis-py 6 and later) would make
    the first request after redis died wait close to a minute.  tooz makes
    its client in ``start()``; nothing public sets its retry policy, so
    the seam wraps the factory it calls.
    """

    def quick_client(client):
        client.set_retry(common.quick_redis_retry())
        return client

    tooz_compat.wrap_client_factory(coordinator, quick_client)
