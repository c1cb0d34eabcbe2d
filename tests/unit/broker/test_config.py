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

import os

import fixtures

from nova_sched_ext.broker import choosers
from nova_sched_ext.broker import config as broker_config
from nova_sched_ext import registry

from tests import base
from tests.unit.broker import helpers

SAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                      'nova-sched-ext-broker.yaml.sample')


class TestLoad(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, text):
        path = os.path.join(self.tmp, 'broker.yaml')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
        return path

    def assertRefused(self, text, *words):
        path = self.write(text)
        exc = self.assertRaises(broker_config.ConfigError,
                                broker_config.load, path)
        message = str(exc)
        self.assertTrue(message.startswith(path + ': '), message)
        self.assertEqual(1, len(message.splitlines()), message)
        for word in words:
            self.assertIn(word, message)

    def test_the_sample_loads(self):
        conf = broker_config.load(SAMPLE)
        self.assertEqual(['east-1', 'east-2', 'west-1'], list(conf.clusters))
        self.assertEqual('nova', conf.clusters['east-2'].zone)
        self.assertEqual(('dpdk', 'normal'), conf.clusters['east-1'].pools)
        family = conf.families['v.c3.large']
        self.assertEqual(
            [('v.c3.large.numa.dpdk', 'dpdk', 'single'),
             ('v.c3.large.dpdk', 'dpdk', 'dual'),
             ('v.c3.large.numa', 'normal', 'single'),
             ('v.c3.large', 'normal', 'dual')],
            [(v.flavor, v.pool, v.numa) for v in family.variants])
        self.assertEqual({'dc-east': 200, 'dc-west': 100},
                         conf.preemptible_caps)
        self.assertEqual(10, conf.set_cap('web'))
        self.assertEqual(50, conf.set_cap('other'))
        self.assertIsInstance(choosers.load(conf), choosers.MostCapacity)
        self.assertEqual('priority', conf.conversion)

    def test_conversion(self):
        conf = helpers.make_config(broker={'conversion': 'most-room'})
        self.assertEqual('most-room', conf.conversion)
        for value in ('cheapest', 3, None):
            exc = self.assertRaises(
                broker_config.ConfigError, helpers.make_config,
                broker={'conversion': value})
            self.assertIn('broker.yaml: broker.conversion: expected one of '
                          'priority, most-room, got %r' % (value,), str(exc))

    def test_best_fit_is_a_chooser(self):
        conf = helpers.make_config(broker={'chooser': 'best-fit'})
        self.assertIsInstance(choosers.load(conf), choosers.BestFit)

    def test_not_yaml(self):
        self.assertRefused('clusters: [a, b\n', 'not valid YAML',
                           'line 2')

    def test_missing_file(self):
        path = os.path.join(self.tmp, 'nope.yaml')
        exc = self.assertRaises(broker_config.ConfigError,
                                broker_config.load, path)
        self.assertIn(path + ': cannot be read', str(exc))

    def test_not_a_mapping(self):
        self.assertRefused('- a\n', '(top level)', 'expected a mapping')

    def test_unknown_key_named_with_its_path(self):
        self.assertRefused(
            'clusters:\n  c1: {region: R, datacenter: d, pools: [p], '
            'pool: x}\nflavor_families: {}\n',
            'clusters.c1.pool', 'unknown key')

    def test_missing_key(self):
        self.assertRefused(
            'clusters:\n  c1: {datacenter: d, pools: [p]}\n'
            'flavor_families: {}\n', 'clusters.c1.region: missing')

    def test_variant_pool_no_cluster_holds(self):
        self.assertRefused(
            'clusters:\n  c1: {region: R, datacenter: d, pools: [normal]}\n'
            'flavor_families:\n  f:\n    variants:\n'
            '      - {flavor: f.dpdk, pool: dpdk, numa: single}\n',
            'flavor_families.f.variants[0].pool', "no cluster has pool "
            "'dpdk'")

    def test_bad_numa_kind(self):
        self.assertRefused(
            'clusters:\n  c1: {region: R, datacenter: d, pools: [p]}\n'
            'flavor_families:\n  f:\n    variants:\n'
            '      - {flavor: f, pool: p, numa: triple}\n',
            'flavor_families.f.variants[0].numa', 'single, dual',
            "'triple'")

    def test_two_clusters_on_one_cloud_and_region(self):
        self.assertRefused(
            'clusters:\n  c1: {cloud: x, region: R, datacenter: d, '
            'pools: [p]}\n  c2: {cloud: x, region: R, datacenter: d, '
            'pools: [p]}\nflavor_families: {}\n',
            'clusters.c2', 'already cluster c1')

    def test_cap_of_an_unknown_datacenter(self):
        data = helpers.config_dict(preemptible_caps={'dc-north': 3})
        exc = self.assertRaises(broker_config.ConfigError,
                                broker_config.parse, data, 'b.yaml')
        self.assertIn('b.yaml: preemptible_caps.dc-north: no cluster is in '
                      "data center 'dc-north'", str(exc))

    def test_bad_numbers(self):
        for section, key, value, words in (
                ('broker', 'max_attempts', 0, 'from 1 to 100'),
                ('broker', 'boot_timeout', 'soon', 'expected a number'),
                ('broker', 'max_attempts', True, 'expected an integer'),
                ('deployment_sets', 'max_size', -1, 'from 1')):
            data = helpers.config_dict()
            data[section] = dict(data[section], **{key: value})
            exc = self.assertRaises(broker_config.ConfigError,
                                    broker_config.parse, data, 'b.yaml')
            self.assertIn('%s.%s' % (section, key), str(exc))
            self.assertIn(words, str(exc))

    def test_default_roles_and_an_override(self):
        conf = helpers.make_config()
        self.assertEqual({'pay-as-you-go', 'auto-scaling', 'preemptible'},
                         set(conf.roles))
        self.assertEqual(('single',), conf.roles['auto-scaling'].numa)
        self.assertTrue(conf.roles['preemptible'].preemptible)
        conf = helpers.make_config(roles={
            'auto-scaling': {'numa': ['single', 'dual'],
                             'pools': ['normal']},
            'batch': {'numa': ['dual']}})
        self.assertEqual(('single', 'dual'), conf.roles['auto-scaling'].numa)
        self.assertEqual(('normal',), conf.roles['auto-scaling'].pools)
        self.assertIn('batch', conf.roles)
        self.assertIn('pay-as-you-go', conf.roles)

    def test_unknown_chooser(self):
        conf = helpers.make_config(broker={'chooser': 'cheapest'})
        exc = self.assertRaises(registry.PluginLoadError, choosers.load,
                                conf)
        self.assertIn('broker.yaml: broker.chooser', str(exc))
        self.assertIn("'cheapest' is not registered", str(exc))
        self.assertIn('most-capacity, round-robin', str(exc))
