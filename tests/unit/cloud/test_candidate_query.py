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

"""The kept state's candidate query against placement's own.

Random clouds (inventories with reserved amounts, allocation ratios and
units, usages, some over capacity, traits, aggregates) are written into
openstack-placement itself, in this process on an in-memory sqlite
(``placement.direct``, no HTTP), and each random query of the subset is
asked of placement's ``GET /allocation_candidates`` at Nova's
microversion and of :func:`candidate_query.answer`: the same allocation
requests and provider summaries, up to order.
"""

import copy
import datetime
import json
from unittest import mock
from urllib import parse as urlparse

import hypothesis
from hypothesis import strategies as st

from nova_sched_ext.cloud import candidate_query as cq
from nova_sched_ext.cloud import placement as p
from tests import base
from tests.unit.cloud import placement_fixtures

CLASSES = placement_fixtures.CLASSES
TRAITS = placement_fixtures.TRAITS
AGGREGATES = placement_fixtures.AGGREGATES
RATIOS = placement_fixtures.RATIOS
#: how many providers an example's cloud has at most
MAX_PROVIDERS = 6


@st.composite
def inventories(draw, rc):
    total = draw(st.integers(1, 64))
    reserved = draw(st.sampled_from((0, 0, 1, total - 1)))
    step = draw(st.sampled_from((1, 1, 1, 2, 4)))
    min_unit = min(draw(st.sampled_from((1, 1, 1, 2, 3))), total)
    max_unit = draw(st.one_of(st.just(total), st.integers(min_unit, total)))
    return p.Inventory(total=total, reserved=reserved, min_unit=min_unit,
                       max_unit=max_unit, step_size=step,
                       allocation_ratio=draw(st.sampled_from(RATIOS)))


@st.composite
def providers(draw):
    """A compute node: VCPU and MEMORY_MB, maybe DISK_GB and a GPU."""
    classes = ['VCPU', 'MEMORY_MB'] + draw(st.lists(
        st.sampled_from(CLASSES[2:]), unique=True))
    invs = {rc: draw(inventories(rc)) for rc in classes}
    usages = {}
    for rc, inv in invs.items():
        # mostly room left; sometimes full or over capacity
        used = draw(st.one_of(st.integers(0, inv.total // 2),
                              st.integers(0, inv.total + 8)))
        if used:
            usages[rc] = used
    return {'inventories': invs, 'usages': usages,
            'traits': draw(st.frozensets(st.sampled_from(TRAITS),
                                         max_size=2)),
            'aggregates': draw(st.frozensets(st.sampled_from(AGGREGATES),
                                             max_size=2))}


@st.composite
def queries(draw, count):
    """``(query parameters, in_tree index or None)`` of the subset."""
    resources = {'VCPU': draw(st.integers(1, 4)),
                 'MEMORY_MB': draw(st.integers(1, 8))}
    for rc in CLASSES[2:]:
        if draw(st.integers(0, 3)) == 0:
            resources[rc] = draw(st.integers(1, 4))
    traits = draw(st.lists(st.sampled_from(TRAITS), unique=True,
                           max_size=2))
    cut = draw(st.integers(0, len(traits)))
    required = sorted(traits[:cut]) + ['!' + t for t in sorted(traits[cut:])]
    params = [('resources', ','.join('%s:%d' % item
                                     for item in sorted(resources.items())))]
    if required:
        params.append(('required', ','.join(required)))
    for any_of in draw(st.lists(st.frozensets(st.sampled_from(AGGREGATES),
                                              min_size=1), max_size=2)):
        params.append(('member_of', 'in:' + ','.join(sorted(any_of))))
    forbidden = draw(st.frozensets(st.sampled_from(AGGREGATES), max_size=1))
    if forbidden:
        params.append(('member_of', '!in:' + ','.join(sorted(forbidden))))
    if draw(st.booleans()):
        params.append(('root_required', '!COMPUTE_STATUS_DISABLED'))
    in_tree = None
    if count and draw(st.integers(0, 3)) == 0:
        in_tree = draw(st.integers(0, count - 1))
    params.append(('limit', str(MAX_PROVIDERS)))
    return params, in_tree


def normalized(allocation_requests, summaries):
    """Placement's answer, order-free."""
    requests = sorted(
        (sorted((rp, sorted(a['resources'].items()))
                for rp, a in ar['allocations'].items()),
         sorted((k, sorted(v)) for k, v in ar['mappings'].items()))
        for ar in allocation_requests)
    return requests, {rp: dict(s, traits=sorted(s['traits']))
                      for rp, s in summaries.items()}


class TestAgainstPlacement(base.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(
            placement_fixtures.InProcessPlacement()).placement

    def compare(self, kept, params):
        querystring = urlparse.urlencode(sorted(params))
        theirs = self.placement.call(
            'get', '/allocation_candidates?' + querystring,
            version=cq.MICROVERSION)
        ours = cq.answer(cq.parse(querystring), kept)
        self.assertEqual(normalized(theirs['allocation_requests'],
                                    theirs['provider_summaries']),
                         normalized(*ours), querystring)
        return {uuid for ar in ours[0] for uuid in ar['allocations']}

    def test_a_known_cloud(self):
        def node(vcpu, used, ratio=1.0, step=1, traits=(), aggs=()):
            return {'inventories': {
                'VCPU': p.Inventory(total=vcpu, step_size=step,
                                    max_unit=vcpu, allocation_ratio=ratio),
                'MEMORY_MB': p.Inventory(total=16, max_unit=16)},
                'usages': {'VCPU': used} if used else {},
                'traits': frozenset(traits), 'aggregates': frozenset(aggs)}
        kept = self.placement.create([
            node(8, 6),                                  # 0: fits exactly
            node(8, 3, ratio=0.57),                      # 1: capacity 4
            node(8, 0, step=4),                          # 2: 2 not a step
            node(8, 0, traits=['COMPUTE_STATUS_DISABLED']),   # 3
            node(8, 0, aggs=[AGGREGATES[2]]),            # 4: forbidden
            node(8, 9),                                  # 5: over capacity
            node(8, 0, traits=['CUSTOM_NSE_A'],
                 aggs=[AGGREGATES[0]]),                  # 6: fits
            node(8, 0, aggs=AGGREGATES[:2]),             # 7: fits
        ])
        found = self.compare(kept, [
            ('resources', 'MEMORY_MB:4,VCPU:2'),
            ('required', '!COMPUTE_STATUS_DISABLED'),
            ('member_of', '!in:' + AGGREGATES[2]), ('limit', '10')])
        self.assertEqual({kept[0].uuid, kept[6].uuid, kept[7].uuid}, found)
        # member_of twice: in one of each
        found = self.compare(kept, [
            ('resources', 'MEMORY_MB:4,VCPU:2'),
            ('member_of', 'in:' + AGGREGATES[0]),
            ('member_of', 'in:' + AGGREGATES[1])])
        self.assertEqual({kept[7].uuid}, found)
        # a limit keeps that many of the candidates, as placement does
        # (which ones is placement's order, not compared)
        query = cq.parse('resources=MEMORY_MB:4,VCPU:2&limit=2')
        ours, summaries = cq.answer(query, kept)
        theirs = self.placement.call(
            'get', '/allocation_candidates?resources=MEMORY_MB:4,VCPU:2'
            '&limit=2', version=cq.MICROVERSION)
        self.assertEqual(2, len(ours))
        self.assertEqual(len(theirs['allocation_requests']), len(ours))
        self.assertEqual(len(theirs['provider_summaries']), len(summaries))
        found = self.compare(kept, [
            ('resources', 'MEMORY_MB:4,VCPU:2'),
            ('member_of', 'in:%s,%s' % (AGGREGATES[0], AGGREGATES[1])),
            ('required', 'CUSTOM_NSE_A')])
        self.assertEqual({kept[6].uuid}, found)
        found = self.compare(kept, [('resources', 'MEMORY_MB:4,VCPU:2'),
                                    ('in_tree', kept[3].uuid)])
        self.assertEqual({kept[3].uuid}, found)

    @hypothesis.settings(
        max_examples=base.hypothesis_examples(0.1, 10), deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        database=None)
    @hypothesis.given(cloud=st.lists(providers(), max_size=MAX_PROVIDERS),
                      data=st.data())
    def test_same_answer_as_placement(self, cloud, data):
        self.placement.reset()
        kept = self.placement.create(cloud)
        for _ in range(3):
            params, in_tree = data.draw(queries(len(kept)))
            if in_tree is not None:
                params.append(('in_tree', kept[in_tree].uuid))
            found = self.compare(kept, params)
            hypothesis.event('candidates: %d' % len(found))


class TestSubset(base.TestCase):
    """What the kept state answers, and what it leaves to placement."""

    def test_novas_own_query_of_a_flavor(self):
        # The query Nova builds for a plain flavor, with what its request
        # filters add (an aggregate the tenant is isolated to, one it is
        # kept out of, disabled computes left out), is inside the subset.
        from nova import objects
        from nova.scheduler import utils as scheduler_utils
        from nova_sched_ext.compat import nova as nova_compat
        objects.register_all()
        spec = objects.RequestSpec(
            flavor=objects.Flavor(vcpus=2, memory_mb=2048, root_gb=10,
                                  ephemeral_gb=0, swap=0,
                                  extra_specs={'trait:CUSTOM_NSE_A':
                                               'required'}),
            image=objects.ImageMeta(properties=objects.ImageMetaProps()),
            is_bfv=False, request_level_params=objects.RequestLevelParams(
                root_required=set(),
                root_forbidden={'COMPUTE_STATUS_DISABLED'}),
            requested_destination=objects.Destination(
                aggregates=[','.join(AGGREGATES[:2])],
                forbidden_aggregates={AGGREGATES[2]}))
        request = scheduler_utils.resources_from_request_spec(
            None, spec, mock.Mock(), enable_pinning_translate=True)
        nova_compat.set_query_limit(request, 1000)
        query = cq.parse(request.to_querystring())
        self.assertEqual(cq.Query(
            resources={'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 10},
            required=frozenset({'CUSTOM_NSE_A'}),
            member_of=(frozenset(AGGREGATES[:2]),),
            forbidden_aggregates=frozenset({AGGREGATES[2]}),
            root_forbidden=frozenset({'COMPUTE_STATUS_DISABLED'}),
            limit=1000), query)

    def test_outside(self):
        for querystring, why in (
                ('resources=VCPU:1&resources1=VGPU:1', 'resources1'),
                ('resources=VCPU:1&same_subtree=_a,_b', 'same_subtree'),
                ('resources=VCPU:1&required=in:A,B', 'any-of traits'),
                ('required=CUSTOM_A', 'no resources'),
                ('resources=VCPU:0', "'VCPU:0'"),
                ('resources=VCPU:1&resources=VCPU:2', 'twice'),
                ('resources=VCPU:1&limit=0', 'limit=0')):
            error = self.assertRaises(cq.OutsideSubset, cq.parse,
                                      querystring)
            self.assertIn(why, str(error), querystring)

    def test_nested_or_sharing_providers_go_to_placement(self):
        inventory = {'VCPU': p.Inventory(total=8, max_unit=8)}
        root = p.Provider(uuid='r', name='r', parent_uuid=None,
                          inventories=inventory, usages={},
                          traits=frozenset())
        query = cq.parse('resources=VCPU:1')
        self.assertEqual(1, len(cq.answer(query, [root])[0]))
        for other, why in (
                (root._replace(uuid='c', parent_uuid='r'), 'nested'),
                (root._replace(uuid='s', traits=frozenset(
                    [cq.SHARING_TRAIT])), 'shares')):
            # wherever it is in the list, and whether it fits or not
            for providers in ([root, other], [other, root]):
                error = self.assertRaises(cq.OutsideSubset, cq.answer,
                                          query, providers)
                self.assertIn(why, str(error))


class TestAllocationRequestCopy(base.TestCase):
    """Nova deep-copies each host's allocation requests every request."""

    def test_a_deep_copy_is_equal_and_shares_nothing(self):
        provider = p.Provider(
            uuid='rp1', name='rp1', parent_uuid=None,
            inventories={'VCPU': p.Inventory(total=8)}, usages={},
            traits=frozenset(), generation=1)
        query = cq.parse('resources=VCPU:2&limit=10')
        [request], _summaries = cq.answer(query, [provider])
        self.assertIsInstance(request, cq.AllocationRequest)
        copied = copy.deepcopy([request])[0]
        self.assertIsInstance(copied, cq.AllocationRequest)
        self.assertEqual(copy.deepcopy(dict(request)), copied)
        self.assertEqual(json.dumps(request), json.dumps(copied))
        copied['allocations']['rp1']['resources']['VCPU'] = 7
        copied['mappings'][''].append('rp2')
        self.assertEqual({'allocations': {'rp1': {'resources': {'VCPU': 2}}},
                          'mappings': {'': ['rp1']}}, request)

    def test_other_values_are_deep_copied_as_copy_does(self):
        when = datetime.datetime(2026, 1, 1)
        value = {'a': [1, 'b', None, 2.5, True, (1, [2])], 'when': when}
        copied = cq.plain_copy(value)
        self.assertEqual(value, copied)
        self.assertIsNot(value['a'], copied['a'])
        self.assertIsNot(value['a'][5][1], copied['a'][5][1])


class TestSummaryKeptPerProvider(base.TestCase):

    def test_one_summary_per_provider_object_and_a_new_one_on_change(self):
        provider = p.Provider(
            uuid='rp1', name='rp1', parent_uuid=None,
            inventories={'VCPU': p.Inventory(total=8, allocation_ratio=2.0)},
            usages={'VCPU': 3}, traits=frozenset(['B', 'A']), generation=1)
        first = cq.summary(provider)
        self.assertIs(first, cq.summary(provider))
        self.assertEqual({'resources': {'VCPU': {'capacity': 16,
                                                 'used': 3}},
                          'traits': ['A', 'B'], 'parent_provider_uuid': None,
                          'root_provider_uuid': 'rp1'}, first)
        claimed = provider._replace(usages={'VCPU': 5}, generation=2)
        self.assertEqual({'capacity': 16, 'used': 5},
                         cq.summary(claimed)['resources']['VCPU'])
        self.assertEqual(3, first['resources']['VCPU']['used'])
