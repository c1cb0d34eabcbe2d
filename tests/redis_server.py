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

"""A private ``redis-server`` for one test: a port of its own, no disk.

The machine's own redis (if any) is never touched: the fixture starts
``redis-server`` on a free port of 127.0.0.1, with no persistence, in a
temporary directory, and kills that process, by its id, when the test
ends.  :meth:`RedisServer.stop` and :meth:`RedisServer.start` take it down
and bring it back on the same port, as an outage would.  A test using it
is skipped when ``redis-server`` is not installed.
"""

import os
import shutil
import socket
import subprocess
import time

import fixtures
import testtools

#: seconds to wait for the server to answer (or to go)
START_TIMEOUT = 10.0


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class RedisServer(fixtures.Fixture):
    """``redis-server --port <free> --save '' --appendonly no``."""

    def __init__(self, binary='redis-server'):
        super().__init__()
        self.binary = shutil.which(binary)
        self.port = None
        self.process = None

    def _setUp(self):
        if self.binary is None:
            raise testtools.TestCase.skipException(
                'redis-server is not installed (apt-get install '
                'redis-server)')
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.port = free_port()
        self.addCleanup(self.stop)
        self.start()

    @property
    def url(self):
        """A tooz URL of the server, with short timeouts for tests."""
        return 'redis://127.0.0.1:%d?socket_timeout=2' % self.port

    def start(self):
        """Start the server (again, on the same port)."""
        log = open(os.path.join(self.dir, 'redis.log'), 'ab')
        self.process = subprocess.Popen(
            [self.binary, '--port', str(self.port), '--bind', '127.0.0.1',
             '--save', '', '--appendonly', 'no', '--dir', self.dir,
             '--protected-mode', 'no'],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not self.answers():
            if self.process.poll() is not None or \
                    time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('redis-server on port %d did not start'
                                   % self.port)
            time.sleep(0.05)

    def stop(self):
        """Kill the server (only the process this fixture started)."""
        if self.process is None:
            return
        process, self.process = self.process, None
        if process.poll() is None:
            process.kill()
        process.wait(timeout=START_TIMEOUT)

    def answers(self):
        """Whether the server answers PING."""
        try:
            with socket.create_connection(('127.0.0.1', self.port),
                                          timeout=0.5) as sock:
                sock.sendall(b'PING\r\n')
                return sock.recv(16).startswith(b'+PONG')
        except OSError:
            return False

    def flush(self):
        """Drop every key (between rounds of a test)."""
        with socket.create_connection(('127.0.0.1', self.port),
                                      timeout=2) as sock:
            sock.sendall(b'FLUSHALL\r\n')
            if not sock.recv(16).startswith(b'+OK'):
                raise RuntimeError('FLUSHALL failed')
