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

"""The caps on preemptible instances (the wrapper, with census mocked)."""

import time
from unittest import mock

import fixtures
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import coordination
from nova_sched_ext.preemption import caps
from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import extra_specs


def instance(host, uuid=None):
    return mock.Mock(host=host, uuid=uuid or getattr(uuids, 'i-' + host))


class TestPreemptibleCaps(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext(
            'u', 'p', request_id='req-caps')
        self.spec_obj = objects.RequestSpec(
            flavor=objects.Flavor(name='pre', extra_specs={
                extra_specs.PREEMPTIBLE_KEY: 'true'}))
        self.flags(deployment_set_lock_dir=self.useFixture(
            fixtures.TempDir()).path, group='nova_sched_ext')
        self.manager = mock.Mock()
        self.caps = caps.PreemptibleCaps(self.manager)
        self.addCleanup(self.caps.backend.stop)
        self.instances = []
        self.zones = {'a1': 'az-a', 'a2': 'az-a', 'b1': 'az-b'}
        self.useFixture(fixtures.MockPatchObject(
            census, 'preemptible_instances',
            side_effect=lambda ctx: list(self.instances)))
        self.useFixture(fixtures.MockPatchObject(
            census, 'host_availability_zones',
            side_effect=lambda ctx: dict(self.zones)))
        self.useFixture(fixtures.MockPatchObject(
            census, 'needs_new_room', return_value=True))
        self.deleted = set()
        self.useFixture(fixtures.MockPatchObject(
            census, 'deleted_instance_uuids',
            side_effect=lambda ctx, pending: self.deleted & set(pending)))
        self.useFixture(fixtures.MockPatchObject(
            objects.HostMappingList, 'get_all',
            return_value=[mock.Mock(host=h) for h in ('a1', 'a2', 'b1',
                                                      'c1')]))
        self.seen_ignore = []

    def call(self, chosen=('a1',), uuids_=None):
        def call_next(context, spec_obj, instance_uuids):
            self.seen_ignore.append(
                spec_obj.ignore_hosts
                if spec_obj.obj_attr_is_set('ignore_hosts') else None)
            return [[objects.Selection(service_host=h)] for h in chosen]
        if uuids_ is None:
            uuids_ = [getattr(uuids, 'new%d' % i) for i in range(len(chosen))]
        return self.caps(call_next, self.context, self.spec_obj, uuids_)

    def test_no_cap_means_no_counting(self):
        self.call()
        census.preemptible_instances.assert_not_called()

    def test_on_demand_requests_are_not_capped(self):
        self.flags(preemptible_max_per_host=0, group='nova_sched_ext')
        self.spec_obj.flavor.extra_specs = {}
        self.call()
        census.preemptible_instances.assert_not_called()

    def test_hosts_at_the_host_cap_are_ignored_then_restored(self):
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        self.instances = [instance('a1')]
        self.spec_obj.ignore_hosts = ['x']
        self.call(chosen=('a2',))
        self.assertEqual([['a1', 'x']], self.seen_ignore)
        self.assertEqual(['x'], self.spec_obj.ignore_hosts)

    def test_a_zone_at_its_cap_ignores_all_its_hosts(self):
        self.flags(preemptible_max_per_az=2, group='nova_sched_ext')
        self.instances = [instance('a1'), instance('a2')]
        self.call(chosen=('b1',))
        self.assertEqual([['a1', 'a2']], self.seen_ignore)

    def test_the_default_zone_holds_hosts_in_no_zone(self):
        self.flags(preemptible_max_per_az=1, group='nova_sched_ext')
        self.instances = [instance('c1')]
        self.call(chosen=('a1',))
        self.assertEqual([['c1']], self.seen_ignore)

    def test_nova_failing_with_capped_hosts_says_why(self):
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        self.instances = [instance('a1')]

        def call_next(context, spec_obj, instance_uuids):
            raise exception.NoValidHost(reason='')
        self.assertRaises(exception.NoValidHost, self.caps, call_next,
                          self.context, self.spec_obj, [uuids.new])
        self.assertIn('Preemptible request req-caps for 1 instance(s) of '
                      'flavor pre refused by the preemptible caps: no room '
                      'outside the hosts at a cap (hosts at their cap of 1 '
                      'per host: a1)', self.stdlog.logger.output)

    def test_a_multi_create_beyond_the_cap_is_released(self):
        self.flags(preemptible_max_per_az=3, group='nova_sched_ext')
        self.instances = [instance('a1')]
        self.assertRaises(exception.NoValidHost, self.call,
                          chosen=('a1', 'a2', 'a2'))
        self.assertEqual(
            3, self.manager.placement_client.delete_allocation_for_instance
            .call_count)
        self.assertIn('zone az-a would hold 4 (max 3 per availability '
                      'zone)', self.stdlog.logger.output)

    def test_placed_but_not_yet_in_a_cell_still_counts(self):
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        self.call(chosen=('a1',), uuids_=[uuids.first])
        self.call(chosen=('a2',), uuids_=[uuids.second])
        self.assertEqual([None, ['a1']], self.seen_ignore)
        # Once the cell shows it, it is counted once, not twice.
        self.instances = [instance('a1', uuids.first)]
        self.assertRaises(exception.NoValidHost, self.call,
                          chosen=('a1',), uuids_=[uuids.third])

    def test_a_placement_deleted_before_it_was_counted_counts_no_more(self):
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        self.call(chosen=('a1',), uuids_=[uuids.first])
        # Its owner deleted it before any count saw it in a cell.
        self.deleted = {uuids.first}
        self.call(chosen=('a1',), uuids_=[uuids.second])
        self.assertEqual([None, None], self.seen_ignore)
        pending = [uuid for uuid, _, _ in
                   self.caps.backend.items(caps.PENDING_KIND)]
        self.assertEqual([uuids.second], pending)

    def test_a_cell_that_cannot_say_what_was_deleted_refuses(self):
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        self.call(chosen=('a1',), uuids_=[uuids.first])
        census.deleted_instance_uuids.side_effect = (
            census.CellUnavailable(uuids.cell1))
        self.assertRaises(exception.NoValidHost, self.call,
                          chosen=('a2',), uuids_=[uuids.second])

    def test_pending_placements_expire(self):
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        self.useFixture(fixtures.MockPatchObject(caps, 'PENDING_TTL', 0.2))
        # The file store's lease clock, driven by the test.
        now = [time.time()]
        self.useFixture(fixtures.MockPatchObject(
            coordination.records, 'wall_clock', lambda: now[0]))
        self.call(chosen=('a1',), uuids_=[uuids.first])
        now[0] += 0.4
        self.call(chosen=('a1',), uuids_=[uuids.second])
        self.assertEqual([None, None], self.seen_ignore)

    def test_pending_placements_are_shared_by_schedulers(self):
        # Another scheduler (its own manager and backend connection, the
        # same backend) sees this one's placement before the cells do.
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        self.call(chosen=('a1',), uuids_=[uuids.first])
        other = caps.PreemptibleCaps(mock.Mock())
        self.addCleanup(other.backend.stop)
        self.caps = other
        self.call(chosen=('a2',), uuids_=[uuids.second])
        self.assertEqual([None, ['a1']], self.seen_ignore)

    def test_a_zone_request_locks_its_zone_only(self):
        self.flags(preemptible_max_per_az=5, group='nova_sched_ext')
        acquire = self.useFixture(fixtures.MockPatchObject(
            self.caps.backend, 'acquire',
            wraps=self.caps.backend.acquire)).mock
        self.spec_obj.availability_zone = 'az-b'
        self.call(chosen=('b1',))
        self.spec_obj.availability_zone = None
        self.call(chosen=('b1',))
        self.assertEqual(
            [[caps.LOCK_PREFIX + 'az-b'],
             [caps.LOCK_PREFIX + z for z in ('az-a', 'az-b', 'nova')]],
            [list(c.args[0]) for c in acquire.call_args_list])

    def test_a_host_outside_the_locked_zone_counts_again_under_all(self):
        # Without zone filtering Nova may pick a host of another zone:
        # that zone was not locked, so the claim is dropped and the
        # request runs again under every zone's lock.
        self.flags(preemptible_max_per_az=5, group='nova_sched_ext')
        self.spec_obj.availability_zone = 'az-b'
        result = self.call(chosen=('a1',))
        self.assertEqual('a1', result[0][0].service_host)
        self.assertEqual(2, len(self.seen_ignore))
        self.manager.placement_client.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.new0, force=True)

    def test_an_unreachable_backend_refuses_and_lifts_no_cap(self):
        self.flags(preemptible_max_per_host=5, group='nova_sched_ext')
        self.useFixture(fixtures.MockPatchObject(
            self.caps.backend, 'acquire',
            side_effect=coordination.BackendUnavailable('down')))
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('coordination backend is unreachable', str(exc))
        self.assertEqual([], self.seen_ignore)

    def test_a_cap_that_cannot_be_checked_refuses(self):
        self.flags(preemptible_max_per_host=5, group='nova_sched_ext')
        census.preemptible_instances.side_effect = RuntimeError('cell down')
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('could not be counted', str(exc))
        self.assertEqual([], self.seen_ignore)
