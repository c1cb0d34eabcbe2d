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


"""What a flavor asks of a host, from Nova's own functions."""

from nova import objects
from nova import test
from oslo_serialization import jsonutils

from nova_sched_ext.capacity import flavors
from nova_sched_ext.fit import model as m

ALIAS = jsonutils.dumps({'vendor_id': '8086', 'product_id': '1520',
                         'name': 'nic', 'device_type': 'type-PCI'})


def flavor(name='f1', vcpus=4, memory_mb=2048, root_gb=10, ephemeral_gb=0,
           swap=0, **specs):
    return objects.Flavor(name=name, flavorid=name, vcpus=vcpus,
                          memory_mb=memory_mb, root_gb=root_gb,
                          ephemeral_gb=ephemeral_gb, swap=swap,
                          extra_specs=specs, is_public=True, disabled=False)


def resources(request, index=0):
    merged = {}
    for group in request.queries[index].groups:
        for rc, n in group.resources.items():
            merged[rc] = merged.get(rc, 0) + n
    return merged


class TestFlavorRequest(test.NoDBTestCase):

    def test_plain_flavor(self):
        request = flavors.flavor_request(flavor())
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 10},
                         resources(request))
        self.assertEqual(1, len(request.queries))
        self.assertEqual(frozenset({'COMPUTE_STATUS_DISABLED'}),
                         request.queries[0].root_forbidden)
        self.assertIsNone(request.instance_topology)
        self.assertIsNone(request.pci_requests)
        self.assertEqual(m.Shape(vcpus=4, memory_mb=2048), request.shape)
        self.assertIsNone(request.invalid)

    def test_ephemeral_and_swap_are_disk(self):
        request = flavors.flavor_request(flavor(ephemeral_gb=5, swap=1536))
        self.assertEqual(17, resources(request)['DISK_GB'])

    def test_resources_overrides(self):
        request = flavors.flavor_request(flavor(**{
            'resources:VCPU': '8', 'resources:DISK_GB': '0',
            'resources:CUSTOM_FPGA': '1'}))
        self.assertEqual({'VCPU': 8, 'MEMORY_MB': 2048, 'CUSTOM_FPGA': 1},
                         resources(request))

    def test_traits(self):
        request = flavors.flavor_request(flavor(**{
            'trait:CUSTOM_GOLD': 'required',
            'trait:CUSTOM_SLOW': 'forbidden'}))
        (group,) = request.queries[0].groups
        self.assertEqual(frozenset({'CUSTOM_GOLD'}), group.required_traits)
        self.assertEqual(frozenset({'CUSTOM_SLOW'}), group.forbidden_traits)
        self.assertEqual(frozenset({'CUSTOM_GOLD'}), request.required_traits)

    def test_numbered_group(self):
        request = flavors.flavor_request(flavor(**{
            'resources1:CUSTOM_VF': '2', 'trait1:CUSTOM_PHYSNET': 'required',
            'group_policy': 'isolate'}))
        unnumbered, numbered = request.queries[0].groups
        self.assertFalse(unnumbered.same_provider)
        self.assertTrue(numbered.same_provider)
        self.assertEqual({'CUSTOM_VF': 2}, numbered.resources)
        self.assertEqual('isolate', request.queries[0].group_policy)

    def test_pinned_flavor_has_the_fallback_query(self):
        request = flavors.flavor_request(flavor(**{
            'hw:cpu_policy': 'dedicated',
            'hw:cpu_thread_policy': 'require'}))
        self.assertEqual({'PCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 10},
                         resources(request, 0))
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 10},
                         resources(request, 1))
        self.assertIn('HW_CPU_HYPERTHREADING',
                      request.queries[0].groups[0].required_traits)
        self.assertEqual(1, len(request.instance_topology.cells))
        self.assertEqual(m.CPU_DEDICATED,
                         request.shape.numa.cells[0].cpu_policy)
        self.flags(disable_fallback_pcpu_query=True, group='workarounds')
        request = flavors.flavor_request(flavor(**{
            'hw:cpu_policy': 'dedicated'}))
        self.assertEqual(1, len(request.queries))

    def test_emulator_threads_take_one_more_pcpu(self):
        request = flavors.flavor_request(flavor(**{
            'hw:cpu_policy': 'dedicated',
            'hw:emulator_threads_policy': 'isolate'}))
        self.assertEqual(5, resources(request)['PCPU'])

    def test_pci_alias_with_the_flavors_numa_policy(self):
        self.flags(alias=[ALIAS], group='pci')
        request = flavors.flavor_request(flavor(**{
            'pci_passthrough:alias': 'nic:2', 'hw:numa_nodes': '1',
            'hw:pci_numa_affinity_policy': 'required'}))
        (pci,) = request.pci_requests
        self.assertEqual(2, pci.count)
        self.assertEqual('required', pci.numa_policy)
        self.assertIsNotNone(request.shape)

    def test_invalid_extra_specs(self):
        request = flavors.flavor_request(flavor(**{
            'hw:numa_nodes': '3', 'hw:numa_cpus.0': '0'}))
        self.assertIsNotNone(request.invalid)
        self.assertEqual((), request.queries)
        self.assertIsNone(request.shape)

    def test_larger(self):
        self.assertTrue(flavors.larger(flavor(vcpus=4, memory_mb=1),
                                       flavor(vcpus=2, memory_mb=9999)))
        self.assertTrue(flavors.larger(flavor(vcpus=4, memory_mb=2),
                                       flavor(vcpus=4, memory_mb=1)))
        self.assertFalse(flavors.larger(flavor(), flavor()))
