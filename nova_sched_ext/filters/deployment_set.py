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

"""DeploymentSetFilter: spread a server group across hosts and failure domains.

A *deployment set* is a Nova server group with policy ``anti-affinity``
whose members are booted with the scheduler hint
``deployment_set_strategy``::

    openstack server create --hint group=<group uuid> \\
        --hint deployment_set_strategy=domain ...

Strategies (:mod:`nova_sched_ext.deployment_set.hints` has the hints):

- ``host``: at most one member per compute host;
- ``domain``: at most one member per failure domain, the value of the host
  aggregate metadata key ``[nova_sched_ext] deployment_set_domain_key``
  (a host in no such aggregate is a domain of its own);
- ``partition``: every member names ``deployment_set_partition``; members of
  different partitions never share a failure domain, members of one
  partition share a host only up to the group's ``max_server_per_host``
  rule (default 1).

A set holds at most ``[nova_sched_ext] deployment_set_max_size`` members
(default 20); the hint ``deployment_set_max_size`` can lower that.

The filter runs for every instance of a request and sees the hosts chosen
for the earlier instances of the same request (Nova appends them to
``instance_group.hosts``), so multi-create honours every rule.  Moves
(resize, migrate, evacuate, unshelve) honour them too, without counting the
moving instance itself.  A bad hint, a group of another policy, or a set
that is full fails the request: every host is rejected, so the request ends
with NoValidHost, and one INFO line says why.  So do the hints
``deployment_set_max_size`` and ``deployment_set_partition`` in a group
where neither the request nor any member names a strategy: such a group is
a plain anti-affinity group, without cap or partitions, and dropping the
hints silently would mislead the user (a move of such a member is let
through, as before).  If the members cannot be read, the request fails the
same way: the filter never guesses.

The set's members are read, and the request's plan made
(:mod:`nova_sched_ext.deployment_set.planning`), once per request, not once
per host or instance.  The members come from a member source
(:mod:`nova_sched_ext.deployment_set.members`): from Nova's databases and
placement by default, or from the caller (pass ``member_source=`` or set
:attr:`DeploymentSetFilter.member_source`).

Enable it after Nova's ServerGroupAntiAffinityFilter::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_sched_ext.filters.all_filters
    enabled_filters = ...,ServerGroupAntiAffinityFilter,DeploymentSetFilter

Concurrent requests for one set are only safe with the package's scheduler,
``nova-sched-ext-scheduler``, which holds a lock per set around
select-and-claim (:mod:`nova_sched_ext.deployment_set.lock`).  Under the
stock ``nova-scheduler`` the filter still sees every member that another
request has claimed in placement, but two requests filtering at the same
moment can both pick the same failure domain.
"""

from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import planning

LOG = logging.getLogger(__name__)


class DeploymentSetFilter(filters.BaseHostFilter):
    """Keep the members of a deployment set apart."""

    # A rebuild keeps the instance on its host.
    RUN_ON_REBUILD = False
    # Every instance of a multi-create sees the hosts of the ones before.
    run_filter_once_per_request = False

    def __init__(self, member_source=None):
        super().__init__()
        #: where the set's members come from; see
        #: nova_sched_ext.deployment_set.members
        self.member_source = member_source or \
            members.DatabaseMemberSource()

    def host_passes(self, host_state, spec_obj):
        return bool(self.filter_all([host_state], spec_obj))

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if scheduler_utils.request_is_rebuild(spec_obj) or \
                not planning.concerns_a_set(spec_obj):
            return hosts
        try:
            plan = self._plan(spec_obj, hosts)
            if plan is None:
                return hosts
            if isinstance(plan, planning.Refusal):
                return []
            return plan.filter(hosts, planning.own_hosts(spec_obj, plan),
                               spec_obj.instance_uuid)
        except Exception:
            # The set's guarantee matters more than this one request.
            LOG.exception('DeploymentSetFilter failed; rejecting all hosts '
                          'for this request rather than risk breaking the '
                          'deployment set.',
                          instance_uuid=spec_obj.instance_uuid)
            return []

    def _plan(self, spec_obj, hosts):
        """The request's plan, made for its first instance."""
        plan = planning.recall(spec_obj)
        if plan is not planning.NOT_PLANNED:
            return plan
        plan = planning.make_plan(spec_obj, hosts, self.member_source)
        if isinstance(plan, planning.Refusal):
            LOG.info('DeploymentSetFilter rejects the request: %s. No host '
                     'can take it; it fails with NoValidHost.', plan.reason,
                     instance_uuid=spec_obj.instance_uuid)
        planning.remember(spec_obj, plan)
        return plan
