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

"""Candidates from kept state: nova_sched_ext.kept_candidates.

On openstack-placement itself, in this process
(:mod:`nova_sched_ext_tools.placement_direct`): the kept answer equals
placement's own ``GET /allocation_candidates``; the state is current
after the signals that keep it (this scheduler's claims at once, a
compute's word of a host, a resync for what nobody tells) and, without
them, is not (the frees placement's generations do not show); placement
is asked whenever the kept state cannot answer.
"""

import logging
import os
import threading
import uuid as uuid_lib

import fixtures
from oslo_config import fixture as config_fixture

from nova_sched_ext.cloud import errors as cloud_errors
from nova_sched_ext.cloud import placement as p
from nova_sched_ext import conf
from nova_sched_ext import kept_candidates
from nova_sched_ext_tools import placement_direct
from tests import base
from tests.unit.cloud import placement_fixtures as pf

CONTEXT = placement_direct.Context('req-nse-test-kept-candidates')


class FakeClock(object):

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Request(object):
    """What the kept state reads of Nova's ``ResourceRequest``."""

    def __init__(self, querystring):
        self.querystring = querystring

    def to_querystring(self):
        return self.querystring


ONE_VCPU = Request('resources=VCPU:1')


def node(vcpus=8, used=0, traits=(), aggregates=()):
    return {'inventories': {
        'VCPU': p.Inventory(total=vcpus, max_unit=vcpus),
        'MEMORY_MB': p.Inventory(total=8192, max_unit=8192)},
        'usages': {'VCPU': used} if used else {},
        'traits': frozenset(traits), 'aggregates': frozenset(aggregates)}


def hosts(answer):
    return sorted(uuid for ar in answer[0] for uuid in ar['allocations'])


class KeptCandidatesTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(pf.InProcessPlacement()).placement
        self.log = self.useFixture(fixtures.FakeLogger(
            name=kept_candidates.__name__, level=logging.INFO))
        self.clock = FakeClock()
        self.client = placement_direct.Counting(self.placement)
        self.kept = kept_candidates.KeptCandidates(
            lambda: p.PlacementReader(CONTEXT, client=self.client),
            clock=self.clock)

    def theirs(self, querystring):
        body = self.placement.call(
            'get', '/allocation_candidates?' + querystring)
        return body['allocation_requests'], body['provider_summaries']

    def claim(self, uuid, vcpus, consumer=None):
        consumer = consumer or str(uuid_lib.uuid4())
        alloc_req = {'allocations': {uuid: {'resources': {'VCPU': vcpus}}}}
        self.placement.call('put', '/allocations/%s' % consumer, dict(
            alloc_req, project_id='p', user_id='u',
            consumer_generation=None))
        return consumer, alloc_req

    def free(self, consumer):
        self.placement.call('delete', '/allocations/%s' % consumer)

    def test_the_answer_is_placements(self):
        self.placement.create([
            node(used=2, traits=['HW_CPU_X86_AVX2'],
                 aggregates=pf.AGGREGATES[:1]),
            node(used=7, aggregates=pf.AGGREGATES[1:2]),
            node(traits=['COMPUTE_STATUS_DISABLED'])])
        self.kept.poll()
        for querystring in (
                'resources=VCPU:1,MEMORY_MB:512&limit=1000',
                'resources=VCPU:2&limit=1000',
                'resources=VCPU:2&required=!COMPUTE_STATUS_DISABLED',
                'resources=VCPU:1&required=HW_CPU_X86_AVX2',
                'resources=VCPU:1&member_of=in:%s,%s' % pf.AGGREGATES[:2],
                'resources=VCPU:1&limit=1'):
            ours = self.kept.answer(Request(querystring))
            theirs = self.theirs(querystring)
            self.assertEqual('1.36', ours[2])
            self.assertEqual(len(theirs[0]), len(ours[0]), querystring)
            if 'limit=1' not in querystring.split('&'):
                self.assertEqual(hosts(theirs), hosts(ours), querystring)
                self.assertEqual(theirs[1], ours[1], querystring)
        self.assertEqual(6, self.kept.counts['kept'])

    def test_placement_answers_what_the_state_cannot(self):
        request = Request('resources=VCPU:1')
        self.assertIsNone(self.kept.answer(request))
        self.assertEqual(1, self.kept.counts['not_ready'])
        self.placement.create([node()])
        self.kept.poll()
        self.assertEqual(1, len(self.kept.answer(request)[0]))
        # no room: an empty answer (the candidate limit asks placement if
        # the request then finds no host)
        self.assertEqual(([], {}, '1.36'),
                         self.kept.answer(Request('resources=VCPU:9')))
        self.assertEqual(1, self.kept.counts['empty'])
        # a numbered group is outside the subset
        self.assertIsNone(self.kept.answer(Request(
            'resources=VCPU:1&resources1=MEMORY_MB:1')))
        self.assertEqual(1, self.kept.counts['outside'])
        # too old: the last poll started longer ago than the bound
        self.clock.now += self.kept.max_age + 1
        self.assertIsNone(self.kept.answer(request))
        self.assertEqual(1, self.kept.counts['too_old'])
        self.kept.poll()
        self.assertEqual(1, len(self.kept.answer(request)[0]))

    def test_a_nested_provider_sends_every_query_to_placement(self):
        [root] = self.placement.create([node()])
        self.kept.poll()
        self.assertEqual([root.uuid],
                         hosts(self.kept.answer(Request('resources=VCPU:1'))))
        self.placement.call('post', '/resource_providers', {
            'name': 'child', 'uuid': str(uuid_lib.uuid4()),
            'parent_provider_uuid': root.uuid}, version='1.14',
            ok=(200, 201))
        self.kept.poll()
        self.assertIsNone(self.kept.answer(Request('resources=VCPU:1')))
        self.assertEqual(1, self.kept.counts['cloud_outside'])

    def test_own_claims_count_before_the_next_poll(self):
        [host] = self.placement.create([node(vcpus=4)])
        self.kept.poll()
        answer = self.kept.answer(Request('resources=VCPU:3'))
        consumer, alloc_req = self.claim(host.uuid, 3)
        self.kept.claimed(answer[0][0])
        self.kept.remember(consumer, answer[0][0])
        # no poll yet: the claim is in the state already
        self.assertEqual([], self.kept.answer(Request('resources=VCPU:2'))[0])
        self.kept.poll()
        self.assertEqual(3, self.kept._state.providers()[0].usages['VCPU'])
        # Nova removes its claim (a request that failed midway): the
        # provider is read again at the next poll
        self.free(consumer)
        self.kept.released(consumer)
        self.kept.poll()
        self.assertEqual([host.uuid],
                         hosts(self.kept.answer(Request('resources=VCPU:2'))))

    def test_a_free_nobody_tells_of_is_seen_at_the_resync(self):
        [host] = self.placement.create([node(vcpus=4)])
        consumer, _alloc_req = self.claim(host.uuid, 4)
        self.kept.poll()
        self.free(consumer)
        self.kept.poll()
        # placement's generation did not move: the poll cannot see it
        self.assertEqual([], self.kept.answer(Request('resources=VCPU:1'))[0])
        # (a poll reads at most the share of two poll intervals)
        self.kept.resync_interval = 2 * self.kept.poll_interval
        self.clock.now += self.kept.resync_interval
        before = self.client.calls
        self.kept.poll()
        # the listing, then the usages of each provider
        self.assertEqual(1 + 1, self.client.calls - before)
        self.assertIn('the resync found the usages of 1 provider(s) changed',
                      self.log.output)
        self.assertEqual(1, len(self.kept.answer(ONE_VCPU)[0]))

    def test_the_resync_is_spread_over_the_polls(self):
        providers = self.placement.create([node(vcpus=4) for _ in range(4)])
        consumers = [self.claim(rp.uuid, 4)[0] for rp in providers]
        self.kept.resync_interval = 4 * self.kept.poll_interval
        self.kept.poll()
        for consumer in consumers:
            self.free(consumer)
        seen = []
        for _quarter in range(4):
            # a quarter of the interval: a quarter of the providers
            self.clock.now += self.kept.resync_interval / 4
            before = self.client.calls
            self.kept.poll()
            self.assertEqual(1 + 1, self.client.calls - before)
            seen.append(hosts(self.kept.answer(ONE_VCPU)))
        # one more provider with room after each poll, each once
        self.assertEqual([1, 2, 3, 4], [len(h) for h in seen])
        self.assertEqual(sorted(rp.uuid for rp in providers), seen[-1])

    def test_a_first_read_longer_than_the_interval_is_not_read_again(self):
        self.placement.create([node(vcpus=4) for _ in range(4)])
        get = self.client.get

        def slow_get(*args, **kwargs):
            # a busy placement: the first read takes 10 intervals
            self.clock.now += self.kept.resync_interval / 2
            return get(*args, **kwargs)

        self.client.get = slow_get
        self.kept.poll()
        self.assertGreater(self.client.calls, 16)
        self.client.get = get
        # every usage was read by that first read: the next poll reads
        # the listing and the share of them that one poll interval is of
        # the resync interval (none of four), not all four again
        self.clock.now += self.kept.poll_interval
        before = self.client.calls
        self.kept.poll()
        self.assertEqual(1, self.client.calls - before)
        self.assertEqual(4, len(self.kept.answer(ONE_VCPU)[0]))

    def test_a_long_poll_reads_no_larger_share_of_usages(self):
        self.kept.resync_interval = 8 * self.kept.poll_interval
        self.placement.create([node(vcpus=4) for _ in range(8)])
        self.kept.poll()
        # a poll that ended four intervals after the last one (placement
        # was slow): the share of two intervals, two of the eight
        # providers, not four
        self.clock.now += 4 * self.kept.poll_interval
        before = self.client.calls
        self.kept.poll()
        self.assertEqual(1 + 2, self.client.calls - before)
        # and at the usual pace, one of eight per interval again
        self.clock.now += self.kept.poll_interval
        before = self.client.calls
        self.kept.poll()
        self.assertEqual(1 + 1, self.client.calls - before)

    def test_the_resync_reads_at_most_its_rate(self):
        # 8 providers in 2 poll intervals would be 4 reads a poll; capped
        # at one read a second, a poll (one second) reads one, and the
        # round takes 8 polls.  0 sets no cap.
        self.assertEqual(5.0, self.kept.resync_max_rate)
        self.kept.resync_interval = 2 * self.kept.poll_interval
        self.kept.resync_max_rate = 1.0 / self.kept.poll_interval
        self.placement.create([node(vcpus=4) for _ in range(8)])
        self.kept.poll()
        reads = []
        for _poll in range(3):
            self.clock.now += self.kept.poll_interval
            before = self.client.calls
            self.kept.poll()
            reads.append(self.client.calls - before - 1)
        self.assertEqual([1, 1, 1], reads)
        self.kept.resync_max_rate = 0
        self.clock.now += self.kept.poll_interval
        before = self.client.calls
        self.kept.poll()
        self.assertEqual(4, self.client.calls - before - 1)

    def test_a_compute_telling_of_a_host_marks_its_providers(self):
        first, second = self.placement.create([node(vcpus=4), node(vcpus=4)])
        consumers = [self.claim(host.uuid, 4)[0] for host in (first, second)]
        self.kept.poll()
        for consumer in consumers:
            self.free(consumer)
        names = {rp.uuid: rp.name for rp in self.kept._state.providers()}
        # by name (the libvirt driver's node is named after its host)
        self.kept.host_changed(names[first.uuid])
        self.kept.poll()
        self.assertEqual([first.uuid],
                         hosts(self.kept.answer(Request('resources=VCPU:1'))))
        # by the compute node UUID the host state knows
        self.kept.host_changed('another-name', [second.uuid])
        self.kept.poll()
        self.assertEqual(sorted([first.uuid, second.uuid]),
                         hosts(self.kept.answer(Request('resources=VCPU:1'))))

    def test_a_refused_claim_marks_its_providers(self):
        [host] = self.placement.create([node(vcpus=4)])
        self.kept.poll()
        self.kept._state.claimed(host.uuid, {'VCPU': 1})
        self.kept.poll()
        before = self.client.calls
        self.kept.claim_failed({'allocations': {host.uuid: {}}})
        self.kept.poll()
        self.assertEqual(1 + 4, self.client.calls - before)

    def test_a_restart_takes_the_snapshot_and_reads_what_changed(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'kept.json')
        config = self.useFixture(config_fixture.Config(conf.CONF))
        config.config(group='nova_sched_ext', kept_state_snapshot_file=path,
                      kept_state_snapshot_interval=60,
                      kept_state_snapshot_verify_per_poll=0)
        providers = self.placement.create([node() for _ in range(3)])

        def started():
            return kept_candidates.KeptCandidates(
                lambda: p.PlacementReader(CONTEXT, client=self.client),
                clock=self.clock)

        self.kept = started()
        self.kept.poll()                    # the first poll saves it
        mtime = os.stat(path).st_mtime_ns
        self.clock.now += 59
        self.kept.poll()
        self.assertEqual(mtime, os.stat(path).st_mtime_ns)
        # stopped: saved, with the claim it counted that placement has not
        # seen; another process claims meanwhile
        self.kept._state.claimed(providers[0].uuid, {'VCPU': 1})
        self.kept.stop()
        self.claim(providers[1].uuid, 8)
        self.kept = started()
        before = self.client.calls
        self.kept.poll()
        # the listing, then the two marked changed: not all three
        self.assertEqual(1 + 4 * 2, self.client.calls - before)
        self.assertEqual(hosts(self.theirs('resources=VCPU:1')),
                         hosts(self.kept.answer(ONE_VCPU)))
        self.assertEqual(2, len(self.kept.answer(ONE_VCPU)[0]))

    def test_the_poller_thread_polls_until_stopped(self):
        self.placement.create([node()])
        self.kept = kept_candidates.KeptCandidates(
            lambda: p.PlacementReader(CONTEXT, client=self.client))
        self.kept.poll_interval = 0.01
        polled = threading.Event()
        poll = self.kept.poll

        def counted():
            changes = poll()
            polled.set()
            return changes

        self.kept.poll = counted
        self.kept.start()
        self.assertTrue(polled.wait(60))
        self.kept.stop()
        self.assertFalse(self.kept._poller.running)
        self.assertEqual(1, len(self.kept.answer(ONE_VCPU)[0]))
        self.assertIn('answered from provider state kept by polling '
                      'placement every 0.01 s', self.log.output)

    def test_an_unexpected_failure_is_logged_once_a_streak(self):
        calls = []

        def broken():
            calls.append(1)
            if len(calls) == 3:
                self.kept._poller.stopping.set()
            raise ValueError('a bug')

        self.kept.poll = broken
        self.kept.poll_interval = 0.0
        self.kept._poller.run()
        self.assertEqual(3, len(calls))
        self.assertEqual(1, self.log.output.count(
            'Kept provider state: the poll failed'))

    def test_a_failing_poll_keeps_the_state_and_warns_once(self):
        self.placement.create([node()])
        self.kept.poll()
        failures = []
        done = threading.Event()

        def unreachable():
            failures.append(1)
            if len(failures) == 3:
                self.kept._poller.stopping.set()
                done.set()
            raise cloud_errors.BackendUnavailable(
                'cannot reach placement: refused')

        self.kept.poll = unreachable
        self.kept.poll_interval = 0.0
        self.kept._poller.run()
        self.assertTrue(done.is_set())
        self.assertEqual(1, self.log.output.count(
            'Kept provider state: cannot poll placement (cannot reach '
            'placement: refused)'))
        # the state is kept, and used until it is too old
        self.assertEqual(1, len(self.kept.answer(ONE_VCPU)[0]))
        self.clock.now += self.kept.max_age + 1
        self.assertIsNone(self.kept.answer(Request('resources=VCPU:1')))
