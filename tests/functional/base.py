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

"""Base class of the functional tests: a real Nova on fake NUMA hosts.

The services, fake hosts and boot helpers live in
:mod:`nova_sched_ext_tools.harness.cloud` (the demo uses them too); this
adds the assertions the tests share.
"""

import itertools

from nova_sched_ext import host_state
from nova_sched_ext import manager
from nova_sched_ext_tools.harness import cloud

NUMA_FIT_FILTER = cloud.NUMA_FIT_FILTER
NUMA_TOPOLOGY_FILTER = cloud.NUMA_TOPOLOGY_FILTER


class NUMAFitTestBase(cloud.NUMACloudTestBase):
    """Nova with the package installed, on fake libvirt NUMA hosts."""

    def assertBootsAsExpected(self, boots, results):
        """Each server landed on one of its expected hosts, or NoValidHost."""
        self.assertEqual(len(boots), len(results))
        problems = []
        for boot, boot_results in zip(boots, results):
            problems.extend(boot.check(boot_results))
        if problems:
            self.fail('Unexpected scheduling:\n  ' + '\n  '.join(problems))

    def assertSameScheduling(self, reference, results):
        """Same host and cells per server, same hosts left after filters."""
        problems = cloud.compare_runs(reference, results)
        if problems:
            self.fail('Scheduling differs with NUMAFitFilter:\n  ' +
                      '\n  '.join(problems))

    def assertFilterLoaded(self, name, module):
        """``name`` runs in nova-scheduler, loaded from ``module``."""
        host_manager = self.scheduler.manager.host_manager
        loaded = {type(f).__name__: type(f).__module__
                  for f in host_manager.enabled_filters}
        self.assertIn(name, loaded)
        self.assertEqual(module, loaded[name])

    def assertFilterNotLoaded(self, name):
        host_manager = self.scheduler.manager.host_manager
        self.assertNotIn(
            name, [type(f).__name__ for f in host_manager.enabled_filters])


class HostStateVariantMixin(object):
    """Run a test class's tests with the host state kept or reloaded.

    ``[nova_sched_ext] keep_host_state`` is :attr:`KEEP_HOST_STATE`. Put
    a subclass of it first in the bases of a subclass of a functional test
    class. The option belongs to the package's scheduler manager, so
    a test that starts stock Nova's ``SchedulerManager`` gets the package's
    one instead; every test checks that the scheduler serving it builds its
    host state the way the variant says, so a variant cannot silently test
    the other way (or Nova's manager).
    """

    #: the value of ``[nova_sched_ext] keep_host_state`` the variant runs
    KEEP_HOST_STATE = None
    #: the names of the inherited tests the variant runs (None: all), so
    #: that the variants of slow classes stay cheap
    VARIANT_TESTS = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.VARIANT_TESTS is None:
            return
        names = {name for name in dir(cls) if name.startswith('test')}
        unknown = set(cls.VARIANT_TESTS) - names
        if unknown:
            # A misspelt name would leave a variant that tests nothing.
            raise TypeError('%s.VARIANT_TESTS names no test of the class: %s'
                            % (cls.__name__, ', '.join(sorted(unknown))))
        for name in names - set(cls.VARIANT_TESTS):
            # Not callable: unittest's loader does not collect it.
            setattr(cls, name, None)

    def setUp(self):
        # Before the base's set-up: it starts the first scheduler.
        self.flags(keep_host_state=self.KEEP_HOST_STATE,
                   group='nova_sched_ext')
        super().setUp()
        self.addCleanup(self.assertHostStateVariant)
        self.assertHostStateVariant()

    def start_service(self, name, *args, **kwargs):
        if name == 'scheduler' and 'manager' not in kwargs:
            kwargs['manager'] = manager.CLASS_PATH
        return super().start_service(name, *args, **kwargs)

    def assertHostStateVariant(self):
        scheduler = self.scheduler.manager
        self.assertIsInstance(scheduler, manager.SchedulerManager)
        self.assertEqual(
            self.KEEP_HOST_STATE,
            isinstance(scheduler.host_manager, host_state.KeptHostManager),
            'the scheduler\'s host manager is %s'
            % type(scheduler.host_manager).__name__)


class KeptHostStateMixin(HostStateVariantMixin):
    """The package's scheduler keeps its host state between requests.

    The default, but the tests that start stock Nova's manager run the
    package's one with it.
    """

    KEEP_HOST_STATE = True


class ReloadedHostStateMixin(HostStateVariantMixin):
    """The package's scheduler builds its host state as Nova does."""

    KEEP_HOST_STATE = False


def serve_in_turn(endpoint, managers):
    """Hand each request of the scheduler's RPC endpoint to one of managers.

    Nova's test base runs one scheduler service; with this, its endpoint
    passes each ``select_destinations`` to ``endpoint`` itself or to one of
    ``managers`` (manager objects of their own: own request wrappers, own
    coordination backend connection), in turn, as several scheduler
    processes behind one RPC topic would serve them.

    :returns: the list of which one served each request (0: ``endpoint``),
        filled as requests come
    """
    targets = [endpoint.select_destinations] + [
        m.select_destinations for m in managers]
    turn = itertools.count()
    served_by = []

    def select_destinations(*args, **kwargs):
        number = next(turn) % len(targets)
        served_by.append(number)
        return targets[number](*args, **kwargs)

    endpoint.select_destinations = select_destinations
    return served_by
