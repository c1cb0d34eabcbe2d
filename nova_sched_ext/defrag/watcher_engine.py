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

"""Watcher's workflow engine ``nova_sched_ext_taskflow``: stop at a failure.

Watcher's own ``taskflow`` engine (python-watcher 17) starts an action
whose parent failed: the action's task records the failure (the action
FAILED) and hands taskflow a result instead of raising, and the engine's
decider lets the next action run whatever that result (the other
execution rule, ``ANY`` in ``[watcher_workflow_engines.taskflow]
action_execution_rule``, runs it only when the parent did *not*
succeed).  A defragmentation plan is valid move by move in its order
(:mod:`.watcher_planner` chains its actions): a move after a failed one
was planned on a cloud that is not there, and it would go on draining a
host whose slot can no longer be recovered.

This engine is Watcher's ``taskflow`` engine with one difference, for the
action plans of the strategy ``nova_sched_ext_defrag`` only: once an
action of the plan has FAILED, no further action starts.  Taskflow
ignores the action after it, and everything after that; those actions
stay PENDING and the action plan ends FAILED.  A SKIPPED action (its
instance gone, or no longer on its source: Watcher's pre-condition) does
not stop the plan: it left its source and target with at least the room
the plan counted on.  The action plans of every other strategy run as
under Watcher's engine.  Select it for the applier with
``[watcher_applier] workflow_engine = nova_sched_ext_taskflow``.
"""

from oslo_log import log as logging

from watcher.applier.workflow_engine import default
from watcher import objects

from nova_sched_ext.defrag import watcher_conf

LOG = logging.getLogger(__name__)

#: The engine's name: its ``watcher_workflow_engines`` entry point.
ENGINE_NAME = 'nova_sched_ext_taskflow'


class StopAtFailureWorkFlowEngine(default.DefaultWorkFlowEngine):
    """Watcher's taskflow engine; a defragmentation stops at a failure."""

    def __init__(self, config, context=None, applier_manager=None):
        super().__init__(config, context=context,
                         applier_manager=applier_manager)
        #: The UUID of the action plan running, when it is the package's
        #: strategy's; None for any other.
        self.stopping_plan = None

    def get_execution_rule(self, actions):
        # Called once per action plan, before taskflow runs it.
        self.stopping_plan = None
        if actions:
            plan = objects.ActionPlan.get_by_id(
                self.context, actions[0].action_plan_id)
            strategy = objects.Strategy.get_by_id(
                self.context, plan.strategy_id)
            if strategy.name == watcher_conf.STRATEGY_NAME:
                self.stopping_plan = plan.uuid
        return super().get_execution_rule(actions)

    def decider(self, history):
        if self.stopping_plan is None:
            return super().decider(history)
        # The parents' results do not tell: an action that failed its
        # pre-condition also hands taskflow True.  The plan's actions do.
        failed = objects.Action.list(self.context, filters={
            'action_plan_uuid': self.stopping_plan,
            'state': objects.action.State.FAILED})
        if failed:
            LOG.warning('Action plan %(plan)s: action %(action)s failed; '
                        'the actions after it are not started',
                        {'plan': self.stopping_plan,
                         'action': failed[0].uuid})
            return False
        return True
