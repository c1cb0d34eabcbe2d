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

"""Parsing the deployment-set hints (the filter tests cover the messages)."""

from oslo_config import fixture as config_fixture
import testtools

from nova_sched_ext import conf
from nova_sched_ext.deployment_set import hints


class TestParse(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))

    def test_none(self):
        self.assertIs(hints.NO_HINTS, hints.parse(None))
        self.assertIs(hints.NO_HINTS, hints.parse({'group': ['x']}))
        self.assertFalse(hints.NO_HINTS.given)

    def test_request_spec_lists_and_plain_values(self):
        expected = hints.SetHints('partition', 3, 7)
        self.assertEqual(expected, hints.parse({
            'deployment_set_strategy': ['partition'],
            'deployment_set_partition': ['3'],
            'deployment_set_max_size': ['7']}))
        self.assertEqual(expected, hints.parse({
            'deployment_set_strategy': 'partition',
            'deployment_set_partition': 3,
            'deployment_set_max_size': '7'}))

    def test_partition_alone_is_parsed_for_the_filter_to_judge(self):
        # The set's strategy may supply 'partition'.
        self.assertEqual(hints.SetHints(partition=2),
                         hints.parse({'deployment_set_partition': '2'}))

    def test_limits_follow_the_options(self):
        self.conf.config(group='nova_sched_ext',
                         deployment_set_max_partitions=2,
                         deployment_set_max_size=100)
        self.assertRaises(hints.InvalidHints, hints.parse, {
            'deployment_set_strategy': 'partition',
            'deployment_set_partition': '2'})
        self.assertEqual(100, hints.parse({
            'deployment_set_strategy': 'host',
            'deployment_set_max_size': '100'}).max_size)

    def test_lenient_parsing_of_existing_members(self):
        self.conf.config(group='nova_sched_ext',
                         deployment_set_max_partitions=2)
        self.assertEqual(hints.SetHints('partition', 5, None),
                         hints.parse_lenient({
                             'deployment_set_strategy': ['PARTITION'],
                             'deployment_set_partition': ['5'],
                             'deployment_set_max_size': ['0']}))
        self.assertEqual(hints.SetHints(), hints.parse_lenient({
            'deployment_set_strategy': ['rack'],
            'deployment_set_partition': ['x', 'y'],
            'deployment_set_max_size': ['big']}))
        self.assertEqual(hints.SetHints(), hints.parse_lenient(None))
