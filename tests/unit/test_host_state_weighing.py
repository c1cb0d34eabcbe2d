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

"""The kept host manager's weighing against Nova's weight handler.

Random hosts (ties included), Nova's weighers, multipliers from the
hosts' aggregates (some of them values Nova cannot read), a weigher with
fixed bounds: the weighed hosts, their order and their weights must be
exactly Nova's.
"""

import random
from unittest import mock

import fixtures
from nova import objects
from nova.scheduler import host_manager
from nova.scheduler import weights
from nova.tests.unit.scheduler import fakes
from oslo_config import fixture as config_fixture

from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf
from nova_sched_ext import host_state
from tests import base


class _BoundedWeigher(weights.BaseHostWeigher):
    """A weigher with fixed bounds, negative weights and a multiplier."""

    minval = -4
    maxval = 10

    def weight_multiplier(self, host_state):
        return 0.5 if host_state.host.endswith('3') else -1.25

    def _weigh_object(self, host_state, weight_properties):
        return host_state.num_io_ops - 4


def _aggregate(rng, number):
    metadata = {}
    for name in ('ram_weight_multiplier', 'cpu_weight_multiplier',
                 'io_ops_weight_multiplier', 'disk_weight_multiplier',
                 'build_failure_weight_multiplier',
                 'num_instances_weight_multiplier'):
        if rng.random() < 0.4:
            metadata[name] = rng.choice(['2.5', '-1', '0', '10', 'bad'])
    return objects.Aggregate(id=number, name='agg%d' % number,
                             hosts=[], metadata=metadata)


def _hosts(rng, count):
    aggregates = [_aggregate(rng, n) for n in range(4)]
    hosts = []
    for number in range(count):
        # few distinct values: many ties, which the order must keep
        name = 'host%d' % number
        hosts.append(fakes.FakeHostState(name, name + '.node', {
            'free_ram_mb': rng.choice([0, 1024, 4096, 4096, 65536]),
            'total_usable_ram_mb': 65536,
            'vcpus_total': 32, 'vcpus_used': rng.choice([0, 8, 8, 31]),
            'cpu_allocation_ratio': rng.choice([1.0, 4.0]),
            'free_disk_mb': rng.choice([0, 10240, 10240]),
            'num_io_ops': rng.randint(0, 6),
            'num_instances': rng.randint(0, 3),
            'failed_builds': rng.choice([0, 0, 2]),
            'hypervisor_version': rng.choice([1, 2]),
            'pci_stats': None, 'cell_uuid': None, 'instances': {},
            # Nova's host manager gives each host a list of its own of
            # the aggregate objects it keeps
            'aggregates': rng.sample(aggregates, rng.randint(0, 2))}))
    return hosts


def _spec():
    """A request every weigher of Nova's can read."""
    return objects.RequestSpec(
        instance_group=None, requested_destination=None,
        pci_requests=None, num_instances=1,
        image=objects.ImageMeta(properties=objects.ImageMetaProps()),
        flavor=objects.Flavor(extra_specs={}))


class TestWeighedObjects(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        handler = weights.HostWeightHandler()
        classes = handler.get_matching_classes(
            ['nova.scheduler.weights.all_weighers'])
        self.handler = handler
        # every weigher of Nova's
        self.weighers = [cls() for cls in classes]
        self.assertGreaterEqual(len(self.weighers), 12)
        self.weighers.append(_BoundedWeigher())

    def assertNovas(self, hosts, weighers):
        spec = _spec()
        expected = self.handler.get_weighed_objects(weighers, hosts, spec)
        got = host_state.weighed_objects(self.handler.object_class,
                                         weighers, hosts, spec)
        self.assertEqual([(w.obj.host, w.weight) for w in expected],
                         [(w.obj.host, w.weight) for w in got])
        self.assertTrue(all(type(w) is type(e)
                            for w, e in zip(got, expected)))

    def test_random_hosts_weigh_as_novas(self):
        for seed in range(40):
            rng = random.Random(seed)
            self.conf.config(group='filter_scheduler',
                             ram_weight_multiplier=rng.choice([1.0, -2.0]),
                             io_ops_weight_multiplier=rng.choice([0.0, -1.0]))
            weighers = rng.sample(self.weighers,
                                  rng.randint(1, len(self.weighers)))
            self.assertNovas(_hosts(rng, rng.choice([1, 2, 7, 60])),
                             weighers)

    def test_multipliers_of_novas_weighers_are_asked_per_aggregates(self):
        self.assertEqual(
            [False] + [True] * (len(self.weighers) - 1),
            [nova_compat.multiplier_reads_aggregates_only(w)
             for w in self.weighers[-1:] + self.weighers[:-1]])
        hosts = _hosts(random.Random(5), 50)
        ram = next(w for w in self.weighers
                   if type(w).__name__ == 'RAMWeigher')
        asked = []
        nova_multiplier = ram.weight_multiplier
        # (the class's method stays Nova's: the instance's counts calls)
        ram.weight_multiplier = lambda host: (
            asked.append(host), nova_multiplier(host))[1]
        self.assertNovas(hosts, [ram])
        distinct = len({tuple(map(id, h.aggregates)) for h in hosts})
        self.assertLess(distinct, 20)
        # Nova's handler asks per host, the kept manager per aggregates
        self.assertEqual(len(hosts) + distinct, len(asked))

    def test_no_host_and_one_host(self):
        self.assertNovas([], self.weighers)
        self.assertNovas(_hosts(random.Random(1), 1), self.weighers)

    def test_debug_runs_novas_own_method(self):
        quiet_handler = weights.HostWeightHandler()
        quiet_handler.__class__ = host_state.QuietHostWeightHandler
        hosts = _hosts(random.Random(3), 5)
        calls = []
        novas = weights.HostWeightHandler.get_weighed_objects

        def counted(handler, *args):
            calls.append(args)
            return novas(handler, *args)
        self.useFixture(fixtures.MockPatchObject(
            weights.HostWeightHandler, 'get_weighed_objects', counted))
        # (the tests log at DEBUG: each case says which it wants)
        with mock.patch.object(host_state._WEIGHTS_LOG, 'isEnabledFor',
                               return_value=False):
            quiet = quiet_handler.get_weighed_objects(self.weighers, hosts,
                                                      _spec())
        self.assertEqual(0, len(calls))
        with mock.patch.object(host_state._WEIGHTS_LOG, 'isEnabledFor',
                               return_value=True):
            loud = quiet_handler.get_weighed_objects(self.weighers, hosts,
                                                     _spec())
        self.assertEqual(1, len(calls))
        self.assertEqual([(w.obj.host, w.weight) for w in loud],
                         [(w.obj.host, w.weight) for w in quiet])

    def test_the_kept_host_manager_weighs_with_it(self):
        with mock.patch.object(host_manager.HostManager, '__init__',
                               return_value=None):
            manager = host_manager.HostManager()
        manager.weight_handler = weights.HostWeightHandler()
        host_state.KeptHostManager.adopt(manager)
        self.assertIsInstance(manager.weight_handler,
                              host_state.QuietHostWeightHandler)
