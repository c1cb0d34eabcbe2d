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

"""Claims cast between schedulers: nova_sched_ext.claim_casts.

Three schedulers' kept states on one openstack-placement (in this
process), each with its RPC server on oslo.messaging's fake transport
as the scheduler service runs it.  A claim one of them makes reaches the
other two at once, and their next polls read nothing of the provider
(the listing only); a claim never cast is read as before; a cast that
cannot be sent, or one of the process's own, changes nothing.
"""

import logging
import time
import uuid as uuid_lib

import fixtures
from oslo_config import cfg
import oslo_messaging as messaging
from oslo_messaging import conffixture

from nova_sched_ext import claim_casts
from nova_sched_ext.cloud import placement as p
from nova_sched_ext import kept_candidates
from nova_sched_ext_tools import placement_direct
from tests import base
from tests.unit.cloud import placement_fixtures as pf
from tests.unit import test_kept_candidates as tkc

CONTEXT = placement_direct.Context('req-nse-test-claim-casts')
#: seconds a cast may take through the fake transport's threads
DELIVERY = 30


class Scheduler(object):
    """One scheduler process: its kept state, casts and RPC server."""

    def __init__(self, test, transport, topic, number):
        self.client = placement_direct.Counting(test.placement)
        self.kept = kept_candidates.KeptCandidates(
            lambda: p.PlacementReader(CONTEXT, client=self.client),
            clock=tkc.FakeClock())
        self.kept.casts = self.casts = claim_casts.ClaimCasts(
            self.kept, topic=topic,
            get_client=lambda target: messaging.get_rpc_client(
                transport, target))
        self.server = messaging.get_rpc_server(
            transport, messaging.Target(topic=topic,
                                        server='scheduler-%d' % number),
            [self.casts.endpoint], executor='threading')
        self.server.start()
        test.addCleanup(self.server.wait)
        test.addCleanup(self.server.stop)

    def used(self, uuid):
        for provider in self.kept._state.providers():
            if provider.uuid == uuid:
                return provider.usages.get('VCPU', 0)


class ClaimCastsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(pf.InProcessPlacement()).placement
        self.log = self.useFixture(fixtures.FakeLogger(
            name=claim_casts.__name__, level=logging.DEBUG,
            format='%(levelname)s %(message)s'))
        self.kept_log = self.useFixture(fixtures.FakeLogger(
            name=kept_candidates.__name__, level=logging.DEBUG))
        conf = cfg.ConfigOpts()
        self.useFixture(conffixture.ConfFixture(conf))
        self.transport = messaging.get_rpc_transport(conf, url='fake:/')
        self.addCleanup(self.transport.cleanup)
        self.topic = 'scheduler-%s' % uuid_lib.uuid4()
        self.uuids = [rp.uuid for rp in self.placement.create(
            [tkc.node(), tkc.node()])]
        self.schedulers = [Scheduler(self, self.transport, self.topic, n)
                           for n in range(3)]
        for scheduler in self.schedulers:
            scheduler.kept.poll()

    def claim(self, scheduler, uuid, vcpus):
        """A claim placement accepts, told as the scheduler's view does."""
        alloc_req = {'allocations': {uuid: {'resources': {'VCPU': vcpus}}}}
        self.placement.call('put', '/allocations/%s' % uuid_lib.uuid4(),
                            dict(alloc_req, project_id='p', user_id='u',
                                 consumer_generation=None))
        scheduler.kept.claimed(alloc_req, {})

    def wait_counted(self, scheduler, number, count='counted'):
        """Until ``scheduler`` has had ``number`` casts of the kind."""
        deadline = time.monotonic() + DELIVERY
        while scheduler.casts.counts[count] < number:
            self.assertLess(time.monotonic(), deadline,
                            'a cast (%s) did not come' % count)
            time.sleep(0.01)

    def test_a_claim_reaches_the_others_before_their_poll(self):
        first, second, third = self.schedulers
        self.claim(first, self.uuids[0], 3)
        self.claim(second, self.uuids[0], 2)
        self.claim(first, self.uuids[1], 1)
        self.wait_counted(third, 3)
        self.wait_counted(first, 1)
        self.wait_counted(second, 2)
        for scheduler in (first, second):
            self.wait_counted(scheduler, 1, count='own')
        for scheduler in self.schedulers:
            self.assertEqual(5, scheduler.used(self.uuids[0]))
            self.assertEqual(1, scheduler.used(self.uuids[1]))
        # every scheduler knows both providers by its counts: each poll
        # reads the listing only, and equals placement
        for scheduler in self.schedulers:
            before = scheduler.client.calls
            self.assertFalse(scheduler.kept.poll())
            self.assertEqual(1, scheduler.client.calls - before)
            theirs = tkc.KeptCandidatesTest.theirs(self, 'resources=VCPU:1')
            ours = scheduler.kept.answer(tkc.ONE_VCPU)
            self.assertEqual(theirs[1], ours[1])
            self.assertEqual(sorted(map(repr, theirs[0])),
                             sorted(map(repr, ours[0])))
        self.assertEqual(2, first.casts.counts['sent'])
        self.assertIn('counted a claim of another scheduler on %s'
                      % self.uuids[0], self.kept_log.output)

    def test_a_claim_not_cast_is_read_at_the_poll(self):
        first, second, _third = self.schedulers
        first.kept.casts = None     # a scheduler without the option
        self.claim(first, self.uuids[0], 3)
        self.assertEqual(0, second.used(self.uuids[0]))
        before = second.client.calls
        self.assertEqual({self.uuids[0]}, second.kept.poll().changed)
        self.assertEqual(1 + 4, second.client.calls - before)
        self.assertEqual(3, second.used(self.uuids[0]))

    def test_a_cast_that_cannot_be_sent_is_warned_once(self):
        first, second, _third = self.schedulers

        def no_broker(target):
            raise messaging.MessageDeliveryFailure('broker down')

        first.casts._get_client = no_broker
        first.casts._client = None
        self.claim(first, self.uuids[0], 3)
        self.claim(first, self.uuids[0], 1)
        self.assertEqual(2, first.casts.counts['failed'])
        self.assertEqual(1, self.log.output.count(
            'WARNING Kept provider state: could not cast a claim'))
        self.assertEqual(1, self.log.output.count(
            'DEBUG Kept provider state: could not cast a claim'))
        # its own state counted them; the others read at their poll
        self.assertEqual(4, first.used(self.uuids[0]))
        self.assertEqual({self.uuids[0]}, second.kept.poll().changed)
        self.assertEqual(4, second.used(self.uuids[0]))

    def test_a_cast_is_tried_once_more_not_forever(self):
        first = self.schedulers[0]
        sent = []

        class Client(object):
            def prepare(self, **kwargs):
                sent.append(kwargs)
                return self

            def cast(self, context, method, **kwargs):
                sent.append(method)

        first.casts._client = Client()
        self.claim(first, self.uuids[0], 1)
        self.assertEqual([{'fanout': True, 'retry': 1},
                          'kept_state_claimed'], sent)

    def test_a_fault_counting_a_cast_is_logged(self):
        _first, second, _third = self.schedulers
        endpoint = second.casts.endpoint
        # an allocation that is not one: logged, never raised
        endpoint.kept_state_claimed({}, 'another', {self.uuids[0]: None})
        self.assertIn('could not count a claim cast by another scheduler',
                      self.log.output)
        endpoint.kept_state_claimed({}, second.casts.sender,
                                    {self.uuids[0]: {'resources': {
                                        'VCPU': 1}}})
        self.assertEqual(1, second.casts.counts['own'])
        self.assertEqual(0, second.used(self.uuids[0]))
