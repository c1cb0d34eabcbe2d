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

"""A candidate limit that cannot hide a fit.

Placement answers a scheduling request with at most ``[scheduler]
max_placement_results`` allocation candidates (1000 by default), chosen
without any idea of NUMA cells, pinned CPUs, huge pages or which PCI
devices are free: it counts resources per host, not per cell.  In a nearly
full cloud every one of them can fail the NUMA fit while a host that fits
lies outside them, and stock Nova answers NoValidHost although the cloud
has room.

:class:`CandidateLimit` runs innermost in the package's scheduler manager
(:class:`nova_sched_ext.manager.SchedulerManager`), right around Nova's own
``select_destinations``:

1. Nova schedules as it always does, with its own limit.
2. If that ends in NoValidHost (the filters left fewer hosts than the
   request has instances, or no claim succeeded) and one of the request's
   placement queries came back with as many allocation requests as its
   limit asked for, so that placement may hold more, Nova schedules the
   request again with a limit ``[nova_sched_ext]
   placement_results_growth_factor`` times larger, up to
   ``placement_results_max``; each widening is logged at INFO with the
   numbers.  The widened candidates go through the same filters:
   NUMAFitFilter rejects the hosts that do not fit in C, in microseconds
   each, before Nova's NUMATopologyFilter sees the few that do.
3. It stops at the first answer, when placement returned fewer candidates
   than asked (it has no more), or at the largest limit.

Innermost, because the request wrappers outside (the deployment-set lock,
the preemptible caps, the eviction) take NoValidHost for "the cloud has no
room": the eviction would evict preemptible instances to make room that a
wider query finds free.  The deployment-set lock and the caps' zone lock are
held while the request is widened, as while Nova schedules it; a request
that placed some of its instances before failing has had their claims
removed by Nova before it is tried again.

Queries Nova sends without a limit (server group and
``same_host``/``different_host`` hints, a forced host with several nodes)
and rebuilds (no placement query) are never widened.  With ``[placement]
randomize_allocation_candidates`` on, each query is a new random sample of
the size asked; a limit at least as large as the candidates placement has
returns them all.

With kept candidates (:mod:`nova_sched_ext.kept_candidates`) the first
attempt's queries are answered from the state the scheduler keeps; it is
widened the same way, and when it ends in NoValidHost with no wider limit
the request is scheduled again with placement's own query, at the limit
the kept state's last answer was taken at (and widened as above): room
freed behind the kept state's back is found before NoValidHost.  Not from
Nova's limit: placement builds every candidate whatever the limit and
returns the first ones (with ``randomize_allocation_candidates`` off), so
a smaller limit finds a subset at the same cost, and a request that fits
nowhere would pay placement's whole query once per limit.

How the limit reaches placement: Nova builds the query (a
``nova.scheduler.utils.ResourceRequest``) and sends it through the
manager's ``placement_client``; the package's manager hands out a
:class:`PlacementClientView` of Nova's report client instead, whose
``get_allocation_candidates`` sets the limit of the calling thread's
current attempt and records what came back.  Everything else goes to the
report client unchanged.
"""

import threading

from nova import exception
from oslo_log import log as logging

from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf

LOG = logging.getLogger(__name__)
CONF = conf.CONF

#: the filters that make a wider query affordable (either one)
NUMA_FIT_FILTERS = ('NUMAFitFilter', 'FastNUMATopologyFilter')


class _Attempt(object):
    """One run of Nova's ``select_destinations`` and its placement queries.

    :param limit: the limit to send instead of Nova's; None keeps Nova's.
    :param kept: the :class:`~nova_sched_ext.kept_candidates.
        KeptCandidates` to answer the queries from, or None to ask
        placement.
    """

    def __init__(self, limit=None, kept=None):
        self.limit = limit
        self.kept = kept
        #: ``(limit sent or None, allocation requests returned, whether
        #: the kept state answered)`` per query
        self.queries = []

    def query(self, client, context, resources):
        # Nova keeps the limit of a query in ResourceRequest._limit and
        # sets it to None itself for the queries it wants unlimited; those
        # stay unlimited.  Anything but a number there (a Nova that keeps
        # it elsewhere) leaves the query as Nova made it, never widened.
        sent = nova_compat.query_limit(resources)
        if sent is not None and self.limit is not None:
            sent = self.limit
            nova_compat.set_query_limit(resources, sent)
        result = None
        if self.kept is not None:
            # None: placement must answer (outside the subset, not
            # ready, too old, or no candidate in the kept state).
            result = self.kept.answer(resources)
        kept = result is not None
        if not kept:
            result = client.get_allocation_candidates(context, resources)
        # (None, None, None) or None when placement failed: nothing came.
        alloc_reqs = result[0] if result else None
        self.queries.append((sent, len(alloc_reqs or ()), kept))
        return result

    def answered_from_kept(self):
        return any(kept for _sent, _returned, kept in self.queries)

    def largest_truncated_limit(self):
        """The largest limit a query of this attempt filled, or None.

        A query that returned as many allocation requests as its limit
        may have been cut short: placement may hold more.
        """
        filled = [sent for sent, returned, _kept in self.queries
                  if sent is not None and returned >= sent]
        return max(filled) if filled else None

    def describe(self):
        return ', '.join(
            ('%d of limit %d' % (returned, sent) if sent is not None
             else '%d, no limit' % returned) +
            (' (kept state)' if kept else '')
            for sent, returned, kept in self.queries) or 'no query'


class PlacementClientView(object):
    """Nova's report client, with the limit of the current attempt.

    ``get_allocation_candidates`` differs inside
    :meth:`CandidateLimit.schedule` on the calling thread (the limit of
    the attempt, the kept state's answer); with kept candidates,
    ``claim_resources`` and ``delete_allocation_for_instance`` also tell
    the kept state what they did.  Every other attribute is the report
    client's (looked up on each use, so that what patches the client,
    such as a test fixture or a bench's timer, still applies).
    """

    def __init__(self, client, candidate_limit):
        self.client = client
        self._candidate_limit = candidate_limit

    def get_allocation_candidates(self, context, resources):
        attempt = self._candidate_limit.current_attempt()
        if attempt is None:
            return self.client.get_allocation_candidates(context, resources)
        return attempt.query(self.client, context, resources)

    def claim_resources(self, context, consumer_uuid, alloc_request,
                        *args, **kwargs):
        claimed = self.client.claim_resources(
            context, consumer_uuid, alloc_request, *args, **kwargs)
        kept = self._candidate_limit.kept
        if kept is not None:
            if claimed:
                kept.claimed(alloc_request, context)
                kept.remember(consumer_uuid, alloc_request)
            else:
                kept.claim_failed(alloc_request)
        return claimed

    def delete_allocation_for_instance(self, context, uuid, *args,
                                       **kwargs):
        try:
            return self.client.delete_allocation_for_instance(
                context, uuid, *args, **kwargs)
        finally:
            kept = self._candidate_limit.kept
            if kept is not None:
                kept.released(uuid)

    def __getattr__(self, name):
        return getattr(self.client, name)


class CandidateLimit(object):
    """Widen placement's limit when it may have hidden a host that fits.

    One per scheduler manager, shared by its concurrent requests (Nova 34
    schedules each on a thread of its own): what belongs to one request is
    kept per thread.  Options, read per request: ``[scheduler]
    max_placement_results`` (Nova's first limit), ``[nova_sched_ext]
    placement_results_max`` and ``placement_results_growth_factor``.
    """

    def __init__(self, kept=None):
        self._local = threading.local()
        self._view = None
        #: the :class:`~nova_sched_ext.kept_candidates.KeptCandidates`
        #: that answers first, or None (``[nova_sched_ext]
        #: kept_candidates`` off)
        self.kept = kept

    def log_settings(self):
        """Say at start what the widening will do; warn when it is costly."""
        maximum = CONF.nova_sched_ext.placement_results_max
        base = CONF.scheduler.max_placement_results
        if maximum <= base:
            LOG.info('Allocation candidates: never asking placement for '
                     'more than [scheduler] max_placement_results = %d '
                     '([nova_sched_ext] placement_results_max = %d).',
                     base, maximum)
            return
        LOG.info('Allocation candidates: when the filters find no host '
                 'among the %(base)d placement returned, asking again with '
                 'up to %(max)d, %(factor)d times more each time.',
                 {'base': base, 'max': maximum,
                  'factor': CONF.nova_sched_ext
                  .placement_results_growth_factor})
        enabled = CONF.filter_scheduler.enabled_filters
        if not any(name in enabled for name in NUMA_FIT_FILTERS):
            LOG.warning('Allocation candidates: neither %(filters)s is in '
                        '[filter_scheduler] enabled_filters; a widened '
                        'query of up to %(max)d hosts is filtered by '
                        'Nova\'s NUMATopologyFilter alone, about 0.2 ms per '
                        'host.', {'filters': ' nor '.join(NUMA_FIT_FILTERS),
                                  'max': maximum})

    def client(self, client):
        """The view of the report client ``client`` Nova should use."""
        view = self._view
        if view is None or view.client is not client:
            # The report client is a process-wide singleton that tests
            # reset; a new one gets a new view.
            view = self._view = PlacementClientView(client, self)
        return view

    def current_attempt(self):
        return getattr(self._local, 'attempt', None)

    def schedule(self, call_nova, context, spec_obj, instance_uuids):
        """``call_nova(context, spec_obj, instance_uuids)``, widened if needed.

        :param call_nova: Nova's ``select_destinations`` for this request
            (Selection objects out, NoValidHost raised as such)
        :returns: what ``call_nova`` returned, the first time it did not
            raise NoValidHost
        :raises NoValidHost: the last attempt's
        """
        previous = self.current_attempt()
        limit = None
        kept = self.kept
        try:
            while True:
                attempt = self._local.attempt = _Attempt(limit, kept)
                try:
                    selections = call_nova(context, spec_obj, instance_uuids)
                except exception.NoValidHost:
                    wider = self._wider_limit(attempt)
                    if wider is None and attempt.answered_from_kept():
                        # The kept state may miss room freed behind its
                        # back: placement's own query before NoValidHost,
                        # at the limit the kept state's last answer was
                        # taken at.  Placement builds every candidate
                        # whatever the limit and returns the first ones,
                        # so a smaller limit would only find fewer, at
                        # the cost of a full query each (at 10,000
                        # providers, three queries for a request that
                        # fits nowhere instead of one).
                        LOG.info('Allocation candidates: request %(req)s '
                                 'found no host among the kept state\'s '
                                 'candidates (%(queries)s); asking '
                                 'placement%(limit)s.',
                                 {'req': context.request_id,
                                  'queries': attempt.describe(),
                                  'limit': '' if limit is None else
                                  ' with limit %d' % limit})
                        kept = None
                        continue
                    if wider is None:
                        if limit is not None:
                            LOG.info('Allocation candidates: request %(req)s '
                                     'found no host with limit %(limit)d '
                                     'either (placement returned '
                                     '%(queries)s).',
                                     {'req': context.request_id,
                                      'limit': limit,
                                      'queries': attempt.describe()})
                        raise
                    LOG.info('Allocation candidates: request %(req)s: the '
                             'filters left fewer than %(needed)d host(s) '
                             'among the candidates placement returned '
                             '(%(queries)s); asking again with limit '
                             '%(wider)d.',
                             {'req': context.request_id,
                              'needed': _instances(spec_obj, instance_uuids),
                              'queries': attempt.describe(),
                              'wider': wider})
                    limit = wider
                    continue
                if limit is not None:
                    LOG.info('Allocation candidates: request %(req)s placed '
                             'with limit %(limit)d (placement returned '
                             '%(queries)s).',
                             {'req': context.request_id, 'limit': limit,
                              'queries': attempt.describe()})
                return selections
        finally:
            self._local.attempt = previous

    @staticmethod
    def _wider_limit(attempt):
        """The limit of the next attempt, or None if there is none."""
        filled = attempt.largest_truncated_limit()
        if filled is None:
            return None
        wider = min(CONF.nova_sched_ext.placement_results_max,
                    filled * CONF.nova_sched_ext
                    .placement_results_growth_factor)
        return wider if wider > filled else None


def _instances(spec_obj, instance_uuids):
    """How many instances the request places (as Nova's _schedule counts)."""
    if instance_uuids:
        return len(instance_uuids)
    return spec_obj.num_instances
