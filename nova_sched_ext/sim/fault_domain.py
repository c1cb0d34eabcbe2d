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

"""SimFaultDomainFilter: the trace's ``fault_domain`` rule, for now.

TEMPORARY.  The trace's ``fault_domain`` groups say: members of a group
whose ``domain`` (partition) numbers differ never share a rack.  That is
the *partition* strategy of the package's deployment-set filter (issue 4),
which does not exist yet.  Until it does, the simulator enforces the rule
with this filter, and only when no deployment-set filter is enabled (see
:data:`DEPLOYMENT_SET_FILTERS`).  Remove it, and translate ``fault_domain``
requests into the deployment-set filter's hints in
:mod:`nova_sched_ext.sim.replay`, once that filter has landed.

The filter is stateless and thread-safe: the simulator, which knows the
group's members, passes the racks this member must avoid in the scheduler
hint :data:`HINT`; a host passes unless its failure domain (rack aggregate
metadata, :data:`nova_sched_ext.sim.cloud.FAILURE_DOMAIN_KEY`) is among
them.  It is not registered as a plugin: it is meant for the simulator
only.
"""

from nova.scheduler import filters
from oslo_log import log as logging

from nova_sched_ext.sim import cloud

LOG = logging.getLogger(__name__)

CLASS_PATH = 'nova_sched_ext.sim.fault_domain.SimFaultDomainFilter'
NAME = 'SimFaultDomainFilter'
HINT = 'sim_fault_domain_avoid_racks'

# Class names of filters that enforce the fault_domain rule themselves; if
# one of them is enabled, the simulator does not add SimFaultDomainFilter.
DEPLOYMENT_SET_FILTERS = ('DeploymentSetFilter',)


class SimFaultDomainFilter(filters.BaseHostFilter):
    """Keep a fault_domain member out of racks of other partitions."""

    RUN_ON_REBUILD = False
    # The racks to avoid change with every member placed.
    run_filter_once_per_request = False

    def filter_all(self, filter_obj_list, spec_obj):
        hints = spec_obj.scheduler_hints or {}
        avoid = hints.get(HINT)
        if not avoid:
            return filter_obj_list
        avoid = set(avoid)
        return (host for host in filter_obj_list
                if self._passes(host, avoid, spec_obj))

    def host_passes(self, host_state, spec_obj):
        hints = spec_obj.scheduler_hints or {}
        return self._passes(host_state, set(hints.get(HINT) or ()), spec_obj)

    @staticmethod
    def _passes(host_state, avoid, spec_obj):
        if cloud.failure_domain(host_state) in avoid:
            LOG.debug('%(host)s is in failure domain %(domain)s, which holds '
                      'a member of another partition of the group.',
                      {'host': host_state.host,
                       'domain': cloud.failure_domain(host_state)},
                      instance_uuid=spec_obj.instance_uuid)
            return False
        return True
