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

"""Watcher's planner ``nova_sched_ext_sequential``: actions one after another.

A defragmentation plan is valid move by move *in its order*: each move
was checked against the cloud the moves before it left (room, NUMA fit,
group rules).  Watcher's default ``weight`` planner runs two migrations
at a time (``[watcher_planners.weight] parallelization``), and its
``node_resource_consolidation`` planner runs the moves of different
source hosts side by side; either would let two moves race for one
target's cells.  This planner makes every action the parent of the next,
in the solution's order, so the applier runs them one at a time in the
planner's sequence.  Watcher's own workflow engine would still start the
actions after a failed one; the package's (:mod:`.watcher_engine`) stops
the plan there, and the moves before it stay in place, as the package's
own executor leaves them.

It is Watcher's ``weight`` planner with another action graph: the action
plan, its actions and the efficacy indicators are written as that planner
writes them.  It has no options: a parallelization would break the order.
"""

import networkx

from watcher.common import utils
from watcher.decision_engine.planner import weight
from watcher import objects

PLANNER_NAME = 'nova_sched_ext_sequential'


class SequentialPlanner(weight.WeightPlanner):
    """Each action of the solution waits for the one before it."""

    @classmethod
    def get_config_opts(cls):
        return []

    def get_sorted_actions_by_weight(self, context, action_plan, solution):
        # One group in the solution's order: the weight planner would sort
        # the actions by type first.
        return [(None, [objects.Action(
            context, uuid=utils.generate_uuid(), parents=[],
            action_plan_id=action_plan.id, **action)
            for action in solution.actions])]

    def compute_action_graph(self, sorted_weighted_actions):
        graph = networkx.DiGraph()
        previous = None
        for _weight, actions in sorted_weighted_actions:
            for action in actions:
                graph.add_node(action)
                if previous is not None:
                    graph.add_edge(previous, action)
                    action.parents.append(previous.uuid)
                previous = action
        return graph
