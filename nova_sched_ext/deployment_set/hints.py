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

"""The scheduler hints of deployment sets, parsed and validated.

A user passes them with ``openstack server create --hint KEY=VALUE``, next
to Nova's own ``--hint group=<server group UUID>``:

``deployment_set_strategy``
    ``host``, ``domain`` or ``partition``.  May be left out when the set
    already has members booted with a strategy: the request then joins the
    set's strategy.  It may not differ from it.
``deployment_set_partition``
    the member's partition, an integer from 0 to
    ``[nova_sched_ext] deployment_set_max_partitions`` - 1; required with
    strategy ``partition`` and refused with the others.
``deployment_set_max_size``
    an integer from 1 to ``[nova_sched_ext] deployment_set_max_size``: a
    lower cap for this set.  The smallest value any member asked for holds.

Nova's API accepts any hint without validating it and stores it, as a list
of strings, in the instance's ``RequestSpec``; the checks happen here, in
the scheduler, where a bad value fails the request with NoValidHost.
"""

import dataclasses

from nova_sched_ext import conf

CONF = conf.CONF

STRATEGY = 'deployment_set_strategy'
PARTITION = 'deployment_set_partition'
MAX_SIZE = 'deployment_set_max_size'
#: every hint this package reads; Nova's ``group`` hint names the set
ALL = (STRATEGY, PARTITION, MAX_SIZE)

HOST = 'host'
DOMAIN = 'domain'
PARTITIONED = 'partition'
STRATEGIES = (HOST, DOMAIN, PARTITIONED)


class InvalidHints(ValueError):
    """A hint has a value the request cannot be scheduled with.

    The message is meant for the operator reading the scheduler log.
    """


@dataclasses.dataclass(frozen=True)
class SetHints:
    """The deployment-set hints of one request (``None``: not given)."""

    strategy: str = None
    partition: int = None
    max_size: int = None

    @property
    def given(self):
        return (self.strategy is not None or self.partition is not None or
                self.max_size is not None)


NO_HINTS = SetHints()


def _single(hints, name):
    """The one value of a hint, or None; a hint given twice is an error."""
    if name not in hints:
        return None
    value = hints[name]
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise InvalidHints('scheduler hint %s must have exactly one '
                               'value, got %r' % (name, list(value)))
        value = value[0]
    if value is None:
        return None
    return str(value).strip()


def _integer(hints, name, low, high, high_reason):
    text = _single(hints, name)
    if text is None:
        return None
    try:
        value = int(text, 10)
    except ValueError:
        raise InvalidHints('scheduler hint %s=%r is not an integer'
                           % (name, text))
    if value < low:
        raise InvalidHints('scheduler hint %s=%d is below %d'
                           % (name, value, low))
    if value > high:
        raise InvalidHints('scheduler hint %s=%d is above %d, %s'
                           % (name, value, high, high_reason))
    return value


def parse(scheduler_hints):
    """Parse and validate the deployment-set hints of a request.

    :param scheduler_hints: ``RequestSpec.scheduler_hints`` (values are
        lists of strings) or a plain ``{name: value}`` dict.
    :returns: :class:`SetHints`; :data:`NO_HINTS` if none is given.
    :raises InvalidHints: with a message naming the hint and the problem.
    """
    hints = scheduler_hints or {}
    if not any(name in hints for name in ALL):
        return NO_HINTS
    strategy = _single(hints, STRATEGY)
    if strategy is not None:
        strategy = strategy.lower()
        if strategy not in STRATEGIES:
            raise InvalidHints('scheduler hint %s=%r is not one of %s'
                               % (STRATEGY, strategy, ', '.join(STRATEGIES)))
    max_partitions = CONF.nova_sched_ext.deployment_set_max_partitions
    partition = _integer(
        hints, PARTITION, 0, max_partitions - 1,
        'the last partition ([nova_sched_ext] '
        'deployment_set_max_partitions is %d)' % max_partitions)
    max_size = CONF.nova_sched_ext.deployment_set_max_size
    size = _integer(
        hints, MAX_SIZE, 1, max_size,
        'the configured maximum size of a deployment set ([nova_sched_ext] '
        'deployment_set_max_size)')
    if partition is not None and strategy not in (None, PARTITIONED):
        raise InvalidHints('scheduler hint %s is only valid with %s=%s, not '
                           'with %s' % (PARTITION, STRATEGY, PARTITIONED,
                                        strategy))
    if strategy == PARTITIONED and partition is None:
        raise InvalidHints('%s=%s needs the scheduler hint %s (0 to %d)'
                           % (STRATEGY, PARTITIONED, PARTITION,
                              max_partitions - 1))
    return SetHints(strategy=strategy, partition=partition, max_size=size)


def parse_lenient(scheduler_hints):
    """The hints of an existing member: what can be read of them.

    An existing member was accepted under the options of its time; a value
    that is invalid now (a smaller ``deployment_set_max_partitions``, say)
    must not make the whole set unschedulable.  Values that cannot be
    read are dropped.
    """
    hints = scheduler_hints or {}
    strategy = partition = size = None
    try:
        strategy = _single(hints, STRATEGY)
        strategy = strategy.lower() if strategy else None
        if strategy not in STRATEGIES:
            strategy = None
    except InvalidHints:
        pass
    for name in (PARTITION, MAX_SIZE):
        try:
            text = _single(hints, name)
            value = int(text, 10) if text is not None else None
        except (InvalidHints, ValueError):
            value = None
        if name == PARTITION:
            partition = value
        elif value is not None and value >= 1:
            size = value
    return SetHints(strategy=strategy, partition=partition, max_size=size)
