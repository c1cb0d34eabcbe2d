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

"""nova-sched-ext-demo's lines under its table add up what the rows show."""

import re
import types

from nova_sched_ext_tools import demo
from nova_sched_ext_tools.harness import filter_trace
from tests import base


def chain(start, *kept):
    return filter_trace.FilterPass(start, list(kept))


def request(*passes, servers=1):
    """The results of one request: its passes are on the first server."""
    return ([types.SimpleNamespace(passes=tuple(passes))] +
            [types.SimpleNamespace(passes=())] * (servers - 1))


FITS = chain(5, ('ComputeFilter', 5), ('NUMAFitFilter', 3),
             ('NUMATopologyFilter', 3))
NONE_LEFT = chain(5, ('ComputeFilter', 5), ('NUMAFitFilter', 0))
# Two servers in one request: a pass for each, then the pass Nova makes to
# pick alternate hosts (SchedulerManager._get_alternate_hosts).
FIRST = chain(5, ('ComputeFilter', 5), ('NUMAFitFilter', 2),
              ('NUMATopologyFilter', 2))
SECOND = chain(2, ('ServerGroupAntiAffinityFilter', 2), ('NUMAFitFilter', 1),
               ('NUMATopologyFilter', 1))
ALTERNATES = chain(1, ('ServerGroupAntiAffinityFilter', 1),
                   ('NUMAFitFilter', 0))


class TestFilterSummary(base.TestCase):

    def setUp(self):
        super().setUp()
        self.run = types.SimpleNamespace(results=[
            request(FITS), request(NONE_LEFT),
            request(FIRST, SECOND, ALTERNATES, servers=2),
            request(),  # placement had no candidate: no pass
        ])

    def test_the_rows_passes(self):
        shown, not_shown = demo.table_passes(self.run)
        self.assertEqual([FITS, NONE_LEFT, FIRST, SECOND], shown)
        self.assertEqual([ALTERNATES], not_shown)
        # ... which are the chains the rows print
        rows = [demo._chain(results[0], index)
                for results in self.run.results
                for index in range(len(results))]
        self.assertEqual([p.render(always=demo.ALWAYS_SHOWN_FILTERS)
                          for p in shown] + ['placement: no candidate host'],
                         rows)

    def test_the_sums_are_those_of_the_rows(self):
        text = demo.filter_summary(self.run)
        removed, passes = map(int, re.search(
            r'NUMAFitFilter removed (\d+) host\(s\) in the (\d+) filter',
            text).groups())
        shown, _ = demo.table_passes(self.run)
        self.assertEqual(
            sum(p.rejected('NUMAFitFilter') for p in shown), removed)
        self.assertEqual((2 + 5 + 3 + 1, 4), (removed, passes))
        self.assertIn('did not run at all in 1 pass(es)', text)
        self.assertIn('Not in the table: 1 more pass(es) Nova made to pick '
                      'alternate hosts', text)
        self.assertIn('(NUMAFitFilter removed 1 host(s) there)', text)

    def test_no_note_without_alternates(self):
        self.run.results = [request(FITS)]
        text = demo.filter_summary(self.run)
        self.assertTrue(text.startswith(
            'NUMAFitFilter removed 2 host(s) in the 1 filter passes above.'))
        self.assertNotIn('Not in the table', text)
