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

"""The limit that widens placement's query: nova_sched_ext.candidates.

Nova's query object (``ResourceRequest``) is real; placement is a fake
report client that holds ``total`` candidates and returns as many as the
limit it receives; "Nova" is a function that asks it through the view, as
Nova's ``select_destinations`` does, and fails unless a given host is
among the candidates.
"""

import threading
from unittest import mock

from nova import context
from nova import exception
from nova import objects
from nova.scheduler import utils as scheduler_utils
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import candidates


class FakePlacement(object):
    """``total`` candidates, one per host ``h0`` .. ``h<total-1>``."""

    def __init__(self, total):
        self.total = total
        #: the limit of each query received
        self.limits = []

    def get_allocation_candidates(self, ctxt, resources):
        self.limits.append(resources._limit)
        count = self.total if resources._limit is None else min(
            self.total, resources._limit)
        alloc_reqs = [{'allocations': {'h%d' % i: {'resources': {}}}}
                      for i in range(count)]
        return alloc_reqs, {'h%d' % i: {} for i in range(count)}, '1.36'

    def delete_allocation_for_instance(self, *args, **kwargs):
        return 'deleted'


def resource_request(limit=1000):
    request = scheduler_utils.ResourceRequest()
    request._limit = limit
    return request


class NovaFake(object):
    """Nova's select_destinations: candidates from the view, then a fit.

    :param fits: the host the request fits on, or None
    :param queries: queries per attempt (2: a pinned flavor's PCPU query
        and its VCPU fallback)
    """

    def __init__(self, view, fits, queries=1, limit=1000):
        self.view = view
        self.fits = fits
        self.queries = queries
        self.limit = limit
        self.calls = 0

    def __call__(self, ctxt, spec_obj, instance_uuids):
        self.calls += 1
        hosts = set()
        for _query in range(self.queries):
            alloc_reqs, _summaries, _version = \
                self.view.get_allocation_candidates(
                    ctxt, resource_request(self.limit))
            for ar in alloc_reqs:
                hosts.update(ar['allocations'])
        if self.fits in hosts:
            return [[self.fits]]
        raise exception.NoValidHost(reason='')


class CandidateLimitTestCase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(max_placement_results=1000, group='scheduler')
        self.limit = candidates.CandidateLimit()
        self.context = context.RequestContext('user', 'project')
        self.spec_obj = objects.RequestSpec(num_instances=1)

    def schedule(self, total, fits, **kwargs):
        placement = FakePlacement(total)
        nova = NovaFake(self.limit.client(placement), fits, **kwargs)
        try:
            return placement, nova, self.limit.schedule(
                nova, self.context, self.spec_obj, [uuids.instance])
        except exception.NoValidHost as exc:
            return placement, nova, exc

    def test_a_host_outside_the_first_limit_is_found(self):
        placement, nova, result = self.schedule(1500, 'h1400')
        self.assertEqual([['h1400']], result)
        self.assertEqual([1000, 4000], placement.limits)
        log = self.stdlog.logger.output
        self.assertIn('the filters left fewer than 1 host(s) among the '
                      'candidates placement returned (1000 of limit '
                      '1000); asking again with limit 4000', log)
        self.assertIn('placed with limit 4000 (placement returned 1500 of '
                      'limit 4000)', log)

    def test_nothing_changes_when_the_first_query_finds_a_host(self):
        placement, nova, result = self.schedule(1500, 'h10')
        self.assertEqual([['h10']], result)
        self.assertEqual([1000], placement.limits)
        self.assertNotIn('Allocation candidates', self.stdlog.logger.output)

    def test_no_widening_when_placement_returned_all_it_has(self):
        placement, nova, result = self.schedule(999, 'nowhere')
        self.assertIsInstance(result, exception.NoValidHost)
        self.assertEqual([1000], placement.limits)
        self.assertEqual(1, nova.calls)

    def test_widening_stops_when_placement_has_no_more(self):
        placement, nova, result = self.schedule(1500, 'nowhere')
        self.assertIsInstance(result, exception.NoValidHost)
        self.assertEqual([1000, 4000], placement.limits)
        self.assertIn('found no host with limit 4000 either (placement '
                      'returned 1500 of limit 4000)',
                      self.stdlog.logger.output)

    def test_widening_is_bounded_by_the_maximum(self):
        placement, nova, result = self.schedule(10 ** 6, 'nowhere')
        self.assertIsInstance(result, exception.NoValidHost)
        self.assertEqual([1000, 4000, 10000], placement.limits)

    def test_the_maximum_itself_is_reached(self):
        placement, nova, result = self.schedule(10 ** 6, 'h9999')
        self.assertEqual([['h9999']], result)
        self.assertEqual([1000, 4000, 10000], placement.limits)

    def test_growth_factor_and_maximum_are_options(self):
        self.flags(placement_results_max=3000,
                   placement_results_growth_factor=2, group='nova_sched_ext')
        placement, nova, result = self.schedule(10 ** 6, 'nowhere')
        self.assertEqual([1000, 2000, 3000], placement.limits)

    def test_a_maximum_not_above_nova_limit_never_widens(self):
        for maximum in (0, 1000, 500):
            self.flags(placement_results_max=maximum, group='nova_sched_ext')
            placement, nova, result = self.schedule(1500, 'h1400')
            self.assertIsInstance(result, exception.NoValidHost)
            self.assertEqual([1000], placement.limits)

    def test_an_unlimited_query_stays_unlimited(self):
        # Nova asks without a limit for server groups and host hints.
        placement, nova, result = self.schedule(1500, 'nowhere',
                                                limit=None)
        self.assertIsInstance(result, exception.NoValidHost)
        self.assertEqual([None], placement.limits)
        self.assertEqual(1, nova.calls)

    def test_both_queries_of_a_pinned_flavor_are_widened(self):
        placement, nova, result = self.schedule(1500, 'h1400', queries=2)
        self.assertEqual([['h1400']], result)
        self.assertEqual([1000, 1000, 4000, 4000], placement.limits)
        self.assertIn('(1000 of limit 1000, 1000 of limit 1000)',
                      self.stdlog.logger.output)

    def test_a_query_without_a_numeric_limit_is_left_alone(self):
        # What the view relies on moved in Nova: no widening, no error.
        placement = mock.Mock()
        placement.get_allocation_candidates.return_value = (
            [{'allocations': {}}] * 1000, {}, '1.36')
        view = self.limit.client(placement)
        resources = mock.Mock(spec=[])

        def nova(ctxt, spec_obj, instance_uuids):
            view.get_allocation_candidates(ctxt, resources)
            raise exception.NoValidHost(reason='')

        self.assertRaises(exception.NoValidHost, self.limit.schedule, nova,
                          self.context, self.spec_obj, [uuids.instance])
        placement.get_allocation_candidates.assert_called_once_with(
            self.context, resources)
        self.assertFalse(hasattr(resources, '_limit'))

    def test_a_failed_placement_query_is_not_widened(self):
        placement = mock.Mock()
        placement.get_allocation_candidates.return_value = (None, None, None)
        view = self.limit.client(placement)

        def nova(ctxt, spec_obj, instance_uuids):
            view.get_allocation_candidates(ctxt, resource_request())
            raise exception.NoValidHost(reason='')

        self.assertRaises(exception.NoValidHost, self.limit.schedule, nova,
                          self.context, self.spec_obj, [uuids.instance])
        placement.get_allocation_candidates.assert_called_once()

    def test_a_failure_that_is_not_no_valid_host_is_not_retried(self):
        placement = FakePlacement(1500)
        view = self.limit.client(placement)

        def nova(ctxt, spec_obj, instance_uuids):
            view.get_allocation_candidates(ctxt, resource_request())
            raise ValueError('bug')

        self.assertRaises(ValueError, self.limit.schedule, nova,
                          self.context, self.spec_obj, [uuids.instance])
        self.assertEqual([1000], placement.limits)
        self.assertIsNone(self.limit.current_attempt())

    def test_the_view_passes_nova_limit_outside_a_request(self):
        placement = FakePlacement(1500)
        view = self.limit.client(placement)
        view.get_allocation_candidates(self.context, resource_request(1000))
        self.assertEqual([1000], placement.limits)
        # Every other method is the report client's (and this one, without
        # kept state, only passes the call on).
        self.assertEqual('deleted', view.delete_allocation_for_instance(
            self.context, uuids.instance))

    def test_the_view_is_the_same_while_the_client_is(self):
        first, second = FakePlacement(1), FakePlacement(1)
        self.assertIs(self.limit.client(first), self.limit.client(first))
        self.assertIsNot(self.limit.client(first),
                         self.limit.client(second))
        self.assertIs(second, self.limit.client(second).client)

    def test_a_widened_limit_stays_in_its_thread(self):
        # Two requests at once: one widened, one in another thread whose
        # queries keep Nova's limit.
        placement = FakePlacement(1500)
        view = self.limit.client(placement)
        other_limits = []
        inside = threading.Event()
        done = threading.Event()

        def other_request():
            inside.wait()
            request = resource_request(1000)
            view.get_allocation_candidates(self.context, request)
            other_limits.append(request._limit)
            done.set()

        def nova(ctxt, spec_obj, instance_uuids):
            alloc_reqs, _s, _v = view.get_allocation_candidates(
                ctxt, resource_request())
            if len(alloc_reqs) < 1500:
                raise exception.NoValidHost(reason='')
            inside.set()
            done.wait()
            return [['h1400']]

        thread = threading.Thread(target=other_request)
        thread.start()
        self.limit.schedule(nova, self.context, self.spec_obj,
                            [uuids.instance])
        thread.join()
        self.assertEqual([1000], other_limits)

    def test_settings_are_logged_with_a_warning_without_numa_fit(self):
        self.flags(enabled_filters=['ComputeFilter', 'NUMATopologyFilter'],
                   group='filter_scheduler')
        self.limit.log_settings()
        log = self.stdlog.logger.output
        self.assertIn('asking again with up to 10000, 4 times more', log)
        self.assertIn('neither NUMAFitFilter nor FastNUMATopologyFilter is '
                      'in [filter_scheduler] enabled_filters', log)

    def test_no_warning_with_the_fast_numa_filter(self):
        self.flags(enabled_filters=['ComputeFilter',
                                    'FastNUMATopologyFilter'],
                   group='filter_scheduler')
        self.limit.log_settings()
        self.assertNotIn('enabled_filters', self.stdlog.logger.output)

    def test_settings_without_widening(self):
        self.flags(placement_results_max=0, group='nova_sched_ext')
        self.limit.log_settings()
        self.assertIn('never asking placement for more than [scheduler] '
                      'max_placement_results = 1000',
                      self.stdlog.logger.output)


class FakeKept(object):
    """The kept state: candidates on ``hosts``; None: placement must answer.

    Records the limit of each query it is asked and what the view tells
    it of claims and removals.
    """

    def __init__(self, hosts):
        self.hosts = hosts
        self.limits = []
        self.told = []

    def answer(self, resources):
        self.limits.append(resources._limit)
        if self.hosts is None:
            return None
        hosts = self.hosts[:resources._limit]
        return ([{'allocations': {h: {'resources': {}}}} for h in hosts],
                {h: {} for h in hosts}, '1.36')

    def claimed(self, alloc_req, context=None):
        self.told.append(('claimed', sorted(alloc_req['allocations'])))

    def remember(self, consumer, alloc_req):
        self.told.append(('remember', consumer))

    def claim_failed(self, alloc_req):
        self.told.append(('claim_failed', sorted(alloc_req['allocations'])))

    def released(self, consumer):
        self.told.append(('released', consumer))


class KeptCandidatesTestCase(test.NoDBTestCase):
    """The candidate limit with ``[nova_sched_ext] kept_candidates``."""

    def setUp(self):
        super().setUp()
        self.flags(max_placement_results=1000, group='scheduler')
        self.context = context.RequestContext('user', 'project')
        self.spec_obj = objects.RequestSpec(num_instances=1)

    def schedule(self, kept_hosts, total, fits, **kwargs):
        kept = FakeKept(kept_hosts)
        limit = candidates.CandidateLimit(kept=kept)
        placement = FakePlacement(total)
        nova = NovaFake(limit.client(placement), fits, **kwargs)
        try:
            result = limit.schedule(nova, self.context, self.spec_obj,
                                    [uuids.instance])
        except exception.NoValidHost as exc:
            result = exc
        return kept, placement, nova, result

    def test_the_kept_answer_replaces_placements(self):
        kept, placement, nova, result = self.schedule(['h1', 'h2'], 1500,
                                                      'h2')
        self.assertEqual([['h2']], result)
        self.assertEqual([1000], kept.limits)
        self.assertEqual([], placement.limits)

    def test_no_host_among_the_kept_candidates_asks_placement(self):
        # room freed behind the state's back: only placement knows
        kept, placement, nova, result = self.schedule(['h1'], 10, 'h5')
        self.assertEqual([['h5']], result)
        self.assertEqual([1000], kept.limits)
        self.assertEqual([1000], placement.limits)
        self.assertIn('found no host among the kept state\'s candidates '
                      '(1 of limit 1000 (kept state)); asking placement.',
                      self.stdlog.logger.output)

    def test_placement_is_asked_once_more_then_no_valid_host(self):
        kept, placement, nova, result = self.schedule(['h1'], 10, 'nowhere')
        self.assertIsInstance(result, exception.NoValidHost)
        self.assertEqual(2, nova.calls)
        self.assertEqual([1000], placement.limits)

    def test_the_kept_answer_is_widened_first(self):
        kept, placement, nova, result = self.schedule(
            ['h%d' % i for i in range(1500)], 1500, 'h1400')
        self.assertEqual([['h1400']], result)
        self.assertEqual([1000, 4000], kept.limits)
        self.assertEqual([], placement.limits)

    def test_placement_is_asked_at_the_kept_states_widest_limit(self):
        # the kept state widened to every candidate and none fits:
        # placement once, with that limit, not 1000 then 4000 then 10000
        hosts = ['h%d' % i for i in range(12000)]
        kept, placement, nova, result = self.schedule(hosts, 12000,
                                                      'nowhere')
        self.assertIsInstance(result, exception.NoValidHost)
        self.assertEqual([1000, 4000, 10000], kept.limits)
        self.assertEqual([10000], placement.limits)
        self.assertIn('(kept state)); asking placement with limit 10000.',
                      self.stdlog.logger.output)
        # room freed behind its back is found at that limit too
        kept, placement, nova, result = self.schedule(
            hosts[:1500], 12000, 'h5000')
        self.assertEqual([['h5000']], result)
        self.assertEqual([1000, 4000], kept.limits)
        self.assertEqual([4000, 10000], placement.limits)

    def test_what_the_state_cannot_answer_goes_to_placement_once(self):
        kept, placement, nova, result = self.schedule(None, 10, 'nowhere')
        self.assertIsInstance(result, exception.NoValidHost)
        self.assertEqual(1, nova.calls)
        self.assertEqual([1000], placement.limits)
        kept, placement, nova, result = self.schedule(None, 10, 'h3')
        self.assertEqual([['h3']], result)

    def test_claims_and_removals_reach_the_kept_state(self):
        kept = FakeKept([])
        placement = mock.Mock()
        placement.claim_resources.side_effect = [True, False]
        view = candidates.CandidateLimit(kept=kept).client(placement)
        alloc_req = {'allocations': {'h1': {'resources': {'VCPU': 1}}}}
        self.assertTrue(view.claim_resources(
            self.context, uuids.first, alloc_req, 'p', 'u',
            allocation_request_version='1.36', consumer_generation=None))
        self.assertFalse(view.claim_resources(
            self.context, uuids.second, alloc_req, 'p', 'u',
            allocation_request_version='1.36', consumer_generation=None))
        placement.delete_allocation_for_instance.side_effect = ValueError
        self.assertRaises(ValueError, view.delete_allocation_for_instance,
                          self.context, uuids.first, force=True)
        self.assertEqual([('claimed', ['h1']), ('remember', uuids.first),
                          ('claim_failed', ['h1']),
                          ('released', uuids.first)], kept.told)
        placement.claim_resources.assert_called_with(
            self.context, uuids.second, alloc_req, 'p', 'u',
            allocation_request_version='1.36', consumer_generation=None)

    def test_without_kept_state_the_view_only_passes_claims_on(self):
        placement = mock.Mock()
        view = candidates.CandidateLimit().client(placement)
        self.assertIs(placement.claim_resources.return_value,
                      view.claim_resources(self.context, uuids.first, {}))
        view.delete_allocation_for_instance(self.context, uuids.first)
        placement.delete_allocation_for_instance.assert_called_once_with(
            self.context, uuids.first)


class NovaResourceRequestTestCase(test.NoDBTestCase):
    """What the view relies on in Nova's query object."""

    def test_the_limit_is_max_placement_results_and_is_sent(self):
        self.flags(max_placement_results=1234, group='scheduler')
        flavor = objects.Flavor(vcpus=2, memory_mb=512, root_gb=1,
                                ephemeral_gb=0, swap=0, extra_specs={})
        image = objects.ImageMeta(properties=objects.ImageMetaProps())
        spec_obj = objects.RequestSpec(flavor=flavor, is_bfv=False,
                                       image=image)
        request = scheduler_utils.ResourceRequest.from_request_spec(spec_obj)
        self.assertEqual(1234, request._limit)
        request._limit = 4000
        self.assertIn('limit=4000', request.to_querystring())
