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


"""Placement's side of the count: inventories, units, traits, trees."""

import importlib
import sys
import warnings

from keystoneauth1 import exceptions as ks_exc

from nova_sched_ext.capacity import errors
from nova_sched_ext.cloud import claims as c
from nova_sched_ext.cloud import placement as p
from tests import base

ROOT = 'root-uuid'
CHILD = 'child-uuid'
DISABLED = 'COMPUTE_STATUS_DISABLED'


def provider(uuid=ROOT, inventories=None, usages=None, traits=(),
             parent=None, name=None):
    return p.Provider(uuid=uuid, name=name or uuid, parent_uuid=parent,
                      inventories=inventories or {}, usages=usages or {},
                      traits=frozenset(traits))


def tree(*providers):
    return p.Tree(providers=providers)


def request(resources, required=(), forbidden=(), *numbered,
            root_forbidden=(DISABLED,)):
    groups = (p.Group(resources=resources,
                      required_traits=frozenset(required),
                      forbidden_traits=frozenset(forbidden)),) + numbered
    return p.Request(groups=groups, root_forbidden=frozenset(root_forbidden))


def host(vcpu=16, memory=32768, disk=100, **kwargs):
    inventories = {'VCPU': p.Inventory(total=vcpu),
                   'MEMORY_MB': p.Inventory(total=memory),
                   'DISK_GB': p.Inventory(total=disk)}
    inventories.update(kwargs.pop('inventories', {}))
    return tree(provider(inventories=inventories, **kwargs))


SMALL = {'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 10}


class TestInventoryMath(base.TestCase):

    def test_capacity_is_total_less_reserved_times_ratio(self):
        inv = p.Inventory(total=10, reserved=2, allocation_ratio=4.0)
        self.assertEqual(32.0, inv.capacity)
        self.assertEqual(16, c.units(inv, 0, 2))
        self.assertEqual(13, c.units(inv, 6, 2))
        self.assertEqual(0, c.units(inv, 32, 2))
        self.assertEqual(0, c.units(inv, 40, 2))

    def test_units(self):
        inv = p.Inventory(total=64, min_unit=2, max_unit=8, step_size=2)
        self.assertEqual(0, c.units(inv, 0, 1))      # below min_unit
        self.assertEqual(0, c.units(inv, 0, 3))      # not a step
        self.assertEqual(0, c.units(inv, 0, 10))     # above max_unit
        self.assertEqual(8, c.units(inv, 0, 8))
        self.assertEqual(16, c.units(inv, 0, 4))

    def test_float_ratios_settle_on_placements_comparison(self):
        # 3 * 1.1 is 3.3000000000000003: three fit, a fourth does not
        inv = p.Inventory(total=3, allocation_ratio=1.1)
        self.assertEqual(3, c.units(inv, 0, 1))
        inv = p.Inventory(total=10, allocation_ratio=0.3)
        self.assertEqual(3, c.units(inv, 0, 1))
        inv = p.Inventory(total=7, allocation_ratio=1.0 / 7 * 7)
        self.assertEqual(7, c.units(inv, 0, 1))

    def test_limit_is_the_scarcest_class(self):
        self.assertEqual(8, c.placement_limit(host(), [request(SMALL)]))
        self.assertEqual(4, c.placement_limit(host(memory=16384),
                                              [request(SMALL)]))
        self.assertEqual(3, c.placement_limit(host(disk=39),
                                              [request(SMALL)]))

    def test_reserved_and_ratios(self):
        tree_ = host(inventories={
            'VCPU': p.Inventory(total=8, reserved=2, allocation_ratio=2.0),
            'MEMORY_MB': p.Inventory(total=16384, reserved=4096,
                                     allocation_ratio=1.5)})
        # VCPU 12 / 2 = 6, MEMORY_MB 18432 / 4096 = 4
        self.assertEqual(4, c.placement_limit(tree_, [request(SMALL)]))
        used = host(inventories=tree_.root.inventories,
                    usages={'MEMORY_MB': 8192})
        self.assertEqual(2, c.placement_limit(used, [request(SMALL)]))

    def test_max_unit_step_size_min_unit(self):
        big = dict(SMALL, VCPU=12)
        tree_ = host(vcpu=64, inventories={
            'VCPU': p.Inventory(total=64, max_unit=8)})
        self.assertEqual(0, c.placement_limit(tree_, [request(big)]))
        tree_ = host(inventories={
            'MEMORY_MB': p.Inventory(total=65536, step_size=8192)})
        self.assertEqual(0, c.placement_limit(tree_, [request(SMALL)]))
        self.assertEqual(8, c.placement_limit(tree_, [request(
            dict(SMALL, MEMORY_MB=8192))]))
        tree_ = host(inventories={
            'DISK_GB': p.Inventory(total=100, min_unit=20)})
        self.assertEqual(0, c.placement_limit(tree_, [request(SMALL)]))

    def test_a_class_the_host_lacks(self):
        wants = dict(SMALL, CUSTOM_GPU=1)
        self.assertEqual(0, c.placement_limit(host(), [request(wants)]))
        gpu = host(inventories={'CUSTOM_GPU': p.Inventory(total=3)})
        self.assertEqual(3, c.placement_limit(gpu, [request(wants)]))

    def test_cap(self):
        self.assertEqual(5, c.placement_limit(host(), [request(SMALL)],
                                              cap=5))
        self.assertEqual(0, c.placement_limit(host(), [request(SMALL)],
                                              cap=0))

    def test_fallback_query_after_the_first(self):
        pinned = {'PCPU': 4, 'MEMORY_MB': 1024}
        fallback = {'VCPU': 4, 'MEMORY_MB': 1024}
        tree_ = host(vcpu=8, inventories={'PCPU': p.Inventory(total=8)})
        self.assertEqual(2, c.placement_limit(tree_, [request(pinned)]))
        # the scheduler also asks for VCPU; both add up
        self.assertEqual(4, c.placement_limit(
            tree_, [request(pinned), request(fallback)]))
        # a legacy host without PCPU: only the fallback query finds it
        self.assertEqual(2, c.placement_limit(
            host(vcpu=8), [request(pinned), request(fallback)]))
        self.assertEqual(3, c.placement_limit(
            tree_, [request(pinned), request(fallback)], cap=3))


class TestTraits(base.TestCase):

    def test_required_and_forbidden(self):
        gold = host(traits={'CUSTOM_GOLD'})
        self.assertEqual(8, c.placement_limit(
            gold, [request(SMALL, required={'CUSTOM_GOLD'})]))
        self.assertEqual(0, c.placement_limit(
            host(), [request(SMALL, required={'CUSTOM_GOLD'})]))
        self.assertEqual(0, c.placement_limit(
            gold, [request(SMALL, forbidden={'CUSTOM_GOLD'})]))
        self.assertEqual(8, c.placement_limit(
            host(), [request(SMALL, forbidden={'CUSTOM_GOLD'})]))

    def test_disabled_compute_is_no_candidate(self):
        self.assertEqual(0, c.placement_limit(host(traits={DISABLED}),
                                              [request(SMALL)]))
        self.assertTrue(c.has_trait(host(traits={DISABLED}), DISABLED))

    def test_traits_of_a_child_serving_the_group(self):
        child = provider(CHILD, parent=ROOT, traits={'CUSTOM_FAST'},
                         inventories={'CUSTOM_NIC': p.Inventory(total=2)})
        root = host().root
        nested = tree(root, child)
        wants = dict(SMALL, CUSTOM_NIC=1)
        self.assertEqual(2, c.placement_limit(
            nested, [request(wants, required={'CUSTOM_FAST'})]))
        # a child that serves nothing of the request does not count
        self.assertEqual(0, c.placement_limit(
            nested, [request(SMALL, required={'CUSTOM_FAST'})]))

    def test_numbered_group_on_one_provider(self):
        children = [provider('c%d' % i, parent=ROOT,
                             inventories={'CUSTOM_VF': p.Inventory(total=3),
                                          'CUSTOM_BW': p.Inventory(total=10)},
                             traits={'CUSTOM_PHYSNET'} if i else ())
                    for i in range(2)]
        nested = tree(host().root, *children)
        group = p.Group(resources={'CUSTOM_VF': 1, 'CUSTOM_BW': 4},
                        required_traits=frozenset({'CUSTOM_PHYSNET'}),
                        forbidden_traits=frozenset(), same_provider=True)
        # only c1 has the trait: 10 // 4 = 2 instances
        self.assertEqual(2, c.placement_limit(
            nested, [request(SMALL, (), (), group)]))


def pool(uuid='pool-uuid', disk=100, used=0):
    return provider(uuid=uuid, inventories={
        'DISK_GB': p.Inventory(total=disk)}, usages={'DISK_GB': used},
        traits=(p.SHARING_TRAIT,))


class TestSharingProviders(base.TestCase):

    def test_a_host_without_disk_draws_it_from_its_pool(self):
        diskless = host(disk=0)._replace(sharing=(pool(disk=35),))
        claims = c.placement_claims(diskless, [request(SMALL)])
        # VCPU 16 // 2 = 8, the pool's 35 // 10 = 3
        self.assertEqual((3, 3, {'DISK_GB': ('pool-uuid',)}), claims)
        self.assertEqual(0, c.placement_limit(host(disk=0),
                                              [request(SMALL)]))

    def test_the_hosts_own_disk_serves_first(self):
        both = host(disk=20)._replace(sharing=(pool(disk=100, used=70),))
        self.assertEqual((5, 3, {'DISK_GB': ('pool-uuid',)}),
                         c.placement_claims(both, [request(SMALL)]))

    def test_several_pools_in_order_and_the_cap(self):
        diskless = host(disk=0)._replace(sharing=(
            pool('a', disk=20), pool('b', disk=100)))
        self.assertEqual((8, 8, {'DISK_GB': ('a', 'b')}),
                         c.placement_claims(diskless, [request(SMALL)]))
        self.assertEqual(4, c.placement_limit(diskless, [request(SMALL)],
                                              cap=4))

    def test_allowances(self):
        trees = [host(disk=0)._replace(sharing=(pool('a', disk=35),)),
                 host(disk=0)._replace(sharing=(pool('a', disk=35),
                                                pool('b', 25, used=5)))]
        self.assertEqual({'DISK_GB': {'a': 3, 'b': 2}},
                         c.pool_allowances(trees, request(SMALL)))


class TestOtherFigures(base.TestCase):

    def test_placement_only_is_os_capacity(self):
        tree_ = host(vcpu=4, traits={DISABLED}, inventories={
            'VCPU': p.Inventory(total=4, allocation_ratio=4.0, max_unit=4)})
        big = dict(SMALL, VCPU=8)
        # os-capacity ignores max_unit and traits: 16 / 8
        self.assertEqual(2, c.placement_only(tree_, request(big)))
        self.assertEqual(0, c.placement_limit(tree_, [request(big)]))

    def test_free_room(self):
        tree_ = host(vcpu=8, memory=4096, inventories={
            'PCPU': p.Inventory(total=4),
            'VCPU': p.Inventory(total=8, allocation_ratio=2.0)},
            usages={'VCPU': 3, 'PCPU': 1, 'MEMORY_MB': 1000})
        self.assertEqual((13 + 3, 3096), c.free_room(tree_))


class FakeResponse(object):

    def __init__(self, status, body=None):
        self.status_code = status
        self._body = body

    def json(self):
        return self._body


class FakeClient(object):

    def __init__(self, routes, error=None):
        self.routes = routes
        self.error = error
        self.calls = []

    def get(self, url, version=None, global_request_id=None):
        self.calls.append((url, version))
        if self.error is not None:
            raise self.error
        status, body = self.routes.get(url, (404, None))
        return FakeResponse(status, body)


class FakeContext(object):
    global_id = 'req-1'


def routes(providers):
    table = {'/resource_providers': (200, {'resource_providers': [
        {'uuid': u, 'name': u, 'root_provider_uuid': root,
         'parent_provider_uuid': parent}
        for u, root, parent, _ in providers]})}
    for u, _, _, inventories in providers:
        base_url = '/resource_providers/%s' % u
        table[base_url + '/inventories'] = (200, {'inventories': {
            rc: {'total': total, 'reserved': 0, 'min_unit': 1,
                 'max_unit': total, 'step_size': 1,
                 'allocation_ratio': 1.0}
            for rc, total in inventories.items()}})
        table[base_url + '/usages'] = (200, {'usages': {
            rc: 1 for rc in inventories}})
        table[base_url + '/traits'] = (200, {'traits': ['T_' + u]})
    return table


class TestPlacementReader(base.TestCase):

    def _reader(self, table, error=None, workers=1):
        client = FakeClient(table, error)
        return p.PlacementReader(FakeContext(), client=client,
                                 workers=workers), client

    def test_trees(self):
        table = routes([(ROOT, ROOT, None, {'VCPU': 8}),
                        ('gpu', ROOT, ROOT, {'VGPU': 2}),
                        ('other', 'other', None, {'VCPU': 4})])
        for workers in (1, 4):
            reader, client = self._reader(table, workers=workers)
            trees = reader.trees([ROOT, 'missing'])
            self.assertEqual([ROOT], list(trees))
            (root, gpu) = trees[ROOT].providers
            self.assertEqual(ROOT, root.uuid)
            self.assertEqual(p.Inventory(total=8, max_unit=8),
                             root.inventories['VCPU'])
            self.assertEqual({'VCPU': 1}, root.usages)
            self.assertEqual(frozenset({'T_' + ROOT}), root.traits)
            self.assertEqual(ROOT, gpu.parent_uuid)
            self.assertTrue(all(v == p.MICROVERSION
                                for u, v in client.calls
                                if 'required=' not in u))
            self.assertNotIn('/resource_providers/other/inventories',
                             [u for u, _ in client.calls])

    def test_without_sharing_providers_nothing_more_is_read(self):
        table = routes([(ROOT, ROOT, None, {'VCPU': 8})])
        reader, client = self._reader(table)
        self.assertEqual((), reader.trees([ROOT])[ROOT].sharing)
        self.assertEqual(
            [('/resource_providers?required=MISC_SHARES_VIA_AGGREGATE',
              p.SHARING_MICROVERSION)],
            [c for c in client.calls if 'required' in c[0]])
        self.assertFalse([u for u, _ in client.calls if 'aggregates' in u])

    def test_sharing_providers_of_the_trees_aggregates(self):
        table = routes([(ROOT, ROOT, None, {'VCPU': 8}),
                        ('other', 'other', None, {'VCPU': 8}),
                        ('pool', 'pool', None, {'DISK_GB': 500}),
                        ('far', 'far', None, {'DISK_GB': 500})])
        table['/resource_providers?required=MISC_SHARES_VIA_AGGREGATE'] = (
            200, {'resource_providers': [
                {'uuid': u, 'name': u, 'root_provider_uuid': u,
                 'parent_provider_uuid': None} for u in ('pool', 'far')]})
        for uuid, aggregates in ((ROOT, ['agg1']), ('other', ['agg2']),
                                 ('pool', ['agg1', 'agg3']),
                                 ('far', ['agg9'])):
            table['/resource_providers/%s/aggregates' % uuid] = (
                200, {'aggregates': aggregates})
        for workers in (1, 4):
            reader, _ = self._reader(table, workers=workers)
            trees = reader.trees([ROOT, 'other'])
            self.assertEqual(['pool'],
                             [s.uuid for s in trees[ROOT].sharing])
            self.assertEqual(
                p.Inventory(total=500, max_unit=500),
                trees[ROOT].sharing[0].inventories['DISK_GB'])
            self.assertEqual((), trees['other'].sharing)

    def test_a_provider_deleted_meanwhile(self):
        table = routes([(ROOT, ROOT, None, {'VCPU': 8})])
        del table['/resource_providers/%s/usages' % ROOT]
        reader, _ = self._reader(table)
        self.assertEqual({}, reader.trees([ROOT]))

    def test_placement_errors(self):
        table = routes([(ROOT, ROOT, None, {'VCPU': 8})])
        table['/resource_providers/%s/traits' % ROOT] = (503, None)
        reader, _ = self._reader(table)
        exc = self.assertRaises(errors.BackendUnavailable, reader.trees,
                                [ROOT])
        self.assertIn('HTTP 503', str(exc))
        self.assertEqual(1, exc.exit_code)
        table['/resource_providers/%s/traits' % ROOT] = (403, None)
        exc = self.assertRaises(errors.ConfigError,
                                self._reader(table)[0].trees, [ROOT])
        self.assertEqual(2, exc.exit_code)

    def test_unreachable(self):
        for error, kind in (
                (ks_exc.ConnectFailure('Connection refused'),
                 errors.BackendUnavailable),
                (ks_exc.EndpointNotFound('no placement endpoint'),
                 errors.BackendUnavailable),
                (ks_exc.MissingAuthPlugin('auth_type missing'),
                 errors.ConfigError),
                (ks_exc.Unauthorized('bad password'), errors.ConfigError)):
            reader, _ = self._reader({}, error=error)
            exc = self.assertRaises(kind, reader.trees, [ROOT])
            self.assertNotIn('\n', str(exc))


class TestDeprecatedModule(base.TestCase):
    """The old path of the reader and the model still works, and warns."""

    def test_capacity_placement_warns_and_re_exports(self):
        sys.modules.pop('nova_sched_ext.capacity.placement', None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            old = importlib.import_module('nova_sched_ext.capacity.placement')
        self.assertTrue(any(issubclass(w.category, DeprecationWarning)
                            for w in caught))
        self.assertIs(p.PlacementReader, old.PlacementReader)
        self.assertIs(p.Inventory, old.Inventory)
        self.assertIs(c.placement_limit, old.placement_limit)
        self.assertIs(c.units, old.units)


class TreesOfTest(base.TestCase):
    """trees_of() of providers read with their aggregates, as read."""

    def setUp(self):
        super().setUp()
        from nova_sched_ext_tools import placement_direct
        from tests.unit.cloud import placement_fixtures as pf
        self.placement = self.useFixture(pf.InProcessPlacement()).placement
        self.context = placement_direct.Context('req-nse-test-trees-of')

    def provider(self, name, parent=None, inventories=None, traits=(),
                 aggregates=()):
        import uuid as uuid_lib
        uuid = str(uuid_lib.uuid4())
        body = {'uuid': uuid, 'name': name}
        if parent:
            body['parent_provider_uuid'] = parent
        self.placement.call('post', '/resource_providers', body)
        base_url = '/resource_providers/%s' % uuid
        gen = self.placement.call('put', base_url + '/inventories', {
            'resource_provider_generation': 0,
            'inventories': inventories or {'VCPU': {'total': 4}}})[
                'resource_provider_generation']
        if traits:
            self.placement.ensure((), traits)
            gen = self.placement.call('put', base_url + '/traits', {
                'resource_provider_generation': gen,
                'traits': list(traits)})['resource_provider_generation']
        if aggregates:
            self.placement.call('put', base_url + '/aggregates', {
                'resource_provider_generation': gen,
                'aggregates': list(aggregates)}, version='1.19')
        return uuid

    def test_the_trees_placement_reader_reads(self):
        agg = '4c3e7f3a-5d1e-4b9a-9a53-0d2a5f1e6b01'
        plain = self.provider('plain')
        nested = self.provider('nested', aggregates=(agg,))
        self.provider('nested-numa1', parent=nested)
        numa0 = self.provider('nested-numa0', parent=nested)
        self.provider('nested-numa0-vf', parent=numa0)
        self.provider('disk-pool', traits=(p.SHARING_TRAIT,),
                      aggregates=(agg,),
                      inventories={'DISK_GB': {'total': 1000}})
        self.provider('other-pool', traits=(p.SHARING_TRAIT,),
                      aggregates=('0f7f1b9c-2f5e-4a8e-8a57-6c0d1c2b3a4d',),
                      inventories={'DISK_GB': {'total': 1000}})
        reader = p.PlacementReader(self.context, client=self.placement)
        read = reader.trees([plain, nested])

        def bare(trees):
            # the reader reads no aggregates and generations for trees
            return {root: [[(m.uuid, m.name, m.parent_uuid, m.inventories,
                             m.usages, m.traits) for m in members]
                           for members in (tree.providers, tree.sharing)]
                    for root, tree in trees.items()}

        kept = p.trees_of(reader.read_all(reader.listing()),
                          [plain, nested])
        self.assertEqual(bare(read), bare(kept))
        self.assertEqual(4, len(kept[nested].providers))
        self.assertEqual(['disk-pool'],
                         [s.name for s in kept[nested].sharing])
        self.assertEqual((), kept[plain].sharing)
