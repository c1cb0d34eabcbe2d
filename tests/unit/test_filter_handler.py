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

"""The kept host manager's filtering against Nova's filter handler.

Random hosts, random chains of filters (Nova's host loop or their own
``filter_all``, some run on rebuilds, some once per request, one that
stops the filtering), rebuilds or not, the first instance or a later one:
the hosts left, in order, and every line logged must be exactly Nova's.
"""

import logging
import random
from unittest import mock

import fixtures
from nova import filters as nova_filters
from nova import objects
from nova.scheduler import filters as host_filters
from nova.scheduler.filters import compute_filter
from nova.scheduler import host_manager
from nova.tests.unit.scheduler import fakes

from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import filter_handler
from nova_sched_ext import host_state
from tests import base


class _LoopFilter(host_filters.BaseHostFilter):
    """Nova's host loop; passes a host by a seeded draw."""

    def __init__(self, seed, share, on_rebuild, once):
        self.seed = seed
        self.share = share
        self.RUN_ON_REBUILD = on_rebuild
        self.run_filter_once_per_request = once

    def host_passes(self, host_state, spec_obj):
        return random.Random('%s/%s' % (self.seed, host_state.host)
                             ).random() < self.share


class _OwnFilterAll(_LoopFilter):
    """Its own filter_all: every other host, or stop the filtering."""

    def filter_all(self, filter_obj_list, spec_obj):
        if self.share < 0.1:
            return None
        return iter(list(filter_obj_list)[::2])


def _filters(rng, count):
    made = []
    for number in range(count):
        kind = rng.choice([_LoopFilter, _LoopFilter, _LoopFilter,
                           _OwnFilterAll])
        made.append(kind(seed=rng.random(), share=rng.random() ** 0.3,
                         on_rebuild=rng.random() < 0.3,
                         once=rng.random() < 0.2))
    return made


def _spec(rng):
    spec = objects.RequestSpec(instance_uuid='a7e3c0de-0000-4000-8000-'
                               '%012d' % rng.randrange(10 ** 6))
    shape = rng.choice(['none', 'rebuild', 'other', 'empty'])
    if shape == 'rebuild':
        spec.scheduler_hints = {'_nova_check_type': ['rebuild']}
    elif shape == 'other':
        spec.scheduler_hints = {'_nova_check_type': ['resize'], 'x': ['1']}
    elif shape == 'empty':
        spec.scheduler_hints = {}
    return spec


def _hosts(count):
    return [fakes.FakeHostState('host%d' % i, 'node%d' % i, {})
            for i in range(count)]


class TestQuietFilterHandler(base.TestCase):

    def setUp(self):
        super().setUp()
        # INFO: the level at which the quiet path runs
        self.log = self.useFixture(fixtures.FakeLogger(
            name=nova_filters.__name__, level=logging.INFO))

    def run_both(self, rng):
        seed = rng.random()
        novas = _filters(random.Random(seed), rng.randrange(0, 7))
        quiet = _filters(random.Random(seed), len(novas))
        quick_manager = mock.Mock(
            filter_handler=host_filters.HostFilterHandler(),
            enabled_filters=quiet)
        filter_handler.quicken(quick_manager)
        self.assertIsInstance(quick_manager.filter_handler,
                              filter_handler.QuietHostFilterHandler)
        hosts = _hosts(rng.randrange(0, 40))
        spec = _spec(rng)
        index = rng.choice([0, 0, 1, 2])
        start = len(self.log.output)
        expected = host_filters.HostFilterHandler().get_filtered_objects(
            novas, iter(hosts), spec, index)
        middle = len(self.log.output)
        got = quick_manager.filter_handler.get_filtered_objects(
            quiet, iter(hosts), spec, index)
        self.assertEqual(self.log.output[start:middle],
                         self.log.output[middle:])
        return expected, got

    def test_the_same_hosts_and_lines_as_novas(self):
        rng = random.Random(7)
        outcomes = set()
        for _case in range(400):
            expected, got = self.run_both(rng)
            if expected is None:
                self.assertIsNone(got)
                outcomes.add('stopped')
            else:
                self.assertEqual([id(h) for h in expected],
                                 [id(h) for h in got])
                outcomes.add('empty' if not got else 'some')
        # every way a request can end was met
        self.assertEqual({'stopped', 'empty', 'some'}, outcomes)

    def test_a_rebuild_passes_every_host_of_a_filter_not_run_on_it(self):
        rejects = _LoopFilter(seed=1, share=0.0, on_rebuild=False,
                              once=False)
        manager = mock.Mock(filter_handler=None, enabled_filters=[rejects])
        filter_handler.quicken(manager)
        hosts = _hosts(5)
        spec = objects.RequestSpec(
            instance_uuid='a7e3c0de-0000-4000-8000-000000000001',
            scheduler_hints={'_nova_check_type': ['rebuild']})
        self.assertEqual(hosts, list(rejects.filter_all(hosts, spec)))
        spec.scheduler_hints = {}
        self.assertEqual([], list(rejects.filter_all(hosts, spec)))
        rejects.RUN_ON_REBUILD = True
        spec.scheduler_hints = {'_nova_check_type': ['rebuild']}
        self.assertEqual([], list(rejects.filter_all(hosts, spec)))

    def test_rebuild_is_asked_once_per_request(self):
        host_filter = compute_filter.ComputeFilter()
        manager = mock.Mock(filter_handler=None,
                            enabled_filters=[host_filter])
        filter_handler.quicken(manager)
        spec = objects.RequestSpec(scheduler_hints={})
        with mock.patch.object(
                filter_handler.scheduler_utils, 'request_is_rebuild',
                return_value=False) as asked, \
                mock.patch.object(host_filter, 'host_passes',
                                  return_value=True):
            list(host_filter.filter_all(_hosts(10), spec))
        self.assertEqual(1, asked.call_count)

    def test_debug_runs_novas_own_method(self):
        self.log = self.useFixture(fixtures.FakeLogger(
            name=nova_filters.__name__, level=logging.DEBUG))
        handler = host_filters.HostFilterHandler()
        handler.__class__ = filter_handler.QuietHostFilterHandler
        with mock.patch.object(
                nova_filters.BaseFilterHandler, 'get_filtered_objects',
                return_value=['from nova']) as novas:
            self.assertEqual(['from nova'], handler.get_filtered_objects(
                [], _hosts(2), objects.RequestSpec(), 0))
        self.assertEqual(1, novas.call_count)

    def test_only_filters_with_novas_host_loop_are_quickened(self):
        loop = _LoopFilter(seed=1, share=0.5, on_rebuild=False, once=False)
        own = _OwnFilterAll(seed=1, share=0.5, on_rebuild=False, once=False)

        class OwnFilterOne(_LoopFilter):
            def _filter_one(self, obj, spec_obj):
                return True

        one = OwnFilterOne(seed=1, share=0.5, on_rebuild=False, once=False)
        self.assertTrue(nova_compat.runs_novas_host_loop(loop))
        self.assertFalse(nova_compat.runs_novas_host_loop(own))
        self.assertFalse(nova_compat.runs_novas_host_loop(one))

        class OtherHandler(host_filters.HostFilterHandler):
            pass

        # (Nova's loader looks for filters beside the handler's module)
        other = host_filters.HostFilterHandler()
        other.__class__ = OtherHandler
        manager = mock.Mock(filter_handler=other,
                            enabled_filters=[loop, own, one])
        filter_handler.quicken(manager)
        self.assertIs(OtherHandler, type(manager.filter_handler))
        self.assertIn('filter_all', vars(loop))
        self.assertNotIn('filter_all', vars(own))
        self.assertNotIn('filter_all', vars(one))

    def test_the_kept_host_manager_filters_with_it(self):
        with mock.patch.object(host_manager.HostManager, '__init__',
                               return_value=None):
            manager = host_manager.HostManager()
        manager.weight_handler = None
        manager.filter_handler = host_filters.HostFilterHandler()
        manager.enabled_filters = [compute_filter.ComputeFilter()]
        host_state.KeptHostManager.adopt(manager)
        self.assertIsInstance(manager.filter_handler,
                              filter_handler.QuietHostFilterHandler)
        self.assertIn('filter_all', vars(manager.enabled_filters[0]))
