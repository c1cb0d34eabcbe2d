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

"""A tie-breaking weigher that makes host choice reproducible in tests.

Nova's weighers leave identical hosts tied, and the scheduler then keeps
the order in which placement happened to list them.  Comparing two runs
host by host (plugin on / off) needs the same choice every time, so this
weigher ranks hosts by name (``a`` before ``b``) with a multiplier small
enough that it only decides between hosts the real weighers see as equal.

Enable it like any weigher, after Nova's::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
                     nova_sched_ext_tools.harness.weighers.HostNameTieBreaker

It is a test helper: deployments have no use for it.
"""

from nova.scheduler import weights


class HostNameTieBreaker(weights.BaseHostWeigher):
    """Prefers the host whose name sorts first, by a tiny margin."""

    #: Nova normalises each weigher to [0, 1] before multiplying, so this
    #: adds at most 1e-6 to a host's total: far below any real difference.
    MULTIPLIER = 1e-6

    def weight_multiplier(self, host_state):
        return self.MULTIPLIER

    def weigh_objects(self, weighed_obj_list, weight_properties):
        names = sorted({w.obj.host for w in weighed_obj_list})
        rank = {name: len(names) - index for index, name in enumerate(names)}
        return [rank[w.obj.host] for w in weighed_obj_list]

    def _weigh_object(self, host_state, weight_properties):
        raise NotImplementedError('weigh_objects ranks all hosts at once')
