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


"""What the locks, the records and the outage probe share.

The backend's URL (the option, or the file backend), how it is written in
log lines, how an error reads in one line, and the client options and
retry policy of the redis backend.
"""

import os
import socket
import urllib.parse

from oslo_config import cfg
from oslo_utils import netutils

from nova_sched_ext import conf

CONF = conf.CONF

#: seconds a redis client waits for a connection, unless the URL says
#: (``socket_connect_timeout``); tooz tries an operation 15 times
REDIS_CONNECT_TIMEOUT = 2.0


def backend_url():
    """The tooz URL of the backend: the option, else the file backend."""
    opts = CONF.nova_sched_ext
    if opts.coordination_url:
        return opts.coordination_url
    return 'file://%s' % os.path.abspath(opts.deployment_set_lock_dir)


def safe_url(url):
    """The backend URL without credentials or options, for log lines."""
    scheme, sep, rest = url.partition('://')
    if '@' in rest:
        rest = rest.split('@', 1)[1]
    return scheme + sep + rest.split('?', 1)[0]


def host_name():
    """This service's ``[DEFAULT] host``, else the machine's name."""
    try:
        return CONF.host
    except cfg.NoSuchOptError:
        return socket.gethostname()


def redis_defaults(url):
    """Client options a redis URL gets unless it sets them itself."""
    parsed = netutils.urlsplit(url)
    if parsed.scheme != 'redis' or \
            'socket_connect_timeout' in urllib.parse.parse_qs(parsed.query):
        return {}
    return {'socket_connect_timeout': REDIS_CONNECT_TIMEOUT}


def quick_redis_retry():
    """A redis retry policy: try once more, at once.

    tooz tries each operation up to 15 times itself; the redis client's
    default (3 retries with a growing backoff) would make a request wait
    close to a minute on a dead redis.
    """
    from redis import backoff
    from redis import retry

    return retry.Retry(backoff.NoBackoff(), 1)


def describe(exc):
    """An exception in one line: its text, else its class's name."""
    text = str(exc) or type(exc).__name__
    return ' '.join(text.split())
