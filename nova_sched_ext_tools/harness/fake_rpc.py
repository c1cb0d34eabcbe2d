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

"""oslo.messaging's fake driver, with listeners woken by a delivery.

Nova's tests run every service on the ``fake:`` transport.  Its listeners
look for a message, and if there is none sleep 50 ms and look again: each
RPC server (two per service since Nova 34, the main and the graceful-
shutdown one) wakes 20 times a second for the whole test.  An idle cloud of
six computes spent 0.46 s of CPU in 20 s on it and the rest of its idling
(2.3% of a core); with this fixture, 0.23 s.  The cost follows a test's
wall time, not its work.

:class:`PromptListeners` makes a listener wait on a condition that every
delivery and every stop notifies, so it takes a message as soon as it is
queued and costs nothing while nothing comes.  Queues, messages, replies
and requeues stay the driver's own: only the wait between two looks at the
queues changes, and a listener still looks at least every
:data:`LOOK_AT_LEAST_EVERY` seconds, should a message ever reach a queue
without :meth:`FakeExchange.deliver_message`.
"""

import threading
import time

import fixtures
from oslo_messaging._drivers import base
from oslo_messaging._drivers import impl_fake

#: seconds a listener waits at most without a notification before it looks
#: at its queues again (a guard; every delivery notifies)
LOOK_AT_LEAST_EVERY = 1.0


class PromptListeners(fixtures.Fixture):
    """Fake-transport listeners that sleep until a message or a stop.

    Patches the classes of ``oslo_messaging._drivers.impl_fake`` for the
    fixture's life, so it covers services started before or after it.
    """

    def _setUp(self):
        # One condition for every exchange: a delivery is rare next to
        # what a look at the queues costs, and a listener woken for another
        # one's message only looks once more.
        self.changed = threading.Condition()
        deliver = impl_fake.FakeExchange.deliver_message
        stop = impl_fake.FakeListener.stop

        def deliver_and_wake(exchange, *args, **kwargs):
            deliver(exchange, *args, **kwargs)
            self._wake()

        def stop_and_wake(listener):
            stop(listener)
            self._wake()

        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeExchange.deliver_message',
            deliver_and_wake))
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeListener.stop',
            stop_and_wake))
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeListener.poll',
            base.batch_poll_helper(self._poll)))

    def _wake(self):
        with self.changed:
            self.changed.notify_all()

    def _poll(self, listener, timeout=None):
        """The next message of one of the listener's targets, or None.

        None once the listener is stopped, or after ``timeout`` seconds
        (None: no limit) without a message.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        # Looking at the queues under the condition means a delivery made
        # after the look notifies only once this listener waits: no wake-up
        # is lost between the look and the wait.
        with self.changed:
            while not listener._stopped.is_set():
                message = self._take(listener)
                if message is not None:
                    return message
                wait = LOOK_AT_LEAST_EVERY
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        break
                self.changed.wait(wait)
        return None

    @staticmethod
    def _take(listener):
        for target in listener._targets:
            exchange = listener._exchange_manager.get_exchange(
                target.exchange)
            ctxt, message, reply_q, requeue = exchange.poll(
                target, listener._pool)
            if message is not None:
                return impl_fake.FakeIncomingMessage(
                    ctxt, message, reply_q, requeue)
        return None
