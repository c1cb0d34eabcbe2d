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

"""The defragmentation planner as a Watcher strategy.

``nova_sched_ext_defrag`` (entry point ``watcher_strategies``), for the
goal ``numa_defragmentation`` (:mod:`.watcher_goal`): an audit runs the
package's planner and turns its plan into Watcher's own ``migrate``
actions (``migration_type`` live, ``source_node``, ``destination_node``,
``resource_id`` the instance), one per move, in the plan's order; the
strategy asks for the planner :mod:`.watcher_planner`, which makes each
action the parent of the next, so the applier runs them in that order.

Watcher's decision engine and Nova cannot share one process (both register
an option ``host`` on oslo.config's global ``CONF``: ``DuplicateOptError``),
so this module imports no Nova and nothing of the package that does; the
plan is made by ``nova-sched-ext-defrag plan --json`` in a process of its
own, in the environment where Nova is installed
(``[watcher_strategies.nova_sched_ext_defrag] planner_command``,
:mod:`.watcher_conf`).

What the planner is told:

* the budget: the audit's parameters ``budget_moves``, ``budget_share``
  (a percentage of the instances in scope) and ``budget_ram_gb``;
* the scope: the hosts of Watcher's compute model (``--scope-hosts``).
  Watcher has already cut that model to the audit's scope (availability
  zones, host aggregates, excluded compute nodes), so the planner moves
  instances only between the hosts Watcher would;
* the never-move list: the audit's parameter ``never_move`` and the
  instances the audit scope excludes (``watcher_exclude`` in the model).

The plan must match the model: a move naming an instance or a host the
model does not have, or an instance the model has on another host, fails
the audit with one line saying which move; nothing is half-planned.
"""

import json
import subprocess

from oslo_log import log as logging

from watcher.common import exception
from watcher.decision_engine.strategy.strategies import base

from nova_sched_ext.defrag import model as defrag_model
from nova_sched_ext.defrag import watcher_conf
from nova_sched_ext.defrag import watcher_goal
from nova_sched_ext.defrag import watcher_planner
from nova_sched_ext import exception as sched_ext_exception

LOG = logging.getLogger(__name__)

#: The migration the plan's moves are (the planner checked them as such).
LIVE = 'live'


class DefragmentationFailed(exception.WatcherException,
                            sched_ext_exception.NovaSchedExtError):
    """The plan cannot be had or used; the audit fails with this line."""

    msg_fmt = 'NUMA defragmentation: %(reason)s'


class NUMADefragmentation(base.BaseStrategy):
    """Live migrations that give large NUMA flavors their room back.

    The plan of ``nova-sched-ext-defrag`` (NUMA-exact, with the server
    groups, deployment sets and preemptible caps of the package) as
    Watcher's ``migrate`` actions, in the plan's order.
    """

    def __init__(self, config, osc=None):
        super().__init__(config, osc)
        # The moves are valid only in their order (see watcher_planner).
        self.planner = watcher_planner.PLANNER_NAME
        self.plan = None

    @classmethod
    def get_name(cls):
        return watcher_conf.STRATEGY_NAME

    @classmethod
    def get_display_name(cls):
        return 'NUMA defragmentation (nova-sched-ext)'

    @classmethod
    def get_translatable_display_name(cls):
        return 'NUMA defragmentation (nova-sched-ext)'

    @classmethod
    def get_goal_name(cls):
        return watcher_goal.GOAL_NAME

    @classmethod
    def get_config_opts(cls):
        # No datasource: the planner reads allocations, not metrics.
        return list(watcher_conf.strategy_opts)

    @classmethod
    def get_schema(cls):
        return {
            'type': 'object',
            'properties': {
                'budget_moves': {
                    'description': 'The most live migrations the plan may '
                                   'have.',
                    'type': 'integer', 'minimum': 0,
                },
                'budget_share': {
                    'description': 'The most live migrations, as a '
                                   'percentage of the instances in scope.',
                    'type': 'number', 'minimum': 0, 'maximum': 100,
                    'default': 5,
                },
                'budget_ram_gb': {
                    'description': 'The most RAM the migrations may move, '
                                   'in GiB.',
                    'type': 'number', 'minimum': 0,
                },
                'never_move': {
                    'description': 'Instances (UUIDs) that stay where '
                                   'they are.',
                    'type': 'array', 'items': {'type': 'string'},
                    'default': [],
                },
            },
            'additionalProperties': False,
        }

    # -- the phases Watcher calls --------------------------------------

    def pre_execute(self):
        self._pre_execute()

    def do_execute(self, audit=None):
        self.plan = self.run_planner(self.planner_arguments())
        # Every move is matched with the model before the first action is
        # added: a plan that does not fit the model adds none.
        moves = [self.model_move(number, move)
                 for number, move in enumerate(self.plan['moves'], 1)]
        for instance, source, target in moves:
            self.add_action_migrate(instance, LIVE, source, target)

    def post_execute(self):
        recovered = self.plan['slots_recovered']
        self.solution.set_efficacy_indicators(
            instance_migrations_count=len(self.plan['moves']),
            large_flavor_slots_before=sum(
                self.plan['slots_before'].values()),
            large_flavor_slots_recovered=sum(recovered.values()),
            memory_moved_gb=self.plan['memory_moved_mb'] / 1024.0)
        LOG.info('NUMA defragmentation: %d live migration(s), slots '
                 'recovered %s (before %s), %.1f GiB moved',
                 len(self.plan['moves']), recovered,
                 self.plan['slots_before'],
                 self.plan['memory_moved_mb'] / 1024.0)

    # -- the planner ---------------------------------------------------

    def planner_arguments(self):
        """The planner's arguments after ``plan --json``."""
        arguments = []
        for path in self.config.nova_config_files or ():
            arguments += ['--config-file', path]
        if self.config.state_file:
            arguments += ['--state', self.config.state_file]
        parameters = self.input_parameters
        for name, option in (('budget_moves', '--budget-moves'),
                             ('budget_share', '--budget-share'),
                             ('budget_ram_gb', '--budget-ram-gb')):
            value = parameters.get(name)
            if value is not None:
                arguments += [option, str(value)]
        hosts = sorted(node.hostname for node in
                       self.compute_model.get_all_compute_nodes().values())
        arguments += ['--scope-hosts', ','.join(hosts)]
        never_move = sorted(set(parameters.get('never_move') or ()) | {
            uuid for uuid, instance in
            self.compute_model.get_all_instances().items()
            if getattr(instance, 'watcher_exclude', False)})
        if never_move:
            arguments += ['--never-move', ','.join(never_move)]
        return arguments

    def run_planner(self, arguments):
        """The plan document of the planner run with ``arguments``."""
        command = list(self.config.planner_command or ())
        if not command:
            raise DefragmentationFailed(reason=(
                '[%s] planner_command is empty: set it to the '
                'nova-sched-ext-defrag command' % watcher_conf.GROUP_NAME))
        argv = command + ['plan', '--json'] + arguments
        shown = ' '.join(command)
        LOG.debug('NUMA defragmentation: running %s', ' '.join(argv))
        try:
            done = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=self.config.planner_timeout)
        except OSError as exc:
            raise DefragmentationFailed(reason=(
                'cannot run the planner %s: %s; set [%s] planner_command to '
                'the nova-sched-ext-defrag of the environment where Nova '
                'and nova-sched-ext are installed' % (
                    shown, exc.strerror or exc, watcher_conf.GROUP_NAME)))
        except subprocess.TimeoutExpired:
            raise DefragmentationFailed(reason=(
                'the planner %s did not finish in %d s ([%s] '
                'planner_timeout)' % (shown, self.config.planner_timeout,
                                      watcher_conf.GROUP_NAME)))
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines()
                     if line.strip()]
            raise DefragmentationFailed(reason='the planner %s failed: %s' % (
                shown, lines[-1].strip() if lines else
                'exit status %d and no message' % done.returncode))
        return self._plan_of(done.stdout, shown)

    @staticmethod
    def _plan_of(output, shown):
        try:
            plan = json.loads(output)
        except ValueError as exc:
            raise DefragmentationFailed(reason=(
                'the planner %s printed no JSON plan: %s' % (shown, exc)))
        if not isinstance(plan, dict) or \
                plan.get('format') != defrag_model.PLAN_FORMAT:
            raise DefragmentationFailed(reason=(
                'the planner %s printed something other than a plan '
                '(format %s)' % (shown, defrag_model.PLAN_FORMAT)))
        for key, kind in (('moves', list), ('slots_before', dict),
                          ('slots_recovered', dict),
                          ('memory_moved_mb', (int, float))):
            if not isinstance(plan.get(key), kind):
                raise DefragmentationFailed(reason=(
                    'the plan of %s has no %s' % (shown, key)))
        return plan

    def model_move(self, number, move):
        """``(instance, source node, target node)`` of Watcher's model."""
        if not isinstance(move, dict) or not all(
                isinstance(move.get(key), str)
                for key in ('instance', 'source', 'target')):
            raise DefragmentationFailed(reason=(
                'move %d of the plan lacks an instance, source or target'
                % number))
        model = self.compute_model
        try:
            instance = model.get_instance_by_uuid(move['instance'])
        except exception.InstanceNotFound:
            raise DefragmentationFailed(reason=(
                "move %d of the plan: no instance %s in Watcher's model of "
                'the audit scope' % (number, move['instance'])))
        nodes = {}
        for key in ('source', 'target'):
            try:
                nodes[key] = model.get_node_by_name(move[key])
            except exception.ComputeNodeNotFound:
                raise DefragmentationFailed(reason=(
                    "move %d of the plan: no compute node %s (its %s) in "
                    "Watcher's model of the audit scope"
                    % (number, move[key], key)))
        try:
            where = model.get_node_by_instance_uuid(instance.uuid)
        except exception.InstanceNotMapped:
            where = None
        if where is None or where.uuid != nodes['source'].uuid:
            raise DefragmentationFailed(reason=(
                "move %d of the plan: instance %s is on %s in Watcher's "
                'model, not on %s: the model and the planner read the '
                'cloud at different times; run the audit again'
                % (number, instance.uuid,
                   where.hostname if where is not None else 'no host',
                   move['source'])))
        return instance, nodes['source'], nodes['target']
