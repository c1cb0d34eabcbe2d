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


"""A kept state's poll, run in a thread of its own on an interval.

:class:`Poller` calls ``poll()`` every ``interval`` seconds (the time a
poll takes included) until stopped.  A poll that fails leaves the state
as it was; the first failure of a streak is logged (a warning naming the
backend for a :class:`~nova_sched_ext.cloud.errors.CloudError`, the
traceback for anything else), the rest of the streak is not, and the
first success after it says so.  Whoever keeps the state decides how old
it may get before it is no longer used.
"""

import threading
import time

from oslo_log import log as logging

from nova_sched_ext.cloud import errors as cloud_errors

LOG = logging.getLogger(__name__)


class Poller(object):
    """``poll()`` in a thread, every ``interval()`` seconds.

    :param poll: the poll; what it returns goes to ``done``
    :param interval: a callable giving the seconds between two polls'
        starts (read at every poll)
    :param what: the state's name in the log, e.g. ``Kept capacity
        state``
    :param source: what it polls, for the log, e.g. ``placement``
    :param meanwhile: what happens while the state cannot be polled, for
        the log, e.g. ``the capacity is counted in full once it is older
        than 30 s``
    :param done: called with each successful poll's result (optional)
    :param clock: monotonic seconds
    :param log: the owner's logger (default: this module's)
    """

    def __init__(self, poll, interval, what, source, meanwhile, done=None,
                 clock=None, log=None):
        self._poll = poll
        self._interval = interval
        self._what = what
        self._source = source
        self._meanwhile = meanwhile
        self._done = done
        self._log = log or LOG
        self._clock = clock or time.monotonic
        #: set to stop the loop (:meth:`stop` sets it)
        self.stopping = threading.Event()
        self._thread = None
        self._failing = False

    @property
    def running(self):
        """Whether the thread polls (not after a fork: threads stay)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, name):
        """Poll in a thread called ``name`` until :meth:`stop`."""
        if self.running:
            return
        self.stopping.clear()
        self._thread = threading.Thread(target=self.run, name=name,
                                        daemon=True)
        self._thread.start()

    def stop(self):
        """Stop polling; waits for a poll under way (a few intervals)."""
        self.stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=max(self._interval(), 1.0) * 5)

    def run(self):
        """The loop (the thread's target); returns once stopped."""
        while not self.stopping.is_set():
            started = self._clock()
            self.once()
            spent = self._clock() - started
            self.stopping.wait(max(self._interval() - spent, 0.0))

    def once(self):
        """One poll, its failure logged as the loop logs it."""
        try:
            result = self._poll()
        except cloud_errors.CloudError as exc:
            if not self._failing:
                self._log.warning('%s: cannot poll %s (%s); %s.',
                                  self._what, self._source, exc,
                                  self._meanwhile)
            self._failing = True
        except Exception:
            if not self._failing:
                self._log.exception('%s: the poll failed; %s.',
                                    self._what, self._meanwhile)
            self._failing = True
        else:
            if self._failing:
                self._log.info('%s: %s polled again.', self._what,
                               self._source)
            self._failing = False
            if self._done is not None:
                self._done(result)
