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

"""The kept compute state and the services' heartbeats, on cell databases.

Nova's sqlite database fixtures (two cells), compute services and nodes
written through Nova's objects.  A heartbeat changes a service's row
(``report_count`` and its times) every ``report_interval`` seconds on
every compute: a refresh then makes no ``Service`` again, and keeps every
``Host``; a service that stops reporting is still seen down, one disabled
or forced down still skipped, at the next refresh, as a full read
(:func:`~nova_sched_ext.cloud.computes.read_cloud`) sees them.
"""

import datetime

from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
from oslo_utils import timeutils

from nova_sched_ext.cloud import compute_state
from nova_sched_ext.cloud import computes
from nova_sched_ext.compat import nova as nova_compat

START = datetime.datetime(2026, 12, 4, 12, 0, 0)


class HeartbeatTest(test.TestCase):

    NUMBER_OF_CELLS = 2

    def setUp(self):
        super().setUp()
        self.now = START
        timeutils.set_time_override(self.now)
        self.addCleanup(timeutils.clear_time_override)
        self.ctxt = nova_context.get_admin_context()
        self.cells = [self.cell_mappings['cell1'],
                      self.cell_mappings['cell2']]
        self.services = {}
        for number, name in enumerate(('host1', 'host2', 'host3')):
            self.add_node(number, name)
        self.made = self.useFixture(test.fixtures.MockPatchObject(
            nova_compat, 'service_from_row',
            wraps=nova_compat.service_from_row)).mock
        self.state = compute_state.ComputeState(self.ctxt, clock_margin=0)

    def add_node(self, number, host):
        cell = self.cells[number % 2]
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            service = objects.Service(cctxt, host=host,
                                      binary='nova-compute',
                                      topic='compute', report_count=0)
            service.create()
            objects.ComputeNode(
                cctxt, uuid=getattr(uuids, host), host=host,
                hypervisor_hostname=host, service_id=service.id, vcpus=16,
                memory_mb=32768, local_gb=1000, vcpus_used=0,
                memory_mb_used=0, local_gb_used=0, free_ram_mb=32768,
                free_disk_gb=1000, disk_available_least=1000,
                running_vms=0, hypervisor_type='QEMU',
                hypervisor_version=8002000, cpu_info='{}',
                host_ip='10.0.0.%d' % (number + 1), supported_hv_specs=[],
                metrics='[]', current_workload=0, cpu_allocation_ratio=4.0,
                ram_allocation_ratio=1.0,
                disk_allocation_ratio=1.0).create()
        self.services[host] = (cell, service)

    def tick(self, seconds):
        self.now += datetime.timedelta(seconds=seconds)
        timeutils.set_time_override(self.now)

    def change(self, host, **values):
        cell, service = self.services[host]
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            service._context = cctxt
            for name, value in values.items():
                setattr(service, name, value)
            service.save()

    def beat(self, *hosts):
        """What the servicegroup database driver saves at a report."""
        for host in hosts:
            _cell, service = self.services[host]
            self.change(host, report_count=service.report_count + 1)

    def refresh(self):
        """``({host: Host}, Services made)``, checked against a full read."""
        self.made.reset_mock()
        self.state.refresh()
        made = self.made.call_count
        hosts = {h.name: h for h in self.state.snapshot().hosts}
        full = {h.name: h.skipped for h in computes.read_cloud(self.ctxt)
                .hosts}
        self.assertEqual(full, {name: h.skipped for name, h in hosts.items()})
        return hosts, made

    def test_heartbeats_make_no_service_again(self):
        hosts, made = self.refresh()
        self.assertEqual(3, made)
        self.assertEqual({None}, {h.skipped for h in hosts.values()})
        for _ in range(3):
            self.tick(10)
            self.beat('host1', 'host2', 'host3')
            again, made = self.refresh()
            self.assertEqual(0, made)
            # the same objects: what was counted from them is kept
            for name, host in hosts.items():
                self.assertIs(host, again[name])

    def test_a_service_that_stops_reporting_is_seen_down(self):
        self.refresh()
        # host2 no longer reports; the others do, past service_down_time
        for _ in range(7):
            self.tick(10)
            self.beat('host1', 'host3')
        hosts, made = self.refresh()
        self.assertEqual(0, made)
        self.assertEqual({'host1': None, 'host2': computes.SKIP_SERVICE_DOWN,
                          'host3': None},
                         {name: h.skipped for name, h in hosts.items()})
        # it reports again: up at the next refresh
        self.beat('host2')
        hosts, made = self.refresh()
        self.assertEqual(0, made)
        self.assertIsNone(hosts['host2'].skipped)

    def test_disabled_and_forced_down_are_seen_at_the_next_refresh(self):
        before, _made = self.refresh()
        self.tick(10)
        self.beat('host1', 'host2', 'host3')
        self.change('host1', disabled=True, disabled_reason='maintenance')
        self.change('host3', forced_down=True)
        hosts, made = self.refresh()
        # the two rows changed other than by their heartbeat
        self.assertEqual(2, made)
        self.assertEqual(
            {'host1': computes.SKIP_SERVICE_DISABLED, 'host2': None,
             'host3': computes.SKIP_SERVICE_DOWN},
            {name: h.skipped for name, h in hosts.items()})
        self.assertIs(before['host2'], hosts['host2'])
        self.change('host1', disabled=False, disabled_reason=None)
        hosts, made = self.refresh()
        self.assertEqual(1, made)
        self.assertIsNone(hosts['host1'].skipped)
