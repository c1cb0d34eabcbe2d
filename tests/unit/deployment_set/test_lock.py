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

"""The per-set lock: threads, processes, timeouts, the request wrapper.

On the file backend (the default), and on a private ``redis-server``
(:mod:`tests.redis_server`): two schedulers exclude each other, and an
outage of redis refuses set requests only, logged once.
"""

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from unittest import mock

import fixtures
from nova import exception
from nova import objects
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids
from testtools import content

from nova_sched_ext import conf
from nova_sched_ext import coordination
from nova_sched_ext.deployment_set import lock
from nova_sched_ext.deployment_set import members
from tests import base
from tests import redis_server

objects.register_all()

SET_A = '11111111-1111-4111-8111-111111111111'
SET_B = '22222222-2222-4222-8222-222222222222'


class LockTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group='nova_sched_ext',
                         deployment_set_lock_dir=self.dir)
        self.locks = lock.SetLocks()
        self.addCleanup(self.locks.stop)

    def check_other_process_holds_the_lock(self, url):
        """A child process holds SET_A's lock; this one waits for it."""
        script = textwrap.dedent('''
            import sys, time
            from oslo_config import cfg
            from nova_sched_ext import conf
            from nova_sched_ext.deployment_set import lock
            conf.CONF([], project='nova')
            conf.CONF.set_override('deployment_set_lock_dir', sys.argv[1],
                                   group='nova_sched_ext')
            locks = lock.SetLocks(url=sys.argv[4] or None)
            held = locks.acquire(sys.argv[2], timeout=5)
            print('held', flush=True)
            time.sleep(float(sys.argv[3]))
            locks.release(held)
            print('released', flush=True)
        ''')
        child = subprocess.Popen(
            [sys.executable, '-c', script, self.dir, SET_A, '1.5',
             url or ''],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def finish():
            # The child's stderr (import-time warnings, or why it failed)
            # belongs to the test's details, not to the console.
            err = child.communicate()[1]
            self.addDetail('child stderr', content.text_content(err))
        self.addCleanup(finish)
        self.assertEqual('held', child.stdout.readline().strip())
        exc = self.assertRaises(lock.LockUnavailable, self.locks.acquire,
                                SET_A, 0.3)
        self.assertIn('another scheduler held the lock', str(exc))
        # Another set is free meanwhile.
        self.locks.release(self.locks.acquire(SET_B, timeout=0.3))
        # Once the child lets go, the lock is ours.
        started = time.monotonic()
        held = self.locks.acquire(SET_A, timeout=10)
        waited = time.monotonic() - started
        self.locks.release(held)
        self.assertEqual('released', child.stdout.readline().strip())
        self.assertGreater(waited, 0.2)


class TestSetLocks(LockTestCase):

    def hold_in_threads(self, groups, hold=0.2):
        """Each thread takes its group's lock; returns (start, end) pairs."""
        spans = {}
        barrier = threading.Barrier(len(groups))

        def run(n, group):
            barrier.wait()
            held = self.locks.acquire(group, timeout=10)
            start = time.monotonic()
            time.sleep(hold)
            spans[n] = (start, time.monotonic())
            self.locks.release(held)

        threads = [threading.Thread(target=run, args=(n, g))
                   for n, g in enumerate(groups)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [spans[n] for n in range(len(groups))]

    @staticmethod
    def overlaps(spans):
        spans = sorted(spans)
        return any(a[1] > b[0] for a, b in zip(spans, spans[1:]))

    def test_default_backend_is_a_file_lock_in_the_lock_dir(self):
        self.assertEqual('file://%s' % self.dir, lock.backend_url())
        held = self.locks.acquire(SET_A, timeout=1)
        self.locks.release(held)
        self.assertTrue(any(SET_A in name for name in os.listdir(self.dir)))

    def test_url_option_wins(self):
        self.conf.config(group='nova_sched_ext',
                         coordination_url='redis://h:6379')
        self.assertEqual('redis://h:6379', lock.backend_url())

    def test_threads_on_one_set_take_turns(self):
        spans = self.hold_in_threads([SET_A] * 4)
        self.assertFalse(self.overlaps(spans), spans)

    def test_threads_on_different_sets_do_not_wait(self):
        spans = self.hold_in_threads([SET_A, SET_B], hold=0.5)
        self.assertTrue(self.overlaps(spans), spans)

    def test_timeout(self):
        held = self.locks.acquire(SET_A, timeout=1)
        started = time.monotonic()
        errors = []

        def other():
            try:
                self.locks.acquire(SET_A, timeout=0.3)
            except lock.LockUnavailable as exc:
                errors.append(str(exc))

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        self.locks.release(held)
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        self.assertEqual(1, len(errors))
        self.assertIn('held the lock of deployment set %s' % SET_A,
                      errors[0])
        # Released and forgotten: the next one gets it at once.
        self.locks.release(self.locks.acquire(SET_A, timeout=0.1))
        self.assertEqual({}, self.locks.backend._local)

    def test_other_process_holds_the_lock(self):
        self.check_other_process_holds_the_lock(None)

    def test_backend_failure(self):
        locks = lock.SetLocks(url='no-such-driver://x')
        # A backend found down probes it from a thread until stopped: a
        # test must not leave one logging into the next tests.
        self.addCleanup(locks.stop)
        exc = self.assertRaises(lock.LockUnavailable, locks.acquire, SET_A,
                                1)
        self.assertIsInstance(exc, coordination.BackendUnavailable)
        self.assertIn('the coordination backend no-such-driver://x is '
                      'unreachable', str(exc))
        # The thread lock was let go too.
        self.assertEqual({}, locks.backend._local)

    def test_credentials_stay_out_of_messages(self):
        self.assertEqual('redis://h:6379',
                         lock._safe_url('redis://user:secret@h:6379'))

    def test_coordinator_is_made_again_after_a_fork(self):
        self.locks.release(self.locks.acquire(SET_A, timeout=1))
        first = self.locks.backend._coordinator
        with mock.patch.object(os, 'getpid', return_value=-1):
            self.locks.release(self.locks.acquire(SET_A, timeout=1))
            self.assertIsNot(first, self.locks.backend._coordinator)
        first.stop()


class FakeFilter(object):
    pass


FakeFilter.__name__ = 'DeploymentSetFilter'


def spec(policy='anti-affinity', rebuild=False, group=True):
    hints = {'_nova_check_type': ['rebuild']} if rebuild else {}
    instance_group = objects.InstanceGroup(
        uuid=SET_A, policy=policy, members=[], hosts=[]) if group else None
    return objects.RequestSpec(instance_uuid=uuids.u1, scheduler_hints=hints,
                               instance_group=instance_group)


class TestDeploymentSetLock(LockTestCase):

    def setUp(self):
        super().setUp()
        self.manager = mock.Mock()
        self.manager.host_manager.enabled_filters = [FakeFilter()]
        self.wrapper = lock.DeploymentSetLock(self.manager, self.locks)
        self.inside = []

        def call_next(context, spec_obj, instance_uuids):
            self.inside.append(self.locked(SET_A))
            return ['selection']

        self.call_next = call_next

    def locked(self, group):
        """Whether another process would find the set locked."""
        other = lock.SetLocks()
        try:
            other.release(other.acquire(group, timeout=0.01))
            return False
        except lock.LockUnavailable:
            return True
        finally:
            other.stop()

    def test_locks_around_the_request_of_an_anti_affinity_group(self):
        spec_obj = spec()
        result = self.wrapper(self.call_next, 'ctxt', spec_obj,
                              [uuids.u1, uuids.u2])
        self.assertEqual(['selection'], result)
        self.assertEqual([True], self.inside)
        self.assertFalse(self.locked(SET_A))
        self.assertEqual((uuids.u1, uuids.u2),
                         members.request_uuids(spec_obj))

    def test_no_lock_without_a_group_or_for_other_policies(self):
        for spec_obj in (spec(group=False), spec(policy='affinity'),
                         spec(policy='soft-anti-affinity'),
                         spec(rebuild=True)):
            self.wrapper(self.call_next, 'ctxt', spec_obj, [uuids.u1])
        self.assertEqual([False] * 4, self.inside)

    def test_no_lock_when_the_filter_is_not_enabled(self):
        self.manager.host_manager.enabled_filters = []
        self.wrapper(self.call_next, 'ctxt', spec(), [uuids.u1])
        self.assertEqual([False], self.inside)

    def test_released_when_scheduling_fails(self):
        def fail(context, spec_obj, instance_uuids):
            raise exception.NoValidHost(reason='')

        self.assertRaises(exception.NoValidHost, self.wrapper, fail, 'ctxt',
                          spec(), [uuids.u1])
        self.assertFalse(self.locked(SET_A))

    def test_no_lock_no_scheduling(self):
        self.conf.config(group='nova_sched_ext',
                         deployment_set_lock_timeout=1)
        log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.deployment_set.lock'))
        with mock.patch.object(self.locks, 'acquire',
                               side_effect=lock.LockUnavailable('busy')):
            exc = self.assertRaises(exception.NoValidHost, self.wrapper,
                                    self.call_next, 'ctxt', spec(), [uuids.u1])
        self.assertEqual([], self.inside)
        self.assertIn('could not be taken', str(exc))
        self.assertIn('Not scheduling instance(s) %s of deployment set %s: '
                      'busy' % (uuids.u1, SET_A), log.output)

    def schedule_with_filter(self, hints):
        """A call_next that runs the filter on the request, as Nova would."""
        from nova.tests.unit.scheduler import fakes

        from nova_sched_ext.filters import deployment_set as ds_filter

        filt = ds_filter.DeploymentSetFilter(
            member_source=members.StaticMemberSource(lambda uuid: []))

        def call_next(context, spec_obj, instance_uuids):
            spec_obj.scheduler_hints = hints
            filt.filter_all([fakes.FakeHostState('h1', 'h1', {})], spec_obj)
            return [['h1', 'alt-1', 'alt-2'], ['h2', 'alt-3']]

        return call_next

    def test_members_of_a_set_get_no_alternates(self):
        call_next = self.schedule_with_filter(
            {'deployment_set_strategy': ['domain']})
        self.assertEqual([['h1'], ['h2']], self.wrapper(
            call_next, 'ctxt', spec(), [uuids.u1, uuids.u2]))

    def test_alternates_if_the_deployer_wants_them(self):
        self.conf.config(group='nova_sched_ext',
                         deployment_set_alternates=True)
        call_next = self.schedule_with_filter(
            {'deployment_set_strategy': ['domain']})
        self.assertEqual([['h1', 'alt-1', 'alt-2'], ['h2', 'alt-3']],
                         self.wrapper(call_next, 'ctxt', spec(),
                                      [uuids.u1, uuids.u2]))

    def test_plain_anti_affinity_groups_keep_alternates(self):
        call_next = self.schedule_with_filter({})
        self.assertEqual([['h1', 'alt-1', 'alt-2'], ['h2', 'alt-3']],
                         self.wrapper(call_next, 'ctxt', spec(),
                                      [uuids.u1, uuids.u2]))

    def test_legacy_answers_pass_unchanged(self):
        legacy = [{'host': 'h1', 'nodename': 'h1', 'limits': {}}]
        inner = self.schedule_with_filter(
            {'deployment_set_strategy': ['domain']})

        def call_next(context, spec_obj, instance_uuids):
            inner(context, spec_obj, instance_uuids)
            return legacy

        self.assertEqual(legacy, self.wrapper(call_next, 'ctxt', spec(),
                                              [uuids.u1]))


class RedisLockTestCase(LockTestCase):
    """The lock on a private redis-server, as several schedulers share it."""

    def setUp(self):
        super().setUp()
        self.redis = self.useFixture(redis_server.RedisServer())
        self.conf.config(group='nova_sched_ext',
                         coordination_url=self.redis.url)

    def scheduler_locks(self):
        """The locks of one more scheduler: its own backend connection."""
        locks = lock.SetLocks()
        self.addCleanup(locks.stop)
        return locks


class TestRedisSetLocks(RedisLockTestCase):

    def test_two_schedulers_in_threads_exclude_each_other(self):
        # Two backends, two tooz coordinators, nothing shared in-process
        # but the test: only redis keeps their holders apart.
        schedulers = [self.scheduler_locks(), self.scheduler_locks()]
        spans = []
        barrier = threading.Barrier(6)

        def run(locks, group):
            barrier.wait()
            for _ in range(3):
                held = locks.acquire(group, timeout=20)
                start = time.monotonic()
                time.sleep(0.05)
                spans.append((group, start, time.monotonic()))
                locks.release(held)

        threads = [threading.Thread(target=run, args=(
            schedulers[n % 2], SET_A if n < 4 else SET_B))
            for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        on_a = [(a, b) for group, a, b in spans if group == SET_A]
        self.assertEqual(12, len(on_a))
        self.assertFalse(TestSetLocks.overlaps(on_a), on_a)
        # Another set is not held up by SET_A's holders.
        on_b = [(a, b) for group, a, b in spans if group == SET_B]
        self.assertTrue(TestSetLocks.overlaps(sorted(on_a + on_b)))

    def test_another_process_holds_the_lock(self):
        self.check_other_process_holds_the_lock(self.redis.url)

    def test_a_lock_of_a_dead_scheduler_runs_out(self):
        # A scheduler that dies holding a lock stops renewing it: redis
        # expires it after the URL's lock_timeout, not never.
        url = self.redis.url + '&lock_timeout=1'
        dead = lock.SetLocks(url=url)
        dead.acquire(SET_A, timeout=1)
        dead.backend._heart_generation += 1  # its heart stops, as in death
        other = lock.SetLocks(url=url)
        self.addCleanup(other.stop)
        # Redis's own clock expires it; the timeout is a guard against a
        # lock that never runs out, not a measure of how fast it does.
        other.release(other.acquire(SET_A, timeout=120))


class TestRedisOutage(RedisLockTestCase):

    def setUp(self):
        super().setUp()
        self.manager = mock.Mock()
        self.manager.host_manager.enabled_filters = [FakeFilter()]
        self.wrapper = lock.DeploymentSetLock(self.manager)
        self.addCleanup(self.wrapper.stop)
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext', level=logging.INFO))
        self.placed = []

    def call_next(self, context, spec_obj, instance_uuids):
        self.placed.append(instance_uuids[0])
        return [['h1']]

    def boot(self, in_set=True):
        uuid = getattr(uuids, 'boot%d' % len(self.placed))
        return self.wrapper(self.call_next, 'ctxt', spec(group=in_set),
                            [uuid])

    def outage_lines(self):
        return [line for line in self.log.output.splitlines()
                if 'coordination backend' in line and 'failed (' in line]

    def recovery_lines(self):
        return [line for line in self.log.output.splitlines()
                if 'answers again, after' in line]

    def test_set_requests_fail_closed_others_go_on_logged_once(self):
        self.assertEqual([['h1']], self.boot())
        self.redis.stop()

        refused = []
        for _ in range(5):
            exc = self.assertRaises(exception.NoValidHost, self.boot)
            refused.append(str(exc))
            # Requests without a set do not need the backend.
            self.assertEqual([['h1']], self.boot(in_set=False))
        self.assertEqual(6, len(self.placed))
        self.assertIn('coordination backend is unreachable, and members '
                      'of a deployment set are never placed without it',
                      refused[0])
        self.assertEqual(1, len(self.outage_lines()), self.log.output)
        self.assertNotIn(self.redis.url.split('?')[0] + '?',
                         self.log.output)

        self.redis.start()
        deadline = time.monotonic() + 120  # a hang guard
        while True:
            try:
                self.boot()
                break
            except exception.NoValidHost:
                self.assertLess(time.monotonic(), deadline,
                                'still refused after redis came back')
                time.sleep(0.1)
        self.assertEqual(1, len(self.outage_lines()), self.log.output)
        self.assertEqual(1, len(self.recovery_lines()), self.log.output)
        # Locked again for real: another scheduler finds the set held.
        inside = []

        def call_next(context, spec_obj, instance_uuids):
            other = self.scheduler_locks()
            self.assertRaises(coordination.LockTimeout, other.acquire,
                              SET_A, 0.2)
            inside.append(True)
            return [['h1']]

        self.wrapper(call_next, 'ctxt', spec(), [uuids.last])
        self.assertEqual([True], inside)

    def test_a_second_outage_is_logged_again(self):
        self.boot()
        for _ in range(2):
            self.redis.stop()
            self.assertRaises(exception.NoValidHost, self.boot)
            self.assertRaises(exception.NoValidHost, self.boot)
            self.redis.start()
            deadline = time.monotonic() + 120  # a hang guard
            while self.wrapper.locks.backend.down:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.1)
            self.boot()
        self.assertEqual(2, len(self.outage_lines()), self.log.output)
        self.assertEqual(2, len(self.recovery_lines()), self.log.output)
