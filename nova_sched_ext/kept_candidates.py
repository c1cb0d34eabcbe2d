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

"""Placement's candidate query, answered by the scheduler from kept state.

With ``[nova_sched_ext] kept_candidates``, nova-sched-ext-scheduler keeps
placement's resource providers (:class:`nova_sched_ext.cloud.
provider_state.ProviderState`) current in a thread of its own and answers
the ``GET /allocation_candidates`` of Nova's ``select_destinations`` from
them (:mod:`nova_sched_ext.cloud.candidate_query`) instead of asking
placement, which reads every provider for every request (12 s at 10,000
compute nodes).  :class:`KeptCandidates` is that state with its poller and
the signals that keep it current; the candidate limit
(:mod:`nova_sched_ext.candidates`) decides when it is asked.

**How it is kept current** (the change feed):

* every ``[nova_sched_ext] kept_state_poll_interval`` seconds, one poll:
  ``GET /resource_providers`` and a read of the providers whose generation
  moved (placement bumps it on every claim against the provider, by any
  scheduler, and on every inventory, trait or aggregate change), that
  appeared or went, or that were marked changed;
* the claims of this scheduler count at once (:meth:`claimed`), before
  placement is polled; with ``kept_state_claim_casts`` each is also cast
  to the other schedulers, which count it when the cast comes
  (:meth:`claimed_elsewhere`, :mod:`nova_sched_ext.claim_casts`).  A
  poll that finds a provider's generation moved by exactly the claims
  counted does not read it; a claim placement refused marks its
  providers;
* room freed does not move a generation, so the frees come from Nova's
  computes, which tell the schedulers of every instance deleted or moved
  away (``delete_instance_info``; ``update_instance_info`` on the host
  that took it), and from this scheduler's own clean-up of its claims:
  each marks the host's providers, read again at the next poll;
* every provider's usages are read again once every
  ``kept_state_resync_interval`` seconds (one call a provider, spread over
  the polls), for room freed without a compute telling (an allocation
  deleted by hand).

**Why a stale state is safe.**  Claims go to placement as Nova makes them
(``PUT /allocations/{consumer}``), and placement refuses one that does
not fit: a state that shows room placement no longer has costs a failed
claim and the next alternate, never an over-commit.  A state that shows
less room than placement has (a free not yet seen) can hide a host: the
candidate limit asks placement's own query, from the start, whenever a
request the kept state answered ends in NoValidHost (an answer with no
candidate included).  A state whose last successful poll started more than
``kept_state_max_age`` seconds ago is not used at all.

Queries outside :mod:`~nova_sched_ext.cloud.candidate_query`'s subset,
and every query while any provider is nested or shares its inventory, go
to placement unchanged.  Thread-safe: one instance per scheduler manager,
shared by its concurrent requests.
"""

import collections
import threading
import time

from oslo_log import log as logging

from nova_sched_ext.cloud import candidate_query
from nova_sched_ext.cloud import poller
from nova_sched_ext.cloud import provider_snapshot
from nova_sched_ext.cloud import provider_state
from nova_sched_ext import conf

LOG = logging.getLogger(__name__)
CONF = conf.CONF

#: How many of this scheduler's recent claims are remembered, so that
#: removing one (Nova's clean-up of a request that failed midway) marks
#: the providers it held.
RECENT_CLAIMS = 10000


class KeptCandidates(object):
    """Providers kept current, and candidates answered from them.

    :param reader_factory: a callable returning a
        :class:`~nova_sched_ext.cloud.placement.PlacementReader`, called
        when the state is built (at :meth:`start` or the first
        :meth:`poll`)
    :param clock: monotonic seconds (tests pass their own)

    Options (read when built): ``[nova_sched_ext] kept_state_poll_interval``,
    ``kept_state_resync_interval``, ``kept_state_resync_max_rate``,
    ``kept_state_max_age``, ``kept_state_snapshot_*``
    (:mod:`~nova_sched_ext.cloud.provider_snapshot`).
    """

    def __init__(self, reader_factory, clock=time.monotonic):
        self._reader_factory = reader_factory
        self._clock = clock
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._state = None
        #: start of the last successful poll
        self._polled_at = None
        self._claims = collections.OrderedDict()
        #: callables run after each poll (the host state's rows)
        self._also = []
        opts = CONF.nova_sched_ext
        self.poll_interval = opts.kept_state_poll_interval
        self.resync_interval = opts.kept_state_resync_interval
        self.resync_max_rate = opts.kept_state_resync_max_rate
        self.max_age = opts.kept_state_max_age
        self.snapshot = provider_snapshot.Snapshot.from_options(
            opts, 'Kept provider state', clock=clock)
        self._poller = poller.Poller(
            lambda: self.poll(), lambda: self.poll_interval,
            'Kept provider state', 'placement',
            'queries go to placement once the state is older than %s s'
            % self.max_age, done=self._log_changes, clock=clock,
            log=LOG)
        #: a :class:`~nova_sched_ext.claim_casts.ClaimCasts` that tells
        #: the other schedulers of this one's claims, or None
        self.casts = None
        #: how queries were answered: ``kept``, ``empty`` (from the kept
        #: state, with no candidate), ``outside``, ``not_ready``,
        #: ``too_old``, ``cloud_outside`` (by placement)
        self.counts = collections.Counter()

    # --- the feed -----------------------------------------------------------

    def _get_state(self):
        with self._lock:
            if self._state is None:
                self._state = provider_state.ProviderState(
                    self._reader_factory(), snapshot=self.snapshot)
            return self._state

    def poll(self):
        """One poll now, and the usages of the providers whose resync is due.

        :returns: the poll's :class:`~nova_sched_ext.cloud.provider_state.
            Changes`
        :raises CloudError: placement could not be read (the state stays
            as it was)
        """
        with self._poll_lock:
            state = self._get_state()
            started = self._clock()
            changes = state.refresh()
            if self.resync_interval:
                self._resync_slice(state)
            self._polled_at = started
            state.save_snapshot()
        for function in self._also:
            function()
        return changes

    def _resync_slice(self, state):
        """Read the usages of the providers due (see ``resync``)."""
        freed = state.resync(self._clock(), self.resync_interval,
                             self.poll_interval, self.resync_max_rate)
        if freed:
            LOG.info('Kept provider state: the resync found the usages of '
                     '%d provider(s) changed without a word from their '
                     'computes.', len(freed))

    def also_poll(self, function):
        """Call ``function()`` after every poll, in the poller's thread.

        Its failure is the poll's: logged, and retried at the next one.
        """
        self._also.append(function)

    def start(self):
        """Poll in a thread of its own until :meth:`stop`."""
        if self._poller.running:
            return
        self._poller.start('nova-sched-ext-kept-state')
        LOG.info('Allocation candidates: answered from provider state kept '
                 'by polling placement every %(poll)s s (usages read '
                 'again every %(resync)s s; not used when older than '
                 '%(age)s s).',
                 {'poll': self.poll_interval,
                  'resync': self.resync_interval or 'never',
                  'age': self.max_age})

    def stop(self):
        """Stop polling; save the snapshot file, when there is one."""
        self._poller.stop()
        state = self._state
        if state is not None:
            with self._poll_lock:
                state.save_snapshot(force=True)

    @staticmethod
    def _log_changes(changes):
        if changes:
            # The UUIDs too: devstack-lite measures the staleness from
            # these lines.
            LOG.debug('Kept provider state: added %s; read again %s; '
                      'removed %s.', _uuids(changes.added),
                      _uuids(changes.changed), _uuids(changes.removed))

    def claimed(self, alloc_request, context=None):
        """This scheduler's claim of ``alloc_request`` succeeded.

        Counted in the state, and cast to the other schedulers when
        :attr:`casts` is set (:mod:`nova_sched_ext.claim_casts`).
        """
        state = self._state
        if state is not None:
            allocations = alloc_request.get('allocations', {})
            for uuid, alloc in allocations.items():
                state.claimed(uuid, alloc.get('resources', {}))
            # The UUIDs too: devstack-lite measures the staleness from
            # these.
            LOG.debug('Kept provider state: counted a claim of this '
                      'scheduler on %s.', _uuids(allocations))
        if self.casts is not None and context is not None:
            self.casts.cast(context, alloc_request)

    def claimed_elsewhere(self, allocations):
        """Another scheduler's claim: ``{provider uuid: {'resources'}}``."""
        state = self._state
        if state is None:
            return
        for uuid, alloc in allocations.items():
            state.claimed(uuid, alloc.get('resources', {}))
        # The UUIDs too: devstack-lite measures the staleness from these.
        LOG.debug('Kept provider state: counted a claim of another '
                  'scheduler on %s.', _uuids(allocations))

    def remember(self, consumer_uuid, alloc_request):
        with self._lock:
            self._claims[consumer_uuid] = tuple(
                alloc_request.get('allocations', {}))
            self._claims.move_to_end(consumer_uuid)
            while len(self._claims) > RECENT_CLAIMS:
                self._claims.popitem(last=False)

    def claim_failed(self, alloc_request):
        """Placement refused a claim: its providers changed meanwhile."""
        self.changed(*alloc_request.get('allocations', {}))

    def released(self, consumer_uuid):
        """The allocations of ``consumer_uuid`` were removed by Nova here."""
        with self._lock:
            uuids = self._claims.pop(consumer_uuid, ())
        self.changed(*uuids)

    def changed(self, *uuids):
        """Read these providers again at the next poll."""
        state = self._state
        if state is not None and uuids:
            state.stale(*uuids)

    def host_changed(self, host_name, node_uuids=()):
        """A compute told of an instance gone from or come to a host.

        :param node_uuids: the compute nodes' UUIDs the scheduler knows
            for ``host_name`` (its host state); the providers named
            ``host_name`` are marked too (the libvirt driver's node name
            is the host name).
        """
        state = self._state
        if state is None:
            return
        state.stale(*(tuple(node_uuids) + tuple(state.named(host_name))))

    # --- the answer ---------------------------------------------------------

    def age(self):
        """Seconds since the start of the last successful poll, or None."""
        polled = self._polled_at
        return None if polled is None else self._clock() - polled

    def answer(self, resources):
        """Nova's ``get_allocation_candidates`` answer for ``resources``.

        :param resources: Nova's ``ResourceRequest`` (its query string)
        :returns: ``(allocation_requests, provider_summaries, version)``
            as Nova's report client returns them (none when no kept
            provider has room), or None: placement must be asked (the
            query or the cloud is outside the subset, or the state is not
            ready or too old)
        """
        state = self._state
        age = self.age()
        if state is None or age is None or not state.ready:
            return self._placement('not_ready', 'no poll has completed')
        if age > self.max_age:
            return self._placement('too_old', 'the last poll started %.1f s '
                                   'ago' % age)
        reason = state.outside()
        if reason:
            return self._placement('cloud_outside', reason)
        try:
            query = candidate_query.parse(resources.to_querystring())
        except candidate_query.OutsideSubset as exc:
            return self._placement('outside', str(exc))
        alloc_reqs, summaries = candidate_query.candidates(
            query, state.providers())
        # An empty answer too: a pinned flavor's second query (VCPU in
        # place of PCPU) finds nothing on most clouds, and placement would
        # be asked for it on every request.  Room freed behind the state's
        # back is found all the same: a request that ends in NoValidHost
        # among the kept candidates is asked of placement.
        self.counts['kept' if alloc_reqs else 'empty'] += 1
        return alloc_reqs, summaries, candidate_query.MICROVERSION

    def _placement(self, count, why):
        self.counts[count] += 1
        LOG.debug('Allocation candidates from placement: %s.', why)
        return None


def _uuids(uuids):
    return ', '.join(sorted(uuids)) or 'none'
