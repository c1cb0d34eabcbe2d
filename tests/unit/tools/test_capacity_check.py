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

"""The demo's capacity check: what a boot must do to its flavor's count."""

import io
import types

from nova_sched_ext_tools import demo
from nova_sched_ext_tools.harness import capacity_check
from nova_sched_ext_tools.harness import fake_hosts as fh
from nova_sched_ext_tools.harness import scenarios
from tests import base

PIN4 = fh.pinned('pin4', vcpus=4, ram_mb=2048)


def result(host=None, fault=None):
    return types.SimpleNamespace(
        host=host, no_valid_host=host is None and 'No valid host' in (
            fault or ''))


NO_VALID_HOST = 'No valid host was found.'


def check(before, after, results, count=1):
    boot = scenarios.Boot('req', PIN4, ('a', 'b'), count=count)
    return capacity_check.check_boot(boot, before, after, results)


class TestBootCheck(base.TestCase):

    def test_a_boot_takes_one_slot_on_its_host(self):
        self.assertEqual([], check({'a': 2, 'b': 1}, {'a': 1, 'b': 1},
                                   [result('a')]).problems())

    def test_a_multi_create_takes_one_slot_per_server(self):
        self.assertEqual([], check({'a': 1, 'b': 1}, {'a': 0, 'b': 0},
                                   [result('a'), result('b')],
                                   count=2).problems())

    def test_a_drop_elsewhere_is_a_problem(self):
        problems = check({'a': 2, 'b': 1}, {'a': 2, 'b': 0},
                         [result('a')]).problems()
        self.assertEqual(
            ['req: the count of pin4 on a went from 2 to 2, but 1 '
             'server(s) landed there',
             'req: the count of pin4 on b went from 1 to 0, but 0 '
             'server(s) landed there'], problems)

    def test_a_drop_of_two_for_one_server_is_a_problem(self):
        problems = check({'a': 3}, {'a': 1}, [result('a')]).problems()
        self.assertEqual(1, len(problems))

    def test_no_valid_host_with_a_count_of_zero(self):
        self.assertEqual([], check({'a': 0, 'b': 0}, {'a': 0, 'b': 0},
                                   [result(fault=NO_VALID_HOST)]).problems())

    def test_no_valid_host_where_the_count_saw_room(self):
        problems = check({'a': 0, 'b': 1}, {'a': 0, 'b': 1},
                         [result(fault=NO_VALID_HOST)]).problems()
        self.assertEqual(['req: NoValidHost, but the count said 1 more pin4 '
                          'fit (b 1)'], problems)

    def test_a_multi_create_beyond_the_count_fails_whole(self):
        failed = [result(fault=NO_VALID_HOST)] * 2
        self.assertEqual([], check({'a': 1}, {'a': 1}, failed,
                                   count=2).problems())
        self.assertEqual(1, len(check({'a': 2}, {'a': 2}, failed,
                                      count=2).problems()))

    def test_another_error_is_not_the_count_s_business(self):
        self.assertEqual([], check({'a': 1}, {'a': 1},
                                   [result(fault='Build of instance '
                                           'aborted')]).problems())

    def test_a_run_lists_each_flavor_once(self):
        run = capacity_check.CapacityRun(['pin4', 'pin2', 'pin4'])
        self.assertEqual(['pin4', 'pin2'], run.flavors)


class TestDemoCapacityTable(base.TestCase):

    def _run(self, same_as_reference, checks=()):
        boots = (scenarios.Boot('req', PIN4, ('a',)),)
        scenario = types.SimpleNamespace(same_as_reference=same_as_reference,
                                         boots=boots)
        runs = []
        for label, after, host in (('run one', 1, None), ('run two', 0, 'a')):
            counted = capacity_check.CapacityRun(['pin4'])
            counted.before = capacity_check.Snapshot({'pin4': 2},
                                                     {'pin4': 5})
            counted.after = capacity_check.Snapshot({'pin4': after},
                                                    {'pin4': 4})
            counted.checks = list(checks)
            results = [[types.SimpleNamespace(flavor='pin4', host=host)]]
            runs.append(types.SimpleNamespace(
                setup=types.SimpleNamespace(label=label), results=results,
                capacity=counted))
        run = types.SimpleNamespace(scenario=scenario, runs=runs)
        run.capacity_problems = lambda: [
            p for each in runs for p in each.capacity.problems()]
        out = io.StringIO()
        demo._render_capacity(run, out.write)
        return out.getvalue()

    def test_runs_that_schedule_alike_show_the_last(self):
        text = self._run(True)
        self.assertIn('  flavor  before  landed  after\n', text)
        self.assertIn('  pin4    2 / 5   1 of 1  0 / 4\n', text)
        self.assertNotIn('run one', text)
        self.assertIn('Checked at each of the 0 requests of both runs', text)

    def test_runs_that_differ_side_by_side(self):
        text = self._run(False)
        self.assertIn('run 1 landed  run 1 after  run 2 landed', text)
        self.assertIn('  pin4    2 / 5   0 of 1        1 / 4        1 of 1  '
                      '      0 / 4\n', text)
        self.assertIn('(run 1: run one; run 2: run two)', text)

    def test_a_disagreement_is_shown(self):
        wrong = check({'a': 2}, {'a': 2}, [result('a')])
        text = self._run(True, [wrong])
        self.assertIn('The count disagreed with the scheduler in 2 case(s)',
                      text)
