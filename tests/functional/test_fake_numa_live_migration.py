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

"""The fake NUMA virt driver's live migrations, under Nova's compute manager.

Two computes on :class:`~nova_sched_ext.virt.fake_numa.FakeNUMADriver`
(two cells of 4 CPUs and 4096 MiB each) in one process, with Nova's
scheduler, conductor, API and placement fixture. A one-cell server of 3072
MiB live-migrates to a host whose cell 0 another such server holds: Nova
must claim cell 1 for it there, and the server must take that cell.  A
migration that fails after the destination's claim is rolled back, and the
claim with it.
"""

import sys
import uuid

import fixtures
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.tests.functional import integrated_helpers

from nova_sched_ext.virt import fake_numa
from nova_sched_ext_tools.harness import cloud

#: where the test's driver is importable for [DEFAULT] compute_driver
ALIAS = 'nse_test_fake_numa_per_host'
CELL_MB = 4096
SERVER_MB = 3072


class PerHostNodeDriver(fake_numa.FakeNUMADriver):
    """The fake NUMA driver with a node UUID of its own per host.

    The real driver takes its node UUID from ``[DEFAULT] state_path``, one
    per process; here several computes share a process.
    """

    def _node_uuid(self):
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, self._host))

    def get_available_resource(self, nodename):
        resources = super().get_available_resource(nodename)
        resources['uuid'] = self._node_uuid()
        return resources

    def get_nodenames_by_uuid(self, refresh=False):
        return {self._node_uuid(): self._host}


class FakeNUMALiveMigrationTest(
        integrated_helpers.ProviderUsageBaseTestCase):

    compute_driver = '%s.PerHostNodeDriver' % ALIAS

    def setUp(self):
        # The test module stands where Nova loads drivers from, as
        # nova_sched_ext.virt.compute does for the package's driver.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.%s' % ALIAS, sys.modules[__name__]))
        sys.modules.setdefault('nova.virt.%s' % ALIAS, sys.modules[__name__])
        self.addCleanup(sys.modules.pop, 'nova.virt.%s' % ALIAS, None)
        # Nova from a wheel: its api-paste.ini is under sys.prefix.
        self.flags(api_paste_config=cloud.find_api_paste_config(),
                   group='wsgi')
        super().setUp()
        cloud.tolerate_newer_sqlalchemy()
        self.flags(numa_topology='2x4x%d' % CELL_MB,
                   group=fake_numa.GROUP_NAME)
        # All memory to the guests: the scenario is about cells, not about
        # placement's room.
        self.flags(reserved_host_memory_mb=0)
        self.flags(enabled_filters=['ComputeFilter', 'NUMATopologyFilter'],
                   group='filter_scheduler')
        for host in ('host1', 'host2'):
            self._start_compute(host)
        self.flavor_id = self._create_flavor(
            memory_mb=SERVER_MB, vcpu=1, disk=1, ephemeral=0,
            extra_spec={'hw:numa_nodes': '1'})
        self.ctxt = nova_context.get_admin_context()

    def _boot(self, host):
        return self._create_server(flavor_id=self.flavor_id, host=host,
                                   networks='none')

    def _instance_cells(self, server):
        topology = objects.InstanceNUMATopology.get_by_instance_uuid(
            self.ctxt, server['id'])
        return [cell.id for cell in topology.cells]

    def _cell_memory_usage(self, host):
        node = objects.ComputeNode.get_by_host_and_nodename(
            self.ctxt, host, host)
        topology = objects.NUMATopology.obj_from_db_obj(node.numa_topology)
        return [cell.memory_usage for cell in topology.cells]

    def test_the_server_takes_the_cell_claimed_on_the_destination(self):
        moving = self._boot('host1')
        self._boot('host2')
        self.assertEqual([0], self._instance_cells(moving))
        self.assertEqual([SERVER_MB, 0], self._cell_memory_usage('host2'))

        # Nova's own _live_migrate helper takes a host from 2025.2 on.
        self.api.post_server_action(moving['id'], {'os-migrateLive': {
            'host': 'host2', 'block_migration': 'auto'}})
        self._wait_for_migration_status(moving, ['completed'])
        self._wait_for_state_change(moving, 'ACTIVE')

        self.assertEqual('host2', self.api.get_server(moving['id'])[
            'OS-EXT-SRV-ATTR:host'])
        # Without the claim it would keep cell 0, which the other holds.
        self.assertEqual([1], self._instance_cells(moving))
        # The migration's claim counts it there at once, and the periodic
        # task, which counts the instances on the host, agrees.
        self.assertEqual([SERVER_MB, SERVER_MB],
                         self._cell_memory_usage('host2'))
        self._run_periodics()
        self.assertEqual([SERVER_MB, SERVER_MB],
                         self._cell_memory_usage('host2'))
        self.assertEqual([0, 0], self._cell_memory_usage('host1'))
        self.assertEqual([], self.computes['host1'].driver.list_instances())

    def test_a_rolled_back_migration_drops_the_destination_claim(self):
        moving = self._boot('host1')
        claimed = []
        driver = self.computes['host2'].driver

        def pre_live_migration(context, instance, *args, **kwargs):
            # The destination has claimed its cells by now.
            claimed.append(self._cell_memory_usage('host2'))
            raise exception.MigrationError(reason='fake failure')
        self.useFixture(fixtures.MockPatchObject(
            driver, 'pre_live_migration', side_effect=pre_live_migration))

        self.api.post_server_action(moving['id'], {'os-migrateLive': {
            'host': 'host2', 'block_migration': 'auto'}})
        # Nova records 'error' or 'failed' depending on where the failure
        # reaches it first; either way the rollback has run.
        self._wait_for_migration_status(moving, ['error', 'failed'])
        self._wait_for_state_change(moving, 'ACTIVE')

        self.assertEqual([[SERVER_MB, 0]], claimed)
        self.assertEqual('host1', self.api.get_server(moving['id'])[
            'OS-EXT-SRV-ATTR:host'])
        self.assertEqual([0], self._instance_cells(moving))
        # Dropped by the rollback itself, not only by the periodic task.
        self.assertEqual([0, 0], self._cell_memory_usage('host2'))
        self._run_periodics()
        self.assertEqual([0, 0], self._cell_memory_usage('host2'))
        self.assertEqual([SERVER_MB, 0], self._cell_memory_usage('host1'))
