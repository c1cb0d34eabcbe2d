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


"""The NUMA layout notation shared by the fake driver and tempest."""

from nova_sched_ext.virt import layout
from tests import base


class LayoutTest(base.TestCase):

    def test_parse(self):
        parsed = layout.parse(' 2x4X4096 ')
        self.assertEqual(layout.Layout(2, 4, 4096), parsed)
        self.assertEqual('2x4x4096', parsed.spec)
        self.assertEqual(8, parsed.cpus)
        self.assertEqual(8192, parsed.memory_mb)
        self.assertEqual({4, 5, 6, 7}, parsed.cell_cpus(1))

    def test_parse_rejects_with_the_expected_form(self):
        for bad in ('', '2x4', '2x4x', 'twoxfour', '2x4x4096x1', None):
            exc = self.assertRaises(ValueError, layout.parse, bad)
            self.assertIn('CELLSxCPUSxMIB', str(exc))

    def test_zero_is_rejected(self):
        exc = self.assertRaises(ValueError, layout.parse, '0x4x4096')
        self.assertIn('cells must be at least 1', str(exc))

    def test_trait_round_trip(self):
        original = layout.Layout(1, 8, 8192)
        self.assertEqual('CUSTOM_NSE_NUMA_1CELLS_8CPUS_8192MB',
                         original.trait)
        self.assertEqual(original, layout.from_trait(original.trait))

    def test_other_traits_are_not_layouts(self):
        for trait in ('COMPUTE_NET_ATTACH_INTERFACE', 'CUSTOM_NSE_NUMA_',
                      'CUSTOM_NSE_NUMA_2CELLS_4CPUS'):
            self.assertIsNone(layout.from_trait(trait))

    def test_fits_empty(self):
        two_small = layout.Layout(2, 4, 4096)
        one_big = layout.Layout(1, 8, 8192)
        # One cell of 8 vCPUs: only the big cell.
        self.assertFalse(two_small.fits_empty(8, 4096, 1))
        self.assertTrue(one_big.fits_empty(8, 4096, 1))
        # Two cells: only the two-cell host.
        self.assertTrue(two_small.fits_empty(8, 4096, 2))
        self.assertFalse(one_big.fits_empty(2, 1024, 2))
        # Memory per cell counts too.
        self.assertFalse(two_small.fits_empty(2, 8192, 1))
        self.assertFalse(two_small.fits_empty(1, 256, 0))
