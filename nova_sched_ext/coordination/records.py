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


"""The record stores: one on redis, one on files.

Each store has the same operations; values are JSON text, owners and keys
plain strings, ttl in seconds.  An owner '' for delete means anyone.  A
record whose lease ran out is still the owner's to update or delete until
someone takes it over: nobody else acted on it.
"""

import contextlib
import fcntl
import json
import os
import re
import time

from oslo_log import log as logging
from oslo_utils import netutils

from nova_sched_ext.compat import tooz as tooz_compat
from nova_sched_ext.coordination import common

LOG = logging.getLogger(__name__)

#: prefix of every key the package writes on a redis backend
REDIS_NAMESPACE = 'nova_sched_ext'
#: what record kinds and keys may be made of (they name files, too)
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')


def check_name(*names):
    """Raise ValueError unless each is a good record kind or key."""
    for name in names:
        if not _NAME.match(name):
            raise ValueError('bad record kind or key %r' % name)


def dumps(record):
    """A record as the stores keep it: JSON, keys sorted."""
    return json.dumps(record, sort_keys=True)


_REDIS_PUT = """
if ARGV[5] == '0' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
    return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
"""

_REDIS_UPDATE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
"""

_REDIS_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
"""

_REDIS_TAKE_OVER = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then
    return 1
end
return 0
"""

_REDIS_DELETE = """
if ARGV[2] ~= '' then
    local holder = redis.call('GET', KEYS[2])
    if holder and holder ~= ARGV[2] then return 0 end
end
local deleted = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return deleted
"""


class RedisRecords(object):
    """Records in redis: a hash per kind, a key with a TTL per lease.

    The keys of one kind share a hash tag, so the scripts work on a
    redis cluster too.  The client is made from the tooz URL the way
    tooz's redis driver makes its own (host, password, sentinel, ssl and
    socket options).
    """

    def __init__(self, url):
        # The redis client is an optional requirement, as for tooz.
        self._client = tooz_compat.redis_client(
            url, common.redis_defaults(url))
        self._client.set_retry(common.quick_redis_retry())
        self._scripts = {
            name: self._client.register_script(source) for name, source in (
                ('put', _REDIS_PUT), ('update', _REDIS_UPDATE),
                ('renew', _REDIS_RENEW), ('take_over', _REDIS_TAKE_OVER),
                ('delete', _REDIS_DELETE))}

    @staticmethod
    def _hash(kind):
        return '%s:{%s}:records' % (REDIS_NAMESPACE, kind)

    @staticmethod
    def _lease(kind, key):
        return '%s:{%s}:lease:%s' % (REDIS_NAMESPACE, kind, key)

    def _run(self, script, kind, key, *args):
        return bool(self._scripts[script](
            keys=[self._hash(kind), self._lease(kind, key)],
            args=[key] + list(args)))

    def ping(self):
        self._client.ping()

    def put(self, kind, key, value, owner, ttl, replace):
        return self._run('put', kind, key, value, owner, _ms(ttl),
                         '1' if replace else '0')

    def update(self, kind, key, value, owner, ttl):
        return self._run('update', kind, key, value, owner, _ms(ttl))

    def renew(self, kind, key, owner, ttl):
        return bool(self._scripts['renew'](
            keys=[self._lease(kind, key), self._hash(kind)],
            args=[owner, key, _ms(ttl)]))

    def take_over(self, kind, key, owner, ttl):
        return self._run('take_over', kind, key, owner, _ms(ttl))

    def delete(self, kind, key, owner):
        return self._run('delete', kind, key, owner)

    def items(self, kind):
        values = self._client.hgetall(self._hash(kind))
        keys = sorted(_text(k) for k in values)
        holders = self._client.mget(
            [self._lease(kind, k) for k in keys]) if keys else []
        by_key = {_text(k): _text(v) for k, v in values.items()}
        return [(k, by_key[k], _text(h) if h is not None else None)
                for k, h in zip(keys, holders)]

    def close(self):
        try:
            self._client.close()
        except Exception:
            LOG.debug('Could not close the redis client.', exc_info=True)


class FileRecords(object):
    """Records as JSON files, for the file backend (one host).

    ``<dir>/records/<kind>/<key>.json`` holds the value, the lease holder
    and the lease's end (wall clock: one host, one clock).  Every
    operation of a kind runs under an exclusive ``flock`` of the kind's
    ``.lock`` file, so it is atomic across the processes of the host.
    """

    def __init__(self, url):
        path = netutils.urlsplit(url).path
        self._root = os.path.join(path, 'records')

    @contextlib.contextmanager
    def _locked(self, kind):
        directory = os.path.join(self._root, kind)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, '.lock'), 'a') as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            yield directory

    @staticmethod
    def _read(directory, key):
        try:
            with open(os.path.join(directory, key + '.json')) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    @staticmethod
    def _write(directory, key, entry):
        path = os.path.join(directory, key + '.json')
        temp = '%s.%d.tmp' % (path, os.getpid())
        with open(temp, 'w') as f:
            json.dump(entry, f)
        os.replace(temp, path)

    @staticmethod
    def _holder(entry):
        if entry is None or entry['expires'] <= wall_clock():
            return None
        return entry['holder']

    def ping(self):
        os.makedirs(self._root, exist_ok=True)

    def put(self, kind, key, value, owner, ttl, replace):
        with self._locked(kind) as directory:
            if not replace and self._read(directory, key) is not None:
                return False
            self._write(directory, key, {'value': value, 'holder': owner,
                                         'expires': wall_clock() + ttl})
            return True

    def update(self, kind, key, value, owner, ttl):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or self._holder(entry) not in (None, owner):
                return False
            self._write(directory, key, {'value': value, 'holder': owner,
                                         'expires': wall_clock() + ttl})
            return True

    def renew(self, kind, key, owner, ttl):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or self._holder(entry) not in (None, owner):
                return False
            entry.update(holder=owner, expires=wall_clock() + ttl)
            self._write(directory, key, entry)
            return True

    def take_over(self, kind, key, owner, ttl):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or self._holder(entry) is not None:
                return False
            entry.update(holder=owner, expires=wall_clock() + ttl)
            self._write(directory, key, entry)
            return True

    def delete(self, kind, key, owner):
        with self._locked(kind) as directory:
            entry = self._read(directory, key)
            if entry is None or owner and \
                    self._holder(entry) not in (None, owner):
                return False
            os.unlink(os.path.join(directory, key + '.json'))
            return True

    def items(self, kind):
        with self._locked(kind) as directory:
            found = []
            for name in sorted(os.listdir(directory)):
                if not name.endswith('.json'):
                    continue
                key = name[:-len('.json')]
                entry = self._read(directory, key)
                if entry is not None:
                    found.append((key, entry['value'], self._holder(entry)))
            return found

    def close(self):
        pass


#: the record store of each tooz scheme that has one
STORES = {'redis': RedisRecords, 'file': FileRecords}


def has_records(url):
    """Whether the backend of ``url`` can hold records."""
    return url.partition('://')[0] in STORES


def wall_clock():
    """Seconds since the epoch: the clock of the file store's leases.

    One host, one clock; a test replaces this to drive the leases' time
    instead of sleeping through them.
    """
    return time.time()


def _ms(seconds):
    return str(max(1, int(seconds * 1000)))


def _text(value):
    return value.decode('utf-8') if isinstance(value, bytes) else value
