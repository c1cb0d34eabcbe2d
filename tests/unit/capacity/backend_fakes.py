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

"""Backends that misbehave, on ports of their own at 127.0.0.1.

:class:`SilentServer` accepts connections and never answers (a database
or placement that hangs); :class:`RefusingPort` refuses them (a database
that is down). Point a MySQL URL or ``[placement] endpoint_override`` at
their ``port``.
"""

import socket
import threading

import fixtures


class SilentServer(fixtures.Fixture):
    """Accepts every connection, reads nothing, answers nothing."""

    def _setUp(self):
        self._server = socket.socket()
        self.addCleanup(self._stop)
        self._server.bind(('127.0.0.1', 0))
        self._server.listen(64)
        self.port = self._server.getsockname()[1]
        self.connections = []
        self.addCleanup(self._close_connections)
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()

    def _stop(self):
        try:
            # wakes the accept() of the thread, which close() does not
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()

    def _accept(self):
        while True:
            try:
                connection, _address = self._server.accept()
            except OSError:
                return
            self.connections.append(connection)

    def _close_connections(self):
        for connection in self.connections:
            connection.close()


class RefusingPort(fixtures.Fixture):
    """A port held without listening: every connection is refused."""

    def _setUp(self):
        self._socket = socket.socket()
        self.addCleanup(self._socket.close)
        self._socket.bind(('127.0.0.1', 0))
        self.port = self._socket.getsockname()[1]
