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


"""Free room: how much of an inventory placement can still allocate.

One rule, placement's own, used by everything that reads placement
(capacity, defragmentation, preemption) instead of each computing it:

- the capacity of an inventory is ``(total - reserved) * allocation_ratio``,
  a float, as placement computes it: in SQL for ``GET
  /allocation_candidates`` (``placement/objects/research_context.py``,
  ``_capacity_check_clause``, used by ``get_providers_with_resource`` and
  the other provider queries), in Python for ``POST``/``PUT
  /allocations`` (``placement/objects/allocation.py``,
  ``_check_capacity_exceeded``), and truncated with ``int()`` in the
  provider summaries a candidate's merged groups are checked against
  (``placement/objects/allocation_candidate.py``,
  ``_build_provider_summaries``, and ``research_context.py``,
  ``RequestWideSearchContext.exceeds_capacity``);
- an amount fits when ``used + amount <= capacity`` and the inventory
  allows the amount: ``min_unit <= amount <= max_unit`` and
  ``amount % step_size == 0`` (the same three functions).

Usages and amounts are integers, so ``used + amount <= capacity`` holds
exactly when ``used + amount <= floor(capacity)``: :func:`capacity` is that
integer, and every figure here is an integer.  A product such as
``100 * 0.57`` is ``56.99999999999999`` in floating point, for placement
as here: its capacity is 56.

An inventory here is anything with placement's inventory fields as
attributes (``total``, ``reserved``, ``min_unit``, ``max_unit``,
``step_size``, ``allocation_ratio``), such as
:class:`nova_sched_ext.cloud.placement.Inventory`.
"""

import math
import typing


def capacity(inventory):
    """How much placement lets be allocated in all: an integer."""
    product = (inventory.total - inventory.reserved) * \
        inventory.allocation_ratio
    return max(int(math.floor(product)), 0)


def allows(inventory, amount):
    """Whether one allocation of ``amount`` respects the units."""
    return (inventory.min_unit <= amount <= inventory.max_unit and
            amount % inventory.step_size == 0)


def free(inventory, used):
    """What placement can still allocate: at least 0."""
    return max(capacity(inventory) - used, 0)


def over(inventory, used):
    """``capacity - used``: below 0 on an inventory used beyond capacity.

    (Its allocation ratio or reserved amount changed after it was
    allocated.)  Placement allows a new allocation there only once others
    freed the excess: a caller that frees room adds it to this, not to
    :func:`free`.
    """
    return capacity(inventory) - used


def fits(inventory, used, amount):
    """Whether placement allocates ``amount`` more; nothing always fits.

    An amount of 0 is not checked by placement (it is dropped from a
    candidates query, and skipped in an allocation's check).
    """
    return fits_headroom(headroom(inventory, used), amount)


class Headroom(typing.NamedTuple):
    """What :func:`fits` reads of an inventory and its usage, computed once.

    For a caller that asks of one provider, unchanged, for many amounts
    (the kept candidate query at every request).
    """

    free: int       # capacity - used; negative when over-committed
    min_unit: int
    max_unit: int
    step_size: int
    capacity: int


def headroom(inventory, used):
    """The :class:`Headroom` of ``inventory`` with ``used`` allocated."""
    cap = capacity(inventory)
    return Headroom(cap - used, inventory.min_unit, inventory.max_unit,
                    inventory.step_size, cap)


def fits_headroom(room, amount):
    """:func:`fits` of the inventory and usage ``room`` was made of."""
    if amount <= 0:
        return True
    # Unpacked: read by index, several times cheaper than by name.
    free, min_unit, max_unit, step_size, _capacity = room
    return (min_unit <= amount <= max_unit and amount % step_size == 0 and
            amount <= free)


def units(inventory, used, amount):
    """How many more allocations of ``amount`` placement allows, one by one.

    0 for an amount of 0 or less, or one the units do not allow.
    """
    if amount <= 0 or not allows(inventory, amount):
        return 0
    return free(inventory, used) // amount


def why_not(inventory, rc, used, amount):
    """None if ``amount`` of ``rc`` fits, else placement's reason, one line."""
    if fits(inventory, used, amount):
        return None
    if amount > inventory.max_unit:
        return '%s %d is above its max_unit %d' % (
            rc, amount, inventory.max_unit)
    if amount < inventory.min_unit:
        return '%s %d is below its min_unit %d' % (
            rc, amount, inventory.min_unit)
    if amount % inventory.step_size:
        return '%s %d is not a multiple of its step_size %d' % (
            rc, amount, inventory.step_size)
    return 'placement has %d free of %s, not %d' % (
        free(inventory, used), rc, amount)
