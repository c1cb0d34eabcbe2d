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

"""Uneven dual-NUMA variants: the rules, the refusals, the order."""

import copy

from nova_sched_ext.broker import choosers
from nova_sched_ext.broker import config as broker_config
from nova_sched_ext.broker import planning

from tests import base
from tests.unit.broker import helpers as h
from tests.unit.broker import test_planning


def config(uneven, numa='dual', roles=None, **broker):
    """helpers' configuration, the normal dual variant given ``uneven``."""
    data = h.config_dict()
    family = data['flavor_families']['v.c3.large']['variants']
    family[3] = dict(family[3], numa=numa, uneven=uneven)
    if roles is not None:
        data['roles'] = roles
    if broker:
        data['broker'] = dict(data['broker'], **broker)
    return broker_config.parse(data, 'broker.yaml')


def uneven_of(conf):
    return [v for v in conf.families['v.c3.large'].variants
            if v.numa == broker_config.UNEVEN]


SIZE = {'vcpus': 16, 'ram': 32768}


class TestVariants(base.TestCase):

    def test_ratios_become_flavors_that_keep_the_other_specs(self):
        conf = config(dict(SIZE, splits=['3:1', '1:3'], extra_specs={
            'hw:cpu_policy': 'dedicated', 'hw:mem_page_size': '1GB',
            'trait:CUSTOM_NORMAL': 'required', 'hw:numa_nodes': 2}))
        variants = conf.families['v.c3.large'].variants
        # right after their even split, in the order given
        self.assertEqual([h.NORMAL_DUAL, 'v.c3.large.u12-4',
                          'v.c3.large.u4-12', h.SPOT_DPDK][:3],
                         [v.flavor for v in variants[3:6]])
        first, second = uneven_of(conf)
        self.assertEqual(((12, 24576), (4, 8192)), first.cells)
        self.assertEqual(((4, 8192), (12, 24576)), second.cells)
        self.assertEqual(('normal', h.NORMAL_DUAL, 16, 32768),
                         (first.pool, first.base, first.vcpus,
                          first.memory_mb))
        self.assertEqual({
            'hw:cpu_policy': 'dedicated', 'hw:mem_page_size': '1GB',
            'trait:CUSTOM_NORMAL': 'required', 'hw:numa_nodes': '2',
            'hw:numa_cpus.0': '0-11', 'hw:numa_cpus.1': '12-15',
            'hw:numa_mem.0': '24576', 'hw:numa_mem.1': '8192'},
            first.flavor_specs())
        self.assertEqual('0-3', second.flavor_specs()['hw:numa_cpus.0'])
        self.assertEqual('4-15', second.flavor_specs()['hw:numa_cpus.1'])

    def test_explicit_cells_and_a_name_template(self):
        conf = config(dict(SIZE, splits=[
            {'cpus': [15, 1], 'ram': [16384, 16384]}],
            name='{flavor}.n{cpus0}c{mem0}m'))
        variant, = uneven_of(conf)
        self.assertEqual('v.c3.large.n15c16384m', variant.flavor)
        self.assertEqual({'hw:numa_cpus.0': '0-14', 'hw:numa_cpus.1': '15',
                          'hw:numa_mem.0': '16384',
                          'hw:numa_mem.1': '16384', 'hw:numa_nodes': '2'},
                         variant.flavor_specs())

    def test_the_rule_makes_every_split_down_to_the_share_no_mirror(self):
        conf = config(dict(SIZE, min_share=25))
        # node 1 from 7 (most even) down to 4 (25 % of 16); 8+8 is the
        # even variant, 3 is below the share; 4+12 is 12+4 to Nova
        self.assertEqual([((9, 18432), (7, 14336)),
                          ((10, 20480), (6, 12288)),
                          ((11, 22528), (5, 10240)),
                          ((12, 24576), (4, 8192))],
                         [v.cells for v in uneven_of(conf)])
        # 1 GiB pages: 32 GiB splits in whole GiB at every share
        conf = config(dict(SIZE, min_share=25, extra_specs={
            'hw:mem_page_size': '1GB'}))
        self.assertEqual([(9, 7), (10, 6), (11, 5), (12, 4)],
                         [(v.cells[0][0], v.cells[1][0])
                          for v in uneven_of(conf)])
        conf = config({'vcpus': 16, 'ram': 24576, 'min_share': 25,
                       'extra_specs': {'hw:mem_page_size': '1GB'}})
        # 24 GiB: only 10+6 (15+9 GiB) and 12+4 (18+6 GiB) are whole
        self.assertEqual([(10, 6), (12, 4)],
                         [(v.cells[0][0], v.cells[1][0])
                          for v in uneven_of(conf)])

    def test_rule_and_explicit_splits_together_once_each(self):
        # 30 % of 16 vCPUs: at least 4.8, so 5 on node 1
        conf = config(dict(SIZE, splits=['3:1', '1:3'], min_share=30))
        self.assertEqual(['v.c3.large.u12-4', 'v.c3.large.u4-12',
                          'v.c3.large.u9-7', 'v.c3.large.u10-6',
                          'v.c3.large.u11-5'],
                         [v.flavor for v in uneven_of(conf)])

    def test_page_sizes_as_nova_reads_them(self):
        for value, kb in (('2048', 2048), ('2MB', 2048), ('2MiB', 2048),
                          ('1GB', 1048576), ('1G', 1048576),
                          ('small', 4), ('large', 2048), ('any', None),
                          ('LARGE', 2048), (2048, 2048)):
            self.assertEqual(kb, broker_config.page_size_kb(value), value)
        for value in ('huge', '2XB', '', '1.5GB'):
            self.assertRaises(ValueError, broker_config.page_size_kb, value)


class TestRefusals(base.TestCase):

    def assertRefused(self, uneven, words, numa='dual'):
        exc = self.assertRaises(broker_config.BrokerConfigError, config,
                                uneven, numa)
        message = str(exc)
        self.assertEqual(1, len(message.splitlines()), message)
        self.assertTrue(message.startswith(
            'broker.yaml: flavor_families.v.c3.large.variants[3].uneven'),
            message)
        self.assertIn(words, message)

    def test_a_node_with_no_cpus(self):
        self.assertRefused(dict(SIZE, splits=['4:0']),
                           'splits[0]: node 1 gets 0 CPUs')
        self.assertRefused(dict(SIZE, splits=['0:4']),
                           'splits[0]: node 0 gets 0 CPUs')
        self.assertRefused(dict(SIZE, splits=[
            {'cpus': [16, 0], 'ram': [16384, 16384]}]),
            'splits[0].cpus: node 1 has 0 CPUs')
        self.assertRefused(dict(SIZE, splits=[
            {'cpus': [12, 4], 'ram': [32768, 0]}]),
            'splits[0].ram: node 1 has 0 MiB of RAM')

    def test_a_split_that_does_not_add_up(self):
        self.assertRefused(dict(SIZE, splits=[
            {'cpus': [12, 3], 'ram': [24576, 8192]}]),
            'splits[0].cpus: adds up to 15 vCPUs, the flavor has 16')
        self.assertRefused(dict(SIZE, splits=[
            {'cpus': [12, 4], 'ram': [24576, 4096]}]),
            'splits[0].ram: adds up to 28672 MiB, the flavor has 32768')
        self.assertRefused({'vcpus': 10, 'ram': 32768, 'splits': ['3:1']},
                           '3:1 of 10 vCPUs is not a whole number of CPUs')
        self.assertRefused({'vcpus': 16, 'ram': 1001, 'splits': ['3:1']},
                           '3:1 of 1001 MiB is not a whole number of MiB')

    def test_memory_below_or_not_a_multiple_of_the_page_size(self):
        self.assertRefused(
            {'vcpus': 4, 'ram': 2048, 'splits': ['3:1'],
             'extra_specs': {'hw:mem_page_size': '1GB'}},
            'splits[0]: node 1 gets 512 MiB of RAM, less than one 1048576 '
            'KiB page (hw:mem_page_size)')
        self.assertRefused(
            {'vcpus': 4, 'ram': 6144, 'splits': ['3:1'],
             'extra_specs': {'hw:mem_page_size': '1GB'}},
            'splits[0]: node 0 gets 4608 MiB of RAM, not a whole number of '
            '1048576 KiB pages')
        self.assertRefused(
            {'vcpus': 4, 'ram': 4098, 'splits': [
                {'cpus': [3, 1], 'ram': [3073, 1025]}],
             'extra_specs': {'hw:mem_page_size': 'large'}},
            'node 0 gets 3073 MiB of RAM, not a whole number of 2048 KiB')
        self.assertRefused(
            dict(SIZE, splits=['3:1'],
                 extra_specs={'hw:mem_page_size': 'huge'}),
            "extra_specs.hw:mem_page_size: expected small, large, any or a "
            "size")

    def test_a_rule_percent_out_of_range(self):
        for share in (0, 50, 60, -5, 100.5):
            self.assertRefused(
                dict(SIZE, min_share=share),
                'min_share: must be above 0 and below 50 (percent of the '
                'vCPUs on each node), got %s' % share)
        self.assertRefused(dict(SIZE, min_share='25%'),
                           "min_share: expected a percent, got '25%'")
        self.assertRefused({'vcpus': 4, 'ram': 8192, 'min_share': 40},
                           'min_share: 40 % of 4 vCPUs and 8192 MiB leaves '
                           'no uneven split')

    def test_what_else_is_refused(self):
        self.assertRefused(dict(SIZE, splits=['1:1']),
                           'splits[0]: is the even split')
        self.assertRefused(dict(SIZE), 'give splits, min_share or both')
        self.assertRefused({'splits': ['3:1']}, 'uneven.vcpus: missing')
        self.assertRefused(dict(SIZE, splits=['3:1', '6:2']),
                           'splits[1]: split 12+4 vCPUs, 24576+8192 MiB is '
                           'listed twice')
        self.assertRefused(dict(SIZE, splits=['three to one']),
                           "expected a ratio ('3:1')")
        self.assertRefused(dict(SIZE, splits=['3:1'], extra_specs={
            'hw:numa_cpus.0': '0-11'}), 'extra_specs.hw:numa_cpus.0: is set '
            'by each uneven split')
        self.assertRefused(dict(SIZE, splits=['3:1'], extra_specs={
            'hw:numa_nodes': '3'}), 'extra_specs.hw:numa_nodes: is set')
        self.assertRefused(dict(SIZE, splits=['3:1'], extra_specs={
            'hw:cpu_dedicated_mask': '^0'}), 'names guest CPUs')
        self.assertRefused(dict(SIZE, splits=['3:1', '1:3'],
                                name='{flavor}.x'),
                           "flavor 'v.c3.large.x' is listed twice")
        self.assertRefused(dict(SIZE, splits=['3:1'], name='{nodes}'),
                           'name: cannot be formatted')
        self.assertRefused(dict(SIZE, splits=['3:1']),
                           'uneven: only a dual variant has uneven splits, '
                           'this one is single', numa='single')

    def test_only_roles_that_list_the_kind_get_them(self):
        roles = {'symmetric': {'numa': ['single', 'dual']},
                 'uneven-only': {'numa': ['uneven']}}
        conf = config(dict(SIZE, splits=['3:1']), roles=roles)
        flavors = {
            role: [v.flavor for v in planning.role_variants(
                conf, test_planning.request(role=role))[1]]
            for role in ('pay-as-you-go', 'auto-scaling', 'preemptible',
                         'symmetric', 'uneven-only')}
        self.assertEqual({
            'pay-as-you-go': [h.DPDK_SINGLE, h.DPDK_DUAL, h.NORMAL_SINGLE,
                              h.NORMAL_DUAL, 'v.c3.large.u12-4'],
            'auto-scaling': [h.DPDK_SINGLE, h.NORMAL_SINGLE],
            'preemptible': [h.DPDK_DUAL, h.NORMAL_DUAL, 'v.c3.large.u12-4'],
            'symmetric': [h.DPDK_SINGLE, h.DPDK_DUAL, h.NORMAL_SINGLE,
                          h.NORMAL_DUAL],
            'uneven-only': ['v.c3.large.u12-4']}, flavors)


class TestOrder(base.TestCase):

    def plan(self, conf, capacity, role='pay-as-you-go'):
        world = test_planning.views(conf, capacity)
        plan = planning.plan(conf, test_planning.request(role=role), world,
                             choosers.MostCapacity(conf))
        return [(c.cluster, c.variant.flavor) for c in plan.candidates]

    def test_after_the_even_split_by_the_clusters_room(self):
        capacity = {'east-1': {h.NORMAL_SINGLE: 1, h.NORMAL_DUAL: 1,
                               'v.c3.large.u12-4': 1,
                               'v.c3.large.u4-12': 1,
                               'v.c3.large.u10-6': 4},
                    'east-2': {'v.c3.large.u12-4': 5, 'v.c3.large.u4-12': 5,
                               'v.c3.large.u10-6': 1}}
        uneven = dict(SIZE, splits=['3:1', '1:3', '5:3'])
        conf = config(uneven)
        # the even split first, then 3:1 and 1:3 (room 6 each: the
        # family's order), then 5:3 (room 5)
        self.assertEqual(
            [('east-1', h.NORMAL_SINGLE), ('east-1', h.NORMAL_DUAL),
             ('east-2', 'v.c3.large.u12-4'), ('east-1', 'v.c3.large.u12-4'),
             ('east-2', 'v.c3.large.u4-12'), ('east-1', 'v.c3.large.u4-12'),
             ('east-1', 'v.c3.large.u10-6'), ('east-2', 'v.c3.large.u10-6')],
            self.plan(conf, capacity))
        capacity['east-1']['v.c3.large.u10-6'] = 9
        self.assertEqual(
            ['v.c3.large.u10-6', 'v.c3.large.u12-4', 'v.c3.large.u4-12'],
            [f for _c, f in self.plan(conf, capacity)
             if '.u' in f][::2][:3])
        # most-room moves the even split (and its uneven ones with it)
        # before the single kind when it has more room
        conf = config(uneven, conversion='most-room')
        capacity['east-2'][h.NORMAL_DUAL] = 3
        self.assertEqual(
            [h.NORMAL_DUAL, h.NORMAL_DUAL, 'v.c3.large.u10-6',
             'v.c3.large.u10-6', 'v.c3.large.u12-4', 'v.c3.large.u12-4',
             'v.c3.large.u4-12', 'v.c3.large.u4-12', h.NORMAL_SINGLE],
            [f for _c, f in self.plan(conf, capacity)])

    def test_without_the_even_split_they_take_its_place(self):
        conf = config(dict(SIZE, splits=['3:1', '5:3']), roles={
            'no-even': {'numa': ['single', 'uneven']}})
        capacity = {'east-2': {h.NORMAL_SINGLE: 1, h.NORMAL_DUAL: 9,
                               'v.c3.large.u12-4': 1,
                               'v.c3.large.u10-6': 2}}
        self.assertEqual(
            [('east-2', h.NORMAL_SINGLE), ('east-2', 'v.c3.large.u10-6'),
             ('east-2', 'v.c3.large.u12-4')],
            self.plan(conf, capacity, role='no-even'))

    def test_the_sample_still_loads_with_the_kind(self):
        data = copy.deepcopy(h.CONFIG)
        conf = broker_config.parse(data, 'broker.yaml')
        self.assertEqual(('single', 'dual', 'uneven'),
                         conf.roles['pay-as-you-go'].numa)
        self.assertEqual([], uneven_of(conf))
