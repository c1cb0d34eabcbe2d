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

"""The eviction wrapper of the preemption driver, with mocks around it.

The functional tests run the whole sequence on a real Nova; these cover
the failure paths a real Nova does not reach easily and the exact shapes
of what is sent (placement payloads, notification, selections).
"""

import datetime
from unittest import mock

import fixtures
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import host_manager
from nova import test
from nova.tests.unit.scheduler import fakes
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import coordination
from nova_sched_ext.deployment_set import lock as ds_lock
from nova_sched_ext.preemption import caps
from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import driver
from nova_sched_ext.preemption import evictor as evictor_mod
from nova_sched_ext.preemption import extra_specs
from nova_sched_ext.preemption import notifications
from nova_sched_ext.preemption import reservation
from nova_sched_ext.preemption import search
from nova_sched_ext.preemption import victims as victims_mod
from tests.unit import nova_manager_tests

RESOURCES = {'PCPU': 4, 'MEMORY_MB': 512, 'DISK_GB': 1}
VICTIM_RESOURCES = {'PCPU': 2, 'MEMORY_MB': 256, 'DISK_GB': 1}


def victim(uuid, project='p-victims'):
    return victims_mod.Victim(
        uuid=uuid, project_id=project,
        created_at=datetime.datetime(2026, 1, 1),
        resources=dict(VICTIM_RESOURCES))


def host_state(host):
    return fakes.FakeHostState(host, host, {
        'uuid': getattr(uuids, host), 'limits': {}, 'aggregates': [],
        'cell_uuid': uuids.cell})


def plan(*placements):
    """``plan(('h1', [uuid, ...]), ...)``: a Plan, one placement each."""
    built = []
    for host, victim_uuids in placements:
        candidate = victims_mod.CandidateHost(
            host=host, nodename=host, rp_uuid=getattr(uuids, host),
            free={}, host_state=host_state(host),
            victims=[victim(u) for u in victim_uuids])
        built.append(victims_mod.Placement(
            host=candidate, victims=tuple(candidate.victims)))
    return victims_mod.Plan(placements=built)


def allocations(rp_uuid, generation=1, project='p-victims'):
    return {'allocations': {rp_uuid: {'resources': dict(VICTIM_RESOURCES)}},
            'consumer_generation': generation, 'project_id': project,
            'user_id': 'u-victims'}


class EvictionTestCase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.lock_dir = self.useFixture(fixtures.TempDir()).path
        self.flags(preemption_wait_timeout=5, preemption_poll_interval=0.01,
                   deployment_set_lock_dir=self.lock_dir,
                   group='nova_sched_ext')
        self.context = nova_context.RequestContext(
            'user', 'project', request_id='req-1')
        self.spec_obj = objects.RequestSpec(
            project_id='project', user_id='user',
            flavor=objects.Flavor(name='on-demand', extra_specs={}))
        self.manager = mock.Mock()
        self.evictor = mock.Mock(spec=evictor_mod.Evictor)
        self.evictor.evict.return_value = True
        self.evictor.wait_gone.return_value = []
        with mock.patch.object(evictor_mod, 'Evictor',
                               return_value=self.evictor):
            self.wrapper = driver.Eviction(self.manager)
        self.addCleanup(self.wrapper.stop)
        self.may_evict = self.useFixture(fixtures_patch(
            census, 'needs_new_room', return_value=True)).mock
        self.read = self.useFixture(fixtures_patch(
            reservation, 'read_allocations',
            side_effect=self._read_allocations)).mock
        self.reserve = self.useFixture(fixtures_patch(
            reservation, 'reserve')).mock
        self.release = self.useFixture(fixtures_patch(
            reservation, 'release')).mock
        self.notify = self.useFixture(fixtures_patch(
            notifications, 'notify_eviction')).mock
        self.current = {}

    def _read_allocations(self, client, context, uuid):
        return self.current[uuid]

    def use_plan(self, the_plan):
        for placement in the_plan.placements if the_plan else ():
            for v in placement.victims:
                self.current[v.uuid] = allocations(placement.host.rp_uuid)
        self.make_plan = self.useFixture(fixtures_patch(
            driver._Attempt, 'make_plan',
            return_value=(dict(RESOURCES), ['hosts'], the_plan))).mock

    def call(self, instance_uuids=(uuids.new,), nova_answer=None):
        def call_next(context, spec_obj, instance_uuids):
            if nova_answer is not None:
                return nova_answer
            raise exception.NoValidHost(reason='full')
        return self.wrapper(call_next, self.context, self.spec_obj,
                            list(instance_uuids))


def fixtures_patch(target, name, **kwargs):
    import fixtures
    return fixtures.MockPatchObject(target, name, **kwargs)


class TestWhenToEvict(EvictionTestCase):

    def test_a_request_nova_serves_is_left_alone(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.assertEqual(['answer'], self.call(nova_answer=['answer']))
        self.make_plan.assert_not_called()

    def test_preemptible_requests_never_evict(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.spec_obj.flavor.extra_specs = {
            extra_specs.PREEMPTIBLE_KEY: 'true'}
        self.assertRaises(exception.NoValidHost, self.call)
        self.make_plan.assert_not_called()
        self.reserve.assert_not_called()

    def test_moves_and_rebuilds_do_not_evict(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.may_evict.return_value = False
        self.assertRaises(exception.NoValidHost, self.call)
        self.make_plan.assert_not_called()

    def test_an_error_deciding_keeps_nova_answer(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.may_evict.side_effect = RuntimeError('db down')
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('full', str(exc))
        self.make_plan.assert_not_called()

    def test_no_plan_evicts_nothing(self):
        self.use_plan(None)
        self.make_plan.return_value = (dict(RESOURCES), ['h'], None)
        self.assertRaises(exception.NoValidHost, self.call)
        self.reserve.assert_not_called()
        self.evictor.evict.assert_not_called()

    def test_a_planning_error_evicts_nothing(self):
        self.use_plan(None)
        self.make_plan.side_effect = TypeError('bug')
        self.assertRaises(exception.NoValidHost, self.call)
        self.reserve.assert_not_called()
        self.assertIn('looking for victims failed; nothing was evicted',
                      self.stdlog.logger.output)

    def test_the_strategy_is_loaded_once_from_the_option(self):
        self.flags(preemption_victim_strategy='random',
                   group='nova_sched_ext')
        wrapper = driver.Eviction(self.manager)
        self.assertEqual('random', wrapper.strategy.name)
        self.flags(preemption_victim_strategy='nonsense',
                   group='nova_sched_ext')
        self.assertRaises(ValueError, driver.Eviction, self.manager)


class TestHappyPath(EvictionTestCase):

    def test_reserve_evict_wait_then_select_the_reserved_host(self):
        the_plan = plan(('h1', [uuids.v1, uuids.v2]))
        self.use_plan(the_plan)

        selections = self.call()

        # One reservation: the new instance on h1, both victims emptied
        # with the generations read just before.
        self.reserve.assert_called_once_with(
            self.manager.placement_client, self.context,
            [(uuids.new, uuids.h1, RESOURCES)],
            {uuids.v1: self.current[uuids.v1],
             uuids.v2: self.current[uuids.v2]}, 'project', 'user')
        # Re-checked all, then each evicted (with its own re-check).
        self.assertEqual([mock.call(uuids.v1), mock.call(uuids.v2)],
                         self.evictor.check_preemptible.call_args_list)
        self.assertEqual([mock.call(uuids.v1, 'delete'),
                          mock.call(uuids.v2, 'delete')],
                         self.evictor.evict.call_args_list)
        self.evictor.wait_gone.assert_called_once_with(
            [uuids.v1, uuids.v2], 'delete', 5, 0.01)
        self.release.assert_not_called()
        self.assertEqual(1, len(selections))
        self.assertEqual(1, len(selections[0]))
        selection = selections[0][0]
        self.assertIsInstance(selection, objects.Selection)
        self.assertEqual('h1', selection.service_host)
        self.assertEqual(uuids.h1, selection.compute_node_uuid)
        self.assertEqual(
            {'allocations': {uuids.h1: {'resources': RESOURCES}},
             'mappings': {'': [uuids.h1]}},
            jsonutils.loads(selection.allocation_request))
        self.assertEqual('1.36', selection.allocation_request_version)

    def test_an_evicted_victims_cap_record_goes(self):
        # v1 was placed minutes ago: the cells do not show it yet, the
        # caps count its record.  Evicted, it must stop counting.
        backend = self.wrapper.backend
        backend.put(caps.PENDING_KIND, uuids.v1, {'host': 'h1'},
                    caps.PENDING_TTL)
        backend.put(caps.PENDING_KIND, uuids.other, {'host': 'h1'},
                    caps.PENDING_TTL)
        self.use_plan(plan(('h1', [uuids.v1])))

        self.call()

        self.assertEqual([uuids.other], [
            key for key, _r, _h in backend.items(caps.PENDING_KIND)])

    def test_a_cap_record_the_backend_cannot_drop_expires(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        delete = self.wrapper.backend.delete

        def delete_but_cap_records(kind, key, owned=True):
            if kind == caps.PENDING_KIND:
                raise coordination.BackendUnavailable('redis is down')
            return delete(kind, key, owned=owned)

        with mock.patch.object(self.wrapper.backend, 'delete',
                               side_effect=delete_but_cap_records) as m:
            selections = self.call()
        m.assert_any_call(caps.PENDING_KIND, uuids.v1, owned=False)
        # The eviction is not undone for a record that will expire.
        self.assertEqual('h1', selections[0][0].service_host)
        self.release.assert_not_called()

    def test_each_eviction_is_notified_and_logged(self):
        self.use_plan(plan(('h1', [uuids.v1]), ('h2', [uuids.v2])))
        self.call(instance_uuids=[uuids.new1, uuids.new2])
        self.assertEqual(2, self.notify.call_count)
        payload = self.notify.call_args_list[1][0][1]
        self.assertIsInstance(payload, notifications.EvictionPayload)
        self.assertEqual({
            'request_id': 'req-1', 'instance_uuid': uuids.new2,
            'host': 'h2', 'nodename': 'h2', 'action': 'delete',
            'victims': [uuids.v2], 'victim_projects': ['p-victims'],
        }, {k: getattr(payload, k) for k in payload.fields})
        log = self.stdlog.logger.output
        self.assertIn('Preemption: request req-1 evicts (delete) %s on '
                      'host h1 for instance %s.' % (uuids.v1, uuids.new1),
                      log)
        self.assertIn('Preemption: request req-1 evicts (delete) %s on '
                      'host h2 for instance %s.' % (uuids.v2, uuids.new2),
                      log)

    def test_the_configured_action_is_used(self):
        self.flags(preemption_action='shelve_offload',
                   group='nova_sched_ext')
        self.use_plan(plan(('h1', [uuids.v1])))
        self.call()
        self.evictor.evict.assert_called_once_with(uuids.v1,
                                                   'shelve_offload')


class TestFailures(EvictionTestCase):

    def assertRolledBack(self, restored):
        self.release.assert_called_once_with(
            self.manager.placement_client, self.context, [uuids.new],
            {uuid: self.current[uuid] for uuid in restored})

    def test_a_victim_no_longer_preemptible_stops_everything(self):
        self.use_plan(plan(('h1', [uuids.v1, uuids.v2])))
        self.evictor.check_preemptible.side_effect = [
            mock.Mock(), evictor_mod.NotPreemptible('v2 is not')]
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('v2 is not', str(exc))
        self.evictor.evict.assert_not_called()
        self.assertRolledBack([uuids.v1, uuids.v2])

    def test_api_failure_mid_eviction_restores_the_untouched(self):
        self.use_plan(plan(('h1', [uuids.v1, uuids.v2, uuids.v3])))
        self.evictor.evict.side_effect = [
            True, evictor_mod.EvictionError('API down'), True]
        # The failed one is still there, untouched.
        self.evictor.get.return_value = mock.Mock(task_state=None,
                                                  status='ACTIVE')
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertEqual(2, self.evictor.evict.call_count)
        self.assertRolledBack([uuids.v2, uuids.v3])
        log = self.stdlog.logger.output
        self.assertIn('Preemption: request req-1 failed: API down. Hosts: '
                      'h1; evicted: %s; not evicted: ' % uuids.v1, log)
        self.assertIn('reservation released', log)

    def test_a_victim_whose_eviction_may_have_started_is_not_restored(self):
        self.use_plan(plan(('h1', [uuids.v1, uuids.v2])))
        self.evictor.evict.side_effect = [
            evictor_mod.EvictionError('timeout'), True]
        self.evictor.get.return_value = mock.Mock(task_state='deleting',
                                                  status='ACTIVE')
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertRolledBack([uuids.v2])

    def test_victims_not_gone_in_time_fail_the_request(self):
        self.use_plan(plan(('h1', [uuids.v1, uuids.v2])))
        self.evictor.wait_gone.return_value = [uuids.v2]
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('still there after 5 s: %s' % uuids.v2, str(exc))
        # Both evictions were sent: their hosts drop their allocations.
        self.assertRolledBack([])

    def test_an_unexpected_error_after_reserving_releases(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.evictor.wait_gone.side_effect = RuntimeError('bug')
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertRolledBack([])

    def test_a_release_that_fails_is_logged_for_the_operator(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.evictor.check_preemptible.side_effect = \
            evictor_mod.NotPreemptible('no')
        self.release.side_effect = reservation.ReservationFailed('down')
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertIn('reservation NOT released (down): check the '
                      'allocations of %s, %s' % (uuids.new, uuids.v1),
                      self.stdlog.logger.output)

    def test_a_lost_race_plans_again_once(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.reserve.side_effect = reservation.ReservationFailed(
            '409', conflict=True)
        exc = self.assertRaises(exception.NoValidHost, self.call)
        self.assertEqual(2, self.make_plan.call_count)
        self.assertEqual(2, self.reserve.call_count)
        self.assertIn('taken by another request', str(exc))
        self.evictor.evict.assert_not_called()

    def test_a_victim_changed_since_planning_plans_again(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        moved = allocations(uuids.h2)
        fresh = allocations(uuids.h1)
        self.read.side_effect = [moved, fresh]
        self.call()
        self.assertEqual(2, self.make_plan.call_count)
        self.reserve.assert_called_once()

    def test_placement_failing_before_the_reservation_evicts_nothing(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.read.side_effect = reservation.ReservationFailed('503')
        self.assertRaises(exception.NoValidHost, self.call)
        self.reserve.assert_not_called()
        self.evictor.evict.assert_not_called()
        self.assertIn("reading the victims' allocations failed; nothing "
                      "was evicted", self.stdlog.logger.output)

    def test_a_refused_reservation_evicts_nothing(self):
        self.use_plan(plan(('h1', [uuids.v1])))
        self.reserve.side_effect = reservation.ReservationFailed('400')
        self.assertRaises(exception.NoValidHost, self.call)
        self.assertEqual(1, self.reserve.call_count)
        self.evictor.evict.assert_not_called()


class NovaManagerTestsOnTheDriver(
        nova_manager_tests.NovaSchedulerManagerTests):
    """Nova's own SchedulerManager unit tests, run on the driver.

    What Nova serves, the driver serves the same way; what Nova refuses
    (for non-preemptible boots, in these tests) is refused the same way
    when no preemptible instance exists.
    """

    manager_cls = driver.PreemptionSchedulerManager

    def setUp(self):
        super().setUp()
        # No cell database here: nothing is preemptible.
        self.useFixture(fixtures_patch(census, 'preemptible_instances',
                                       return_value=[]))
        self.useFixture(fixtures_patch(census, 'preemptible_flavor_ids',
                                       return_value=[]))


class TestManager(test.NoDBTestCase):

    @mock.patch.object(host_manager.HostManager, '_init_instance_info',
                       new=mock.Mock())
    @mock.patch.object(host_manager.HostManager, '_init_aggregates',
                       new=mock.Mock())
    def test_wrappers_caps_then_eviction_inside_the_set_lock(self):
        manager = driver.PreemptionSchedulerManager()
        self.assertEqual(
            [ds_lock.DeploymentSetLock, caps.PreemptibleCaps,
             driver.Eviction],
            [type(w) for w in manager.request_wrappers])


class TestNotification(test.NoDBTestCase):

    def payload(self):
        return notifications.EvictionPayload(
            request_id='req-1', instance_uuid=uuids.new, host='h1',
            nodename='n1', action='delete', victims=[uuids.v1, uuids.v2],
            victim_projects=['p1', 'p2'])

    @mock.patch('nova.rpc.get_versioned_notifier')
    def test_versioned_and_of_the_package(self, get_notifier):
        self.flags(host='sched-1')
        context = nova_context.RequestContext('u', 'p')
        notifications.notify_eviction(context, self.payload())
        get_notifier.assert_called_once_with(
            'nova-sched-ext-scheduler:sched-1')
        notifier = get_notifier.return_value
        notifier.info.assert_called_once_with(
            context, 'nova_sched_ext.preemption.evict', mock.ANY)
        primitive = notifier.info.call_args[0][2]
        self.assertEqual('EvictionPayload', primitive['nova_object.name'])
        self.assertEqual('nova_sched_ext',
                         primitive['nova_object.namespace'])
        self.assertEqual('1.0', primitive['nova_object.version'])
        self.assertEqual({
            'request_id': 'req-1', 'instance_uuid': uuids.new,
            'host': 'h1', 'nodename': 'n1', 'action': 'delete',
            'victims': [uuids.v1, uuids.v2], 'victim_projects': ['p1', 'p2'],
        }, primitive['nova_object.data'])

    @mock.patch('nova.rpc.get_versioned_notifier')
    def test_a_notification_failure_never_undoes_an_eviction(self, get):
        get.return_value.info.side_effect = RuntimeError('bus down')
        notifications.notify_eviction(
            nova_context.RequestContext('u', 'p'), self.payload())
        self.assertIn('Could not send the nova_sched_ext.preemption.evict '
                      'notification of request req-1',
                      self.stdlog.logger.output)


class TestCandidateHosts(test.NoDBTestCase):
    """Which hosts an eviction considers, and how they are described."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext('u', 'p')
        self.spec_obj = objects.RequestSpec(
            project_id='p', user_id='u', ignore_hosts=None,
            force_hosts=None, force_nodes=None, availability_zone=None,
            requested_destination=None,
            flavor=objects.Flavor(name='od', extra_specs={}))
        self.manager = mock.Mock()
        self.manager.host_manager.enabled_filters = []
        wrapper = mock.Mock(manager=self.manager)
        self.attempt = search.CandidateSearch(wrapper.manager, self.context,
                                              self.spec_obj)
        self.group = objects.RequestGroup(
            resources=dict(RESOURCES), required_traits=set(),
            forbidden_traits=set(), aggregates=[],
            forbidden_aggregates=set())
        self.attempt.resource_request = mock.Mock(
            get_request_group=mock.Mock(return_value=self.group),
            _root_required=set(), _root_forbidden=set())
        self.states = [host_state(h) for h in ('h1', 'h2', 'h3')]
        for state, aggs in zip(self.states,
                               ([uuids.agg_a], [uuids.agg_b], [])):
            state.aggregates = [objects.Aggregate(uuid=u, metadata={})
                                for u in aggs]

    def kept(self):
        return [s.host for s in self.attempt.filter_hosts(self.states)]

    def test_everything_kept_without_constraints(self):
        self.assertEqual(['h1', 'h2', 'h3'], self.kept())

    def test_forced_ignored_and_requested_hosts(self):
        self.spec_obj.ignore_hosts = ['H1']
        self.assertEqual(['h2', 'h3'], self.kept())
        self.spec_obj.ignore_hosts = None
        self.spec_obj.force_hosts = ['h3']
        self.assertEqual(['h3'], self.kept())
        self.spec_obj.force_hosts = None
        self.spec_obj.requested_destination = objects.Destination(host='h2')
        self.assertEqual(['h2'], self.kept())

    @mock.patch.object(census, 'host_availability_zones',
                       return_value={'h1': 'az1', 'h2': 'az2'})
    def test_the_requested_zone(self, zones):
        self.flags(default_availability_zone='az1')
        self.spec_obj.availability_zone = 'az1'
        self.assertEqual(['h1', 'h3'], self.kept())

    def test_required_and_forbidden_aggregates(self):
        self.group.aggregates = [[uuids.agg_a, uuids.agg_b]]
        self.assertEqual(['h1', 'h2'], self.kept())
        self.group.forbidden_aggregates = {uuids.agg_b}
        self.assertEqual(['h1'], self.kept())

    def test_usage_filters_are_not_run_the_others_are(self):
        usage = mock.Mock(name='usage')
        type(usage).__name__ = 'NUMATopologyFilter'
        other = mock.Mock(name='other')
        type(other).__name__ = 'ComputeFilter'
        self.manager.host_manager.enabled_filters = [usage, other]
        handler = self.manager.host_manager.filter_handler
        handler.get_filtered_objects.return_value = self.states[:1]
        self.assertEqual(['h1'], self.kept())
        handler.get_filtered_objects.assert_called_once_with(
            [other], self.states, self.spec_obj, 0)

    def _placement(self, usages, consumers, traits=('COMPUTE_NODE',)):
        client = self.manager.placement_client
        inventory = {'PCPU': {'total': 8, 'reserved': 0,
                              'allocation_ratio': 1.0, 'max_unit': 8},
                     'MEMORY_MB': {'total': 4096, 'reserved': 512,
                                   'allocation_ratio': 1.5,
                                   'max_unit': 4096}}
        bodies = {'inventories': {'inventories': inventory},
                  'usages': {'usages': usages},
                  'allocations': {'allocations': consumers},
                  'traits': {'traits': list(traits)}}
        client.get.side_effect = lambda url, **kw: mock.Mock(
            status_code=200,
            json=mock.Mock(return_value=bodies[url.rsplit('/', 1)[1]]))

    def test_a_host_is_described_from_placement(self):
        self._placement({'PCPU': 8, 'MEMORY_MB': 6000},
                        {uuids.v1: {'resources': {'PCPU': 2}},
                         uuids.other: {'resources': {'PCPU': 6}}})
        instances = [mock.Mock(uuid=uuids.v1, project_id='p1',
                               created_at=None, numa_topology=None,
                               pci_requests=None),
                     mock.Mock(uuid=uuids.v_elsewhere)]
        host = self.attempt.describe_host(self.states[0], instances)
        self.assertEqual({'PCPU': 0, 'MEMORY_MB': 0}, host.free)
        self.assertEqual({'PCPU': 8, 'MEMORY_MB': 4096}, host.max_unit)
        self.assertEqual([uuids.v1], [v.uuid for v in host.victims])
        self.assertEqual({'PCPU': 2}, dict(host.victims[0].resources))
        self.assertIs(self.states[0], host.host_state)

    def test_a_host_without_the_required_traits_is_no_candidate(self):
        self._placement({}, {uuids.v1: {'resources': {'PCPU': 2}}})
        self.group.required_traits = {'HW_CPU_X86_AVX512F'}
        self.assertIsNone(self.attempt.describe_host(
            self.states[0], [mock.Mock(uuid=uuids.v1)]))
        self.group.required_traits = set()
        self.group.forbidden_traits = {'COMPUTE_NODE'}
        self.assertIsNone(self.attempt.describe_host(
            self.states[0], [mock.Mock(uuid=uuids.v1)]))
