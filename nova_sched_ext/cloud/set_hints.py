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

Shared by the scheduler's filter, the members' reader and the
defragmentation planner, so it sits in the cloud ring
(``nova_sched_ext.deployment_set.hints`` is the same module).

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

Both integers need a strategy, the request's or the set's; which the set
has is only known from its members, so DeploymentSetFilter checks that,
and refuses them in a group without one.

Nova's API accepts any hint without validating it and stores it, as a list
of strings, in the instance's ``RequestSpec``; the checks happen here, in
the scheduler, where a bad value fails the request with NoValidHost.

An integer is written in ASCII digits only, with an optional leading
``-`` (so that a negative value is told it is below the range): ``int()``
would also read ``'1_0'`` as 10, digits of other scripts (Arabic-Indic,
fullwidth, Bengali...) and surrounding white space, and a value the user
did not mean must fail rather than be read as another.  Values are user
input of any length: messages show at most :data:`MAX_SHOWN` characters
of them.
"""

import dataclasses
import re

from nova_sched_ext import conf
from nova_sched_ext import exception as sched_ext_exception

CONF = conf.CONF

STRATEGY = 'deployment_set_strategy'
PARTITION = 'deployment_set_partition'
MAX_SIZE = 'deployment_set_max_size'
#: every hint this package reads; Nova's ``group`` hint names the set
ALL = (STRATEGY, PARTITION, MAX_SIZE)

#: characters of a hint's value that a message shows; the rest is cut
MAX_SHOWN = 64

# fullmatch, not match: a trailing newline must not pass.  [0-9] rather
# than \d, which matches the digits of every script.
_INTEGER = re.compile(r'-?[0-9]+', re.ASCII)

HOST = 'host'
DOMAIN = 'domain'
PARTITIONED = 'partition'
STRATEGIES = (HOST, DOMAIN, PARTITIONED)


class InvalidHints(ValueError, sched_ext_exception.UserFacingError):
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


def _shown(text, quote=True):
    """``text`` for a message: quoted, and cut after :data:`MAX_SHOWN`.

    Why: a hint can be thousands of characters long, and the message is
    one line of the scheduler log.
    """
    if len(text) <= MAX_SHOWN:
        return repr(text) if quote else text
    head = text[:MAX_SHOWN]
    return '%s... (%d characters)' % (repr(head) if quote else head,
                                      len(text))


def _single(hints, name):
    """The one value of a hint as a string, or None.

    A hint given twice is an error.  The value is not stripped: whether
    white space is allowed is up to the caller.
    """
    if name not in hints:
        return None
    value = hints[name]
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise InvalidHints('scheduler hint %s must have exactly one '
                               'value, got %d: %s'
                               % (name, len(value),
                                  _shown(repr(list(value)), quote=False)))
        value = value[0]
    if value is None:
        return None
    return str(value)


def _strategy(hints):
    text = _single(hints, STRATEGY)
    return None if text is None else text.strip().lower()


def _to_integer(text):
    """``(value, None)``, or ``(None, sign)`` for a value of huge magnitude.

    ``None`` if ``text`` is not an integer.  Why the sign: ``int()`` of
    thousands of digits is slow, and refused beyond
    ``sys.get_int_max_str_digits()``; such a value is out of any range
    anyway, and only its direction matters for the message.
    """
    if not _INTEGER.fullmatch(text):
        return None
    negative = text.startswith('-')
    significant = text.lstrip('-').lstrip('0')
    if len(significant) > 18:
        return None, -1 if negative else 1
    # int() counts leading zeros against its digit limit too.
    value = int(significant or '0', 10)
    return -value if negative else value, None


def _integer(hints, name, low, high, high_reason):
    text = _single(hints, name)
    if text is None:
        return None
    parsed = _to_integer(text)
    if parsed is None:
        raise InvalidHints('scheduler hint %s=%s is not an integer (ASCII '
                           'digits 0-9 only, without spaces)'
                           % (name, _shown(text)))
    value, huge = parsed
    # Compared before converted: a huge value has no int to compare.
    if huge == -1 or (huge is None and value < low):
        raise InvalidHints('scheduler hint %s=%s is below %d'
                           % (name, _shown(text, quote=False), low))
    if huge == 1 or value > high:
        raise InvalidHints('scheduler hint %s=%s is above %d, %s'
                           % (name, _shown(text, quote=False), high,
                              high_reason))
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
    strategy = _strategy(hints)
    if strategy is not None:
        if strategy not in STRATEGIES:
            raise InvalidHints('scheduler hint %s=%s is not one of %s'
                               % (STRATEGY, _shown(strategy),
                                  ', '.join(STRATEGIES)))
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
    read are dropped.  Integers are read as :func:`parse` reads them,
    except that white space around them is ignored: older releases
    accepted it, and the member was placed with that value.
    """
    hints = scheduler_hints or {}
    strategy = partition = size = None
    try:
        strategy = _strategy(hints)
        if strategy not in STRATEGIES:
            strategy = None
    except InvalidHints:
        pass
    for name in (PARTITION, MAX_SIZE):
        try:
            text = _single(hints, name)
            parsed = _to_integer(text.strip()) if text is not None \
                else None
        except InvalidHints:
            parsed = None
        # A huge value cannot be a partition, nor a useful cap.
        value = parsed[0] if parsed is not None else None
        if name == PARTITION:
            partition = value
        elif value is not None and value >= 1:
            size = value
    return SetHints(strategy=strategy, partition=partition, max_size=size)
