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

"""Plugins are found through entry points, including other distributions'.

These tests need the package installed (``pip install -e .``): the
entry points of ``setup.cfg`` only exist in the installed metadata.
"""

import importlib.metadata
import logging
import os
import re
import sys
import textwrap
import uuid

import fixtures
from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from oslo_config import generator
from stevedore import _cache as stevedore_cache
from stevedore import extension

from nova_sched_ext.compat import release
from nova_sched_ext import filters
from nova_sched_ext import weighers
from tests import base

THIRD_PARTY_MODULE = textwrap.dedent('''
    from nova.scheduler import filters
    from nova.scheduler import weights


    class ThirdPartyFilter(filters.BaseHostFilter):
        def host_passes(self, host_state, spec_obj):
            return True


    class ThirdPartyWeigher(weights.BaseHostWeigher):
        def _weigh_object(self, host_state, weight_properties):
            return 0.0


    class NotAPlugin:
        pass
''')


class ThirdPartyDistribution(fixtures.Fixture):
    """A distribution installed beside this one: a module plus a dist-info.

    Nothing of it lives inside nova_sched_ext; it reaches the package only
    through the entry points it declares.  The module name is unique per
    fixture so that neither sys.modules nor any entry-point cache can hand a
    test the plugins of an earlier one.
    """

    def __init__(self, entry_points, source=THIRD_PARTY_MODULE):
        super().__init__()
        self.module = 'thirdparty_%s' % uuid.uuid4().hex
        self._entry_points = entry_points
        self._source = source

    def _setUp(self):
        root = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(root, self.module + '.py'), 'w') as f:
            f.write(self._source)
        dist_info = os.path.join(root, '%s-1.0.dist-info' % self.module)
        os.mkdir(dist_info)
        with open(os.path.join(dist_info, 'METADATA'), 'w') as f:
            f.write('Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n'
                    % self.module)
        with open(os.path.join(dist_info, 'entry_points.txt'), 'w') as f:
            for group, entries in self._entry_points.items():
                f.write('[%s]\n' % group)
                for name, attr in entries.items():
                    f.write('%s = %s:%s\n' % (name, self.module, attr))
        self.root = root
        self.addCleanup(sys.modules.pop, self.module, None)

    def on_path(self):
        return fixtures.PythonPathEntry(self.root)


class TestRegistration(base.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext.registry', level=logging.DEBUG))
        # stevedore keeps what it found per namespace for the life of the
        # process, and on disk per sys.path; start each test from a rescan
        # and keep the disk cache of test paths out of the user's home.
        self._rescan()
        cache_dir = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatchObject(
            stevedore_cache._c, '_dir', cache_dir))

    def _rescan(self):
        self.useFixture(fixtures.MockPatchObject(
            extension.ExtensionManager, 'ENTRY_POINT_CACHE', {}))

    @staticmethod
    def _names(classes):
        return {'%s.%s' % (cls.__module__, cls.__name__) for cls in classes}

    def test_own_filter_is_registered(self):
        self.assertIn('nova_sched_ext.filters.numa_fit.NUMAFitFilter',
                      self._names(filters.all_filters()))
        self.assertNotIn('Skipping', self.log.output)

    def test_third_party_filter_and_weigher_are_picked_up(self):
        dist = self.useFixture(ThirdPartyDistribution({
            'nova_sched_ext.filters': {'ThirdPartyFilter': 'ThirdPartyFilter'},
            'nova_sched_ext.weighers': {
                'ThirdPartyWeigher': 'ThirdPartyWeigher'},
        }))
        third_filter = '%s.ThirdPartyFilter' % dist.module
        third_weigher = '%s.ThirdPartyWeigher' % dist.module

        # Not installed yet: not there.  This also proves the assertions
        # below are not satisfied by something found earlier.
        self.assertNotIn(third_filter, self._names(filters.all_filters()))
        self.assertNotIn(third_weigher,
                         self._names(weighers.all_weighers()))

        with dist.on_path():
            self._rescan()
            found_filters = self._names(filters.all_filters())
            found_weighers = self._names(weighers.all_weighers())

        self.assertIn(third_filter, found_filters)
        self.assertIn('nova_sched_ext.filters.numa_fit.NUMAFitFilter',
                      found_filters)
        self.assertIn(third_weigher, found_weighers)

    def test_broken_plugins_are_logged_and_skipped(self):
        dist = self.useFixture(ThirdPartyDistribution({
            'nova_sched_ext.filters': {
                'ThirdPartyFilter': 'ThirdPartyFilter',
                'MissingFilter': 'NoSuchClass',
                'NotAFilter': 'NotAPlugin',
                'WrongKindFilter': 'ThirdPartyWeigher',
            },
        }))
        with dist.on_path():
            self._rescan()
            found = self._names(filters.all_filters())

        self.assertIn('%s.ThirdPartyFilter' % dist.module, found)
        self.assertIn('nova_sched_ext.filters.numa_fit.NUMAFitFilter', found)
        self.assertNotIn('%s.NotAPlugin' % dist.module, found)
        self.assertNotIn('%s.ThirdPartyWeigher' % dist.module, found)
        for name in ('MissingFilter', 'NotAFilter', 'WrongKindFilter'):
            self.assertIn('Skipping plugin %s = ' % name, self.log.output)
        self.assertIn('it failed to load', self.log.output)
        self.assertIn(
            'not a subclass of nova.scheduler.filters.BaseHostFilter',
            self.log.output)

    def test_nova_handler_loads_all_filters_by_path(self):
        dist = self.useFixture(ThirdPartyDistribution({
            'nova_sched_ext.filters': {'ThirdPartyFilter': 'ThirdPartyFilter'},
        }))
        with dist.on_path():
            self._rescan()
            # What nova-scheduler does with [filter_scheduler]
            # available_filters set as the README tells deployers.
            classes = nova_filters.HostFilterHandler().get_matching_classes(
                ['nova.scheduler.filters.all_filters',
                 'nova_sched_ext.filters.all_filters'])

        by_name = {cls.__name__: cls for cls in classes}
        self.assertIn('NUMATopologyFilter', by_name)
        self.assertEqual('nova_sched_ext.filters.numa_fit',
                         by_name['NUMAFitFilter'].__module__)
        self.assertEqual(dist.module, by_name['ThirdPartyFilter'].__module__)
        for cls in classes:
            self.assertTrue(issubclass(cls, nova_filters.BaseHostFilter))

    def test_nova_handler_loads_all_weighers_by_path(self):
        dist = self.useFixture(ThirdPartyDistribution({
            'nova_sched_ext.weighers': {
                'ThirdPartyWeigher': 'ThirdPartyWeigher'},
        }))
        with dist.on_path():
            self._rescan()
            classes = nova_weights.HostWeightHandler().get_matching_classes(
                ['nova_sched_ext.weighers.all_weighers'])

        self.assertIn('%s.ThirdPartyWeigher' % dist.module,
                      self._names(classes))


class TestInstalledMetadata(base.TestCase):
    """setup.cfg's entry points reach the installed distribution."""

    @staticmethod
    def _entry_point(group, name):
        matches = importlib.metadata.entry_points(group=group, name=name)
        return {ep.value for ep in matches}

    def test_config_opts_entry_point(self):
        self.assertEqual({'nova_sched_ext.conf.opts:list_scheduler_opts'},
                         self._entry_point('oslo.config.opts',
                                           'nova_sched_ext'))

    def test_console_scripts(self):
        self.assertEqual({'nova_sched_ext_tools.bench.cli:main'},
                         self._entry_point('console_scripts',
                                           'nova-sched-ext-bench'))
        self.assertEqual({'nova_sched_ext_tools.demo:main'},
                         self._entry_point('console_scripts',
                                           'nova-sched-ext-demo'))
        self.assertEqual({'nova_sched_ext.broker.cmd:main'},
                         self._entry_point('console_scripts',
                                           'nova-sched-ext-broker'))
        self.assertEqual({'nova_sched_ext.defrag.cmd:main'},
                         self._entry_point('console_scripts',
                                           'nova-sched-ext-defrag'))

    def test_saved_states_the_defrag_command_reads(self):
        # nova-sched-ext-defrag plan --state picks the reader by format
        from nova_sched_ext_tools.sim import state as sim_state
        self.assertEqual(
            {'nova_sched_ext_tools.sim.defrag_report:planner_input'},
            self._entry_point('nova_sched_ext.defrag.saved_states',
                              sim_state.FORMAT))

    def test_broker_choosers(self):
        self.assertEqual({'nova_sched_ext.broker.choosers:RoundRobin'},
                         self._entry_point('nova_sched_ext.broker_choosers',
                                           'round-robin'))
        self.assertEqual({'nova_sched_ext.broker.choosers:MostCapacity'},
                         self._entry_point('nova_sched_ext.broker_choosers',
                                           'most-capacity'))

    def test_watcher_plugins(self):
        # Loaded by Watcher's decision engine (only there: they are not
        # imported here, where Nova is).
        self.assertEqual(
            {'nova_sched_ext.defrag.watcher_strategy:NUMADefragmentation'},
            self._entry_point('watcher_strategies', 'nova_sched_ext_defrag'))
        self.assertEqual(
            {'nova_sched_ext.defrag.watcher_goal:NUMADefragmentation'},
            self._entry_point('watcher_goals', 'numa_defragmentation'))
        self.assertEqual(
            {'nova_sched_ext.defrag.watcher_planner:SequentialPlanner'},
            self._entry_point('watcher_planners',
                              'nova_sched_ext_sequential'))

    #: The release whose libraries write etc/*.conf.sample (tox -e
    #: genconfig on requirements.txt's newest Nova).
    SAMPLE_RELEASE = 34

    @staticmethod
    def _own_names():
        # The package's own options: those its oslo.config.opts entry
        # points list, less keystoneauth's in the service-credential
        # sections (written by the installed keystoneauth).
        from nova_sched_ext.conf import utils
        library = {opt.dest for opt in utils.service_credential_opts('any')}
        own = set()
        for point in importlib.metadata.entry_points(
                group='oslo.config.opts'):
            if point.name.split('.')[0] == 'nova_sched_ext':
                for _group, opts in point.load()():
                    own.update(opt.dest for opt in opts)
        return {name.replace('-', '_') for name in own - library}

    @staticmethod
    def _own_only(text, own):
        # Each option's block in a sample ends with its "#name = value".
        kept = []
        for block in text.split('\n\n'):
            last = block.rstrip('\n').rpartition('\n')[2]
            match = re.match(r'#([\w-]+) = ', last)
            if match and match.group(1).replace('-', '_') not in own:
                continue
            kept.append(block)
        return '\n\n'.join(kept)

    def test_sample_config_is_current(self):
        top = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        # On an older release keystoneauth writes its own options
        # differently (2025.1's timeout is an integer and it has no TLS
        # options): the package's options are compared there, all of them
        # on the sample's release.
        older = release.installed() < self.SAMPLE_RELEASE
        own = self._own_names() if older else None

        def compared(text):
            return self._own_only(text, own) if older else text

        # nova.conf's sample, and watcher.conf's for the Watcher strategy
        for name in ('nova-sched-ext', 'nova-sched-ext-watcher'):
            sample = os.path.join(top, 'etc', '%s.conf.sample' % name)
            fresh = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'sample')
            generator.main(args=[
                '--config-file',
                os.path.join(top, 'etc', '%s-config-generator.conf' % name),
                '--output-file', fresh])
            with open(sample) as f, open(fresh) as g:
                self.assertEqual(compared(g.read()), compared(f.read()),
                                 'etc/%s.conf.sample is out of date: run '
                                 'tox -e genconfig' % name)

    def test_distribution_metadata(self):
        dist = importlib.metadata.distribution('nova-sched-ext')
        self.assertEqual('>=3.11', dist.metadata['Requires-Python'])
        requires = ' '.join(dist.requires or [])
        self.assertIn('nova', requires)
        self.assertIn('stevedore', requires)
