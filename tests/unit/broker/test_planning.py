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

"""The decision alone: plan() on views written by hand."""

from nova_sched_ext.broker import choosers
from nova_sched_ext.broker import planning

from tests import base
from tests.unit.broker import helpers as h


def views(conf, capacity, **per_cluster):
    """A reachable view per cluster: image, 100 addresses, ``capacity``."""
    result = {}
    for name, cluster in conf.clusters.items():
        result[name] = planning.ClusterView(
            cluster=cluster, image_present=True, free_ips=100,
            capacity=dict(capacity.get(name, {})))
        for key, value in per_cluster.get(name, {}).items():
            setattr(result[name], key, value)
    return result


def request(**kw):
    kw.setdefault('family', 'v.c3.large')
    return planning.Request(image='cirros', network='private', **kw)


class TestPlan(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = h.make_config()
        self.most = choosers.MostCapacity(self.conf)

    def pairs(self, plan):
        return [(c.cluster, c.variant.flavor) for c in plan.candidates]

    def test_variants_in_priority_order_then_clusters_by_capacity(self):
        plan = planning.plan(self.conf, request(count=2), views(self.conf, {
            'east-1': {h.DPDK_SINGLE: 2, h.NORMAL_SINGLE: 9},
            'east-2': {h.NORMAL_SINGLE: 3, h.NORMAL_DUAL: 5},
            'west-1': {h.DPDK_SINGLE: 7, h.DPDK_DUAL: 1, h.NORMAL_DUAL: 2}}),
            self.most)
        self.assertIsNone(plan.refusal)
        self.assertEqual(
            [('west-1', h.DPDK_SINGLE), ('east-1', h.DPDK_SINGLE),
             ('east-1', h.NORMAL_SINGLE), ('east-2', h.NORMAL_SINGLE),
             ('east-2', h.NORMAL_DUAL), ('west-1', h.NORMAL_DUAL)],
            self.pairs(plan))
        dropped = {(v.cluster, v.variant.flavor): v.reason
                   for v in plan.verdicts if not v.kept and v.variant}
        self.assertEqual('capacity 1, 2 needed',
                         dropped['west-1', h.DPDK_DUAL])
        self.assertEqual('no pool dpdk in this cluster',
                         dropped['east-2', h.DPDK_SINGLE])

    def test_role_rules(self):
        capacity = {name: {f: 10 for f in h.VARIANTS}
                    for name in self.conf.clusters}
        auto = planning.plan(self.conf, request(role='auto-scaling'),
                             views(self.conf, capacity), self.most)
        self.assertEqual((h.DPDK_SINGLE, h.NORMAL_SINGLE),
                         tuple(v.flavor for v in auto.variants))
        self.assertEqual({'single'},
                         {c.variant.numa for c in auto.candidates})
        spot = planning.plan(self.conf, request(role='preemptible'),
                             views(self.conf, capacity), self.most)
        self.assertEqual((h.DPDK_DUAL, h.NORMAL_DUAL),
                         tuple(v.flavor for v in spot.variants))
        # a role that allows no variant of the family
        conf = h.make_config(roles={'pinned': {'numa': ['single'],
                                               'pools': ['gpu']}})
        exc = self.assertRaises(planning.RequestError, planning.plan, conf,
                                request(role='pinned'), {}, self.most)
        self.assertIn('role pinned allows no variant', str(exc))

    def test_unknown_family_role_cluster_datacenter(self):
        for kw, words in (({'family': 'v.c9'}, "unknown flavor family "
                           "'v.c9'; known: v.c3.large, v.c3.large.spot"),
                          ({'role': 'vip'}, "unknown role 'vip'"),
                          ({'clusters': ('mars',)}, "unknown cluster "
                           "'mars'; known: east-1, east-2, west-1"),
                          ({'datacenter': 'dc-x'}, "unknown data center"),
                          ({'count': 0}, 'count must be an integer')):
            exc = self.assertRaises(planning.RequestError, planning.plan,
                                    self.conf, request(**kw), {}, self.most)
            self.assertIn(words, str(exc))

    def test_image_and_addresses_filter_clusters(self):
        capacity = {name: {f: 10 for f in h.VARIANTS}
                    for name in self.conf.clusters}
        plan = planning.plan(
            self.conf, request(count=3), views(
                self.conf, capacity, **{
                    'east-1': {'image_present': False},
                    'west-1': {'free_ips': 2}}), self.most)
        self.assertEqual({'east-2'}, {c.cluster for c in plan.candidates})
        reasons = {v.cluster: v.reason for v in plan.verdicts
                   if v.variant is None}
        self.assertEqual('image cirros is not in this cluster',
                         reasons['east-1'])
        self.assertEqual('network private has 2 free addresses, 3 needed',
                         reasons['west-1'])

    def test_deployment_set_cap_across_clusters(self):
        capacity = {name: {f: 10 for f in h.VARIANTS}
                    for name in self.conf.clusters}
        members = {'east-1': {'set_members': 2},
                   'west-1': {'set_members': 2}}
        ok = planning.plan(self.conf, request(deployment_set='db'),
                           views(self.conf, capacity, **members), self.most)
        self.assertIsNone(ok.refusal)
        over = planning.plan(self.conf, request(deployment_set='db',
                                                count=2),
                             views(self.conf, capacity, **members),
                             self.most)
        self.assertEqual('deployment set db has 4 members across the '
                         'clusters; 2 more would pass its cap of 5',
                         over.refusal)
        self.assertEqual([], over.candidates)
        small = planning.plan(self.conf, request(deployment_set='small'),
                              views(self.conf, capacity, **members),
                              self.most)
        self.assertIn('its cap of 2', small.refusal)

    def test_preemptible_cap_per_datacenter(self):
        capacity = {name: {f: 10 for f in h.VARIANTS}
                    for name in self.conf.clusters}
        held = {'east-1': {'preemptible': 2}, 'east-2': {'preemptible': 1},
                'west-1': {'preemptible': 50}}
        plan = planning.plan(
            self.conf, request(family='v.c3.large.spot', role='preemptible',
                               count=2), views(self.conf, capacity, **held),
            self.most)
        # dc-east holds 3 of its 4; dc-west has no cap
        self.assertEqual({'west-1'}, {c.cluster for c in plan.candidates})
        reasons = {v.cluster: v.reason for v in plan.verdicts
                   if v.variant is None}
        self.assertIn('data center dc-east holds 3 preemptible instances; '
                      '2 more would pass its cap of 4', reasons['east-1'])
        # pay-as-you-go is not capped
        paid = planning.plan(self.conf, request(count=2),
                             views(self.conf, capacity, **held), self.most)
        self.assertEqual(3, len({c.cluster for c in paid.candidates}))

    def test_unknown_capacity_goes_last_and_unreachable_is_dropped(self):
        capacity = {'east-1': {h.NORMAL_DUAL: 1},
                    'west-1': {h.NORMAL_DUAL: 1}}
        plan = planning.plan(self.conf, request(), views(
            self.conf, capacity, **{
                'east-2': {'capacity': None,
                           'capacity_error': 'HTTP 503: down'},
                'west-1': {'error': 'cannot connect: refused'}}), self.most)
        self.assertEqual([('east-1', h.NORMAL_DUAL),
                          ('east-2', h.NORMAL_SINGLE),
                          ('east-2', h.NORMAL_DUAL)], self.pairs(plan))
        self.assertIsNone(plan.candidates[-1].capacity)
        reasons = {v.cluster: v.reason for v in plan.verdicts
                   if v.variant is None}
        self.assertEqual('unreachable: cannot connect: refused',
                         reasons['west-1'])

    def test_nothing_fits_is_a_refusal_with_the_reasons(self):
        plan = planning.plan(self.conf, request(count=4),
                             views(self.conf, {}), self.most)
        self.assertIn('no cluster can take 4 x v.c3.large', plan.refusal)
        self.assertIn('capacity 0, 4 needed', plan.refusal)

    def test_round_robin_ignores_capacity_and_turns(self):
        rr = choosers.RoundRobin(self.conf)
        capacity = {'east-1': {h.NORMAL_DUAL: 1},
                    'east-2': {h.NORMAL_DUAL: 9},
                    'west-1': {h.NORMAL_DUAL: 5}}
        world = views(self.conf, capacity)
        first = planning.plan(self.conf, request(), world, rr)
        self.assertEqual(['east-1', 'east-2', 'west-1'],
                         [c.cluster for c in first.candidates])
        rr.placed(first.candidates[0])
        second = planning.plan(self.conf, request(), world, rr)
        self.assertEqual(['east-2', 'west-1', 'east-1'],
                         [c.cluster for c in second.candidates])
        most = planning.plan(self.conf, request(), world, self.most)
        self.assertEqual(['east-2', 'west-1', 'east-1'],
                         [c.cluster for c in most.candidates])
        most = planning.plan(self.conf, request(count=2), world, self.most)
        self.assertEqual(['east-2', 'west-1'],
                         [c.cluster for c in most.candidates])

    def test_best_fit_takes_the_least_capacity_that_covers(self):
        best = choosers.BestFit(self.conf)
        world = views(self.conf, {'east-1': {h.NORMAL_DUAL: 1},
                                  'east-2': {h.NORMAL_DUAL: 9},
                                  'west-1': {h.NORMAL_DUAL: 5}})
        plan = planning.plan(self.conf, request(count=2), world, best)
        self.assertEqual(['west-1', 'east-2'],
                         [c.cluster for c in plan.candidates])
        # equal capacity: the configuration's cluster order
        world = views(self.conf, {name: {h.NORMAL_DUAL: 4}
                                  for name in self.conf.clusters})
        plan = planning.plan(self.conf, request(), world, best)
        self.assertEqual(['east-1', 'east-2', 'west-1'],
                         [c.cluster for c in plan.candidates])

    def test_most_room_conversion_reorders_kinds_inside_a_pool(self):
        conf = h.make_config(broker={'conversion': 'most-room'})
        most = choosers.MostCapacity(conf)
        world = views(conf, {
            'east-1': {h.DPDK_SINGLE: 2, h.DPDK_DUAL: 3, h.NORMAL_SINGLE: 4,
                       h.NORMAL_DUAL: 1},
            'east-2': {h.NORMAL_SINGLE: 2, h.NORMAL_DUAL: 9},
            'west-1': {h.DPDK_SINGLE: 4, h.DPDK_DUAL: 2}})
        plan = planning.plan(conf, request(count=2), world, most)
        # dpdk still first (the pool's priority), its single-NUMA kind
        # first since it has room 6 against 5; in the normal pool the
        # dual kind's 9 beat the single kind's 6, and a cluster whose
        # capacity does not cover the count adds no room
        self.assertEqual(
            [('west-1', h.DPDK_SINGLE), ('east-1', h.DPDK_SINGLE),
             ('east-1', h.DPDK_DUAL), ('west-1', h.DPDK_DUAL),
             ('east-2', h.NORMAL_DUAL),
             ('east-1', h.NORMAL_SINGLE), ('east-2', h.NORMAL_SINGLE)],
            self.pairs(plan))
        # the same world, the seed's order
        plan = planning.plan(self.conf, request(count=2), world, self.most)
        self.assertEqual(
            [('west-1', h.DPDK_SINGLE), ('east-1', h.DPDK_SINGLE),
             ('east-1', h.DPDK_DUAL), ('west-1', h.DPDK_DUAL),
             ('east-1', h.NORMAL_SINGLE), ('east-2', h.NORMAL_SINGLE),
             ('east-2', h.NORMAL_DUAL)],
            self.pairs(plan))

    def test_most_room_ties_and_empty_kinds_keep_the_priority(self):
        conf = h.make_config(broker={'conversion': 'most-room'})
        most = choosers.MostCapacity(conf)
        world = views(conf, {'east-2': {h.NORMAL_SINGLE: 5,
                                        h.NORMAL_DUAL: 5}})
        plan = planning.plan(conf, request(), world, most)
        self.assertEqual([('east-2', h.NORMAL_SINGLE),
                          ('east-2', h.NORMAL_DUAL)], self.pairs(plan))
        world = views(conf, {'east-1': {h.DPDK_DUAL: 1}})
        plan = planning.plan(conf, request(), world, most)
        self.assertEqual([('east-1', h.DPDK_DUAL)], self.pairs(plan))

    def test_tried_pairs_are_not_candidates(self):
        capacity = {name: {h.NORMAL_DUAL: 3} for name in self.conf.clusters}
        plan = planning.plan(self.conf, request(),
                             views(self.conf, capacity), self.most,
                             tried={('east-1', h.NORMAL_DUAL)})
        self.assertEqual(['east-2', 'west-1'],
                         [c.cluster for c in plan.candidates])
