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

"""The fake RPC driver's listeners, woken by a delivery or a stop."""

import threading
import time
import types
from unittest import mock
import uuid

import fixtures
import oslo_messaging
from oslo_messaging._drivers import impl_fake

from nova_sched_ext_tools.harness import fake_rpc
from tests import base

#: seconds before a test gives up on a thread: a hang guard, not a measure
HANG_GUARD = 120


class PromptListenersTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.prompt = self.useFixture(fake_rpc.PromptListeners())
        # Only a notification may wake a waiting listener: no guard look,
        # and not the driver's own poll, which sleeps between two looks.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_sched_ext_tools.harness.fake_rpc.LOOK_AT_LEAST_EVERY',
            3600))
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.time', types.SimpleNamespace(
                time=time.time, sleep=mock.Mock(
                    side_effect=AssertionError('the listener slept')))))
        # The driver keeps its exchanges for the process: one of the
        # test's own.
        manager = impl_fake.FakeExchangeManager(str(uuid.uuid4()))
        self.exchange = manager.get_exchange(None)
        self.listener = impl_fake.FakeListener(
            manager, [oslo_messaging.Target(topic='topic', server='host')])
        self.waiting = threading.Event()
        wait = self.prompt.changed.wait

        def note_the_wait(timeout):
            self.waiting.set()
            return wait(timeout)

        self.prompt.changed.wait = note_the_wait

    def poll_in_a_thread(self, **kwargs):
        """Poll in a thread; wait until it waits; return its result list."""
        result = []
        thread = threading.Thread(
            target=lambda: result.append(self.listener.poll(**kwargs)))
        thread.start()
        self.addCleanup(thread.join, HANG_GUARD)
        self.assertTrue(self.waiting.wait(HANG_GUARD))
        return thread, result

    def join(self, thread):
        thread.join(HANG_GUARD)
        self.assertFalse(thread.is_alive(), 'the listener still waits')

    def test_a_delivery_wakes_a_waiting_listener(self):
        thread, result = self.poll_in_a_thread()
        self.exchange.deliver_message('topic', {'user': 'u'}, {'m': 1},
                                      server='host')
        self.join(thread)
        [messages] = result
        self.assertEqual([{'m': 1}], [m.message for m in messages])
        self.assertEqual([{'user': 'u'}], [m.ctxt for m in messages])

    def test_a_stop_wakes_a_waiting_listener(self):
        thread, result = self.poll_in_a_thread()
        self.listener.stop()
        self.join(thread)
        self.assertEqual([[]], result)

    def test_a_message_already_queued_is_taken_without_waiting(self):
        self.exchange.deliver_message('topic', {}, {'m': 2}, server='host')
        messages = self.listener.poll(timeout=0)
        self.assertEqual([{'m': 2}], [m.message for m in messages])
        self.assertFalse(self.waiting.is_set())

    def test_nothing_queued_and_a_timeout_gives_nothing(self):
        self.assertEqual([], self.listener.poll(timeout=0))
