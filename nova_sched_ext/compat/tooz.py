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

"""tooz's names that are no API, each behind one function.

Read from tooz 9.1.0.  ``tests/unit/test_compat.py`` checks each against
the installed tooz.  See :mod:`nova_sched_ext.compat`.
"""

import urllib.parse

from oslo_utils import netutils


def redis_client(url, options):
    """A redis client made from a tooz URL, as tooz's redis driver does.

    ``tooz.drivers.redis.RedisDriver._make_client``, given what the
    driver's constructor gives it: the URL split, its query options
    collapsed (``tooz.utils.collapse``, less
    ``RedisDriver.EXCLUDE_OPTIONS``), and the socket timeout of the
    ``timeout`` option, else ``RedisDriver.CLIENT_DEFAULT_SOCKET_TO``.
    The client handles host, password, sentinel, ssl and socket options
    as tooz's own does, and connects on first use.  The redis client is an
    optional requirement, as for tooz: this imports it only when called.

    :param options: client options added over the URL's
    :returns: a ``redis.Redis`` (the sentinel's master client with a
        sentinel URL)
    """
    from tooz.drivers import redis as tooz_redis
    from tooz import utils as tooz_utils

    driver = tooz_redis.RedisDriver
    parsed = netutils.urlsplit(url)
    collapsed = tooz_utils.collapse(urllib.parse.parse_qs(parsed.query),
                                    exclude=driver.EXCLUDE_OPTIONS)
    collapsed.update(options)
    timeout = int(collapsed.get('timeout', driver.CLIENT_DEFAULT_SOCKET_TO))
    return driver._make_client(parsed, collapsed, timeout)


def wrap_client_factory(coordinator, wrap):
    """Wrap the client factory a tooz coordinator's ``start()`` calls.

    tooz's redis driver makes its client in ``start()`` through
    ``_make_client(parsed_url, options, default_socket_timeout)``; nothing
    public changes the client it makes (its retry policy, say).  After
    this, ``start()`` gives the new client to ``wrap`` and keeps what
    ``wrap`` returns.

    :param wrap: ``wrap(client) -> client``
    :returns: False if the coordinator's driver has no such factory (not
        redis), and nothing was changed
    """
    make_client = getattr(coordinator, '_make_client', None)
    if make_client is None:
        return False

    def make_wrapped_client(*args, **kwargs):
        return wrap(make_client(*args, **kwargs))

    coordinator._make_client = make_wrapped_client
    return True
