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

"""Victim-selection strategies (``nova_sched_ext.victim_strategies``).

The driver picks one by name with :func:`load_strategy` (option
``[nova_sched_ext] preemption_victim_strategy``).  A strategy places one
instance at a time (:meth:`VictimStrategy.place_one`);
:meth:`VictimStrategy.choose` runs it for every instance of a request through
:func:`~nova_sched_ext.preemption.victims.plan_eviction`, all or nothing.

``minimal`` (:class:`MinimalVictims`, the default; :mod:`.minimal`)
    Over all hosts, the placement that minimises, in this order: the number
    of victims; the resources wasted (see :func:`waste`); the age of the
    oldest victim (younger is better, so long-running work survives); then
    host and node name and victim UUIDs, so that equal inputs give equal
    answers.  Exact: subsets of each host's victims are tried by increasing
    size; see the class, and :mod:`.search`, for the bounds that keep it
    fast.

``random`` (:class:`RandomVictims`; :mod:`.random_victims`)
    Aardvark-like, for comparison: a random host among those where the
    request fits once all its victims are gone, then random victims one at
    a time until it fits.

A third party adds a strategy by subclassing :class:`VictimStrategy`
(:mod:`.base`) and registering it in the entry-point namespace.  A name
that is not registered, fails to import or is not a :class:`VictimStrategy`
stops the preemption driver at start, with one message naming the option,
the entry point and the namespace.  Strategies are shared by concurrent
requests: they keep no per-request state on ``self`` (the random
strategy's generator is shared, so with a seed its sequence depends on the
order of concurrent requests).
"""

from nova_sched_ext.preemption.strategies import base
from nova_sched_ext.preemption.strategies import minimal
from nova_sched_ext.preemption.strategies import random_victims
from nova_sched_ext.preemption.strategies import search
from nova_sched_ext import registry

NAMESPACE = 'nova_sched_ext.victim_strategies'
DEFAULT_STRATEGY = 'minimal'
#: the option that names the strategy, for error messages
OPTION = '[nova_sched_ext] preemption_victim_strategy'

VictimStrategy = base.VictimStrategy
MinimalVictims = minimal.MinimalVictims
RandomVictims = random_victims.RandomVictims
waste = search.waste


def available_strategies():
    """Names registered in the strategies' entry-point namespace."""
    return registry.registered_names(NAMESPACE)


def load_strategy(name=DEFAULT_STRATEGY, **kwargs):
    """Instantiate the strategy registered under ``name``.

    :param kwargs: passed to the strategy's constructor (e.g. ``seed``)
    :raises nova_sched_ext.registry.PluginLoadError: (a ValueError) no
        strategy of that name, or one that fails to load or is not a
        :class:`VictimStrategy`; the message lists the registered names
    """
    strategy_class, = registry.load_named(NAMESPACE, [name], VictimStrategy,
                                          option=OPTION)
    return strategy_class(**kwargs)
