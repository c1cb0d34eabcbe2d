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


"""Outages of the backend: noted once, refused at once, probed till over.

The first failure of the backend marks it down and logs one ERROR line;
while it is down every use fails at once with
:class:`~nova_sched_ext.coordination.exception.\
CoordinationBackendUnavailable` (no request waits on a dead backend), and
the heartbeat thread (:mod:`~nova_sched_ext.coordination.leases`) probes
it every
:data:`PROBE_INTERVAL` seconds; the first answer logs one INFO line and
lifts the mark.
"""

import time

from oslo_log import log as logging
from stevedore import exception as stevedore_exception

from nova_sched_ext.coordination import common
from nova_sched_ext.coordination import exception

LOG = logging.getLogger(__name__)

#: seconds between two probes of a backend that is down
PROBE_INTERVAL = 1.0


class Outage(object):
    """The outage half of :class:`~nova_sched_ext.coordination.Backend`.

    Uses the backend's ``_guard``, ``_down_since``, ``_unusable``,
    ``_wake``, ``_store``, ``url``, ``_get_coordinator`` and
    ``_ensure_heart``.
    """

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
                self._unusable = common.describe(exc)
        url = common.safe_url(self.url)
        if first:
            LOG.error('The coordination backend %(url)s failed (%(what)s: '
                      '%(exc)s). Until it answers again, requests for '
                      'deployment sets, preemptible requests under a cap '
                      'and evictions are refused with NoValidHost; other '
                      'requests are scheduled as usual. This is logged '
                      'once per outage.',
                      {'url': url, 'what': what, 'exc': common.describe(exc)})
            self._ensure_heart()
            self._wake.set()
        else:
            LOG.debug('The coordination backend %(url)s is still down '
                      '(%(what)s: %(exc)s).',
                      {'url': url, 'what': what, 'exc': common.describe(exc)})
        return exception.CoordinationBackendUnavailable(
            'the coordination backend %s is unreachable (%s)'
            % (url, common.describe(exc)))

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
                     'again.', {'url': common.safe_url(self.url),
                                's': time.monotonic() - since})

    def _check_up(self):
        """Fail at once while the backend is down."""
        since = self._down_since
        if self._unusable:
            raise exception.CoordinationBackendUnavailable(
                'the coordination backend %s cannot be used (%s): fix '
                '[nova_sched_ext] coordination_url and restart'
                % (common.safe_url(self.url), self._unusable))
        if since is not None:
            raise exception.CoordinationBackendUnavailable(
                'the coordination backend %s has been unreachable for '
                '%.0f s' % (common.safe_url(self.url),
                            time.monotonic() - since))

    def _probe(self):
        started = time.monotonic()
        try:
            self._get_coordinator().heartbeat()
            if self._store is not None:
                self._store.ping()
        except Exception as exc:
            LOG.debug('The coordination backend %s is still down: %s',
                      common.safe_url(self.url), common.describe(exc))
            return
        self._answered(started)
