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


"""compute(): hosts chosen, counted, and added up per scope."""

import datetime
from unittest import mock

from nova import objects
from nova.scheduler import host_manager
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext import capacity
from nova_sched_ext.capacity import errors
from nova_sched_ext.capacity import service
from nova_sched_ext.capacity import sources
from nova_sched_ext.cloud import placement as p
from tests.unit.capacity import test_flavors


def numa_cell(cell_id, pcpus, memory=8192):
    cpus = set(range(cell_id * 8, cell_id * 8 + 8))
    pcpuset = set(sorted(cpus)[:pcpus])
    return objects.NUMACell(
        id=cell_id, cpuset=cpus - pcpuset, pcpuset=pcpuset, memory=memory,
        cpu_usage=0, memory_usage=0, pinned_cpus=set(),
        siblings=[{c} for c in sorted(cpus)], socket=0,
        mempages=[objects.NUMAPagesTopology(size_kb=4, total=memory * 256,
                                            used=0, reserved=0)],
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False))


def host_state(name, pcpus=4, cells=2):
    state = host_manager.HostState(name, name, uuids.cell1)
    state.uuid = getattr(uuids, name)
    state.numa_topology = objects.NUMATopology(
        cells=[numa_cell(i, pcpus) for i in range(cells)])
    state.cpu_allocation_ratio = 4.0
    state.ram_allocation_ratio = 1.0
    state.vcpus_total = 8 * cells
    state.vcpus_used = 0
    state.total_usable_ram_mb = 8192 * cells
    state.free_ram_mb = 8192 * cells
    state.num_instances = 0
    return state


def tree(state, pcpus=8, vcpus=8, memory=16384, traits=(), usages=None):
    return p.Tree(providers=(p.Provider(
        uuid=state.uuid, name=state.host, parent_uuid=None,
        inventories={'PCPU': p.Inventory(total=pcpus),
                     'VCPU': p.Inventory(total=vcpus, allocation_ratio=4.0),
                     'MEMORY_MB': p.Inventory(total=memory),
                     'DISK_GB': p.Inventory(total=1000)},
        usages=usages or {}, traits=frozenset(traits)),))


CELL1 = objects.CellMapping(uuid=uuids.cell1, name='cell1')
CELL2 = objects.CellMapping(uuid=uuids.cell2, name='cell2')


def aggregate(agg_id, name, hosts, **metadata):
    return objects.Aggregate(id=agg_id, uuid=getattr(uuids, name), name=name,
                             hosts=hosts, metadata=metadata)


PINNED2 = test_flavors.flavor('pin2', vcpus=2, memory_mb=1024,
                              **{'hw:cpu_policy': 'dedicated'})
PINNED4 = test_flavors.flavor('pin4', vcpus=4, memory_mb=1024,
                              **{'hw:cpu_policy': 'dedicated'})
SHARED = test_flavors.flavor('shared', vcpus=2, memory_mb=4096)
HUGE = test_flavors.flavor('huge', vcpus=64, memory_mb=1024)


class ComputeTestCase(test.NoDBTestCase):
    """compute() on hosts made here, sources and placement mocked."""

    def setUp(self):
        super().setUp()
        self.zone = aggregate(1, 'zone-a', ['h1'], availability_zone='az-a')
        self.pool = aggregate(2, 'pool', ['h1', 'h2'], pool='x')
        self.hosts = []
        self.trees = {}
        self.flavors = [PINNED2, PINNED4, SHARED]
        for name, cell, aggs in (('h1', CELL1, [self.zone, self.pool]),
                                 ('h2', CELL1, [self.pool]),
                                 ('h3', CELL2, [])):
            self.add_host(name, cell, aggs)
        self.useFixture(test.fixtures.MockPatchObject(
            sources, 'read_cloud', side_effect=lambda ctx: sources.Cloud(
                hosts=self.hosts, aggregates=[self.zone, self.pool],
                cells=[CELL1, CELL2])))
        self.useFixture(test.fixtures.MockPatchObject(
            sources, 'read_flavors',
            side_effect=lambda ctx, names=None: self.pick(names)))
        self.read_trees = self.useFixture(test.fixtures.MockPatchObject(
            service, '_read_trees',
            side_effect=lambda ctx, hosts: {
                h.uuid: self.trees[h.uuid] for h in hosts
                if h.uuid in self.trees})).mock

    def pick(self, names):
        if names is None:
            return list(self.flavors)
        by_name = {f.name: f for f in self.flavors}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise errors.UnknownFlavor('unknown flavor %r' % missing[0])
        return [by_name[n] for n in names]

    def add_host(self, name, cell, aggs, skipped=None, **tree_args):
        state = host_state(name)
        state.aggregates = aggs  # as HostState.update() sets them
        host = sources.Host(state=state, cell=cell, aggregates=aggs,
                            availability_zone=sources.host_availability_zone(
                                aggs), skipped=skipped)
        self.hosts.append(host)
        self.trees[state.uuid] = tree(state, **tree_args)
        return host

    def compute(self, **kwargs):
        return capacity.compute(mock.sentinel.context, **kwargs).to_dict()


class TestCompute(ComputeTestCase):

    def test_cloud(self):
        report = self.compute()
        self.assertEqual('cloud', report['by'])
        (scope,) = report['scopes']
        # 2 cells x 4 pinned CPUs per host: 4 x pin2, 2 x pin4 per host;
        # shared asks no NUMA topology: placement's 16 GiB make 4 per host
        self.assertEqual({'pin2': 12, 'pin4': 6, 'shared': 12},
                         scope['capacity'])
        self.assertEqual({'pin2': 12, 'pin4': 6, 'shared': 12},
                         scope['placement_only'])
        self.assertEqual('pin4', scope['largest_flavor'])
        self.assertEqual({'vcpus': 0, 'memory_mb': 0},
                         scope['fragmentation'])
        self.assertEqual(3, scope['hosts'])
        self.assertEqual(3, report['hosts_counted'])
        self.assertEqual({}, report['hosts_skipped'])
        self.assertEqual(0, report['engine_fallbacks'])
        self.assertEqual(
            [{'id': 'pin2', 'name': 'pin2', 'vcpus': 2, 'ram': 1024,
              'disk': 10}],
            self.compute(flavors=['pin2'])['flavors'])

    def test_report_layout(self):
        report = self.compute(by='az')
        self.assertEqual({'by', 'generated_at', 'flavors', 'scopes',
                          'hosts_counted', 'hosts_skipped',
                          'engine_fallbacks'}, set(report))
        stamp = datetime.datetime.strptime(report['generated_at'],
                                           '%Y-%m-%dT%H:%M:%SZ')
        self.assertIsNotNone(stamp)
        self.assertEqual({'scope', 'name', 'capacity', 'placement_only',
                          'largest_flavor', 'fragmentation', 'hosts'},
                         set(report['scopes'][0]))

    def test_by_az_aggregate_cell_host(self):
        def figures(report):
            return {s['name']: (s['capacity']['pin4'], s['hosts'])
                    for s in report['scopes']}
        self.assertEqual({'az-a': (2, 1), 'nova': (4, 2)},
                         figures(self.compute(by='az')))
        self.assertEqual({'zone-a': (2, 1), 'pool': (4, 2)},
                         figures(self.compute(by='aggregate')))
        self.assertEqual({'cell1': (4, 2), 'cell2': (2, 1)},
                         figures(self.compute(by='cell')))
        self.assertEqual({'h1': (2, 1), 'h2': (2, 1), 'h3': (2, 1)},
                         figures(self.compute(by='host')))

    def test_az_and_aggregate_select_hosts(self):
        report = self.compute(az='nova', by='cloud')
        self.assertEqual(2, report['hosts_counted'])
        self.assertEqual(4, report['scopes'][0]['capacity']['pin4'])
        report = self.compute(aggregate='pool', by='aggregate')
        self.assertEqual(['pool'], [s['name'] for s in report['scopes']])
        report = self.compute(aggregate='pool', az='az-a', by='cell')
        self.assertEqual([('cell1', 1)], [(s['name'], s['hosts'])
                                          for s in report['scopes']])
        for key in ('2', uuids.pool):
            self.assertEqual(2, self.compute(aggregate=key)['hosts_counted'])

    def test_unknown_scope_flavor_and_by(self):
        exc = self.assertRaises(errors.UnknownScope, self.compute,
                                az='az-x')
        self.assertIn("'az-x'", str(exc))
        self.assertIn('az-a, nova', str(exc))
        self.assertRaises(errors.UnknownScope, self.compute,
                          aggregate='nope')
        self.assertRaises(errors.UnknownScope, self.compute, by='rack')
        self.assertRaises(errors.UnknownFlavor, self.compute,
                          flavors=['nope'])
        self.pool2 = aggregate(3, 'pool', ['h3'])
        self.assertRaises(errors.UnknownScope, service.find_aggregate,
                          [self.pool, self.pool2], 'pool')
        self.assertIs(self.pool2, service.find_aggregate(
            [self.pool, self.pool2], '3'))

    def test_per_host(self):
        report = self.compute(by='az', per_host=True)
        self.assertEqual(['az', 'az', 'host', 'host', 'host'],
                         [s['scope'] for s in report['scopes']])
        report = self.compute(by='host', per_host=True)
        self.assertEqual(3, len(report['scopes']))

    def test_skipped_hosts(self):
        self.add_host('down', CELL1, [], skipped=sources.SKIP_SERVICE_DOWN)
        gone = self.add_host('gone', CELL1, [])
        del self.trees[gone.uuid]
        self.add_host('off', CELL2, [], traits={'COMPUTE_STATUS_DISABLED'})
        report = self.compute()
        self.assertEqual(3, report['hosts_counted'])
        self.assertEqual({'service_down': 1, 'no_resource_provider': 1,
                          'service_disabled': 1}, report['hosts_skipped'])
        # hosts outside the selection are not reported at all
        self.assertEqual({}, self.compute(az='az-a')['hosts_skipped'])
        # nothing live: placement is not asked
        self.read_trees.reset_mock()
        for host in self.hosts:
            host.skipped = sources.SKIP_SERVICE_DOWN
        self.assertEqual(0, self.compute()['hosts_counted'])
        self.read_trees.assert_not_called()

    def test_placement_bounds_the_numa_count(self):
        for host in self.hosts:
            self.trees[host.uuid] = tree(host.state, pcpus=5)
        self.flags(disable_fallback_pcpu_query=True, group='workarounds')
        report = self.compute(flavors=['pin2'])
        # NUMA: 4 per host; PCPU 5 // 2 = 2 per host
        self.assertEqual(6, report['scopes'][0]['capacity']['pin2'])
        # The scheduler's fallback query (VCPU for PCPU) is on by default:
        # placement then offers VCPU allocations for pinned guests too.
        self.flags(disable_fallback_pcpu_query=False, group='workarounds')
        report = self.compute(flavors=['pin2'])
        self.assertEqual(12, report['scopes'][0]['capacity']['pin2'])

    def test_a_storage_pool_is_counted_once_for_its_hosts(self):
        # Every host draws its disk from one sharing provider with room for
        # 7 instances of 10 GB: each host alone could take 7, the cloud 7.
        pool = p.Provider(uuid='pool', name='pool', parent_uuid=None,
                          inventories={'DISK_GB': p.Inventory(total=75)},
                          usages={'DISK_GB': 5},
                          traits=frozenset([p.SHARING_TRAIT]))
        for host in self.hosts:
            own = self.trees[host.uuid].root
            inventories = dict(own.inventories)
            del inventories['DISK_GB']
            self.trees[host.uuid] = p.Tree(
                providers=(own._replace(inventories=inventories),),
                sharing=(pool,))
        report = self.compute(flavors=['pin2', 'shared'], by='host')
        self.assertEqual([4, 4, 4],
                         [s['capacity']['pin2'] for s in report['scopes']])
        cloud = self.compute(flavors=['pin2', 'shared'])['scopes'][0]
        self.assertEqual({'pin2': 7, 'shared': 7}, cloud['capacity'])
        # os-capacity reads the hosts' own providers only
        self.assertEqual({'pin2': 0, 'shared': 0}, cloud['placement_only'])
        cells = {s['name']: s['capacity']['pin2']
                 for s in self.compute(flavors=['pin2'],
                                       by='cell')['scopes']}
        self.assertEqual({'cell1': 7, 'cell2': 4}, cells)

    def test_traits_per_flavor(self):
        gold = test_flavors.flavor('gold', vcpus=2, memory_mb=1024, **{
            'hw:cpu_policy': 'dedicated', 'trait:CUSTOM_GOLD': 'required'})
        self.flavors.append(gold)
        self.add_host('h4', CELL2, [], traits={'CUSTOM_GOLD'})
        report = self.compute(flavors=['gold'], by='host')
        self.assertEqual({'h1': 0, 'h2': 0, 'h3': 0, 'h4': 4},
                         {s['name']: s['capacity']['gold']
                          for s in report['scopes']})

    def test_largest_flavor_and_fragmentation(self):
        # h1's pinned CPUs are all taken: it takes none of the pinned
        # flavors, and SHARED is not counted here
        h1 = self.hosts[0]
        for cell in h1.state.numa_topology.cells:
            cell.pin_cpus(set(cell.pcpuset))
        self.trees[h1.uuid] = tree(h1.state, usages={
            'PCPU': 8, 'VCPU': 5, 'MEMORY_MB': 10000})
        report = self.compute(flavors=['pin2', 'pin4'], by='host')
        by_host = {s['name']: s for s in report['scopes']}
        self.assertIsNone(by_host['h1']['largest_flavor'])
        # VCPU 8 x 4.0 - 5 = 27 free, PCPU 0; MEMORY 16384 - 10000
        self.assertEqual({'vcpus': 27, 'memory_mb': 6384},
                         by_host['h1']['fragmentation'])
        self.assertEqual({'vcpus': 0, 'memory_mb': 0},
                         by_host['h2']['fragmentation'])
        cloud = self.compute(flavors=['pin2', 'pin4'])['scopes'][0]
        self.assertEqual({'vcpus': 27, 'memory_mb': 6384},
                         cloud['fragmentation'])
        self.assertEqual('pin4', cloud['largest_flavor'])

    def test_largest_is_by_vcpus_then_ram(self):
        flavors = [test_flavors.flavor('a', vcpus=4, memory_mb=100),
                   test_flavors.flavor('b', vcpus=2, memory_mb=9000),
                   test_flavors.flavor('c', vcpus=4, memory_mb=200)]
        self.assertEqual('c', service._largest(
            flavors, {'a': 1, 'b': 1, 'c': 1}))
        self.assertEqual('a', service._largest(
            flavors, {'a': 1, 'b': 1, 'c': 0}))
        self.assertIsNone(service._largest(flavors, {}))

    def test_a_flavor_too_large_fits_nowhere(self):
        self.flavors.append(HUGE)
        report = self.compute(flavors=['huge'])
        self.assertEqual({'huge': 0}, report['scopes'][0]['capacity'])

    def test_invalid_flavor_counts_zero(self):
        bad = test_flavors.flavor('bad', **{
            'hw:numa_nodes': '3', 'hw:numa_cpus.0': '0'})
        self.flavors.append(bad)
        report = self.compute(flavors=['bad'])
        self.assertEqual({'bad': 0}, report['scopes'][0]['capacity'])

    def test_engine_fallbacks_are_counted(self):
        emulator = test_flavors.flavor('emu', vcpus=2, memory_mb=1024, **{
            'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate',
            'hw:emulator_threads_policy': 'isolate'})
        self.flavors.append(emulator)
        report = self.compute(flavors=['emu', 'pin2'])
        self.assertEqual(3, report['engine_fallbacks'])
        self.flags(fit='nova', group='nova_sched_ext_capacity')
        nova = self.compute(flavors=['emu', 'pin2'])
        self.assertEqual(6, nova['engine_fallbacks'])
        self.assertEqual(report['scopes'], nova['scopes'])


class TestHostChecks(ComputeTestCase):

    def test_isolated_aggregates(self):
        self.zone.metadata['trait:CUSTOM_SECURE'] = 'required'
        secure = test_flavors.flavor('secure', vcpus=2, memory_mb=1024, **{
            'trait:CUSTOM_SECURE': 'required'})
        self.flavors.append(secure)
        by_host = lambda report: {s['name']: s['capacity']  # noqa: E731
                                  for s in report['scopes']}
        # off by default: h1 takes pin2
        self.assertEqual(4, by_host(self.compute(by='host'))['h1']['pin2'])
        self.flags(enable_isolated_aggregate_filtering=True,
                   group='scheduler')
        report = by_host(self.compute(by='host'))
        self.assertEqual(0, report['h1']['pin2'])
        self.assertEqual(4, report['h2']['pin2'])
        # the flavor requiring the trait may go there (placement still
        # wants the trait on the provider, which h1 lacks)
        self.trees[self.hosts[0].uuid] = tree(self.hosts[0].state,
                                              traits={'CUSTOM_SECURE'})
        self.assertGreater(by_host(self.compute(by='host'))['h1']['secure'],
                           0)

    def test_aggregate_instance_extra_specs_filter(self):
        pooled = test_flavors.flavor('pooled', vcpus=2, memory_mb=1024, **{
            'hw:cpu_policy': 'dedicated',
            'aggregate_instance_extra_specs:pool': 'x'})
        self.flavors.append(pooled)
        report = self.compute(flavors=['pooled'], by='host')
        self.assertEqual(3, sum(1 for s in report['scopes']
                                if s['capacity']['pooled']))
        self.flags(enabled_filters=['ComputeFilter',
                                    'AggregateInstanceExtraSpecsFilter'],
                   group='filter_scheduler')
        report = self.compute(flavors=['pooled'], by='host')
        self.assertEqual({'h1': 4, 'h2': 4, 'h3': 0},
                         {s['name']: s['capacity']['pooled']
                          for s in report['scopes']})

    def test_type_affinity_filter(self):
        self.pool.metadata['instance_type'] = 'pin4'
        self.flags(enabled_filters=['AggregateTypeAffinityFilter'],
                   group='filter_scheduler')
        report = self.compute(by='host')
        by_host = {s['name']: s['capacity'] for s in report['scopes']}
        self.assertEqual(0, by_host['h1']['pin2'])
        self.assertEqual(2, by_host['h1']['pin4'])
        self.assertEqual(4, by_host['h3']['pin2'])

    def test_num_instances_filters_cap_the_count(self):
        self.hosts[0].state.num_instances = 47
        self.flags(enabled_filters=['NumInstancesFilter'],
                   group='filter_scheduler')
        self.flags(max_instances_per_host=50, group='filter_scheduler')
        report = self.compute(flavors=['pin2'], by='host')
        self.assertEqual(3, report['scopes'][0]['capacity']['pin2'])
        self.flags(enabled_filters=['AggregateNumInstancesFilter'],
                   group='filter_scheduler')
        self.pool.metadata['max_instances_per_host'] = '48'
        report = self.compute(flavors=['pin2'], by='host')
        self.assertEqual({'h1': 1, 'h2': 4, 'h3': 4},
                         {s['name']: s['capacity']['pin2']
                          for s in report['scopes']})
