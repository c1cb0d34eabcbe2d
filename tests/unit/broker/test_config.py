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
            [(v.flavor, v.pool, v.numa) for v in family.variants
             if v.numa != 'uneven'])
        # 3:1, then the 25 % rule from the most even split down
        self.assertEqual(
            ['v.c3.large.u12-4', 'v.c3.large.u9-7', 'v.c3.large.u10-6',
             'v.c3.large.u11-5'],
            [v.flavor for v in family.variants if v.numa == 'uneven'])
        self.assertEqual(('single', 'dual', 'uneven'),
                         conf.roles['pay-as-you-go'].numa)
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


VALID = ('clusters:\n'
         '  east-1: {region: RegionOne, datacenter: dc-east, pools: [n]}\n'
         'flavor_families:\n'
         '  f: {variants: [{flavor: f, pool: n, numa: single}]}\n')


def alias_bomb(levels, width=9):
    """A region of ``width ** levels`` strings in a few hundred bytes."""
    names = 'abcdefghijklmnop'
    items = ['&a [%s]' % ', '.join(['lol'] * width)]
    for i in range(1, levels):
        items.append('&%s [%s]' % (names[i], ', '.join(
            ['*' + names[i - 1]] * width)))
    return VALID.replace('region: RegionOne',
                         'region: [%s]' % ', '.join(items))


class TestHostileFiles(TestLoad):
    """What a careless or hostile file gets: one line, nothing used."""

    def test_an_alias_bomb_is_refused_before_it_is_built(self):
        # 9 ** 6 = 531,441 strings; 9 levels took 320 s and 5.9 GB
        self.assertRefused(alias_bomb(6), 'holds more than %d values once '
                           'its aliases are expanded (line 2)'
                           % broker_config.MAX_CONFIG_VALUES)

    def test_aliases_within_the_bound_are_fine(self):
        text = VALID.replace('pools: [n]', 'pools: &p [n]') + (
            '  g: {variants: [{flavor: g, pool: n, numa: single}]}\n'
            'roles:\n  batch: {numa: [dual], pools: *p}\n')
        conf = broker_config.load(self.write(text))
        self.assertEqual(('n',), conf.roles['batch'].pools)

    def test_a_self_containing_alias_is_refused(self):
        self.assertRefused(
            'clusters: &c\n  east-1: {region: R, datacenter: d, '
            'pools: *c}\nflavor_families: {}\n',
            'is nested deeper than %d levels'
            % broker_config.MAX_CONFIG_DEPTH)

    def test_deep_nesting_is_refused_as_it_is_read(self):
        self.assertRefused(VALID + 'roles: %s%s\n' % ('[' * 100, ']' * 100),
                           'is nested deeper than 32 levels (line 5)')

    def test_a_message_shows_a_bounded_part_of_a_value(self):
        shown = []

        class Loud:
            def __repr__(self):
                shown.append(self)
                return 'loud'
        data = helpers.config_dict()
        data['clusters']['east-1']['region'] = [Loud()] * 1000
        exc = self.assertRaises(broker_config.ConfigError,
                                broker_config.parse, data, 'b.yaml')
        self.assertIn("clusters.east-1.region: expected a name", str(exc))
        self.assertIn('[loud, loud, loud, loud, ...]', str(exc))
        self.assertLessEqual(len(shown), 4)

    def test_a_long_key_is_shown_clipped(self):
        name = 'x' * 1000    # YAML's longest simple key is 1024
        exc = self.assertRaises(
            broker_config.ConfigError, broker_config.load,
            self.write(VALID.replace('east-1', name)))
        self.assertIn(': clusters.xxx', str(exc))
        self.assertIn("expected a name (letters", str(exc))
        self.assertLess(len(str(exc)), 500)

    def test_a_repeated_key_is_refused(self):
        self.assertRefused(
            VALID + '  f: {variants: [{flavor: g, pool: n, numa: dual}]}\n',
            "is not valid YAML at line 5, column 3: the key 'f' is "
            "repeated (first at line 4)")
        self.assertRefused(
            VALID.replace('clusters:\n', 'clusters:\n  east-1: {region: R2, '
                          'datacenter: dc-east, pools: [n]}\n'),
            "line 3, column 3: the key 'east-1' is repeated (first at line "
            "2)")
        self.assertRefused(
            'broker:\n  max_attempts: 4\n  max_attempts: 100\n' + VALID,
            "line 3, column 3: the key 'max_attempts' is repeated")

    def test_a_merge_may_be_overridden(self):
        text = VALID.replace(
            '  east-1: {region: RegionOne, datacenter: dc-east, pools: [n]}',
            '  east-2: &base {region: RegionOne, datacenter: dc-east, '
            'pools: [n]}\n  east-1: {<<: *base, region: RegionTwo}')
        conf = broker_config.load(self.write(text))
        self.assertEqual('RegionTwo', conf.clusters['east-1'].region)
        self.assertEqual(('n',), conf.clusters['east-1'].pools)

    def test_sections_of_the_wrong_type_are_refused(self):
        for section, value, kind in (
                ('broker', '[]', 'a list'), ('broker', '0', 'an integer'),
                ('roles', '""', 'a string'),
                ('preemptible_caps', '[]', 'a list'),
                ('deployment_sets', 'false', 'a boolean')):
            self.assertRefused(VALID + '%s: %s\n' % (section, value),
                               '%s: expected a mapping, got %s'
                               % (section, kind))
        self.assertRefused(VALID + 'deployment_sets: {caps: 0}\n',
                           'deployment_sets.caps: expected a mapping, got '
                           'an integer')

    def test_an_empty_section_is_its_defaults(self):
        conf = broker_config.load(self.write(
            VALID + 'broker:\nroles:\ndeployment_sets:\n'))
        self.assertEqual(broker_config.DEFAULT_MAX_ATTEMPTS,
                         conf.max_attempts)
        self.assertIn('pay-as-you-go', conf.roles)

    def test_a_file_over_the_size_is_refused_unread(self):
        padding = '# %s\n' % ('-' * 1021)
        text = VALID + padding * (broker_config.MAX_CONFIG_BYTES // 1024)
        self.assertGreater(len(text), broker_config.MAX_CONFIG_BYTES)
        self.useFixture(fixtures.MockPatchObject(
            broker_config, '_Loader', side_effect=AssertionError('parsed')))
        self.assertRefused(text, 'is larger than 1024 KiB (%d bytes): a '
                           'broker configuration is a few kilobytes'
                           % len(text))

    def test_a_file_at_the_size_loads(self):
        text = VALID + '#' * (broker_config.MAX_CONFIG_BYTES - len(VALID))
        conf = broker_config.load(self.write(text))
        self.assertEqual(['east-1'], list(conf.clusters))

    def test_an_integer_python_will_not_convert(self):
        self.assertRefused('broker: {max_attempts: %s}\n' % ('1' * 5000) +
                           VALID, 'cannot be read: Exceeds the limit')


class TestTimeouts(base.TestCase):

    def test_defaults_and_overrides(self):
        conf = helpers.make_config()
        self.assertEqual((5, 30, 8), (
            conf.clusters['east-1'].connect_timeout,
            conf.clusters['east-1'].read_timeout, conf.survey_workers))
        clusters = helpers.config_dict()['clusters']
        clusters['west-1']['read_timeout'] = 2
        conf = helpers.make_config(
            broker={'connect_timeout': 1, 'read_timeout': 10,
                    'survey_workers': 3}, clusters=clusters)
        self.assertEqual((1, 10), (conf.clusters['east-1'].connect_timeout,
                                   conf.clusters['east-1'].read_timeout))
        self.assertEqual((1, 2), (conf.clusters['west-1'].connect_timeout,
                                  conf.clusters['west-1'].read_timeout))
        self.assertEqual(3, conf.survey_workers)

    def test_bounds(self):
        for broker, words in (
                ({'read_timeout': 0}, 'broker.read_timeout: must be from '
                                      '0.1 to 3600'),
                ({'connect_timeout': 'soon'}, 'broker.connect_timeout: '
                                              'expected a number'),
                ({'survey_workers': 0}, 'broker.survey_workers: must be '
                                        'from 1 to 64')):
            exc = self.assertRaises(broker_config.ConfigError,
                                    helpers.make_config, broker=broker)
            self.assertIn(words, str(exc))
