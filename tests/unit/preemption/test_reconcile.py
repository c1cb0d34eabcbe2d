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

"""Eviction records and their reconcile, with placement and the API mocked.

The functional tests kill a scheduler at each step of a real eviction and
check placement afterwards; these cover what the record holds at each
step, and every case of the roll-back: each kind of victim, a new
instance that did become one, a reconcile that fails halfway, two
reconciles at once, a record whose owner is alive.
"""

import threading
import time
from unittest import mock

import fixtures
from nova import exception
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import coordination
from nova_sched_ext.preemption import driver
from nova_sched_ext.preemption import evictor as evictor_mod
from nova_sched_ext.preemption import journal
from nova_sched_ext.preemption import reconcile
from nova_sched_ext.preemption import reservation
from tests.unit.preemption import test_driver

#: a short lease, so that a test need not wait long for a dead owner
TTL = 0.3


def server(status='ACTIVE', task_state=None):
    return mock.Mock(status=status, task_state=task_state)


class SimulatedCrash(BaseException):
    pass


class JournalTestCase(test_driver.EvictionTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(journal, 'ttl',
                                                 return_value=TTL))
        # The test drives time: the leases' clock (the file store's) and
        # the schedulers' own clock advance only when it says, and no
        # heartbeat thread runs: :meth:`beat` is one heartbeat.  Nothing
        # depends on how fast the machine is.
        self.clock = time.time()
        self.useFixture(fixtures.MockPatchObject(
            coordination.records, 'wall_clock', lambda: self.clock))
        self.useFixture(fixtures.MockPatchObject(
            journal, 'monotonic', lambda: self.clock))
        self.useFixture(fixtures.MockPatchObject(
            coordination.Backend, '_ensure_heart'))
        self.became = self.useFixture(fixtures.MockPatchObject(
            reconcile, '_became_instance', return_value=False)).mock

    def records(self):
        return self.wrapper.backend.items(journal.KIND)

    def another_scheduler(self):
        """The Eviction wrapper of another scheduler manager."""
        manager = mock.Mock()
        with mock.patch.object(evictor_mod, 'Evictor',
                               return_value=self.evictor):
            other = driver.Eviction(manager)
        self.addCleanup(other.stop)
        return other

    def crash_at(self, point, nth=1):
        seen = []

        def inject(name, **details):
            if name == point:
                seen.append(details)
                if len(seen) == nth:
                    raise SimulatedCrash(point)

        self.useFixture(fixtures.MockPatchObject(driver, 'FAULT_INJECTION',
                                                 inject))

    def advance(self, seconds):
        """``seconds`` pass, for the leases and the schedulers."""
        self.clock += seconds

    def beat(self, wrapper=None):
        """One heartbeat of a scheduler (this one): it renews its leases."""
        (wrapper or self.wrapper).backend._heartbeat()

    def die(self):
        """This scheduler dies: its leases run out."""
        self.wrapper.backend.stop()
        self.advance(TTL * 2)


class TestTheRecord(JournalTestCase):

    def test_written_before_the_reservation_kept_up_then_deleted(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1, uuids.v2])))
        seen = {}

        def reserve(*args):
            seen['reserve'] = self.records()

        def evict(uuid, action):
            seen[uuid] = self.records()[0][1]
            return True

        self.reserve.side_effect = reserve
        self.evictor.evict.side_effect = evict
        self.call()

        (key, record, holder), = seen['reserve']
        self.assertEqual(self.wrapper.backend.owner, holder)
        self.assertEqual(journal.RESERVING, record['state'])
        self.assertEqual('req-1', record['request_id'])
        self.assertEqual(self.wrapper.backend.owner, record['owner'])
        self.assertEqual([{'uuid': uuids.new, 'rp_uuid': uuids.h1,
                           'resources': test_driver.RESOURCES}],
                         record['consumers'])
        self.assertEqual(
            {uuids.v1: {'uuid': uuids.v1, 'host': 'h1',
                        'allocations': self.current[uuids.v1]},
             uuids.v2: {'uuid': uuids.v2, 'host': 'h1',
                        'allocations': self.current[uuids.v2]}},
            {v['uuid']: v for v in record['victims']})
        # Before each victim: which one is being evicted, and which are.
        self.assertEqual((journal.EVICTING, uuids.v1, []),
                         (seen[uuids.v1]['state'],
                          seen[uuids.v1]['evicting'],
                          seen[uuids.v1]['evicted']))
        self.assertEqual((uuids.v2, [uuids.v1]),
                         (seen[uuids.v2]['evicting'],
                          seen[uuids.v2]['evicted']))
        # Answered: nothing left to reconcile.
        self.assertEqual([], self.records())

    def test_the_lease_outlives_its_ttl_while_the_owner_lives(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))
        holders = []

        def wait_gone(*args):
            # Three leases long, a heartbeat every third of one.
            for _ in range(9):
                self.advance(TTL / 3.0)
                self.beat()
            holders.append(self.records()[0][2])
            return []

        self.evictor.wait_gone.side_effect = wait_gone
        self.call()
        self.assertEqual([self.wrapper.backend.owner], holders)

    def test_no_record_no_eviction(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))
        self.useFixture(fixtures.MockPatchObject(
            self.wrapper.backend, 'put',
            side_effect=coordination.BackendUnavailable('down')))
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('not evicted while the scheduler\'s coordination '
                      'backend is unreachable', str(exc))
        self.reserve.assert_not_called()
        self.evictor.evict.assert_not_called()

    def test_a_refused_reservation_leaves_no_record(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))
        self.reserve.side_effect = reservation.ReservationFailed('400')
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertEqual([], self.records())

    def test_a_rolled_back_eviction_leaves_no_record(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))
        self.evictor.wait_gone.return_value = [uuids.v1]
        self.assertRaises(exception.NoValidHost, self.call)
        self.release.assert_called_once()
        self.assertEqual([], self.records())

    def test_a_failed_release_is_left_to_a_reconcile(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))
        self.evictor.wait_gone.return_value = [uuids.v1]
        self.release.side_effect = reservation.ReservationFailed('down')
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('a reconcile retries in', self.stdlog.logger.output)
        self.beat()
        self.advance(TTL * 2)
        (key, record, holder), = self.records()
        self.assertIsNone(holder)
        self.assertEqual(journal.ROLLING_BACK, record['state'])

    def test_taken_over_the_owner_rolls_nothing_back(self):
        # Taken for dead (its lease ran out, say while it was paused):
        # the scheduler that took the record over rolls back, only it.
        self.use_plan(test_driver.plan(('h1', [uuids.v1, uuids.v2])))
        other = self.another_scheduler()

        def evict(uuid, action):
            self.wrapper.backend.drop_lease(journal.KIND,
                                            self.records()[0][0])
            self.advance(TTL * 2)
            key, record, _holder = self.records()[0]
            self.assertIsNotNone(other.journal.take_over(key, record))
            return True

        self.evictor.evict.side_effect = evict
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('taken over by another scheduler', str(exc))
        self.assertEqual(1, self.evictor.evict.call_count)
        self.release.assert_not_called()
        (key, record, holder), = self.records()
        self.assertEqual(other.backend.owner, holder)
        self.assertEqual(journal.RECONCILING, record['state'])

    def test_a_stalled_owner_sends_no_eviction_on_a_taken_record(self):
        # Stalled (CPU starvation, a GC pause) between recording a victim's
        # eviction and sending it, longer than its lease: another
        # scheduler took the record over and rolls it back.  Resumed, it
        # must not send the eviction.
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))
        other = self.another_scheduler()

        def stall(point, **details):
            if point != 'evicting':
                return
            self.advance(TTL * 2)
            (key, record, holder), = self.records()
            self.assertIsNone(holder)
            self.assertIsNotNone(other.journal.take_over(key, record))

        self.useFixture(fixtures.MockPatchObject(driver, 'FAULT_INJECTION',
                                                 stall))
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('taken over by another scheduler', str(exc))
        self.evictor.evict.assert_not_called()
        self.release.assert_not_called()
        (key, record, holder), = self.records()
        self.assertEqual(other.backend.owner, holder)
        self.assertEqual(journal.RECONCILING, record['state'])

    def test_a_stall_shorter_than_half_a_lease_costs_no_write(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))

        def stall(point, **details):
            if point == 'evicting':
                self.advance(TTL / 3.0)

        self.useFixture(fixtures.MockPatchObject(driver, 'FAULT_INJECTION',
                                                 stall))
        update = self.useFixture(fixtures.MockPatchObject(
            self.wrapper.backend, 'update',
            wraps=self.wrapper.backend.update)).mock
        self.call()
        self.evictor.evict.assert_called_once_with(uuids.v1, 'delete')
        # reserved, evicting, evicted, gone: no write of ensure_held
        self.assertEqual(4, update.call_count)

    def test_a_stalled_owner_reserves_nothing_on_a_taken_record(self):
        self.use_plan(test_driver.plan(('h1', [uuids.v1])))
        other = self.another_scheduler()

        def stall(point, **details):
            if point != 'recorded':
                return
            self.advance(TTL * 2)
            (key, record, holder), = self.records()
            self.assertIsNotNone(other.journal.take_over(key, record))

        self.useFixture(fixtures.MockPatchObject(driver, 'FAULT_INJECTION',
                                                 stall))
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('taken over by another scheduler', str(exc))
        self.reserve.assert_not_called()
        self.evictor.evict.assert_not_called()

    def test_backend_down_mid_eviction_restores_only_the_untouched(self):
        # The record cannot say whose it is: another scheduler may have
        # taken it over and restored some victims already, so only those
        # the API shows untouched get their allocations here.
        self.use_plan(test_driver.plan(('h1', [uuids.v1, uuids.v2,
                                               uuids.v3])))
        real_save = journal.Entry.save
        down = []

        def save(entry, **changes):
            if down or changes.get('evicting') == uuids.v2:
                down.append(True)
                raise coordination.BackendUnavailable('down')
            return real_save(entry, **changes)

        self.useFixture(fixtures.MockPatchObject(journal.Entry, 'save',
                                                 save))
        self.evictor.get.side_effect = lambda uuid: {
            uuids.v2: server(), uuids.v3: server(task_state='deleting')}[
            uuid]
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertEqual(1, self.evictor.evict.call_count)
        self.release.assert_called_once_with(
            self.manager.placement_client, self.context, [uuids.new],
            {uuids.v2: self.current[uuids.v2]})


class TestReconcile(JournalTestCase):

    def setUp(self):
        super().setUp()
        self.use_plan(test_driver.plan(('h1', [uuids.v1, uuids.v2])))
        self.other = self.another_scheduler()
        #: what placement shows after the crash, per consumer (the
        #: reservation emptied the victims)
        self.now = {}
        self.servers = {uuids.v1: server(), uuids.v2: server()}
        self.evictor.get.side_effect = lambda uuid: self.servers[uuid]

    def crash(self, point, nth=1):
        self.crash_at(point, nth)
        self.assertRaises(SimulatedCrash, self.call)
        # What the reconcile reads of placement.
        self.read.side_effect = lambda client, context, uuid: {
            'allocations': self.now.get(uuid, {}),
            'consumer_generation': 1, 'project_id': 'p', 'user_id': 'u'}
        self.die()

    def test_a_live_owners_eviction_is_left_alone(self):
        reached = threading.Event()
        proceed = threading.Event()

        def evict(uuid, action):
            reached.set()
            proceed.wait(10)
            return True

        self.evictor.evict.side_effect = evict
        caller = threading.Thread(target=self.call)
        caller.start()
        self.assertTrue(reached.wait(60))
        # Two leases long, a heartbeat every third of one.
        for _ in range(6):
            self.advance(TTL / 3.0)
            self.beat()
        self.assertEqual([], self.other.reconcile())
        proceed.set()
        caller.join()
        self.release.assert_not_called()

    def test_dead_after_the_reservation(self):
        self.crash('reserved')
        self.evictor.evict.assert_not_called()
        done = self.other.reconcile()
        self.assertEqual(1, len(done))
        self.release.assert_called_once_with(
            self.other.manager.placement_client, mock.ANY, [uuids.new],
            {uuids.v1: self.current[uuids.v1],
             uuids.v2: self.current[uuids.v2]})
        self.assertEqual((sorted([uuids.v1, uuids.v2]), []),
                         (done[0]['restored'], done[0]['evicted']))
        self.assertEqual([], self.records())
        self.assertIn('was left unfinished by scheduler %s'
                      % self.wrapper.backend.owner,
                      self.stdlog.logger.output)

    def test_dead_before_the_reservation(self):
        # Nothing reserved: the victims still hold their room, so none is
        # restored; the new instance holds nothing to release.
        self.crash('recorded')
        self.reserve.assert_not_called()
        self.now = {uuids.v1: {'rp': {}}, uuids.v2: {'rp': {}}}
        done = self.other.reconcile()
        self.assertEqual([], done[0]['restored'])
        self.release.assert_called_once_with(
            mock.ANY, mock.ANY, [uuids.new], {})

    def test_dead_between_two_victims(self):
        self.crash('evicted')
        # The API took the first one's eviction; the record did not learn
        # it: the API says so.
        self.servers[uuids.v1] = server(task_state='deleting')
        done = self.other.reconcile()
        self.assertEqual(([uuids.v2], [uuids.v1]),
                         (done[0]['restored'], done[0]['left']))
        self.release.assert_called_once_with(
            mock.ANY, mock.ANY, [uuids.new],
            {uuids.v2: self.current[uuids.v2]})

    def test_dead_after_the_last_victim(self):
        self.crash('evicted', nth=2)
        self.servers = {uuids.v1: None, uuids.v2: server(status='DELETED')}
        done = self.other.reconcile()
        self.assertEqual(([], [uuids.v1], [uuids.v2]),
                         (done[0]['restored'], done[0]['evicted'],
                          done[0]['left']))
        self.release.assert_called_once_with(mock.ANY, mock.ANY,
                                             [uuids.new], {})

    def test_a_victim_with_its_room_back_is_not_given_it_twice(self):
        self.crash('reserved')
        self.now = {uuids.v1: {'rp': {'resources': {'PCPU': 2}}}}
        done = self.other.reconcile()
        self.assertEqual([uuids.v2], done[0]['restored'])

    def test_a_new_instance_that_became_one_keeps_its_room(self):
        self.crash('gone')
        self.became.return_value = True
        done = self.other.reconcile()
        self.assertEqual(([], [uuids.new]),
                         (done[0]['released'], done[0]['kept']))
        self.release.assert_called_once_with(mock.ANY, mock.ANY, [], {})

    def test_an_api_failure_is_retried_by_the_next_reconcile(self):
        self.crash('reserved')
        self.evictor.get.side_effect = evictor_mod.EvictionError('API down')
        self.assertEqual([], self.other.reconcile())
        self.release.assert_not_called()
        self.assertIn('could not be rolled back yet (API down)',
                      self.stdlog.logger.output)
        self.assertEqual(1, len(self.records()))
        self.evictor.get.side_effect = lambda uuid: self.servers[uuid]
        self.advance(TTL * 2)
        self.assertEqual(1, len(self.other.reconcile()))
        self.assertEqual([], self.records())

    def test_two_reconciles_at_once_roll_back_once(self):
        self.crash('reserved')
        third = self.another_scheduler()
        barrier = threading.Barrier(2)
        done = []

        def run(wrapper):
            barrier.wait()
            done.extend(wrapper.reconcile())

        threads = [threading.Thread(target=run, args=(w,))
                   for w in (self.other, third)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(1, len(done))
        self.release.assert_called_once()

    def test_the_manager_reconciles_through_its_eviction_wrapper(self):
        manager = mock.Mock(request_wrappers=[object(), self.other])
        self.crash('reserved')
        done = driver.PreemptionSchedulerManager.reconcile_evictions(
            manager)
        self.assertEqual(1, len(done))

    def test_started_with_the_service_it_reconciles_at_once(self):
        self.flags(preemption_reconcile_interval=1, group='nova_sched_ext')
        self.crash('reserved')
        self.other.start()
        # A guard against a hang, not a measure of speed.
        deadline = time.monotonic() + 120
        while self.records():
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        self.release.assert_called_once()
        self.other.stop()
