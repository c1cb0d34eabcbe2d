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

"""The kept host state against a full reload, on real cell databases.

Two cells on Nova's sqlite database fixtures, compute services and nodes
with NUMA topologies and PCI pools written through Nova's objects, and two
managers over them: Nova's ``HostManager`` (a full reload on every
request) and :class:`~nova_sched_ext.host_state.KeptHostManager`. After
every step of a random sequence (compute node updates, with the clock
frozen or moving; claims made on the kept manager's host states, as the
scheduler makes them; instance updates, deletes and syncs; services
disabled, forced down, heartbeats; aggregates changed and deleted; nodes
deleted and created) both answer the same requests, and every field of
every ``HostState`` the filters and weighers read must be equal.
"""

import datetime
import random
from unittest import mock

import fixtures

from nova import context as nova_context
from nova.db.main import api as main_db_api
from nova import objects
from nova.objects import fields
from nova.scheduler import host_manager
from nova import test
from oslo_utils import timeutils
from oslo_utils import uuidutils

from nova_sched_ext.fit import adapters as fit_adapters
from nova_sched_ext import host_state
from tests import base

#: fields whose values are Nova objects, compared as primitives
_OBJECT_FIELDS = ('numa_topology', 'metrics')
PCI_VENDOR = '8086'


def _topology(rng, cells=2):
    result = []
    for cell_id in range(cells):
        first = cell_id * 8
        cpuset = set(range(first, first + 4))
        pcpuset = set(range(first + 4, first + 8))
        pinned = set(rng.sample(sorted(pcpuset), rng.randint(0, 2)))
        result.append(objects.NUMACell(
            id=cell_id, cpuset=cpuset, pcpuset=pcpuset,
            memory=8192, cpu_usage=rng.randint(0, 4),
            memory_usage=rng.choice([0, 1024, 2048]), socket=cell_id,
            pinned_cpus=pinned,
            mempages=[
                objects.NUMAPagesTopology(size_kb=4, total=1048576,
                                          used=0, reserved=0),
                objects.NUMAPagesTopology(size_kb=2048, total=1024,
                                          used=rng.randint(0, 512),
                                          reserved=0)],
            siblings=[{cpu, cpu + 1} for cpu in range(first, first + 8, 2)],
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False)))
    return objects.NUMATopology(cells=result)


def _pci_pools(rng):
    return objects.PciDevicePoolList(objects=[
        objects.PciDevicePool(product_id='0001', vendor_id=PCI_VENDOR,
                              numa_node=node, count=rng.randint(0, 3),
                              tags={'dev_type': 'type-PCI'})
        for node in (0, 1)])


def _usage(compute, rng):
    compute.vcpus_used = rng.randint(0, 16)
    compute.memory_mb_used = rng.randint(512, 16384)
    compute.free_ram_mb = compute.memory_mb - compute.memory_mb_used
    compute.local_gb_used = rng.randint(0, 500)
    compute.free_disk_gb = compute.local_gb - compute.local_gb_used
    compute.disk_available_least = compute.free_disk_gb - rng.randint(0, 5)
    compute.running_vms = rng.randint(0, 6)
    compute.stats = {'num_instances': str(compute.running_vms),
                     'io_workload': str(rng.randint(0, 3)),
                     'failed_builds': str(rng.randint(0, 1))}
    compute.numa_topology = _topology(rng)._to_json()
    compute.pci_device_pools = _pci_pools(rng)


class TestKeptHostState(test.TestCase):

    NUMBER_OF_CELLS = 2

    def setUp(self):
        super().setUp()
        self.flags(track_instance_changes=True, group='filter_scheduler')
        self.ctxt = nova_context.get_admin_context()
        self.cells = [self.cell_mappings['cell1'],
                      self.cell_mappings['cell2']]
        self.number = 0
        self.computes = {}      # uuid -> (cell, ComputeNode)
        self.services = {}      # host -> (cell, Service)
        self.instances = {}     # host -> set of instance uuids
        self.aggregates = []
        self.rng = random.Random(7)
        for _ in range(6):
            self._new_node()
        # What the bench and a running cloud do: the computes tell the
        # scheduler about their instances, no asynchronous bulk load.
        with mock.patch.object(host_manager.HostManager,
                               '_init_instance_info'):
            self.stock = host_manager.HostManager()
            self.kept = host_state.KeptHostManager()
        self.managers = (self.stock, self.kept)

    # -- the cloud --------------------------------------------------------

    def _new_node(self):
        self.number += 1
        cell = self.cells[self.number % 2]
        host = 'host%d' % self.number
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            service = objects.Service(cctxt, host=host,
                                      binary='nova-compute',
                                      topic='compute', report_count=0)
            service.create()
            compute = objects.ComputeNode(
                cctxt, uuid=uuidutils.generate_uuid(), host=host,
                hypervisor_hostname=host + '.node', service_id=service.id,
                vcpus=16, memory_mb=32768, local_gb=1000,
                hypervisor_type='QEMU', hypervisor_version=8002000,
                cpu_info='{}', host_ip='10.0.0.%d' % self.number,
                supported_hv_specs=[objects.HVSpec(
                    arch=fields.Architecture.X86_64,
                    hv_type=fields.HVType.KVM,
                    vm_mode=fields.VMMode.HVM)],
                metrics='[]', current_workload=0,
                cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0,
                disk_allocation_ratio=1.0)
            _usage(compute, self.rng)
            compute.create()
        objects.HostMapping(self.ctxt, host=host, cell_mapping=cell).create()
        self.computes[compute.uuid] = (cell, compute)
        self.services[host] = (cell, service)
        self.instances[host] = set()
        return compute

    def _states(self, manager, uuids, spec=None):
        return {(s.host, s.nodename): s for s in
                manager.get_host_states_by_uuids(self.ctxt, uuids, spec)}

    def _requested_uuids(self):
        uuids = list(self.computes)
        if self.rng.random() < 0.2:
            # Nova without placement (a rebuild) asks for every node.
            return None
        # Placement may still list a node deleted a moment ago.
        uuids.append(uuidutils.generate_uuid())
        self.rng.shuffle(uuids)
        return uuids[:self.rng.randint(1, len(uuids))]

    # -- the comparison ---------------------------------------------------

    @staticmethod
    def _fields(state):
        result = {}
        for name, value in vars(state).items():
            if (name.startswith('_kept') or
                    name.startswith(host_state.SHARED_CACHE_PREFIX)):
                continue
            if name in _OBJECT_FIELDS:
                value = (value.obj_to_primitive() if value is not None
                         else None)
            elif name == 'pci_stats':
                value = (value.pools,
                         value.numa_topology.obj_to_primitive()
                         if value.numa_topology else None)
            elif name == 'service':
                value = dict(value)
            elif name == 'aggregates':
                value = sorted((a.id, a.name, sorted(a.hosts),
                                sorted(a.metadata.items()))
                               for a in value)
            elif name == 'instances':
                value = sorted(value)
            result[name] = value
        return result

    def differences(self, uuids):
        """What the kept state gets wrong, compared with a full reload."""
        expected = self._states(self.stock, uuids)
        got = self._states(self.kept, uuids)
        problems = []
        if set(expected) != set(got):
            problems.append('hosts: reload %s, kept %s'
                            % (sorted(expected), sorted(got)))
        for key in set(expected) & set(got):
            want, have = self._fields(expected[key]), self._fields(got[key])
            for name in sorted(set(want) | set(have)):
                if want.get(name, '<unset>') != have.get(name, '<unset>'):
                    problems.append('%s %s: reload %r, kept %r' % (
                        key, name, want.get(name), have.get(name)))
        return problems

    #: poll the rows before each comparison (kept candidates' mode)
    polled = False

    def assertSameAsReload(self, step):
        if self.polled:
            self.kept.poll_rows(self.ctxt)
        uuids = self._requested_uuids()
        problems = self.differences(uuids)
        self.assertEqual([], problems, 'after %s' % step)

    # -- the steps --------------------------------------------------------

    def _compute(self):
        uuid = self.rng.choice(sorted(self.computes))
        return self.computes[uuid]

    def step_update_node(self, uuid=None):
        cell, compute = self.computes[uuid] if uuid else self._compute()
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            compute._context = cctxt
            _usage(compute, self.rng)
            if self.rng.random() < 0.3:
                compute.cpu_allocation_ratio = self.rng.choice([2.0, 4.0])
            compute.save()

    def step_claim(self):
        """A request's claim on the kept manager's states, as Nova makes it.

        Nova's manager consumes from the chosen host, the filters set
        limits and the allocation candidates, a failed multi-create resets
        ``updated``; none of it may reach the next request.
        """
        # Both managers' states take the same claim: Nova's manager also
        # records the instance in the host's instance list, which is the
        # manager's own (_instance_info) and so outlives the request.
        by_manager = [self._states(manager, None)
                      for manager in self.managers]
        for states in by_manager:
            for state in states.values():
                state.limits['numa_topology'] = objects.NUMATopologyLimits(
                    cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0)
                state.allocation_candidates = [{'mappings': {}}]
        key = self.rng.choice(sorted(by_manager[1]))
        pinned = self.rng.random() < 0.5
        spec = objects.RequestSpec(
            flavor=objects.Flavor(root_gb=10, ephemeral_gb=0,
                                  memory_mb=1024, vcpus=2, swap=0,
                                  extra_specs={}),
            requested_resources=[],
            numa_topology=objects.InstanceNUMATopology(cells=[
                objects.InstanceNUMACell(
                    id=0, cpuset=set() if pinned else {0, 1},
                    pcpuset={0, 1} if pinned else set(), memory=1024,
                    cpu_policy=(fields.CPUAllocationPolicy.DEDICATED
                                if pinned else
                                fields.CPUAllocationPolicy.SHARED))]),
            pci_requests=objects.InstancePCIRequests(requests=[
                objects.InstancePCIRequest(
                    count=1, spec=[{'vendor_id': PCI_VENDOR}],
                    request_id=uuidutils.generate_uuid())]
                if self.rng.random() < 0.5 else []))
        instance_uuid = uuidutils.generate_uuid()
        reset = self.rng.random() < 0.3
        for states in by_manager:
            chosen = states[key]
            chosen.consume_from_request(spec.obj_clone())
            chosen.instances.setdefault(instance_uuid, objects.Instance(
                uuid=instance_uuid))
            if reset:
                chosen.updated = None

    def step_instances(self):
        host = self.rng.choice(sorted(self.instances))
        cell, _service = self.services[host]
        known = self.instances[host]
        action = self.rng.choice(['add', 'delete', 'sync', 'sync_wrong'])
        if action == 'add' or not known:
            inst_uuid = uuidutils.generate_uuid()
            with nova_context.target_cell(self.ctxt, cell) as cctxt:
                objects.Instance(cctxt, uuid=inst_uuid, host=host,
                                 project_id='p', user_id='u').create()
            known.add(inst_uuid)
            for manager in self.managers:
                manager.update_instance_info(
                    self.ctxt, host, objects.InstanceList(objects=[
                        objects.Instance(uuid=inst_uuid, host=host)]))
        elif action == 'delete':
            inst_uuid = known.pop()
            with nova_context.target_cell(self.ctxt, cell) as cctxt:
                main_db_api.instance_destroy(cctxt, inst_uuid)
            for manager in self.managers:
                manager.delete_instance_info(self.ctxt, host, inst_uuid)
        else:
            sent = sorted(known)
            if action == 'sync_wrong':
                # Out of sync: both re-create the host's list from the DB.
                sent.append(uuidutils.generate_uuid())
            for manager in self.managers:
                manager.sync_instance_info(self.ctxt, host, sent)

    def step_service(self):
        host = self.rng.choice(sorted(self.services))
        cell, service = self.services[host]
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            service._context = cctxt
            action = self.rng.choice(['disable', 'force_down', 'beat'])
            if action == 'disable':
                service.disabled = not service.disabled
                service.disabled_reason = 'test' if service.disabled else None
            elif action == 'force_down':
                service.forced_down = not service.forced_down
            else:
                service.report_count += 1
                service.last_seen_up = timeutils.utcnow(with_timezone=True)
            service.save()

    def step_aggregate(self):
        if self.aggregates and self.rng.random() < 0.3:
            agg = self.aggregates.pop(self.rng.randrange(len(self.aggregates)))
            # As Nova's API requires: the hosts out first.
            for host in list(agg.hosts):
                agg.delete_host(host)
            agg.destroy()
            for manager in self.managers:
                manager.delete_aggregate(agg)
            return
        if not self.aggregates or self.rng.random() < 0.4:
            agg = objects.Aggregate(self.ctxt, name='agg%d' % self.number,
                                    metadata={'k': 'v'})
            self.number += 1
            agg.create()
            self.aggregates.append(agg)
        agg = self.rng.choice(self.aggregates)
        host = self.rng.choice(sorted(self.services))
        if host in agg.hosts:
            agg.delete_host(host)
        else:
            agg.add_host(host)
        agg.update_metadata({'k': str(self.rng.randint(0, 9))})
        for manager in self.managers:
            manager.update_aggregates([agg])

    def step_delete_node(self, uuid=None):
        if uuid is None and len(self.computes) <= 2:
            return self.step_new_node()
        uuid = uuid or self.rng.choice(sorted(self.computes))
        cell, compute = self.computes.pop(uuid)
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            compute._context = cctxt
            compute.destroy()

    def step_new_node(self):
        self._new_node()

    def _freeze_clock(self):
        """Nova's and the database's clock, moved by the test only."""
        clock = [datetime.datetime.utcnow()]

        def utcnow(with_timezone=False):
            if with_timezone:
                return clock[0].replace(tzinfo=datetime.timezone.utc)
            return clock[0]
        # oslo.utils' own utcnow carries override_time, which code that
        # Nova 31 runs reads (its dogpile cache of EC2 ids): the stand-in
        # says no override, as the real one does.
        utcnow.override_time = None
        self.useFixture(fixtures.MockPatchObject(timeutils, 'utcnow',
                                                 utcnow))
        return clock

    STEPS = (('update_node', 5), ('claim', 4), ('instances', 3),
             ('service', 3), ('aggregate', 2), ('delete_node', 1),
             ('new_node', 1))

    def _run(self, seed, steps, frozen_share):
        self.rng = random.Random(seed)
        names = [name for name, weight in self.STEPS for _ in range(weight)]
        clock = self._freeze_clock()
        self.assertSameAsReload('the start')
        for number in range(steps):
            if self.rng.random() >= frozen_share:
                # Time moves (by less than the margin, at times).
                clock[0] += datetime.timedelta(
                    seconds=self.rng.choice([0.2, 1, 5, 40]))
            name = self.rng.choice(names)
            getattr(self, 'step_' + name)()
            self.assertSameAsReload('step %d (%s), seed %d'
                                    % (number, name, seed))

    def test_random_sequences_equal_a_full_reload(self):
        # A randomized property test: its number of sequences follows the
        # property tests' budget (2 in CI, 4 by default, 66 in tox -e fuzz).
        for seed in range(base.hypothesis_examples(1 / 150, 2)):
            self._run(seed, 60, frozen_share=0.3)

    def test_frozen_clock_equals_a_full_reload(self):
        # Every save in the same instant: updated_at never moves, so only
        # the margin makes the kept manager read the rows again.
        self._run(11, 40, frozen_share=1.0)

    def test_polled_rows_equal_a_full_reload_after_each_poll(self):
        # [nova_sched_ext] kept_candidates: the rows come from the kept
        # state's poll; once polled, the state is a full reload's.
        self.polled = True
        self._run(5, 60, frozen_share=0.3)

    def test_polled_rows_spare_the_requests_their_reads(self):
        self._freeze_clock()
        self.kept.poll_rows(self.ctxt)
        uuids = sorted(self.computes)
        with mock.patch.object(host_state, '_node_stamps',
                               wraps=host_state._node_stamps) as stamps, \
                mock.patch.object(host_state, '_service_rows',
                                  wraps=host_state._service_rows) as rows:
            self.assertEqual([], self.differences(uuids))
            self.assertEqual(0, stamps.call_count)
            self.assertEqual(0, rows.call_count)
            # a node the poll did not see is read, alone
            new = self._new_node()
            self.assertEqual([], self.differences(uuids + [new.uuid]))
            self.assertEqual([new.uuid], stamps.call_args[0][1])
            self.assertEqual([new.host], rows.call_args[0][1])
            # rows older than kept_state_max_age are not used
            for polled in self.kept._polled.by_cell.values():
                polled.at -= 31
            stamps.reset_mock()
            self.assertEqual([], self.differences(uuids))
            self.assertTrue(stamps.called)

    def test_a_heartbeat_makes_no_service(self):
        """Every service reports: the states are a reload's, no Service made.

        A row a heartbeat alone changed keeps its ``Service``; the
        request's ``HostState`` gets the new heartbeat in its dict.  A
        row that changed otherwise is made again.
        """
        uuids = sorted(self.computes)
        self.assertEqual([], self.differences(uuids))
        for host in sorted(self.services):
            cell, service = self.services[host]
            with nova_context.target_cell(self.ctxt, cell) as cctxt:
                service._context = cctxt
                service.report_count += 1
                service.last_seen_up = (timeutils.utcnow(with_timezone=True) +
                                        datetime.timedelta(seconds=3))
                service.save()
        made = mock.Mock(wraps=host_state.nova_compat.service_from_row)
        with mock.patch.object(host_state.nova_compat, 'service_from_row',
                               made):
            self.assertEqual([], self.differences(uuids))
            # the stock manager makes its own Services, not through this
            self.assertEqual(0, made.call_count)
            host = sorted(self.services)[0]
            cell, service = self.services[host]
            with nova_context.target_cell(self.ctxt, cell) as cctxt:
                service._context = cctxt
                service.disabled = True
                service.save()
            self.assertEqual([], self.differences(uuids))
            self.assertEqual(1, made.call_count)

    def test_a_change_after_the_poll_waits_for_the_next(self):
        """The polled rows are one poll late, never more."""
        clock = self._freeze_clock()
        uuid = sorted(self.computes)[0]
        # past the clock margin: the record read now is trusted
        clock[0] += datetime.timedelta(seconds=40)
        self.kept.poll_rows(self.ctxt)
        self.assertEqual([], self.differences([uuid]))
        self.step_update_node(uuid)
        clock[0] += datetime.timedelta(seconds=40)
        self.assertNotEqual([], self.differences([uuid]))
        self.kept.poll_rows(self.ctxt)
        self.assertEqual([], self.differences([uuid]))

    def test_a_missed_change_is_seen(self):
        """The comparison fails when the kept state is stale.

        Trust every row, whatever its age, and an update in the instant
        of the one before (same ``updated_at``) goes unseen.
        """
        uuid = sorted(self.computes)[0]
        self._freeze_clock()
        self.assertEqual([], self.differences(None))
        self.flags(host_state_clock_margin=1, group='nova_sched_ext')
        real = host_state._Kept
        with mock.patch.object(
                host_state, '_Kept',
                side_effect=lambda c, s, t, r: real(c, s, True, r)):
            self.step_update_node(uuid)
            self.kept.drop_kept_state()
            self.assertEqual([], self.differences(None))
            self.step_update_node(uuid)
            self.assertNotEqual([], self.differences(None))
        # The margin, not the patched trust: the change is seen.
        self.kept.drop_kept_state()
        self.assertEqual([], self.differences(None))
        self.step_update_node(uuid)
        self.assertEqual([], self.differences(None))

    # -- the warm-up: [nova_sched_ext] host_state_warm_up_nodes -----------

    def _kept_records(self):
        return {uuid: kept for nodes in self.kept._records.nodes.values()
                for uuid, kept in nodes.items()}

    def _reads(self):
        """The compute node reads, the warm-up's and the requests'."""
        return mock.patch.object(host_state, '_read_records',
                                 wraps=host_state._read_records)

    @staticmethod
    def _read_uuids(reads):
        return sorted(uuid for call in reads.call_args_list
                      for uuid in call[0][1])

    def test_the_warm_up_reads_what_the_requests_would(self):
        clock = self._freeze_clock()
        # past the clock margin: what the poller reads is trusted
        clock[0] += datetime.timedelta(seconds=40)
        self.kept._warm_up.builds_fit_models = True
        self.kept.poll_rows(self.ctxt)
        self.assertEqual(0, self.kept.warm_up_pending)
        records = self._kept_records()
        self.assertEqual(sorted(self.computes), sorted(records))
        for kept in records.values():
            self.assertTrue(kept.trusted)
            self.assertIs(kept.compute, kept.base._kept_compute)
            # the packed fit model too, vouched for by the base's stamp
            self.assertIn(fit_adapters._CACHE_ATTR, vars(kept.base))
        uuids = sorted(self.computes)
        with self._reads() as reads, \
                mock.patch.object(host_state.nova_compat, 'service_from_row',
                                  wraps=host_state.nova_compat
                                  .service_from_row) as services, \
                mock.patch.object(fit_adapters, '_refresh',
                                  wraps=fit_adapters._refresh) as models:
            self.assertEqual([], self.differences(uuids))
            fit_adapters.prepared_hosts(
                list(self._states(self.kept, uuids).values()),
                per_candidate=False)
        self.assertEqual(0, reads.call_count)
        self.assertEqual(0, services.call_count)
        self.assertEqual(0, models.call_count)

    def test_the_fit_models_are_built_when_a_plugin_reads_them(self):
        self.assertFalse(self.kept._warm_up.builds_fit_models)
        self.flags(available_filters=['nova.scheduler.filters.all_filters',
                                      'nova_sched_ext.filters.all_filters'],
                   enabled_filters=['ComputeFilter',
                                    'FastNUMATopologyFilter'],
                   group='filter_scheduler')
        with mock.patch.object(host_manager.HostManager,
                               '_init_instance_info'):
            manager = host_state.KeptHostManager()
        self.assertTrue(manager._warm_up.builds_fit_models)

    def test_the_warm_up_reads_at_most_its_number_new_nodes_first(self):
        self.flags(host_state_warm_up_nodes=2, group='nova_sched_ext')
        clock = self._freeze_clock()
        clock[0] += datetime.timedelta(seconds=40)
        self.kept.poll_rows(self.ctxt)
        first = self._kept_records()
        self.assertEqual(2, len(first))
        self.assertEqual(len(self.computes) - 2, self.kept.warm_up_pending)
        changed = sorted(first)[0]
        self.step_update_node(changed)
        clock[0] += datetime.timedelta(seconds=40)
        with self._reads() as reads:
            self.kept.poll_rows(self.ctxt)
        # the nodes never read come before the one that changed
        self.assertNotIn(changed, self._read_uuids(reads))
        self.assertEqual(2, len(self._read_uuids(reads)))
        self.assertEqual(len(self.computes) - 4 + 1,
                         self.kept.warm_up_pending)
        while self.kept.warm_up_pending:
            self.kept.poll_rows(self.ctxt)
        records = self._kept_records()
        self.assertEqual(sorted(self.computes), sorted(records))
        self.assertIsNot(first[changed], records[changed])
        self.assertEqual(self.computes[changed][1].vcpus_used,
                         records[changed].compute.vcpus_used)
        with self._reads() as reads:
            self.assertEqual([], self.differences(sorted(self.computes)))
        self.assertEqual(0, reads.call_count)

    def test_a_young_change_waits_for_the_margin(self):
        clock = self._freeze_clock()
        clock[0] += datetime.timedelta(seconds=40)
        self.kept.poll_rows(self.ctxt)
        uuid = sorted(self.computes)[0]
        self.step_update_node(uuid)
        clock[0] += datetime.timedelta(seconds=5)
        with self._reads() as reads:
            # read now, the record would not be trusted: requests read it
            self.kept.poll_rows(self.ctxt)
            self.assertEqual(0, reads.call_count)
            self.assertEqual([], self.differences([uuid]))
            self.assertEqual([uuid], self._read_uuids(reads))
            reads.reset_mock()
            clock[0] += datetime.timedelta(seconds=40)
            self.kept.poll_rows(self.ctxt)
            self.assertEqual([uuid], self._read_uuids(reads))
            self.assertTrue(self._kept_records()[uuid].trusted)
            reads.reset_mock()
            self.assertEqual([], self.differences([uuid]))
            self.assertEqual(0, reads.call_count)

    def test_the_poller_reads_old_records_again_instead_of_a_drop(self):
        self.flags(host_state_full_refresh_interval=600,
                   group='nova_sched_ext')
        clock = self._freeze_clock()
        clock[0] += datetime.timedelta(seconds=40)
        self.kept.poll_rows(self.ctxt)
        uuids = sorted(self.computes)
        old, young = uuids[0], uuids[1]
        records = self._kept_records()
        records[old].read_at -= 601
        records[young].read_at -= 599
        with self._reads() as reads:
            self.kept.poll_rows(self.ctxt)
        self.assertEqual([old], self._read_uuids(reads))
        self.assertIsNot(records[old], self._kept_records()[old])
        self.assertIs(records[young], self._kept_records()[young])
        # Behind the poller's back (it stopped): a request reads a record
        # older than the interval plus kept_state_max_age, nothing else,
        # and drops nothing.
        self.kept._records.since -= 10000
        kept_nodes = self.kept._records.nodes
        self._kept_records()[young].read_at -= 600 + 30 + 1
        with self._reads() as reads:
            self.assertEqual([], self.differences(uuids))
        self.assertEqual([young], self._read_uuids(reads))
        self.assertIs(kept_nodes, self.kept._records.nodes)

    def test_without_the_warm_up_the_state_is_dropped_as_before(self):
        self.flags(host_state_warm_up_nodes=0,
                   host_state_full_refresh_interval=600,
                   group='nova_sched_ext')
        clock = self._freeze_clock()
        clock[0] += datetime.timedelta(seconds=40)
        with self._reads() as reads:
            self.kept.poll_rows(self.ctxt)
        self.assertEqual(0, reads.call_count)
        self.assertEqual({}, self._kept_records())
        uuids = sorted(self.computes)
        self.assertEqual([], self.differences(uuids))
        self.kept._records.since -= 601
        with self._reads() as reads:
            self.assertEqual([], self.differences(uuids))
        self.assertEqual(uuids, self._read_uuids(reads))

    def test_a_node_the_warm_up_cannot_build_is_left_to_requests(self):
        clock = self._freeze_clock()
        clock[0] += datetime.timedelta(seconds=40)
        bad = sorted(self.computes)[0]
        real = self.kept._new_base

        def new_base(compute, cell_uuid):
            if compute.uuid == bad:
                raise ValueError('a record Nova cannot read')
            return real(compute, cell_uuid)

        with mock.patch.object(self.kept, '_new_base',
                               side_effect=new_base):
            self.kept.poll_rows(self.ctxt)
        self.assertEqual(sorted(set(self.computes) - {bad}),
                         sorted(self._kept_records()))
        self.assertEqual(0, self.kept.warm_up_pending)
        with self._reads() as reads:
            self.assertEqual([], self.differences(sorted(self.computes)))
        self.assertEqual([bad], self._read_uuids(reads))

    def test_the_warm_up_forgets_deleted_nodes(self):
        clock = self._freeze_clock()
        clock[0] += datetime.timedelta(seconds=40)
        self.kept.poll_rows(self.ctxt)
        gone = sorted(self.computes)[0]
        host = self.computes[gone][1].host
        self.step_delete_node(gone)
        self.kept.poll_rows(self.ctxt)
        self.assertNotIn(gone, self._kept_records())
        self.assertEqual(sorted(self.computes), sorted(self._kept_records()))
        self.assertIn(host, [h for services in
                             self.kept._records.services.values()
                             for h in services])

    def test_a_partial_warm_up_equals_a_full_reload_after_each_poll(self):
        # A few nodes a poll, records read again after a second: requests
        # and the poller read and build side by side.
        self.flags(host_state_warm_up_nodes=2,
                   host_state_full_refresh_interval=1,
                   group='nova_sched_ext')
        self.kept._warm_up.builds_fit_models = True
        self.polled = True
        self._run(17, 60, frozen_share=0.3)
