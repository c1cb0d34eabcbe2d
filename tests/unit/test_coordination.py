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

"""The coordination backend's records and leases, on files and on redis.

The same cases run on both record stores: the file one (the default
backend) and a private ``redis-server``.  Each :class:`Backend` stands
for one scheduler process.

No case sleeps through a lease: the test drives time (:meth:`advance`:
a fake clock for the file store, the leases' time to live shortened for
redis) and the heartbeats (:meth:`beat`), so a loaded machine, where a
heartbeat thread may not run for seconds, gives the same outcome as an
idle one.
"""

import logging
import os
import socket
import threading
import time

import fixtures
from oslo_config import fixture as config_fixture
import redis

from nova_sched_ext import conf
from nova_sched_ext import coordination
from tests import base
from tests import redis_server

KIND = 'things'


class RecordsTests(object):
    """Cases every record store passes; mixed into a backend's test case.

    A test case sets ``self.url`` and defines :meth:`advance`.
    """

    def backend(self):
        """One more scheduler process's backend; its heartbeats are driven.

        The heartbeat thread does not start: :meth:`beat` runs one beat
        when the test says, as the thread would every third of a lease.
        """
        backend = coordination.Backend(self.url)
        self.useFixture(fixtures.MockPatchObject(backend, '_ensure_heart'))
        self.addCleanup(backend.stop)
        return backend

    @staticmethod
    def beat(backend):
        """One heartbeat of ``backend``: it renews the leases it keeps."""
        backend._heartbeat()

    def advance(self, seconds):
        """``seconds`` pass for every lease of the store."""
        raise NotImplementedError()

    def test_put_once_then_read_with_its_holder(self):
        first = self.backend()
        self.assertTrue(first.put(KIND, 'k1', {'a': 1}, 30))
        self.assertFalse(self.backend().put(KIND, 'k1', {'a': 2}, 30))
        self.assertEqual([('k1', {'a': 1}, first.owner)],
                         self.backend().items(KIND))
        self.assertTrue(first.put(KIND, 'k1', {'a': 3}, 30, replace=True))
        self.assertEqual([('k1', {'a': 3}, first.owner)], first.items(KIND))

    def test_only_the_holder_updates_and_deletes(self):
        owner, other = self.backend(), self.backend()
        owner.put(KIND, 'k1', {'a': 1}, 30)
        self.assertFalse(other.update(KIND, 'k1', {'a': 2}, 30))
        self.assertFalse(other.delete(KIND, 'k1'))
        self.assertTrue(owner.update(KIND, 'k1', {'a': 3}, 30))
        self.assertEqual([('k1', {'a': 3}, owner.owner)], other.items(KIND))
        self.assertTrue(other.delete(KIND, 'k1', owned=False))
        self.assertEqual([], owner.items(KIND))
        self.assertFalse(owner.update(KIND, 'k1', {'a': 4}, 30))

    def test_a_lease_runs_out_unless_kept_alive(self):
        owner = self.backend()
        owner.put(KIND, 'kept', {}, 60, keep_alive=True)
        owner.put(KIND, 'left', {}, 60)
        # 75 s, a heartbeat every 25 s: past the lease, which only the
        # heartbeats kept.
        for _ in range(3):
            self.advance(25)
            self.beat(owner)
        holders = {key: holder for key, _record, holder in
                   self.backend().items(KIND)}
        self.assertEqual({'kept': owner.owner, 'left': None}, holders)
        # Nobody took it over: still the owner's to finish.
        self.assertTrue(owner.update(KIND, 'left', {'done': True}, 30))

    def test_one_of_many_takes_over_a_dead_holders_record(self):
        dead = self.backend()
        dead.put(KIND, 'k1', {'a': 1}, 30)
        self.advance(31)
        schedulers = [self.backend() for _ in range(4)]
        self.assertFalse(schedulers[0].take_over(KIND, 'nothing', 30))
        won = []
        barrier = threading.Barrier(len(schedulers))

        def take(backend):
            barrier.wait()
            if backend.take_over(KIND, 'k1', 30):
                won.append(backend)

        threads = [threading.Thread(target=take, args=(s,))
                   for s in schedulers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(1, len(won))
        # The dead one, back from the dead, holds nothing any more.
        self.assertFalse(dead.update(KIND, 'k1', {'a': 2}, 30))
        self.assertFalse(dead.delete(KIND, 'k1'))
        self.assertTrue(won[0].update(KIND, 'k1', {'a': 3}, 30))
        self.assertTrue(won[0].delete(KIND, 'k1'))
        self.assertEqual([], dead.items(KIND))

    def test_a_live_holders_record_cannot_be_taken_over(self):
        owner = self.backend()
        owner.put(KIND, 'k1', {}, 30, keep_alive=True)
        # Twice the lease, with its heartbeats: still held.
        for _ in range(3):
            self.advance(20)
            self.beat(owner)
        self.assertFalse(self.backend().take_over(KIND, 'k1', 30))
        # No more heartbeats renew it: it runs out 30 s after the last.
        owner.drop_lease(KIND, 'k1')
        self.advance(20)
        self.beat(owner)
        self.assertFalse(self.backend().take_over(KIND, 'k1', 30))
        self.advance(11)
        self.assertTrue(self.backend().take_over(KIND, 'k1', 30))

    def test_a_stalled_holder_finds_its_record_taken(self):
        # A scheduler stalled (CPU starvation, a GC pause) past its lease:
        # its heartbeat did not run, another took the record over.  Back,
        # its renewal and every write of the record fail: it must stop.
        stalled, other = self.backend(), self.backend()
        stalled.put(KIND, 'k1', {'step': 1}, 30, keep_alive=True)
        self.advance(31)
        self.assertTrue(other.take_over(KIND, 'k1', 30))
        self.beat(stalled)
        self.assertNotIn((KIND, 'k1'), stalled._leases)
        self.assertFalse(stalled.update(KIND, 'k1', {'step': 2}, 30))
        self.assertFalse(stalled.delete(KIND, 'k1'))
        self.assertEqual([('k1', {'step': 1}, other.owner)],
                         other.items(KIND))

    def test_bad_names_are_refused(self):
        self.assertRaises(ValueError, self.backend().put, KIND, '../x', {},
                          1)


class TestFileRecords(RecordsTests, base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        path = self.useFixture(fixtures.TempDir()).path
        self.url = 'file://%s' % path
        self.now = time.time()
        self.useFixture(fixtures.MockPatchObject(
            coordination.records, 'wall_clock', lambda: self.now))

    def advance(self, seconds):
        self.now += seconds

    def test_the_default_backend_has_records(self):
        self.conf.config(group='nova_sched_ext',
                         coordination_url=None)
        self.assertTrue(coordination.has_records(coordination.backend_url()))


class TestRedisRecords(RecordsTests, base.TestCase):

    def setUp(self):
        super().setUp()
        self.redis = self.useFixture(redis_server.RedisServer())
        self.url = self.redis.url

    def advance(self, seconds):
        # Redis's own clock expires the leases: each loses ``seconds`` of
        # its time to live, as if they had passed.
        client = redis.Redis(port=self.redis.port)
        self.addCleanup(client.close)
        pattern = '%s:*:lease:*' % coordination.REDIS_NAMESPACE
        for lease in client.scan_iter(match=pattern):
            left = client.pttl(lease) - int(seconds * 1000)
            if left > 0:
                client.pexpire(lease, left)
            else:
                client.delete(lease)

    def test_a_dead_redis_is_found_at_once(self):
        # tooz tries each operation 15 times; with the redis client's
        # default retries and backoff the first request after redis died
        # would wait close to a minute.
        backend = self.backend()
        backend.release(backend.acquire(['a'], 1, 'of a'))
        backend.put(KIND, 'k1', {}, 30)
        self.redis.stop()
        # What the client waits between its tries, not the wall time the
        # failure took: that depends on how loaded the machine is.
        slept = []
        self.useFixture(fixtures.MockPatch('redis.retry.sleep',
                                           side_effect=slept.append))
        for use in (lambda: backend.acquire(['a'], 1, 'of a'),
                    lambda: self.backend().items(KIND),
                    lambda: self.backend().acquire(['a'], 1, 'of a')):
            del slept[:]
            self.assertRaises(coordination.BackendUnavailable, use)
            self.assertLess(sum(slept), 1, slept)
        self.assertTrue(backend.down)


class TestBackendChoice(base.TestCase):

    def test_lock_only_backends_have_no_records(self):
        backend = coordination.Backend('zookeeper://127.0.0.1:1')
        self.assertFalse(coordination.has_records(backend.url))
        exc = self.assertRaises(coordination.BackendUnsupported,
                                backend.items, KIND)
        self.assertIn('holds locks only', str(exc))

    def test_a_url_naming_no_driver_is_not_probed(self):
        # No probe can fix a configuration error, and each one would log
        # the driver loader's warning: one line, then a clear refusal.
        log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        backend = coordination.Backend('no-such-driver://x')
        self.addCleanup(backend.stop)
        self.assertRaises(coordination.BackendUnavailable, backend.acquire,
                          ['a'], 1, 'of a')
        time.sleep(coordination.PROBE_INTERVAL * 2.5)
        exc = self.assertRaises(coordination.BackendUnavailable,
                                backend.acquire, ['a'], 1, 'of a')
        self.assertIn('cannot be used', str(exc))
        self.assertIn('coordination_url and restart', str(exc))
        self.assertEqual(1, log.output.count('Could not load'), log.output)
        self.assertIsNone(backend._heart)

    def test_urls_in_messages_carry_no_secret(self):
        self.assertEqual(
            'redis://h:6379',
            coordination.safe_url('redis://u:secret@h:6379?password=x'))

    def test_a_manager_has_one_backend(self):
        class Manager(object):
            pass

        manager = Manager()
        self.assertIs(coordination.for_manager(manager),
                      coordination.for_manager(manager))
        self.assertIsNot(coordination.for_manager(manager),
                         coordination.for_manager(Manager()))


class TestCheckAtStart(base.TestCase):
    """A backend that cannot work is reported when the scheduler starts."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        self.dir = self.useFixture(fixtures.TempDir()).path

        class Manager(object):
            pass

        self.manager = Manager()
        self.backend = coordination.for_manager(self.manager)

    def set(self, **kwargs):
        self.conf.config(group='nova_sched_ext', **kwargs)

    def test_a_url_of_no_backend_is_refused(self):
        for url in ('redis//127.0.0.1:6379', '127.0.0.1:6379',
                    'reddis://127.0.0.1:6379'):
            self.set(coordination_url=url)
            exc = self.assertRaises(coordination.BackendUnusable,
                                    coordination.check_at_start,
                                    self.manager)
            self.assertIn('[nova_sched_ext] coordination_url = ',
                          str(exc))
            self.assertIn('names no coordination backend', str(exc))
            self.assertIn('redis://', str(exc))

    def test_options_a_backend_cannot_read_are_refused(self):
        self.set(coordination_url='redis://127.0.0.1:6379?db=one')
        exc = self.assertRaises(coordination.BackendUnusable,
                                coordination.check_at_start, self.manager)
        self.assertIn('cannot be used', str(exc))

    def test_a_backend_that_does_not_answer_is_one_warning(self):
        # A port bound by this test and never listened on: refused.
        sock = socket.socket()
        self.addCleanup(sock.close)
        sock.bind(('127.0.0.1', 0))
        url = 'redis://127.0.0.1:%d' % sock.getsockname()[1]
        self.set(coordination_url=url)
        coordination.check_at_start(self.manager)
        lines = self.log.output.splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('[nova_sched_ext] coordination_url: the '
                      'coordination backend %s does not answer at start'
                      % url, lines[0])
        # The check leaves nothing behind for the workers.
        self.assertIsNone(self.backend._coordinator)
        self.assertFalse(self.backend.down)

    def test_a_backend_that_answers_is_silent(self):
        self.set(coordination_url='file://%s' % self.dir)
        coordination.check_at_start(self.manager)
        self.assertEqual('', self.log.output)

    def test_a_lock_dir_that_cannot_be_written_is_one_warning(self):
        # Under a regular file: no directory can be made there, root or not.
        blocker = os.path.join(self.dir, 'file')
        open(blocker, 'w').close()
        self.set(deployment_set_lock_dir=os.path.join(blocker, 'locks'))
        coordination.check_at_start(self.manager)
        lines = self.log.output.splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('[nova_sched_ext] deployment_set_lock_dir: the '
                      'scheduler cannot write its lock directory %s'
                      % os.path.join(blocker, 'locks'), lines[0])

    def test_a_lock_dir_is_made_at_start(self):
        locks = os.path.join(self.dir, 'a', 'locks')
        self.set(deployment_set_lock_dir=locks)
        coordination.check_at_start(self.manager)
        self.assertTrue(os.path.isdir(locks))
        self.assertEqual('', self.log.output)

    def test_nothing_is_checked_without_a_wrapper_that_uses_it(self):
        self.set(coordination_url='redis//x')
        coordination.check_at_start(object())
