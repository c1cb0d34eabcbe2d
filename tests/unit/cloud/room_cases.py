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

"""The edge cases of the free-room rule, with placement's answers.

One table for two tests: the unit test checks
:mod:`nova_sched_ext.cloud.room` against the answers written here, the
functional test (``tests/functional/test_room.py``) checks the same
answers against placement itself, in its fixture, so that the table
cannot drift from placement.

Each row: a name, the inventory (placement's fields), what is already
allocated, the amount asked, and placement's answers: whether one more
allocation of the amount is accepted, and how many of them are accepted
one after another.
"""

import collections

Case = collections.namedtuple(
    'Case', 'name inventory used amount fits units')


def inventory(total, reserved=0, ratio=1.0, min_unit=1, max_unit=None,
              step_size=1):
    return {'total': total, 'reserved': reserved,
            'allocation_ratio': ratio, 'min_unit': min_unit,
            'max_unit': total if max_unit is None else max_unit,
            'step_size': step_size}


CASES = (
    Case('empty, exact', inventory(8), 0, 8, True, 1),
    Case('one above the total', inventory(8), 0, 9, False, 0),
    Case('usage at the edge', inventory(8), 6, 2, True, 1),
    Case('usage one past the edge', inventory(8), 7, 2, False, 0),
    Case('reserved', inventory(8, reserved=2), 4, 2, True, 1),
    Case('reserved, one past', inventory(8, reserved=2), 5, 2, False, 0),
    # 7 * 1.5 = 10.5: room for 10, not 11
    Case('fractional capacity', inventory(7, ratio=1.5, max_unit=16), 8, 2,
         True, 1),
    Case('fractional capacity, past', inventory(7, ratio=1.5, max_unit=16),
         9, 2, False, 0),
    # 100 * 0.57 is 56.99999999999999 in floating point: 56, not 57
    Case('ratio below 1, float product', inventory(100, ratio=0.57), 54, 2,
         True, 1),
    Case('ratio below 1, float product, past', inventory(100, ratio=0.57),
         55, 2, False, 0),
    # (10 - 1) * 1.1 = 9.9: 9
    Case('reserved and a fractional ratio', inventory(10, reserved=1,
                                                      ratio=1.1), 0, 3,
         True, 3),
    Case('oversubscribed', inventory(4, ratio=16.0, max_unit=4), 60, 4,
         True, 1),
    Case('above max_unit with room', inventory(32, max_unit=4), 0, 8,
         False, 0),
    Case('at max_unit', inventory(32, max_unit=4), 0, 4, True, 8),
    Case('below min_unit', inventory(32, min_unit=4), 0, 2, False, 0),
    Case('at min_unit', inventory(32, min_unit=4), 0, 4, True, 8),
    Case('off step_size', inventory(32, step_size=4), 0, 6, False, 0),
    Case('on step_size', inventory(32, step_size=4), 0, 8, True, 4),
    Case('on step_size, usage at the edge', inventory(32, step_size=4), 24,
         8, True, 1),
)
