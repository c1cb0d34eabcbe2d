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

"""DatabaseMemberSource on Nova's own API and cell databases.

Nova's ``test.TestCase`` gives an API database, cell0 and two cells
(sqlite); groups, mappings, request specs, instances, compute nodes and
aggregates are written there as Nova writes them.  Only placement is a
mock.
"""

from unittest import mock

from keystoneauth1 import exceptions as ks_exc
from nova.compute import task_states
from nova.compute import vm_states
from nova import context as nova_context
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.unit.scheduler import fakes
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.deployment_set import hints as ds_hints
from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import rules
from nova_sched_ext.filters import deployment_set

PROJECT = 'project'
USER = 'user'


class DatabaseMemberSourceTest(test.TestCase):

    NUMBER_OF_CELLS = 2

    def setUp(self):
        super().setUp()
        self.flags(deployment_set_domain_key='failure_domain',
                   group='nova_sched_ext')
        self.ctxt = nova_context.get_admin_context()
        self.group = objects.InstanceGroup(
            self.ctxt, user_id=USER, project_id=PROJECT, name='set',
            policy='anti-affinity', rules={})
        self.group.create()
        self.allocations = {}
        self.placement = mock.Mock()
        self.placement.get_allocs_for_consumer.side_effect = \
            lambda ctxt, consumer: {
                'allocations': self.allocations.get(consumer, {})}
        self.useFixture(fixtures_patch(report, 'report_client_singleton',
                                       return_value=self.placement))
        self.source = members.DatabaseMemberSource()
        self.nodes = {}

    # -- writing Nova's records ---------------------------------------------

    def cell(self, name):
        return self.cell_mappings[name]

    def member(self, uuid, cell='cell1', host=None, hints=None,
               vm_state=vm_states.ACTIVE, task_state=None,
               queued_for_delete=False, in_cell=True):
        """A member as Nova records it; ``cell=None``: a build request."""
        objects.InstanceGroup.add_members(self.ctxt, self.group.uuid, [uuid])
        cell_mapping = self.cell(cell) if cell else None
        objects.InstanceMapping(
            self.ctxt, instance_uuid=uuid, project_id=PROJECT, user_id=USER,
            cell_mapping=cell_mapping,
            queued_for_delete=queued_for_delete).create()
        if hints is not None:
            objects.RequestSpec(
                self.ctxt, instance_uuid=uuid, project_id=PROJECT,
                user_id=USER, num_instances=1, scheduler_hints={
                    k: [str(v)] for k, v in hints.items()},
                flavor=objects.Flavor(extra_specs={}),
                image=objects.ImageMeta(properties=objects.ImageMetaProps()),
            ).create()
        if cell_mapping is not None and in_cell:
            with nova_context.target_cell(self.ctxt, cell_mapping) as cctxt:
                objects.Instance(
                    cctxt, uuid=uuid, project_id=PROJECT, user_id=USER,
                    host=host, node=host, compute_id=1 if host else None,
                    vm_state=vm_state,
                    task_state=task_state).create()
        return uuid

    def compute_node(self, host, cell='cell1'):
        node_uuid = getattr(uuids, 'node_' + host)
        with nova_context.target_cell(self.ctxt, self.cell(cell)) as cctxt:
            objects.ComputeNode(
                cctxt, uuid=node_uuid, host=host, vcpus=4, memory_mb=4096,
                local_gb=10, vcpus_used=0, memory_mb_used=0, local_gb_used=0,
                hypervisor_type='fake', hypervisor_version=1,
                hypervisor_hostname=host, free_ram_mb=4096, free_disk_gb=10,
                current_workload=0, running_vms=0, cpu_info='{}',
                disk_available_least=10, host_ip='10.0.0.1',
                supported_hv_specs=[], stats={}, cpu_allocation_ratio=1.0,
                ram_allocation_ratio=1.0, disk_allocation_ratio=1.0).create()
        self.nodes[host] = node_uuid
        return node_uuid

    def claim(self, instance_uuid, *node_uuids):
        self.allocations[instance_uuid] = {
            node: {'resources': {'VCPU': 1}} for node in node_uuids}

    def spec(self, hints=None, instance_uuid=uuids.new):
        group = objects.InstanceGroup.get_by_uuid(self.ctxt, self.group.uuid)
        group.hosts = []
        return objects.RequestSpec(
            instance_uuid=instance_uuid, num_instances=1,
            scheduler_hints={k: [str(v)] for k, v in (hints or {}).items()},
            instance_group=group)

    def load(self, hints=None, instance_uuid=uuids.new, own=(),
             host_states=()):
        spec_obj = self.spec(hints, instance_uuid)
        request = members.Request(instance_uuid, own,
                                  ds_hints.parse(spec_obj.scheduler_hints),
                                  host_states)
        return self.source.load(spec_obj, request)

    @staticmethod
    def by_uuid(snapshot):
        return {m.uuid: m for m in snapshot.members}

    # -- tests ---------------------------------------------------------------

    def test_members_hosts_and_hints_across_cells(self):
        self.member(uuids.m1, 'cell1', 'h1', {
            'deployment_set_strategy': 'partition',
            'deployment_set_partition': 2,
            'deployment_set_max_size': 5})
        self.member(uuids.m2, 'cell2', 'h2', {
            'deployment_set_strategy': 'partition',
            'deployment_set_partition': 0})
        snapshot = self.load({'deployment_set_strategy': 'partition',
                              'deployment_set_partition': 1})
        found = self.by_uuid(snapshot)
        self.assertEqual(rules.Member(uuids.m1, ('h1',), 2, 'partition', 5),
                         found[uuids.m1])
        self.assertEqual(rules.Member(uuids.m2, ('h2',), 0, 'partition'),
                         found[uuids.m2])
        self.assertEqual('anti-affinity', snapshot.policy)
        self.assertEqual(1, snapshot.max_server_per_host)
        self.assertFalse(snapshot.moving)
        self.assertEqual('partition', snapshot.strategy)
        self.assertEqual(5, snapshot.max_size)
        self.placement.get_allocs_for_consumer.assert_not_called()

    def test_group_rule_is_read_afresh(self):
        group = objects.InstanceGroup(
            self.ctxt, user_id=USER, project_id=PROJECT, name='x',
            policy='anti-affinity', rules={'max_server_per_host': 3})
        group.create()
        self.group = group
        snapshot = self.load({'deployment_set_strategy': 'partition',
                              'deployment_set_partition': 0})
        self.assertEqual(3, snapshot.max_server_per_host)

    def test_plain_group_stops_after_the_hints(self):
        self.member(uuids.m1, 'cell1', 'h1', {})
        with mock.patch.object(nova_context, 'scatter_gather_cells') as sg:
            snapshot = self.load()
        sg.assert_not_called()
        self.assertEqual((), snapshot.members)
        self.assertIsNone(snapshot.strategy)

    def test_a_member_with_a_strategy_makes_it_a_set(self):
        self.member(uuids.m1, 'cell1', 'h1',
                    {'deployment_set_strategy': 'domain'})
        snapshot = self.load()
        self.assertEqual('domain', snapshot.strategy)
        self.assertEqual(('h1',), snapshot.members[0].hosts)

    def test_deleted_members_do_not_count(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.gone, 'cell1', 'h1', hints, queued_for_delete=True)
        self.member(uuids.half_gone, 'cell1', 'h2', hints, in_cell=False)
        self.member(uuids.alive, 'cell1', 'h3', hints)
        snapshot = self.load(hints)
        self.assertEqual([uuids.alive], list(self.by_uuid(snapshot)))

    def test_failed_build_in_cell0_counts_without_a_host(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.failed, 'cell0', None, hints,
                    vm_state=vm_states.ERROR)
        snapshot = self.load(hints)
        self.assertEqual((), self.by_uuid(snapshot)[uuids.failed].hosts)

    def test_build_request_claimed_in_placement(self):
        # Another request's scheduler has just claimed h2 for this member;
        # the conductor has not created the instance in a cell yet.
        hints = {'deployment_set_strategy': 'domain'}
        self.member(uuids.claimed, None, None, hints)
        self.member(uuids.queued, None, None, hints)
        candidate = fakes.FakeHostState('h2', 'h2', {
            'uuid': uuids.node_h2, 'aggregates': []})
        self.claim(uuids.claimed, uuids.node_h2)
        snapshot = self.load(hints, host_states=[candidate])
        found = self.by_uuid(snapshot)
        self.assertEqual(('h2',), found[uuids.claimed].hosts)
        # Not scheduled yet: holds nothing, and does not count yet.
        self.assertNotIn(uuids.queued, found)

    def test_building_without_host_uses_placement_and_compute_nodes(self):
        hints = {'deployment_set_strategy': 'domain'}
        node = self.compute_node('h5', 'cell2')
        self.member(uuids.building, 'cell1', None, hints,
                    vm_state=vm_states.BUILDING,
                    task_state=task_states.SCHEDULING)
        # A nested provider (a PCI device) is not a compute node.
        self.claim(uuids.building, node, uuids.nested_pci_rp)
        snapshot = self.load(hints)
        self.assertEqual(('h5',), self.by_uuid(snapshot)[uuids.building].hosts)

    def test_member_in_the_middle_of_a_resize_holds_both_hosts(self):
        hints = {'deployment_set_strategy': 'host'}
        self.compute_node('h9')
        self.member(uuids.resizing, 'cell1', 'h1', hints,
                    task_state=task_states.RESIZE_MIGRATING)
        self.claim(uuids.resizing, self.nodes['h9'])
        snapshot = self.load(hints)
        self.assertEqual(('h1', 'h9'),
                         self.by_uuid(snapshot)[uuids.resizing].hosts)

    def test_shelved_offloaded_member_holds_nothing(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.shelved, 'cell1', None, hints,
                    vm_state=vm_states.SHELVED_OFFLOADED)
        snapshot = self.load(hints)
        self.assertEqual((), self.by_uuid(snapshot)[uuids.shelved].hosts)
        self.placement.get_allocs_for_consumer.assert_not_called()

    def test_the_moving_instance_is_not_a_member(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.mover, 'cell1', 'h1', hints)
        self.member(uuids.other, 'cell1', 'h2', hints)
        snapshot = self.load(hints, instance_uuid=uuids.mover)
        self.assertTrue(snapshot.moving)
        self.assertEqual([uuids.other], list(self.by_uuid(snapshot)))

    def test_unshelve_is_a_move(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.mover, 'cell1', None, hints,
                    vm_state=vm_states.SHELVED_OFFLOADED,
                    task_state=task_states.UNSHELVING)
        snapshot = self.load(hints, instance_uuid=uuids.mover)
        self.assertTrue(snapshot.moving)

    def test_a_new_instance_is_not_a_move(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.new, None, None, hints)
        snapshot = self.load(hints, instance_uuid=uuids.new)
        self.assertFalse(snapshot.moving)
        self.assertEqual((), snapshot.members)

    def test_instances_of_the_request_are_skipped(self):
        hints = {'deployment_set_strategy': 'host'}
        for uuid in (uuids.new, uuids.new2, uuids.new3):
            self.member(uuid, None, None, hints)
        self.load(hints, own=(uuids.new, uuids.new2, uuids.new3))
        self.placement.get_allocs_for_consumer.assert_not_called()

    def test_hints_are_read_once_per_member(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.m1, 'cell1', 'h1', hints)
        self.member(uuids.m2, 'cell1', 'h2', hints)
        with mock.patch.object(objects.RequestSpec, 'get_by_instance_uuid',
                               wraps=objects.RequestSpec.get_by_instance_uuid
                               ) as get:
            self.load(hints)
            self.load(hints)
            self.member(uuids.m3, 'cell1', 'h3', hints)
            self.load(hints)
        self.assertEqual(3, get.call_count)

    def test_member_without_request_spec(self):
        self.member(uuids.old, 'cell1', 'h1', hints=None)
        snapshot = self.load({'deployment_set_strategy': 'host'})
        self.assertEqual(rules.Member(uuids.old, ('h1',)),
                         snapshot.members[0])

    def test_placement_failure(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.claimed, None, None, hints)
        self.placement.get_allocs_for_consumer.side_effect = \
            ks_exc.ConnectFailure('placement is down')
        exc = self.assertRaises(members.MembersUnavailable, self.load, hints)
        self.assertIn('placement did not tell the allocations of member %s'
                      % uuids.claimed, str(exc))

    def test_cell_failure(self):
        hints = {'deployment_set_strategy': 'host'}
        self.member(uuids.m1, 'cell2', 'h1', hints)
        with mock.patch.object(
                nova_context, 'scatter_gather_cells',
                return_value={self.cell('cell2').uuid:
                              nova_context.did_not_respond_sentinel}):
            exc = self.assertRaises(members.MembersUnavailable, self.load,
                                    hints)
        self.assertIn('cell cell2', str(exc))
        self.assertIn('did not answer', str(exc))

    def test_group_deleted_meanwhile(self):
        spec_obj = self.spec({'deployment_set_strategy': 'host'})
        self.group.destroy()
        request = members.Request(uuids.new, (), ds_hints.parse(
            spec_obj.scheduler_hints))
        self.assertRaises(members.MembersUnavailable, self.source.load,
                          spec_obj, request)

    def test_resolve_domains_from_aggregates(self):
        for name, hosts, metadata in (
                ('rack-a', ['h1', 'h2'], {'failure_domain': 'rack-a'}),
                ('rack-b', ['h3'], {'failure_domain': 'rack-b, pdu-1'}),
                ('ssd', ['h1', 'h4'], {'ssd': 'true'})):
            agg = objects.Aggregate(self.ctxt, name=name, metadata=metadata)
            agg.create()
            for host in hosts:
                agg.add_host(host)
        self.assertEqual(
            {'h1': frozenset(['rack-a']), 'h3': frozenset(['rack-b',
                                                           'pdu-1']),
             'h4': frozenset([('host', 'h4')])},
            self.source.resolve_domains(['h1', 'h3', 'h4']))

    def test_filter_on_the_database(self):
        """The filter and this source, end to end, on a domain set."""
        agg = objects.Aggregate(self.ctxt, name='rack-a',
                                metadata={'failure_domain': 'rack-a'})
        agg.create()
        agg.add_host('a1')
        agg.add_host('a2')
        hints = {'deployment_set_strategy': 'domain'}
        # The member sits on a2, a full host placement did not offer.
        self.member(uuids.m1, 'cell1', 'a2', hints)
        self.member(uuids.new, None, None, hints)
        candidates = [fakes.FakeHostState(h, h, {
            'uuid': getattr(uuids, h),
            'aggregates': [agg] if h == 'a1' else []})
            for h in ('a1', 'b1')]
        filt = deployment_set.DeploymentSetFilter()
        kept = filt.filter_all(candidates, self.spec(hints))
        self.assertEqual(['b1'], [h.host for h in kept])


def fixtures_patch(module, name, **kwargs):
    import fixtures
    return fixtures.MockPatchObject(module, name, **kwargs)
