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

from nova_sched_ext import conf
from nova_sched_ext.deployment_set import hints
from tests import base


class TestParse(base.TestCase):

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


class TestStrictIntegers(base.TestCase):
    """Only plain ASCII digits are integers (issue 11).

    ``int()`` also reads ``'1_0'`` as 10, digits of other scripts and
    surrounding spaces; a hint is user input, and a value the user did not
    mean to give must fail, not be read as something else.
    """

    NOT_INTEGERS = (
        '1_0',                 # int() reads it as 10
        '\u0661\u0660',        # Arabic-Indic 10
        '\uff11\uff10',        # fullwidth 10
        '\u09e7\u09e6',        # Bengali 10
        ' 5 ', '5 ', ' 5', '\t5', '5\n',
        '+5', '0x5', '5.0', '5e0', '', ' ',
    )

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config(conf.CONF))

    def test_only_ascii_digits(self):
        for name, strategy in (('deployment_set_partition', 'partition'),
                               ('deployment_set_max_size', 'host')):
            for text in self.NOT_INTEGERS:
                given = {'deployment_set_strategy': 'partition',
                         'deployment_set_partition': '0'}
                if strategy != 'partition':
                    given = {'deployment_set_strategy': strategy}
                given[name] = [text]
                exc = self.assertRaises(hints.InvalidHints, hints.parse,
                                        given)
                self.assertIn('%s=%r is not an integer' % (name, text),
                              str(exc))

    def test_plain_digits_still_parse(self):
        self.assertEqual(hints.SetHints('partition', 6, 20), hints.parse({
            'deployment_set_strategy': ['partition'],
            'deployment_set_partition': ['006'],
            'deployment_set_max_size': ['20']}))
        exc = self.assertRaises(hints.InvalidHints, hints.parse, {
            'deployment_set_strategy': 'partition',
            'deployment_set_partition': '-1'})
        self.assertIn('deployment_set_partition=-1 is below 0', str(exc))

    def test_lenient_parsing_reads_ascii_digits_only(self):
        self.assertEqual(hints.SetHints(), hints.parse_lenient({
            'deployment_set_partition': ['\u0661'],
            'deployment_set_max_size': ['1_0']}))
        self.assertEqual(hints.SetHints(), hints.parse_lenient({
            'deployment_set_partition': ['\u09e7'],
            'deployment_set_max_size': ['\uff15']}))
        # Older releases accepted white space: the member was placed with
        # that value.
        self.assertEqual(hints.SetHints(partition=5, max_size=3),
                         hints.parse_lenient({
                             'deployment_set_partition': [' 5 '],
                             'deployment_set_max_size': ['3\n']}))
        self.assertEqual(hints.SetHints(partition=5, max_size=10),
                         hints.parse_lenient({
                             'deployment_set_partition': ['5'],
                             'deployment_set_max_size': ['10']}))


class TestLongValuesAreCut(base.TestCase):
    """A value of any length gives a log line of bounded length."""

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config(conf.CONF))

    def message(self, given):
        return str(self.assertRaises(hints.InvalidHints, hints.parse,
                                     given))

    def assertCut(self, message, text):
        self.assertLess(len(message), 400, message)
        self.assertIn(text[:hints.MAX_SHOWN], message)
        self.assertNotIn(text[:hints.MAX_SHOWN + 1], message)
        self.assertIn('...', message)
        self.assertIn('%d characters' % len(text), message)

    def test_huge_number(self):
        text = '9' * 5000
        message = self.message({'deployment_set_strategy': 'host',
                                'deployment_set_max_size': text})
        self.assertCut(message, text)
        self.assertIn('is above 20', message)

    def test_huge_negative_number(self):
        text = '-' + '9' * 5000
        message = self.message({'deployment_set_strategy': 'partition',
                                'deployment_set_partition': text})
        self.assertCut(message, text)
        self.assertIn('is below 0', message)

    def test_huge_number_with_leading_zeros_is_small(self):
        self.assertEqual(3, hints.parse({
            'deployment_set_strategy': 'host',
            'deployment_set_max_size': '0' * 5000 + '3'}).max_size)

    def test_long_text(self):
        text = 'x' * 5000
        self.assertCut(self.message({'deployment_set_strategy': 'host',
                                     'deployment_set_max_size': text}),
                       text)
        self.assertCut(self.message({'deployment_set_strategy': text}),
                       text)

    def test_many_values(self):
        message = self.message(
            {'deployment_set_strategy': ['host'] * 5000})
        self.assertLess(len(message), 400, message)
        self.assertIn('must have exactly one value', message)
