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

"""Victim strategies load through the registry, and are refused clearly.

The third-party strategies come from a distribution installed for the test
(:class:`tests.unit.test_registration.ThirdPartyDistribution`).
"""

import sys
import textwrap
from unittest import mock

from nova import test

from nova_sched_ext.preemption import driver
from nova_sched_ext.preemption import strategies
from nova_sched_ext import registry
from tests.unit import test_registration
from tests.unit import test_wrappers

STRATEGIES_MODULE = textwrap.dedent('''
    from nova_sched_ext.preemption import strategies


    class Fewest(strategies.VictimStrategy):
        name = 'fewest'

        def __init__(self, seed=None):
            self.seed = seed

        def place_one(self, hosts, request):
            return None


    class NotAStrategy:
        pass
''')


class TestLoadStrategy(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.dist = self.useFixture(test_registration.ThirdPartyDistribution(
            {strategies.NAMESPACE: {'fewest': 'Fewest',
                                    'plain': 'NotAStrategy',
                                    'broken': 'NoSuchClass'}},
            source=STRATEGIES_MODULE))
        self.useFixture(self.dist.on_path())
        self.useFixture(test_wrappers.FreshEntryPoints())

    def test_a_third_party_strategy(self):
        loaded = strategies.load_strategy('fewest', seed=3)
        self.assertIs(sys.modules[self.dist.module].Fewest, type(loaded))
        self.assertEqual(3, loaded.seed)
        self.assertIn('fewest', strategies.available_strategies())

    def test_unknown(self):
        exc = self.assertRaises(registry.PluginLoadError,
                                strategies.load_strategy, 'fewer')
        self.assertIn("[nova_sched_ext] preemption_victim_strategy cannot "
                      "be used: 'fewer' is not registered in the "
                      "entry-point namespace nova_sched_ext.victim_strategies",
                      str(exc))
        self.assertIn('broken, fewest', str(exc))

    def test_broken(self):
        exc = self.assertRaises(registry.PluginLoadError,
                                strategies.load_strategy, 'broken')
        self.assertIn(
            '[nova_sched_ext] preemption_victim_strategy cannot be used: '
            'the entry point broken = %s:NoSuchClass of namespace '
            'nova_sched_ext.victim_strategies failed to load: '
            'AttributeError' % self.dist.module, str(exc))

    def test_not_a_victim_strategy(self):
        exc = self.assertRaises(registry.PluginLoadError,
                                strategies.load_strategy, 'plain')
        self.assertIn(
            'the entry point plain = %s:NotAStrategy of namespace '
            'nova_sched_ext.victim_strategies is not a subclass of '
            'nova_sched_ext.preemption.strategies.base.VictimStrategy'
            % self.dist.module, str(exc))

    def test_a_bad_option_stops_the_driver_at_start(self):
        self.flags(preemption_victim_strategy='broken',
                   group='nova_sched_ext')
        with mock.patch.object(driver.evictor_mod, 'Evictor') as evictor:
            exc = self.assertRaises(registry.PluginLoadError,
                                    driver.Eviction, mock.Mock())
        self.assertIn('[nova_sched_ext] preemption_victim_strategy cannot '
                      'be used: the entry point broken = ', str(exc))
        evictor.assert_not_called()
