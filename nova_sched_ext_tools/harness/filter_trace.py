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

"""Record how many hosts each scheduler filter kept, per scheduling pass.

Nova's filter handler (``nova.filters.BaseFilterHandler``) logs, for every
pass, ``Starting with N host(s)`` and then, per filter, ``Filter X returned N
host(s)`` (debug) or ``Filter X returned 0 hosts`` (info, after which the
remaining filters are skipped).  :class:`FilterTrace` listens to that logger,
so it observes the real scheduler without patching it: what it reports is what
an operator would read in the scheduler log at debug level.  The scheduler
manager then logs ``Filtered [<HostState>, ...]``; the host names of that list
are kept as the pass's survivors.
"""

import dataclasses
import logging
import re
import threading

import fixtures

FILTER_LOGGER = 'nova.filters'
MANAGER_LOGGER = 'nova.scheduler.manager'
_FILTERED_TEMPLATE = 'Filtered %(hosts)s'

_START = re.compile(r'^Starting with (\d+) host\(s\)$')
_KEPT = re.compile(r'^Filter (\w+) returned (\d+) host\(s\)$')
_NONE_LEFT = re.compile(r'^Filter (\w+) returned 0 hosts$')


@dataclasses.dataclass
class FilterPass:
    """One run of the filter chain: the host count in and per filter."""

    start: int
    kept: list = dataclasses.field(default_factory=list)
    #: sorted names of the hosts that passed every filter (None if unknown)
    survivors: object = None

    def count(self, filter_name):
        """Hosts the filter kept, or None if it did not run in this pass."""
        for name, count in self.kept:
            if name == filter_name:
                return count
        return None

    def ran(self, filter_name):
        return self.count(filter_name) is not None

    def rejected(self, filter_name):
        """How many hosts the filter removed (0 if it did not run)."""
        before = self.start
        for name, count in self.kept:
            if name == filter_name:
                return before - count
            before = count
        return 0

    def render(self, always=()):
        """``6 candidates -> ComputeFilter 6 -> NUMAFitFilter 2 -> ...``

        The chain starts with the hosts placement offered (or, for the
        second and later servers of a multi-create request, the hosts left
        from the first).  Filters that kept every host are left out unless
        named in ``always``; the first filter is always shown so the reader
        sees where the chain starts.
        """
        steps = ['%d candidate%s' % (self.start,
                                     '' if self.start == 1 else 's')]
        before = self.start
        for index, (name, count) in enumerate(self.kept):
            if index == 0 or count != before or name in always:
                steps.append('%s %d' % (name, count))
            before = count
        skipped = [name for name in always if not self.ran(name)]
        text = ' -> '.join(steps)
        if skipped and self.kept and self.kept[-1][1] == 0:
            text += ' (%s not run)' % ', '.join(skipped)
        return text


class _Handler(logging.Handler):

    def __init__(self, trace):
        super().__init__(level=logging.DEBUG)
        self._trace = trace

    def emit(self, record):
        if record.name == MANAGER_LOGGER:
            if record.msg == _FILTERED_TEMPLATE and \
                    isinstance(record.args, dict):
                self._trace._observe_survivors(record.args.get('hosts'))
            return
        try:
            message = record.getMessage()
        except Exception:  # a broken log call must not break scheduling
            return
        self._trace._observe(message)


class FilterTrace(fixtures.Fixture):
    """Collects :class:`FilterPass` records from the ``nova.filters`` log.

    Thread-safe: the scheduler may filter in a worker thread.  Use
    :meth:`take` after each boot to get the passes it caused.
    """

    def _setUp(self):
        self._lock = threading.Lock()
        self._passes = []
        handler = _Handler(self)
        for name in (FILTER_LOGGER, MANAGER_LOGGER):
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            self.addCleanup(logger.removeHandler, handler)
            # The handler sees debug records only if the logger lets them
            # through; Nova's StandardLogging fixture sets the root to
            # DEBUG, and this keeps the trace working under other set-ups.
            if not logger.isEnabledFor(logging.DEBUG):
                self.addCleanup(logger.setLevel, logger.level)
                logger.setLevel(logging.DEBUG)

    def _observe(self, message):
        match = _START.match(message)
        if match:
            with self._lock:
                self._passes.append(FilterPass(int(match.group(1))))
            return
        match = _KEPT.match(message) or _NONE_LEFT.match(message)
        if match:
            name = match.group(1)
            count = int(match.group(2)) if match.lastindex == 2 else 0
            with self._lock:
                if self._passes:
                    self._passes[-1].kept.append((name, count))

    def _observe_survivors(self, hosts):
        try:
            names = sorted(host.host for host in hosts)
        except (TypeError, AttributeError):
            return
        with self._lock:
            if self._passes and self._passes[-1].survivors is None:
                self._passes[-1].survivors = names

    def take(self):
        """Return the passes recorded since the last call and forget them."""
        with self._lock:
            passes, self._passes = self._passes, []
        return passes
