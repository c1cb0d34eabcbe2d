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

"""The base class of the tests that are not Nova test cases.

A test prints nothing to the console: what it logs (every logger, from
DEBUG up) and what it writes to ``sys.stdout`` and ``sys.stderr`` are
captured into the test's details, which the runner shows for a failing
test only, next to its traceback.  Nova's own test cases
(``nova.test.TestCase``, ``NoDBTestCase`` and the functional bases) capture
their log the same way with their ``StandardLogging`` fixture (from INFO
up), and their output with oslotest's, which ``tests/__init__.py`` turns on.

A record logged outside every test's capture (on import, or by a fixture
after its test has ended) reaches the console only from WARNING up; see
``tests/__init__.py``.

To watch a test live instead, turn a capture off with oslotest's switches:
``OS_LOG_CAPTURE=0``, ``OS_STDOUT_CAPTURE=0``, ``OS_STDERR_CAPTURE=0``.
"""

import collections
import contextlib
import io
import logging
import os
import sys

import fixtures
import testtools
from testtools import content
from testtools import content_type

#: the format of the captured log (that of Nova's StandardLogging)
LOG_FORMAT = '%(asctime)s %(levelname)s [%(name)s] %(message)s'


def _capture(switch):
    return os.environ.get(switch, '1').lower() not in (
        '0', 'false', 'no', 'off')


#: The property tests' budget: examples a test draws at most.  600 unless
#: NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES says (``bash .ci/run`` sets 100,
#: ``tox -e fuzz`` 10,000).
HYPOTHESIS_EXAMPLES = int(os.environ.get('NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES',
                                         '600'))


def hypothesis_examples(share, least):
    """A test's share of the budget, never below ``least`` examples.

    A test that costs more per example than the others takes a share of
    the budget instead of a number of its own, so that CI's small budget
    and the fuzz env's big one reach every property test.
    """
    return max(int(HYPOTHESIS_EXAMPLES * share), least)


class OutputCapture(fixtures.Fixture):
    """Capture ``sys.stdout`` and ``sys.stderr`` into the test's details."""

    def _setUp(self):
        for name, switch in (('stdout', 'OS_STDOUT_CAPTURE'),
                             ('stderr', 'OS_STDERR_CAPTURE')):
            if _capture(switch):
                stream = self.useFixture(fixtures.StringStream(name)).stream
                self.useFixture(fixtures.MonkeyPatch('sys.' + name, stream))


# A subunit packet holds at most 4 MiB, and a test's details travel in one:
# a test that logs more (Nova at DEBUG does) would break the whole stream.
# The end of the log is where a failure is.
LOG_TAIL_BYTES = 1 << 20


class _LogTail(logging.Handler):
    """The last ``limit`` bytes (about) of what was logged."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit
        self.records = collections.deque()
        self.size = 0
        self.dropped = 0

    def emit(self, record):
        try:
            line = self.format(record) + '\n'
        except Exception:
            self.handleError(record)
            return
        self.records.append(line)
        self.size += len(line)
        while self.size > self.limit and len(self.records) > 1:
            self.size -= len(self.records.popleft())
            self.dropped += 1

    def text(self):
        head = ('[%d earlier log records left out]\n' % self.dropped
                if self.dropped else '')
        return head + ''.join(self.records)

    @property
    def output(self):
        # what fixtures.FakeLogger offers, for tests that read the log
        return ''.join(self.records)


class LogCapture(fixtures.Fixture):
    """Capture the log, DEBUG and up, into the test's details.

    The root logger gets back the handlers and level it had, even if the
    code under test set up logging itself (a command's ``main()``).
    """

    def _setUp(self):
        root = logging.getLogger()
        self.addCleanup(self._restore, root, list(root.handlers), root.level)
        if _capture('OS_LOG_CAPTURE'):
            tail = _LogTail(LOG_TAIL_BYTES)
            tail.setFormatter(logging.Formatter(LOG_FORMAT))
            self.useFixture(fixtures.LogHandler(tail, level=logging.DEBUG))
            self.addDetail('pythonlogging', content.Content(
                content_type.UTF8_TEXT, lambda: [tail.text().encode()]))
            self.logger = tail
        else:
            handler = logging.StreamHandler(sys.__stderr__)
            handler.setFormatter(logging.Formatter(LOG_FORMAT))
            self.useFixture(fixtures.LogHandler(handler,
                                                level=logging.DEBUG))

    @staticmethod
    def _restore(root, handlers, level):
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


class TestCase(testtools.TestCase):
    """A testtools test case whose log and output show only if it fails."""

    def setUp(self):
        super().setUp()
        self.useFixture(LogCapture())
        self.useFixture(OutputCapture())

    @staticmethod
    def run_main(main, *argv):
        """``(exit status, stdout)`` of a command's ``main(argv)``."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(list(argv))
        return rc, out.getvalue()


class OneLineErrors(object):
    """``assertOneLineError`` of a command test that sets ``prog``.

    The test case keeps what the command wrote in ``self.stdout`` and
    ``self.stderr`` (``io.StringIO``).
    """

    prog = None

    def assertOneLineError(self, code, result, *words):
        """Exit status ``code``, one error line with ``words``, no output."""
        self.assertEqual(code, result)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertTrue(lines[0].startswith(self.prog + ': error: '), lines)
        for word in words:
            self.assertIn(word, lines[0])
        self.assertEqual('', self.stdout.getvalue())
