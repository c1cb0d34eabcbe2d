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

"""Watcher's goal ``numa_defragmentation``: room for large flavors.

A goal of its own rather than Watcher's ``server_consolidation``: that
goal's efficacy is the share of compute nodes released, but the planner
recovers *slots of the reference flavors*, and a slot comes back when one
NUMA cell is emptied as much as when a whole host is.  A plan that frees
twenty cells on twenty hosts would read 0 % released under
``server_consolidation``, and Watcher would choose between this strategy
and its own consolidations by a figure this one does not optimise.

The efficacy indicators are the planner's own figures: the migrations,
the reference-flavor slots before and recovered, and the RAM moved; the
global efficacy is the slots recovered.  Loaded by Watcher only; it
imports no Nova (:mod:`nova_sched_ext.defrag.watcher_strategy`).
"""

from watcher.decision_engine.goal import base
from watcher.decision_engine.goal.efficacy import base as efficacy_base
from watcher.decision_engine.goal.efficacy import indicators
from watcher.decision_engine.solution import efficacy

GOAL_NAME = 'numa_defragmentation'


class _Count(indicators.IndicatorSpecification):
    """A whole number an indicator of this goal reports."""

    def __init__(self, name, description, unit):
        super().__init__(name=name, description=description, unit=unit)

    @property
    def schema(self):
        return {'type': 'integer', 'minimum': 0}


class _Amount(_Count):
    @property
    def schema(self):
        return {'type': 'number', 'minimum': 0}


class _Difference(_Count):
    # A figure of the plan, reported as it is: a check here would turn a
    # surprising plan into an audit failing with a schema error.
    @property
    def schema(self):
        return {'type': 'integer'}


class SlotsRecoveredSpecification(efficacy_base.EfficacySpecification):

    def get_indicators_specifications(self):
        return [
            indicators.InstanceMigrationsCount(),
            _Count('large_flavor_slots_before',
                   'Slots of the reference flavors (how many more of each '
                   'fit, NUMA-exact), summed, before the migrations.',
                   'slots'),
            _Difference('large_flavor_slots_recovered',
                        'Slots of the reference flavors the migrations give '
                        'back, summed (after less before).', 'slots'),
            _Amount('memory_moved_gb',
                    'RAM of the instances the migrations move.', 'GiB'),
        ]

    def get_global_efficacy_indicator(self, indicators_map=None):
        recovered = 0
        if indicators_map:
            recovered = indicators_map.large_flavor_slots_recovered
        return [efficacy.Indicator(
            name='large_flavor_slots_recovered',
            description='Slots of the reference flavors given back by the '
                        'action plan.',
            unit='slots', value=recovered)]


class NUMADefragmentation(base.Goal):
    """Give large NUMA flavors their room back.

    Live migrations that empty NUMA cells and hosts, so that more instances
    of the reference flavors (NUMASlotWeigher's,
    ``[nova_sched_ext] numa_slot_reference_flavors``) fit.
    """

    @classmethod
    def get_name(cls):
        return GOAL_NAME

    @classmethod
    def get_display_name(cls):
        return 'NUMA defragmentation'

    @classmethod
    def get_translatable_display_name(cls):
        return 'NUMA defragmentation'

    @classmethod
    def get_efficacy_specification(cls):
        return SlotsRecoveredSpecification()
