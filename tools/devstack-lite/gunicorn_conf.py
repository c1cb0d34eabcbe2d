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

"""gunicorn's settings for every API devstack-lite serves (``gunicorn -c``).

The command line adds the address, the application and what differs
between services (``--threads`` from a uWSGI file, the stub's request
line limit); it wins over this file.
"""

import os

worker_class = 'gthread'
workers = 1
threads = 4
# A Nova boot or a placement query under load can take minutes here.
timeout = 300
graceful_timeout = 5
# Several runs share the machine; no control socket in $HOME to clash on.
control_socket_disable = True
# gunicorn closes an idle kept-alive connection after 2 s by default.  A
# client polling every 2 s (the broker's scenarios, tempest's waiters)
# then now and then sends its next request on a connection the server is
# closing, and gets RemoteDisconnected for a request that never reached
# the API.  Behind devstack's Apache the clients see 5 s or more; the
# clients here idle far less than this.
keepalive = 75
pythonpath = os.path.dirname(os.path.abspath(__file__))
