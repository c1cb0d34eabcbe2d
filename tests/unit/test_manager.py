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

"""The package's scheduler manager and nova-sched-ext-scheduler."""

import importlib
import io
import logging
from unittest import mock

import fixtures
from nova import context
from nova import exception
from nova import objects
from nova.scheduler import host_manager
from nova.scheduler import manager as nova_manager
from nova import test
import oslo_messaging as messaging
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import candidates
from nova_sched_ext import claim_casts
from nova_sched_ext.deployment_set import lock as ds_lock
from nova_sched_ext import host_state
from nova_sched_ext import kept_candidates
from nova_sched_ext import manager
from nova_sched_ext.preemption import driver
from nova_sched_ext import registry
from tests.unit import nova_manager_tests
from tests.unit import test_candidates


class NovaManagerTestsOnOurManager(
        nova_manager_tests.NovaSchedulerManagerTests):
    """Nova's own SchedulerManager unit tests, run on the subclass.

    The wrappers must not change anything Nova's tests can see.
    """

    manager_cls = manager.SchedulerManager


class Recorder(object):
    """A request wrapper that notes when it runs."""

    def __init__(self, name, calls):
        self.name = name
        self.calls = calls

    def __call__(self, call_next, context, spec_obj, instance_uuids):
        self.calls.append(('enter', self.name, spec_obj.instance_uuid,
                           tuple(instance_uuids or ())))
        try:
            return call_next(context, spec_obj, instance_uuids)
        except Exception as exc:
            self.calls.append(('raised', self.name, type(exc).__name__))
            raise
        finally:
            self.calls.append(('exit', self.name))


class TestRequestWrappers(test.NoDBTestCase):

    @mock.patch.object(host_manager.HostManager, '_init_instance_info',
                       new=mock.Mock())
    @mock.patch.object(host_manager.HostManager, '_init_aggregates',
                       new=mock.Mock())
    def setUp(self):
        super().setUp()
        self.calls = []
        calls = self.calls

        class TwoWrappers(manager.SchedulerManager):
            REQUEST_WRAPPERS = (
                lambda m: Recorder('outer', calls),
                lambda m: Recorder('inner', calls),
            )

        self.manager = TwoWrappers()
        self.context = context.RequestContext('user', 'project')
        self.spec_obj = objects.RequestSpec(instance_uuid=uuids.u1)

    def test_the_deployment_set_lock_is_shipped(self):
        self.assertEqual((ds_lock.DeploymentSetLock,),
                         manager.SchedulerManager.REQUEST_WRAPPERS)

    def test_wrappers_run_outermost_first_around_nova(self):
        def nova_select(*args, **kwargs):
            self.calls.append(('nova', kwargs['spec_obj'].instance_uuid,
                               kwargs['instance_uuids'],
                               kwargs['return_objects'],
                               kwargs['return_alternates']))
            return ['selections']

        with mock.patch.object(nova_manager.SchedulerManager,
                               'select_destinations', autospec=True,
                               side_effect=nova_select):
            result = self.manager.select_destinations(
                self.context, spec_obj=self.spec_obj,
                instance_uuids=[uuids.u1, uuids.u2], return_objects=True,
                return_alternates=True)
        self.assertEqual(['selections'], result)
        self.assertEqual([
            ('enter', 'outer', uuids.u1, (uuids.u1, uuids.u2)),
            ('enter', 'inner', uuids.u1, (uuids.u1, uuids.u2)),
            ('nova', uuids.u1, [uuids.u1, uuids.u2], True, True),
            ('exit', 'inner'),
            ('exit', 'outer'),
        ], self.calls)

    def test_the_wrappers_see_only_the_widened_answer(self):
        # Placement holds 1,500 candidates and returns 1,000; the host
        # that fits is not among them.  The manager asks again, inside the
        # wrappers: they see one request and its selections, no
        # NoValidHost (the eviction would act on it).
        self.flags(max_placement_results=1000, group='scheduler')
        placement = test_candidates.FakePlacement(1500)
        self.useFixture(fixtures.MockPatch(
            'nova.scheduler.client.report.report_client_singleton',
            return_value=placement))
        client = self.manager.placement_client
        self.assertIsInstance(client, candidates.PlacementClientView)
        self.assertIs(client, self.manager.placement_client)
        self.assertIs(placement, client.client)

        def nova_select(*args, **kwargs):
            # what Nova's select_destinations does with its client
            return test_candidates.NovaFake(
                self.manager.placement_client, 'h1400')(
                    args[-1], kwargs['spec_obj'], kwargs['instance_uuids'])

        with mock.patch.object(nova_manager.SchedulerManager,
                               'select_destinations', autospec=True,
                               side_effect=nova_select):
            result = self.manager.select_destinations(
                self.context, spec_obj=self.spec_obj,
                instance_uuids=[uuids.u1], return_objects=True)
        self.assertEqual([['h1400']], result)
        self.assertEqual([1000, 4000], placement.limits)
        self.assertEqual([('enter', 'outer', uuids.u1, (uuids.u1,)),
                          ('enter', 'inner', uuids.u1, (uuids.u1,)),
                          ('exit', 'inner'), ('exit', 'outer')], self.calls)

    def test_legacy_request_spec_is_converted_first(self):
        with mock.patch.object(nova_manager.SchedulerManager,
                               'select_destinations', autospec=True,
                               return_value=[]) as nova_select, \
                mock.patch.object(objects.RequestSpec, 'from_primitives',
                                  return_value=self.spec_obj) as convert:
            self.manager.select_destinations(
                self.context, request_spec={'a': 1},
                filter_properties={'b': 2})
        convert.assert_called_once_with(self.context, {'a': 1}, {'b': 2})
        self.assertIs(self.spec_obj,
                      nova_select.call_args.kwargs['spec_obj'])
        self.assertEqual(('enter', 'outer', uuids.u1, ()), self.calls[0])

    def test_wrappers_see_the_no_valid_host_of_nova(self):
        # Nova's select_destinations hands NoValidHost to the RPC server
        # as an ExpectedException; the wrappers see NoValidHost itself,
        # and the RPC server gets it wrapped again.
        def no_valid_host(*args, **kwargs):
            try:
                raise exception.NoValidHost(reason='full')
            except exception.NoValidHost:
                raise messaging.ExpectedException()

        with mock.patch.object(nova_manager.SchedulerManager,
                               'select_destinations', autospec=True,
                               side_effect=no_valid_host):
            exc = self.assertRaises(messaging.ExpectedException,
                                    self.manager.select_destinations,
                                    self.context, spec_obj=self.spec_obj,
                                    instance_uuids=[uuids.u1])
        self.assertIsInstance(exc.exc_info[1], exception.NoValidHost)
        self.assertEqual([('raised', 'inner', 'NoValidHost'),
                          ('exit', 'inner'),
                          ('raised', 'outer', 'NoValidHost'),
                          ('exit', 'outer')], self.calls[2:])

    def test_wrappers_see_objects_even_for_a_legacy_caller(self):
        seen = []

        def nova_select(*args, **kwargs):
            seen.append((kwargs['return_objects'],
                         kwargs['return_alternates']))
            return [[objects.Selection(
                service_host='h1', nodename='n1', compute_node_uuid=uuids.cn,
                cell_uuid=uuids.cell, limits=None,
                allocation_request=None, allocation_request_version=None)]]

        with mock.patch.object(nova_manager.SchedulerManager,
                               'select_destinations', autospec=True,
                               side_effect=nova_select):
            result = self.manager.select_destinations(
                self.context, spec_obj=self.spec_obj,
                instance_uuids=[uuids.u1], return_objects=False,
                return_alternates=True)
        # Objects for the wrappers, never alternates for such a caller,
        # and Nova's legacy list of host dicts for the caller.
        self.assertEqual([(True, False)], seen)
        self.assertEqual([{'host': 'h1', 'nodename': 'n1',
                           'limits': {}}], result)

    def test_a_wrapper_may_refuse(self):
        def refuse(call_next, context, spec_obj, instance_uuids):
            raise exception.NoValidHost(reason='no')

        self.manager.request_wrappers.insert(0, refuse)
        with mock.patch.object(nova_manager.SchedulerManager,
                               'select_destinations') as nova_select:
            exc = self.assertRaises(messaging.ExpectedException,
                                    self.manager.select_destinations,
                                    self.context, spec_obj=self.spec_obj)
        self.assertIsInstance(exc.exc_info[1], exception.NoValidHost)
        nova_select.assert_not_called()
        self.assertEqual([], self.calls)

    def test_wrappers_are_stopped_with_the_service(self):
        wrapper = mock.Mock()
        self.manager.request_wrappers = [wrapper, object()]
        self.manager.cleanup_host()
        wrapper.stop.assert_called_once_with()

    def test_wrappers_are_started_with_the_service(self):
        # init_host runs in each worker, after the fork: a wrapper's
        # threads start there.  One that fails does not stop the others.
        failing, wrapper = mock.Mock(), mock.Mock()
        failing.start.side_effect = RuntimeError('no')
        self.manager.request_wrappers = [failing, object(), wrapper]
        self.manager.init_host(None)
        wrapper.start.assert_called_once_with()
        self.assertIn('failed to start', self.stdlog.logger.output)


class TestKeptCandidates(test.NoDBTestCase):
    """``[nova_sched_ext] kept_candidates``: on, and off (the default)."""

    @mock.patch.object(host_manager.HostManager, '_init_instance_info',
                       new=mock.Mock())
    @mock.patch.object(host_manager.HostManager, '_init_aggregates',
                       new=mock.Mock())
    def build(self):
        return manager.SchedulerManager()

    def test_off_by_default_every_query_goes_to_placement(self):
        scheduler = self.build()
        self.assertIsNone(scheduler.candidate_limit.kept)
        client = mock.Mock()
        client.get_allocation_candidates.return_value = ([], {}, '1.36')
        view = scheduler.candidate_limit.client(client)

        def nova(ctxt, spec_obj, instance_uuids):
            view.get_allocation_candidates(ctxt, mock.Mock(_limit=1000))
            return [['h1']]

        scheduler.candidate_limit.schedule(
            nova, context.RequestContext('u', 'p'), objects.RequestSpec(),
            [uuids.u1])
        client.get_allocation_candidates.assert_called_once()

    def test_on_it_starts_and_stops_with_the_service(self):
        self.flags(kept_candidates=True, kept_state_poll_interval=0.5,
                   group='nova_sched_ext')
        scheduler = self.build()
        kept = scheduler.candidate_limit.kept
        self.assertIsInstance(kept, kept_candidates.KeptCandidates)
        self.assertEqual(0.5, kept.poll_interval)
        with mock.patch.object(kept, 'start') as start, \
                mock.patch.object(kept, 'stop') as stop:
            scheduler.init_host(None)
            start.assert_called_once_with()
            scheduler.cleanup_host()
            stop.assert_called_once_with()

    def test_claim_casts_add_their_endpoint_with_the_option(self):
        self.flags(kept_candidates=True, group='nova_sched_ext')
        scheduler = self.build()
        self.assertIsNone(scheduler.candidate_limit.kept.casts)
        self.assertEqual([], [e for e in scheduler.additional_endpoints
                              if isinstance(e, claim_casts.
                                            ClaimCastsEndpoint)])
        self.flags(kept_state_claim_casts=True, group='nova_sched_ext')
        scheduler = self.build()
        casts = scheduler.candidate_limit.kept.casts
        self.assertIsInstance(casts, claim_casts.ClaimCasts)
        self.assertIn(casts.endpoint, scheduler.additional_endpoints)
        # a claim placement accepted through the manager's view is cast
        client = mock.Mock()
        client.claim_resources.return_value = True
        view = scheduler.candidate_limit.client(client)
        ctxt = context.RequestContext('u', 'p')
        alloc_req = {'allocations': {uuids.rp: {'resources': {'VCPU': 1}}}}
        with mock.patch.object(casts, 'cast') as cast:
            self.assertTrue(view.claim_resources(
                ctxt, uuids.consumer, alloc_req, uuids.project,
                uuids.user))
        cast.assert_called_once_with(ctxt, alloc_req)
        # one that placement refused is not
        client.claim_resources.return_value = False
        with mock.patch.object(casts, 'cast') as cast:
            self.assertFalse(view.claim_resources(
                ctxt, uuids.consumer, alloc_req, uuids.project,
                uuids.user))
        cast.assert_not_called()

    def told(self, scheduler):
        """What delete/update_instance_info of host1, host2 mark."""
        kept = scheduler.candidate_limit.kept
        ctxt = context.RequestContext('u', 'p')
        with mock.patch.object(kept, 'host_changed') as host_changed, \
                mock.patch.object(scheduler.host_manager,
                                  'delete_instance_info') as deleted, \
                mock.patch.object(scheduler.host_manager,
                                  'update_instance_info') as updated:
            scheduler.delete_instance_info(ctxt, 'host1', uuids.instance)
            scheduler.update_instance_info(ctxt, 'host2', mock.sentinel.info)
        # Nova's handling first, as before
        deleted.assert_called_once_with(ctxt, 'host1', uuids.instance)
        updated.assert_called_once_with(ctxt, 'host2', mock.sentinel.info)
        return host_changed.call_args_list

    def test_what_computes_tell_marks_their_kept_nodes(self):
        self.flags(kept_candidates=True, group='nova_sched_ext')
        scheduler = self.build()
        hm = scheduler.host_manager
        self.assertIsInstance(hm, host_state.KeptHostManager)
        for node, host in ((uuids.node1, 'host1'), (uuids.node2, 'host2'),
                           (uuids.node3, 'host1')):
            hm._records.nodes[uuids.cell][node] = host_state._Kept(
                mock.Mock(host=host), None, True, 0.0)
        self.assertEqual(
            [mock.call('host1', sorted([uuids.node1, uuids.node3])),
             mock.call('host2', [uuids.node2])], self.told(scheduler))

    def test_what_computes_tell_marks_nova_host_states(self):
        self.flags(kept_candidates=True, keep_host_state=False,
                   group='nova_sched_ext')
        scheduler = self.build()
        self.assertNotIsInstance(scheduler.host_manager,
                                 host_state.KeptHostManager)
        scheduler.host_manager.host_state_map = {
            ('host1', 'node1'): mock.Mock(uuid=uuids.node1),
            ('host2', 'node2'): mock.Mock(uuid=uuids.node2)}
        self.assertEqual([mock.call('host1', [uuids.node1]),
                          mock.call('host2', [uuids.node2])],
                         self.told(scheduler))


def import_scheduler_cmd():
    """Import the console script module as the tests run.

    Like ``nova.cmd.scheduler`` it chooses the process's concurrency mode
    on import; the test run has chosen it already (eventlet unless
    OS_NOVA_DISABLE_EVENTLET_PATCHING says otherwise), so that choice is
    skipped here, as the console script would never meet it.
    """
    with mock.patch('nova_sched_ext.compat.release.monkey_patch') as patch:
        module = importlib.import_module('nova_sched_ext.cmd.scheduler')
    if patch.called:
        patch.assert_called_once_with('threading')
    return module


class TestWithoutTheSetLock(test.NoDBTestCase):
    """A chain without the deployment-set lock, with its filter enabled."""

    @mock.patch.object(host_manager.HostManager, '_init_instance_info',
                       new=mock.Mock())
    @mock.patch.object(host_manager.HostManager, '_init_aggregates',
                       new=mock.Mock())
    def build(self, wrappers, filters):
        self.flags(request_wrappers=wrappers, group='nova_sched_ext')
        self.flags(enabled_filters=filters, group='filter_scheduler')
        self.flags(available_filters=[
            'nova.scheduler.filters.all_filters',
            'nova_sched_ext.filters.all_filters'], group='filter_scheduler')
        log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.manager', level=logging.WARNING))
        manager.SchedulerManager()
        return log.output

    def test_an_empty_chain_with_the_filter_warns(self):
        output = self.build([], ['ComputeFilter', 'DeploymentSetFilter'])
        self.assertEqual(1, len(output.splitlines()), output)
        self.assertIn('[filter_scheduler] enabled_filters has '
                      'DeploymentSetFilter but [nova_sched_ext] '
                      'request_wrappers (empty) does not name '
                      'deployment_set_lock', output)

    def test_no_warning_with_the_lock_or_without_the_filter(self):
        self.assertEqual('', self.build(
            ['deployment_set_lock'], ['DeploymentSetFilter']))
        self.assertEqual('', self.build([], ['ComputeFilter']))


class TestSchedulerCommand(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.cmd = import_scheduler_cmd()
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stderr', self.stderr))

    def test_service_is_nova_scheduler_with_our_manager(self):
        with mock.patch('nova.service.Service.create') as create:
            service = self.cmd.create_service()
        create.assert_called_once_with(
            binary='nova-scheduler', topic='scheduler',
            manager='nova_sched_ext.manager.SchedulerManager')
        self.assertIs(create.return_value, service)

    def test_main_starts_it_like_nova_scheduler(self):
        self.flags(workers=3, group='scheduler')
        cmd = self.cmd
        with mock.patch.object(cmd, 'parse_args') as args, \
                mock.patch.object(cmd.logging, 'setup'), \
                mock.patch.object(cmd.gmr.TextGuruMeditation,
                                  'setup_autorun'), \
                mock.patch.object(cmd, 'create_service') as create, \
                mock.patch.object(cmd.service, 'serve') as serve, \
                mock.patch.object(cmd.service, 'wait') as wait:
            cmd.main()
        args.assert_called_once()
        serve.assert_called_once_with(create.return_value, workers=3)
        wait.assert_called_once_with()

    def test_the_driver_option_chooses_the_manager(self):
        self.flags(scheduler_driver='preemption', group='nova_sched_ext')
        with mock.patch('nova.service.Service.create') as create:
            self.cmd.create_service()
        create.assert_called_once_with(
            binary='nova-scheduler', topic='scheduler',
            manager='nova_sched_ext.preemption.driver.'
                    'PreemptionSchedulerManager')

    def test_every_registered_driver_resolves(self):
        from oslo_utils import importutils
        self.assertIs(manager.SchedulerManager, importutils.import_class(
            registry.driver_class_path('default')))
        self.assertIs(driver.PreemptionSchedulerManager,
                      importutils.import_class(
                          registry.driver_class_path('preemption')))

    def test_an_unknown_driver_stops_the_service_with_a_clear_message(self):
        self.flags(scheduler_driver='nope', group='nova_sched_ext')
        self.assertRaises(registry.UnknownDriver, self.cmd.create_service)
        cmd = self.cmd
        with mock.patch.object(cmd, 'parse_args'), \
                mock.patch.object(cmd.logging, 'setup'), \
                mock.patch.object(cmd.gmr.TextGuruMeditation,
                                  'setup_autorun'), \
                mock.patch.object(cmd.service, 'serve') as serve:
            exc = self.assertRaises(SystemExit, cmd.main)
        self.assertEqual(2, exc.code)
        self.assertIn("scheduler_driver = 'nope' is not a scheduler "
                      "driver; known: default, preemption",
                      self.stderr.getvalue())
        serve.assert_not_called()

    def test_a_backend_without_records_stops_the_preemption_driver(self):
        self.flags(scheduler_driver='preemption',
                   coordination_url='zookeeper://127.0.0.1:2181',
                   group='nova_sched_ext')
        cmd = self.cmd
        with mock.patch.object(cmd, 'parse_args'), \
                mock.patch.object(cmd.logging, 'setup'), \
                mock.patch.object(cmd.gmr.TextGuruMeditation,
                                  'setup_autorun'), \
                mock.patch.object(host_manager.HostManager,
                                  '_init_instance_info'), \
                mock.patch.object(host_manager.HostManager,
                                  '_init_aggregates'), \
                mock.patch('nova.service.Service.create',
                           side_effect=lambda **kw: driver.
                           PreemptionSchedulerManager()), \
                mock.patch.object(cmd.service, 'serve') as serve:
            exc = self.assertRaises(SystemExit, cmd.main)
        self.assertEqual(2, exc.code)
        self.assertIn('the coordination backend zookeeper://127.0.0.1:2181 '
                      '([nova_sched_ext] coordination_url) holds locks '
                      'only', self.stderr.getvalue())
        serve.assert_not_called()

    def test_manager_class_path_resolves(self):
        from oslo_utils import importutils
        self.assertIs(manager.SchedulerManager,
                      importutils.import_class(manager.CLASS_PATH))
