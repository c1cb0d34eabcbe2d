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

"""The options of the Watcher strategy, in ``watcher.conf``.

Watcher's plugin loader registers a strategy's options itself, from its
``get_config_opts``, on Watcher's ``CONF`` in the group
``[watcher_strategies.<strategy name>]``: the strategy returns
:data:`strategy_opts`, so the group is ours and no name can clash with
Watcher's own (nor with Nova's, which is never in that process).  This
module imports nothing but oslo.config, so ``oslo-config-generator`` can
list them (``etc/nova-sched-ext-watcher-config-generator.conf``, namespace
``nova_sched_ext.watcher``) without Watcher installed.

What is run on the decision engine's host is set here, by the operator,
never in an audit's parameters: an audit's parameters come from any user
Watcher's API lets create audits.
"""

from oslo_config import cfg

#: The strategy's name: its ``watcher_strategies`` entry point.
STRATEGY_NAME = 'nova_sched_ext_defrag'
#: Where Watcher's loader registers :data:`strategy_opts`.
GROUP_NAME = 'watcher_strategies.%s' % STRATEGY_NAME

strategy_opts = [
    cfg.ListOpt(
        'planner_command',
        default=['nova-sched-ext-defrag'],
        help='The command that runs the planner, as a comma-separated '
             'argument list; the strategy adds "plan --json" and the '
             "audit's budget and scope. Watcher and Nova cannot be "
             'imported in one process (both register an option "host" '
             "on oslo.config's global CONF), so the plan is made by the "
             'nova-sched-ext-defrag command of the environment where Nova '
             'and nova-sched-ext are installed, e.g. '
             '/opt/nova/bin/nova-sched-ext-defrag. The default is looked '
             "up on the decision engine's PATH."),
    cfg.ListOpt(
        'nova_config_files',
        default=['/etc/nova/nova.conf'],
        help='The nova.conf files the planner reads the cloud with (its '
             'cell databases, placement and the reference flavors of '
             'NUMASlotWeigher), each passed as --config-file. Empty: the '
             'planner is given none.'),
    cfg.StrOpt(
        'state_file',
        default=None,
        help='Plan on a state saved by nova-sched-ext-sim --save-state '
             '(passed as --state) instead of the live cloud: for trials '
             "and tests. Watcher's model of the cloud must then have the "
             "state's hosts and instances."),
    cfg.IntOpt(
        'planner_timeout',
        default=600,
        min=1,
        help='Seconds the planner may run before it is stopped and the '
             'audit fails.'),
]


def list_opts():
    return [(GROUP_NAME, strategy_opts)]
