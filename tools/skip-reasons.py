#!/usr/bin/env python3
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

"""Print each skipped test of a subunit v2 stream and why it was skipped.

    stestr last --subunit | tools/skip-reasons.py

One line per skipped test, sorted: ``<test id>: <reason>`` (the reason on
one line; "no reason given" if the test gave none).  Prints nothing if no
test was skipped.  Used by tools/run-tests.sh for its summary.
"""

import sys

import subunit
import testtools


def skipped_tests(stream):
    """[(test id, reason)] of the skipped tests in a subunit v2 stream."""
    skipped = []

    def on_test(test):
        if test['status'] != 'skip':
            return
        reason = test['details'].get('reason')
        text = ' '.join(reason.as_text().split()) if reason else ''
        skipped.append((test['id'], text or 'no reason given'))

    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    try:
        subunit.ByteStreamToStreamResult(
            stream, non_subunit_name='stdout').run(result)
    finally:
        result.stopTestRun()
    return sorted(skipped)


def main():
    for test_id, reason in skipped_tests(sys.stdin.buffer):
        print('%s: %s' % (test_id, reason))


if __name__ == '__main__':
    main()
