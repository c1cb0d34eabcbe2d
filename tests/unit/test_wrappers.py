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

"""Request wrappers are loaded by name, in order, and refused clearly.

The third-party wrappers come from a distribution installed for the test
(:class:`tests.unit.test_registration.ThirdPartyDistribution`); only
:class:`TestShippedWrappers` needs this package's own entry points in the
installed metadata (``pip install -e .``).
"""

import sys
import textwrap
from unittest import mock

import fixtures
from nova import context
from nova import objects
from nova.scheduler import host_manager
from nova.scheduler import manager as nova_manager
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
from stevedore import _cache as stevedore_cache
from stevedore import extension

from nova_sched_ext import conf
from nova_sched_ext.deployment_set import lock as ds_lock
from nova_sched_ext import manager
from nova_sched_ext.preemption import caps
from nova_sched_ext.preemption import driver
from nova_sched_ext import registry
from nova_sched_ext import wrappers
from tests.unit import test_registration

WRAPPERS_MODULE = textwrap.dedent('''
    from nova_sched_ext import wrappers

    CALLS = []


    class Audit(wrappers.RequestWrapper):
        def __call__(self, call_next, context, spec_obj, instance_uuids):
            CALLS.append(('enter', type(self).__name__))
            try:
                return call_next(context, spec_obj, instance_uuids)
            finally:
                CALLS.append(('exit', type(self).__name__))

        def stop(self):
            CALLS.append(('stop', type(self).__name__))


    class Outer(Audit):
        pass


    class Inner(Audit):
        pass


    def not_a_class(manager):
        return None


    class NotAWrapper:
        def __init__(self, manager):
            pass
''')

ENTRY_POINTS = {wrappers.NAMESPACE: {
    'audit': 'Audit', 'outer': 'Outer', 'inner': 'Inner',
    'function': 'not_a_class', 'plain': 'NotAWrapper',
    'missing': 'NoSuchClass',
}}


class FreshEntryPoints(fixtures.Fixture):
    """Entry points read afresh, without the user's stevedore disk cache."""

    def _setUp(self):
        self.useFixture(fixtures.MockPatchObject(
            extension.ExtensionManager, 'ENTRY_POINT_CACHE', {}))
        cache_dir = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatchObject(
            stevedore_cache._c, '_dir', cache_dir))


class ThirdPartyWrappers(fixtures.Fixture):
    """The wrappers of ENTRY_POINTS, installed and on sys.path."""

    def _setUp(self):
        self.dist = self.useFixture(test_registration.ThirdPartyDistribution(
            ENTRY_POINTS, source=WRAPPERS_MODULE))
        self.useFixture(self.dist.on_path())
        self.useFixture(FreshEntryPoints())

    def plugin(self, attr):
        __import__(self.dist.module)
        return getattr(sys.modules[self.dist.module], attr)

    @property
    def calls(self):
        return self.plugin('CALLS')


class TestLoadNamed(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.third = self.useFixture(ThirdPartyWrappers())

    def load(self, names):
        return wrappers.load(names)

    def test_in_the_order_given(self):
        self.assertEqual(
            [self.third.plugin('Inner'), self.third.plugin('Outer'),
             self.third.plugin('Audit')],
            self.load(['inner', 'outer', 'audit']))
        self.assertEqual([], self.load([]))

    def test_an_unknown_name_is_refused_with_the_names_known(self):
        exc = self.assertRaises(registry.PluginLoadError, self.load,
                                ['audit', 'auditt'])
        message = str(exc)
        self.assertIn('[nova_sched_ext] request_wrappers cannot be used: '
                      "'auditt' is not registered in the entry-point "
                      'namespace nova_sched_ext.request_wrappers', message)
        registered = message.split('(registered: ', 1)[1].rstrip(')')
        self.assertLessEqual(set(ENTRY_POINTS[wrappers.NAMESPACE]),
                             set(registered.split(', ')))
        self.assertNotIn('\n', message)
        self.assertIsInstance(exc, ValueError)

    def test_a_wrapper_that_fails_to_load_is_refused(self):
        exc = self.assertRaises(registry.PluginLoadError, self.load,
                                ['audit', 'missing'])
        self.assertIn(
            'the entry point missing = %s:NoSuchClass of namespace '
            'nova_sched_ext.request_wrappers failed to load: '
            'AttributeError' % self.third.dist.module, str(exc))

    def test_what_is_not_a_request_wrapper_is_refused(self):
        for name, attr in (('plain', 'NotAWrapper'),
                           ('function', 'not_a_class')):
            exc = self.assertRaises(registry.PluginLoadError, self.load,
                                    [name])
            self.assertIn(
                'the entry point %s = %s:%s of namespace '
                'nova_sched_ext.request_wrappers is not a subclass of '
                'nova_sched_ext.wrappers.RequestWrapper'
                % (name, self.third.dist.module, attr), str(exc))

    def test_every_problem_in_one_message(self):
        exc = self.assertRaises(registry.PluginLoadError, self.load,
                                ['nope', 'plain', 'audit'])
        self.assertIn("'nope' is not registered", str(exc))
        self.assertIn('entry point plain = ', str(exc))

    def test_a_name_given_twice_is_refused(self):
        # Twice in the chain would take the deployment-set lock twice.
        exc = self.assertRaises(registry.PluginLoadError, self.load,
                                ['audit', 'inner', 'audit'])
        self.assertEqual('[nova_sched_ext] request_wrappers names audit more '
                         'than once', str(exc))

    def test_a_name_registered_twice_is_refused(self):
        other = self.useFixture(test_registration.ThirdPartyDistribution(
            {wrappers.NAMESPACE: {'audit': 'Audit'}},
            source=WRAPPERS_MODULE))
        self.useFixture(other.on_path())
        self.useFixture(FreshEntryPoints())
        exc = self.assertRaises(registry.PluginLoadError, self.load,
                                ['audit'])
        self.assertIn("'audit' is registered more than once", str(exc))
        self.assertIn('%s:Audit' % other.module, str(exc))
        self.assertIn('%s:Audit' % self.third.dist.module, str(exc))


class ManagerTestCase(test.NoDBTestCase):

    @mock.patch.object(host_manager.HostManager, '_init_instance_info',
                       new=mock.Mock())
    @mock.patch.object(host_manager.HostManager, '_init_aggregates',
                       new=mock.Mock())
    def build(self, manager_class=manager.SchedulerManager):
        return manager_class()


class TestManagerLoadsTheOption(ManagerTestCase):

    def setUp(self):
        super().setUp()
        self.third = self.useFixture(ThirdPartyWrappers())

    def test_a_third_party_wrapper_runs_in_the_chain(self):
        self.flags(request_wrappers=['outer', 'inner'], group='nova_sched_ext')
        scheduler = self.build()
        self.assertEqual(
            [self.third.plugin('Outer'), self.third.plugin('Inner')],
            [type(w) for w in scheduler.request_wrappers])
        for wrapper in scheduler.request_wrappers:
            self.assertIs(scheduler, wrapper.manager)

        calls = self.third.calls

        def nova_select(*args, **kwargs):
            calls.append(('nova',))
            return [['selection']]

        spec_obj = objects.RequestSpec(instance_uuid=uuids.u1)
        with mock.patch.object(nova_manager.SchedulerManager,
                               'select_destinations', autospec=True,
                               side_effect=nova_select):
            result = scheduler.select_destinations(
                context.RequestContext('user', 'project'), spec_obj=spec_obj,
                instance_uuids=[uuids.u1], return_objects=True)
        self.assertEqual([['selection']], result)
        self.assertEqual([('enter', 'Outer'), ('enter', 'Inner'), ('nova',),
                          ('exit', 'Inner'), ('exit', 'Outer')], calls)
        scheduler.cleanup_host()
        self.assertEqual([('stop', 'Outer'), ('stop', 'Inner')], calls[-2:])

    def test_an_empty_option_runs_no_wrapper(self):
        self.flags(request_wrappers=[], group='nova_sched_ext')
        self.assertEqual([], self.build().request_wrappers)

    def test_an_unknown_wrapper_stops_the_manager(self):
        self.flags(request_wrappers=['outer', 'deployment_set_lok'],
                   group='nova_sched_ext')
        exc = self.assertRaises(registry.PluginLoadError, self.build)
        self.assertIn("[nova_sched_ext] request_wrappers cannot be used: "
                      "'deployment_set_lok' is not registered in the "
                      "entry-point namespace "
                      "nova_sched_ext.request_wrappers", str(exc))

    def test_a_broken_wrapper_stops_the_manager(self):
        self.flags(request_wrappers=['missing'], group='nova_sched_ext')
        exc = self.assertRaises(registry.PluginLoadError, self.build)
        self.assertIn('missing = %s:NoSuchClass' % self.third.dist.module,
                      str(exc))

    def test_driver_wrappers_go_inside_the_configured_ones(self):
        class Driver(manager.SchedulerManager):
            DRIVER_REQUEST_WRAPPERS = ('inner', 'audit')

        outer, inner, audit = (self.third.plugin(name)
                               for name in ('Outer', 'Inner', 'Audit'))
        self.flags(request_wrappers=['outer'], group='nova_sched_ext')
        self.assertEqual([outer, inner, audit],
                         [type(w) for w in self.build(Driver)
                          .request_wrappers])
        # Named in the option, a driver's wrapper keeps the option's place
        # and runs once.
        self.flags(request_wrappers=['audit', 'outer'],
                   group='nova_sched_ext')
        self.assertEqual([audit, outer, inner],
                         [type(w) for w in self.build(Driver)
                          .request_wrappers])

    def test_a_broken_driver_wrapper_names_the_driver(self):
        class Driver(manager.SchedulerManager):
            DRIVER_REQUEST_WRAPPERS = ('plain',)

        self.flags(request_wrappers=['outer'], group='nova_sched_ext')
        exc = self.assertRaises(registry.PluginLoadError, self.build, Driver)
        self.assertIn('the request wrappers of the scheduler manager '
                      '%s.Driver cannot be used' % __name__, str(exc))

    def test_a_subclass_that_sets_the_wrappers_keeps_them(self):
        # As before the option existed: the tuple replaces the chain.
        outer = self.third.plugin('Outer')

        class Legacy(manager.SchedulerManager):
            REQUEST_WRAPPERS = (outer,)

        self.flags(request_wrappers=['nope'], group='nova_sched_ext')
        self.assertEqual([outer], [type(w) for w in self.build(Legacy)
                                   .request_wrappers])


class TestShippedWrappers(ManagerTestCase):
    """The package's own wrappers, from the installed entry points."""

    def setUp(self):
        super().setUp()
        self.useFixture(FreshEntryPoints())

    def test_registered(self):
        self.assertEqual(
            [ds_lock.DeploymentSetLock, caps.PreemptibleCaps,
             driver.Eviction],
            wrappers.load(['deployment_set_lock', 'preemptible_caps',
                           'eviction']))

    def test_the_default_is_the_deployment_set_lock(self):
        self.assertEqual(['deployment_set_lock'],
                         conf.CONF.nova_sched_ext.request_wrappers)
        self.assertEqual([ds_lock.DeploymentSetLock],
                         [type(w) for w in self.build().request_wrappers])

    def test_the_preemption_driver_orders_its_own_inside(self):
        self.flags(request_wrappers=['eviction', 'deployment_set_lock'],
                   group='nova_sched_ext')
        self.assertEqual(
            [driver.Eviction, ds_lock.DeploymentSetLock,
             caps.PreemptibleCaps],
            [type(w) for w in self.build(
                driver.PreemptionSchedulerManager).request_wrappers])
