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


"""The fake NUMA virt driver reports what a NUMA host would."""

import os
import subprocess
import sys
from unittest import mock

from nova.compute import provider_tree
from nova import exception
from nova import objects
from nova.virt import hardware
from oslo_config import fixture as config_fixture

from nova_sched_ext.virt import fake_numa
from nova_sched_ext.virt import layout
from tests import base


class FakeNUMADriverTest(base.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()
        self.flags = self.useFixture(config_fixture.Config(fake_numa.CONF))

    def _driver(self, topology='2x4x4096', **compute_flags):
        self.flags.config(numa_topology=topology,
                          group=fake_numa.GROUP_NAME)
        if compute_flags:
            self.flags.config(group='compute', **compute_flags)
        return fake_numa.FakeNUMADriver(None)

    def test_topology(self):
        topology = self._driver().host_numa_topology()
        self.assertEqual(2, len(topology.cells))
        self.assertEqual({4, 5, 6, 7}, topology.cells[1].cpuset)
        self.assertEqual(set(), topology.cells[1].pcpuset)
        self.assertEqual(4096, topology.cells[1].memory)
        self.assertEqual(4096 * 256, topology.cells[1].mempages[0].total)

    def test_available_resource_carries_the_topology(self):
        driver = self._driver('1x8x8192')
        driver.init_host('nse-host')
        with mock.patch('nova.virt.node.get_local_node_uuid',
                        return_value='b5f9d4b8-0000-4000-8000-000000000001'):
            resources = driver.get_available_resource('nse-host')
        topology = objects.NUMATopology.obj_from_db_obj(
            resources['numa_topology'])
        self.assertEqual(1, len(topology.cells))
        self.assertEqual(8, resources['vcpus'])
        self.assertEqual(8192, resources['memory_mb'])

    def test_nova_fits_guests_to_the_cells(self):
        topology = self._driver().host_numa_topology()
        fits = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, cpuset={0, 1, 2, 3}, pcpuset=set(),
                                     memory=2048)])
        too_wide = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, cpuset=set(range(6)),
                                     pcpuset=set(), memory=2048)])
        self.assertIsNotNone(hardware.numa_fit_instance_to_host(
            topology, fits, provider_mapping=None))
        self.assertIsNone(hardware.numa_fit_instance_to_host(
            topology, too_wide, provider_mapping=None))

    def test_inventory_and_trait(self):
        driver = self._driver('2x4x4096', cpu_dedicated_set='4-7')
        tree = provider_tree.ProviderTree()
        tree.new_root('nse-host', 'b5f9d4b8-0000-4000-8000-000000000001')
        tree.add_traits('nse-host', 'CUSTOM_NSE_NUMA_1CELLS_1CPUS_1MB')
        driver.update_provider_tree(tree, 'nse-host')
        data = tree.data('nse-host')
        self.assertEqual(4, data.inventory['VCPU']['total'])
        self.assertEqual(4, data.inventory['PCPU']['total'])
        self.assertEqual(8192, data.inventory['MEMORY_MB']['total'])
        self.assertEqual({layout.parse('2x4x4096').trait},
                         {t for t in data.traits
                          if t.startswith(layout.TRAIT_PREFIX)})
        topology = driver.host_numa_topology()
        self.assertEqual({4, 5, 6, 7}, topology.cells[1].pcpuset)
        self.assertEqual(set(), topology.cells[1].cpuset)

    def test_bad_topology_is_a_clear_error(self):
        exc = self.assertRaises(exception.InvalidConfiguration,
                                self._driver, '2x4')
        self.assertIn('numa_topology', str(exc))

    def test_cpu_sets_must_exist_on_the_host(self):
        exc = self.assertRaises(exception.InvalidConfiguration,
                                self._driver, '1x4x4096',
                                cpu_dedicated_set='2-9')
        self.assertIn('only has CPUs 0-3', str(exc))


class FakeNUMALiveMigrationTest(base.TestCase):
    """Both ends ask Nova for a NUMA-aware live migration, as libvirt does."""

    def setUp(self):
        super().setUp()
        objects.register_all()
        flags = self.useFixture(config_fixture.Config(fake_numa.CONF))
        flags.config(numa_topology='2x4x4096', group=fake_numa.GROUP_NAME)
        self.driver = fake_numa.FakeNUMADriver(None)

    @staticmethod
    def _instance(numa_topology):
        return objects.Instance(
            uuid='6f0b0ad4-0000-4000-8000-000000000001', id=1,
            numa_topology=numa_topology,
            flavor=objects.Flavor(vcpus=2, memory_mb=3072, root_gb=1))

    def _numa_instance(self):
        return self._instance(objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, cpuset={0, 1}, pcpuset=set(),
                                     memory=3072)]))

    def _checks(self, instance):
        """The migrate data at the destination, then after the source."""
        at_destination = self.driver.check_can_live_migrate_destination(
            None, instance, {}, {})
        # The manager hands the destination's data to the source.
        at_source = self.driver.check_can_live_migrate_source(
            None, instance, at_destination)
        return at_destination, at_source

    def test_numa_instance_asks_for_a_claim_on_the_destination(self):
        at_destination, at_source = self._checks(self._numa_instance())
        # Nova's manager claims the destination's cells only when the
        # source data carries its flag, and the destination's flag got
        # there (ComputeManager._source_can_numa_live_migrate).
        self.assertTrue(at_destination.dst_supports_numa_live_migration)
        self.assertTrue(at_source.dst_supports_numa_live_migration)
        self.assertTrue(at_source.src_supports_numa_live_migration)

    def test_instance_without_numa_topology_needs_no_claim(self):
        at_destination, at_source = self._checks(self._instance(None))
        self.assertNotIn('dst_supports_numa_live_migration', at_destination)
        self.assertNotIn('src_supports_numa_live_migration', at_source)

    def test_live_migration_calls_back_the_manager(self):
        instance = self._numa_instance()
        post, recover = mock.Mock(), mock.Mock()
        data = self._checks(instance)[1]
        self.driver.live_migration(None, instance, 'nse-dest', post,
                                   recover, migrate_data=data)
        post.assert_called_once_with(None, instance, 'nse-dest', False,
                                     data)
        recover.assert_not_called()

    def test_source_forgets_the_instance_after_the_move(self):
        instance = self._numa_instance()
        self.driver.spawn(None, instance, None, None, None, None)
        self.assertEqual([instance.uuid], self.driver.list_instance_uuids())

        self.driver.post_live_migration(None, instance, None)

        self.assertEqual([], self.driver.list_instance_uuids())

    def test_destination_starts_tracking_the_instance(self):
        instance = self._numa_instance()
        self.driver.post_live_migration_at_destination(None, instance, [])
        self.assertEqual([instance.uuid], self.driver.list_instance_uuids())


class FakeNUMAComputeTest(base.TestCase):
    """nova_sched_ext.virt.compute makes the driver loadable by Nova."""

    def test_nova_loads_the_driver_by_its_alias(self):
        # A fresh interpreter: the module settles Nova's concurrency mode,
        # which only works before anything else imports Nova.
        script = (
            'from nova_sched_ext.virt import compute\n'
            'compute.register_drivers()\n'
            'from oslo_utils import importutils\n'
            'cls = importutils.import_class("nova.virt." + '
            'compute.COMPUTE_DRIVER)\n'
            'print(cls.__module__ + "." + cls.__name__)\n')
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        output = subprocess.run([sys.executable, '-c', script], env=env,
                                capture_output=True, text=True, check=True,
                                timeout=120).stdout
        self.assertEqual('nova_sched_ext.virt.fake_numa.FakeNUMADriver',
                         output.strip().splitlines()[-1])
