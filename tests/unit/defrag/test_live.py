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

"""The planner's cloud read from Nova's objects and placement.

The hosts are what the capacity count's reader gives (its own tests cover
reading them); here the instances of the cell databases, their groups and
hints and placement's allocations are Nova objects and a fake reader, and
the cloud the planner gets is checked field by field, with the reasons an
instance cannot move.  The functional test reads a real Nova.
"""

import types

from nova import context as nova_context
from nova import objects
from nova import test
from nova.tests.unit import fake_instance
from oslo_db import exception as db_exc
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.capacity import errors
from nova_sched_ext.capacity import sources
from nova_sched_ext.cloud import computes
from nova_sched_ext.cloud import placement
from nova_sched_ext.defrag import live
from nova_sched_ext.defrag import model
from nova_sched_ext.deployment_set import hints as ds_hints
from nova_sched_ext.preemption import extra_specs

CELL1 = objects.CellMapping(uuid=uuids.cell1, name='cell1', disabled=False)
PINNED = {'hw:cpu_policy': 'dedicated'}


def flavor(name, vcpus, memory_mb, specs=None):
    return objects.Flavor(flavorid=name, name=name, vcpus=vcpus,
                          memory_mb=memory_mb, root_gb=1, ephemeral_gb=0,
                          swap=0, extra_specs=dict(specs or {}))


def host_topology():
    cells = [objects.NUMACell(
        id=i, cpuset=set(), pcpuset={4 * i + c for c in range(4)},
        memory=2048, cpu_usage=0, memory_usage=0, pinned_cpus=set(),
        siblings=[], mempages=[objects.NUMAPagesTopology(
            size_kb=4, total=524288, used=0)], network_metadata=objects.
        NetworkMetadata(physnets=set(), tunneled=False)) for i in (0, 1)]
    return objects.NUMATopology(cells=cells)


def found_host(name, node_uuid, skipped=None, aggregates=()):
    state = types.SimpleNamespace(
        host=name, nodename=name, uuid=node_uuid,
        numa_topology=host_topology(), cpu_allocation_ratio=4.0,
        ram_allocation_ratio=1.5)
    return sources.Host(state=state, cell=CELL1,
                        aggregates=list(aggregates),
                        availability_zone='az1', skipped=skipped)


def instance(uuid, host, flavor_, vm_state='active', task_state=None,
             pci=0, cells=((0, {0: 1, 1: 2}),)):
    topology = objects.InstanceNUMATopology(cells=[
        objects.InstanceNUMACell(
            id=cell, cpuset=set(), pcpuset=set(pinning), memory=512,
            cpu_policy='dedicated', cpu_pinning=pinning)
        for cell, pinning in cells])
    row = fake_instance.fake_instance_obj(
        nova_context.get_admin_context(), uuid=uuid, host=host, node=host,
        vm_state=vm_state, task_state=task_state, project_id='project-1')
    # as InstanceList.get_by_filters loads them with expected_attrs
    row.flavor = flavor_
    row.numa_topology = topology
    row.system_metadata = {}
    row.pci_requests = objects.InstancePCIRequests(requests=[
        objects.InstancePCIRequest(count=1, alias_name='nic')] * pci)
    return row


class FakeReader(object):

    def __init__(self, allocations):
        self.allocations_ = allocations

    def trees(self, roots):
        inventories = {
            'PCPU': placement.Inventory(total=8, max_unit=8),
            'MEMORY_MB': placement.Inventory(total=4096, max_unit=4096)}
        return {root: placement.Tree(providers=(placement.Provider(
            uuid=root, name=root, parent_uuid=None,
            inventories=inventories,
            usages={'PCPU': 2 * len(self.allocations_.get(root, {}))},
            traits=frozenset()),)) for root in roots}

    def allocations(self, providers):
        return {p: self.allocations_.get(p, {}) for p in providers}


class TestReadCloud(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.hosts = [
            found_host('h1', uuids.cn1, aggregates=[objects.Aggregate(
                id=1, name='rack-a', hosts=['h1'],
                metadata={'rack': 'r1', 'filter_tenant_id': 'p1, p2'})]),
            found_host('h2', uuids.cn2, skipped=sources.SKIP_SERVICE_DISABLED),
        ]
        self.useFixture(test.fixtures.MockPatchObject(
            computes, 'read_cloud', side_effect=lambda ctx: sources.Cloud(
                hosts=self.hosts, aggregates=[], cells=[CELL1])))
        small = flavor('small.2', 2, 512, PINNED)
        spot = flavor('spot.2', 2, 512, dict(
            PINNED, **{extra_specs.PREEMPTIBLE_KEY: 'true'}))
        self.rows = [
            instance(uuids.ok, 'h1', small),
            instance(uuids.spot, 'h1', spot),
            instance(uuids.pci, 'h1', small, pci=1),
            instance(uuids.busy, 'h1', small, task_state='migrating'),
            instance(uuids.off, 'h1', small, vm_state='stopped'),
            instance(uuids.lost, 'h1', small),
            instance(uuids.on_disabled, 'h2', small),
        ]
        self.filters = []

        def get_by_filters(cctxt, filters, expected_attrs=None):
            self.filters.append((filters, expected_attrs))
            return [r for r in self.rows if r.host in filters['host']]
        self.useFixture(test.fixtures.MockPatchObject(
            objects.InstanceList, 'get_by_filters',
            side_effect=get_by_filters))
        self.answers = {}
        self.useFixture(test.fixtures.MockPatchObject(
            nova_context, 'scatter_gather_cells',
            side_effect=lambda ctx, cells, timeout, fn, *args: {
                c.uuid: self.answers.get(c.uuid) or fn(
                    types.SimpleNamespace(cell_uuid=c.uuid), *args)
                for c in cells}))
        self.groups = [
            objects.InstanceGroup(uuid=uuids.set, policy='anti-affinity',
                                  rules={'max_server_per_host': '2'},
                                  members=[uuids.ok, uuids.spot,
                                           uuids.elsewhere]),
            objects.InstanceGroup(uuid=uuids.empty, policy='affinity',
                                  rules={}, members=[uuids.elsewhere]),
        ]
        self.useFixture(test.fixtures.MockPatchObject(
            objects.InstanceGroupList, 'get_all',
            side_effect=lambda ctx: self.groups))
        hints = {uuids.ok: ds_hints.SetHints(strategy='partition',
                                             partition=1, max_size=None)}
        self.useFixture(test.fixtures.MockPatch(
            'nova_sched_ext.cloud.groups.member_hints',
            side_effect=lambda ctx, uuid: hints.get(uuid,
                                                    ds_hints.NO_HINTS)))
        resources = {'PCPU': 2, 'MEMORY_MB': 512, 'DISK_GB': 1}
        self.reader = FakeReader({
            uuids.cn1: {u: dict(resources) for u in (
                uuids.ok, uuids.spot, uuids.pci, uuids.busy, uuids.off)},
            uuids.cn2: {uuids.on_disabled: dict(resources)}})

    def read(self):
        return live.read_cloud(self.context, placement_reader=self.reader)

    def test_hosts(self):
        cloud = self.read()
        self.assertEqual({'h1', 'h2'}, set(cloud.hosts))
        h1, h2 = cloud.hosts['h1'], cloud.hosts['h2']
        self.assertIsNone(h1.disabled_reason)
        self.assertEqual('disabled', h2.disabled_reason)
        self.assertEqual(8, h1.inventories['PCPU'].total)
        self.assertEqual(10, h1.usages['PCPU'])
        self.assertEqual((4.0, 1.5), (h1.cpu_allocation_ratio,
                                      h1.ram_allocation_ratio))
        self.assertEqual('az1', h1.availability_zone)
        self.assertEqual(frozenset({'rack-a'}), h1.aggregates)
        self.assertEqual(frozenset({'p1', 'p2'}),
                         h1.aggregate_metadata['filter_tenant_id'])
        self.assertEqual(2, len(h1.numa_topology.cells))

    def test_instances_and_why_some_stay(self):
        cloud = self.read()
        self.assertEqual({r.uuid for r in self.rows}, set(cloud.instances))
        ok = cloud.instances[uuids.ok]
        self.assertIsNone(ok.unmovable)
        self.assertEqual(('h1', 'small.2', 2, 512, 'project-1'),
                         (ok.host, ok.flavor_name, ok.vcpus, ok.memory_mb,
                          ok.project_id))
        self.assertEqual({'PCPU': 2, 'MEMORY_MB': 512, 'DISK_GB': 1},
                         ok.resources)
        self.assertEqual({0: 1, 1: 2}, ok.numa_topology.cells[0].cpu_pinning)
        # what the move is fitted with: the flavor's request, not the cells
        # it has now
        self.assertEqual('dedicated',
                         ok.requested_topology.cells[0].cpu_policy)
        self.assertFalse(ok.requested_topology.cells[0].cpu_pinning)
        self.assertFalse(ok.preemptible)
        self.assertTrue(cloud.instances[uuids.spot].preemptible)
        unmovable = {u: i.unmovable for u, i in cloud.instances.items()}
        self.assertEqual(model.PCI_DEVICES, unmovable[uuids.pci])
        self.assertEqual('it has the task state migrating',
                         unmovable[uuids.busy])
        self.assertIn('it is stopped', unmovable[uuids.off])
        self.assertEqual('placement holds no allocation of it on its host',
                         unmovable[uuids.lost])
        # the planner keeps it where it is for its host's sake
        self.assertIsNone(unmovable[uuids.on_disabled])
        (filters, expected), = self.filters
        self.assertEqual({'host': ['h1', 'h2'], 'deleted': False}, filters)
        self.assertIn('numa_topology', expected)
        self.assertIn('pci_requests', expected)

    def test_the_hosts_a_move_touches(self):
        # what the executor reads again before a move: the hosts named,
        # their instances and groups; placement asked of them alone
        asked = []
        trees, allocations = self.reader.trees, self.reader.allocations
        self.reader.trees = lambda roots: asked.append(list(roots)) or \
            trees(roots)
        self.reader.allocations = lambda providers: asked.append(
            list(providers)) or allocations(providers)
        cloud = live.read_cloud(self.context, placement_reader=self.reader,
                                hosts=['h2'])
        self.assertEqual(['h2'], list(cloud.hosts))
        self.assertEqual([uuids.on_disabled], list(cloud.instances))
        self.assertEqual({}, cloud.groups)
        self.assertEqual([[uuids.cn2], [uuids.cn2]], asked)
        (filters, _expected), = self.filters
        self.assertEqual(['h2'], filters['host'])
        self.assertEqual(model.part_of(self.read(), ['h2']).instances.keys(),
                         cloud.instances.keys())

    def test_groups_and_deployment_sets(self):
        cloud = self.read()
        # a group with no member on a host is nothing the plan must keep
        self.assertEqual([uuids.set], list(cloud.groups))
        group = cloud.groups[uuids.set]
        self.assertEqual(('anti-affinity', 2, 'partition'),
                         (group.policy, group.max_server_per_host,
                          group.deployment_set_strategy))
        self.assertEqual(uuids.set, cloud.instances[uuids.ok].group)
        self.assertEqual(1, cloud.instances[uuids.ok].partition)
        self.assertIsNone(cloud.instances[uuids.spot].partition)
        self.assertIsNone(cloud.instances[uuids.pci].group)

    def test_preemptible_cap_and_aggregate_specs(self):
        self.flags(preemptible_max_per_host=3, group='nova_sched_ext')
        self.flags(enabled_filters=['AggregateInstanceExtraSpecsFilter'],
                   group='filter_scheduler')
        self.rows[0].flavor.extra_specs[
            'aggregate_instance_extra_specs:ssd'] = 'true'
        cloud = self.read()
        self.assertEqual(3, cloud.preemptible_max_per_host)
        self.assertEqual({'ssd': 'true'},
                         cloud.instances[uuids.ok].required_metadata)

    def test_a_cell_database_that_does_not_answer(self):
        self.answers[CELL1.uuid] = nova_context.did_not_respond_sentinel
        exc = self.assertRaises(errors.BackendUnavailable, self.read)
        self.assertEqual('the database of cell cell1 did not answer within '
                         '%d seconds' % nova_context.CELL_TIMEOUT, str(exc))

    def test_the_api_database_failing_on_groups(self):
        objects.InstanceGroupList.get_all.side_effect = \
            db_exc.DBConnectionError('(2003) Can\'t connect\nto server')
        exc = self.assertRaises(errors.BackendUnavailable, self.read)
        self.assertTrue(str(exc).startswith(
            'cannot read the API database (server groups): '), exc)
        self.assertNotIn('\n', str(exc))

    def test_placement_unreachable(self):
        def trees(roots):
            raise errors.BackendUnavailable('cannot reach placement: '
                                            'connection refused')
        self.reader.trees = trees
        exc = self.assertRaises(errors.BackendUnavailable, self.read)
        self.assertEqual('cannot reach placement: connection refused',
                         str(exc))

    def test_scope_checks_name_what_is_missing(self):
        cloud = self.read()
        for scope, words in (
                (model.Scope(availability_zone='az9'), 'availability zone '
                 'az9'),
                (model.Scope(aggregate='rack-z'), 'aggregate named rack-z'),
                (model.Scope(hosts=frozenset({'h1', 'h9'})), 'named h9')):
            exc = self.assertRaises(model.PlanError, scope.check, cloud)
            self.assertIn(words, str(exc))
        model.Scope(aggregate='rack-a', hosts=frozenset({'h1'})).check(cloud)


class TestReferenceFlavors(test.NoDBTestCase):

    def test_the_weighers_by_default_or_the_named_ones(self):
        context = nova_context.get_admin_context()
        big = flavor('big.8', 8, 1024, dict(PINNED, **{'hw:numa_nodes': '2'}))
        self.flags(numa_slot_reference_flavors=['big.8'],
                   group='nova_sched_ext')
        self.useFixture(test.fixtures.MockPatchObject(
            objects.Flavor, 'get_by_name', return_value=big))
        requests = live.reference_flavors(context)
        self.assertEqual(['big.8'], [r.name for r in requests])
        self.assertEqual(2, len(requests[0].instance_topology.cells))
        objects.Flavor.get_by_name.assert_called_once_with(context, 'big.8')
        named = live.reference_flavors(context, ['big.8'])
        self.assertEqual(['big.8'], [r.name for r in named])
