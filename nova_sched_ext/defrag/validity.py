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

"""Whether one move is allowed, where it is applied, in order.

:func:`why_unmovable` says why an instance stays where it is whatever the
target (it cannot live-migrate, the operator keeps it, its affinity group
would be split); :func:`why_not_target` why a target host cannot take it
now, given every move planned before (a :class:`~.state.PlanningState`):
the rules the scheduler applies to a live migration with a destination
(the availability zone, the aggregate isolation of its flavor and
project, placement's room, server group affinity and anti-affinity, the
package's deployment sets and the preemptible cap per host).  The NUMA fit
is the caller's: the search asks the fit engine, the applied move Nova's
``numa_fit_instance_to_host``.

The reasons are sentences about the target, as the planner's output and
the executor's skips show them.
"""

import collections

from nova_sched_ext.cloud import set_rules as rules
from nova_sched_ext.defrag import state as planning_state

#: The aggregate metadata key of AggregateMultiTenancyIsolation.
TENANT_KEY = 'filter_tenant_id'


def why_unmovable(state, instance, never_move, groups):
    """None if the instance may be moved at all, else why not.

    :param groups: the cloud's :class:`GroupIndex`
    """
    if instance.unmovable:
        return instance.unmovable
    reason = never_move.why(instance)
    if reason:
        return reason
    host = state.cloud.hosts.get(state.where[instance.uuid])
    if host is not None and host.disabled_reason:
        return 'its host %s is %s' % (host.name, host.disabled_reason)
    group = state.cloud.groups.get(instance.group)
    if group is not None and group.policy == 'affinity' and any(
            state.where[uuid] == state.where[instance.uuid]
            for uuid in groups.members[group.uuid] if uuid != instance.uuid):
        return ('it is in affinity group %s with other members on its '
                'host: the group moves together or not at all' % group.uuid)
    return None


class GroupIndex(object):
    """Members of each group, kept once for a plan.

    Instances never join or leave a group while it is made.
    """

    def __init__(self, cloud):
        self.members = collections.defaultdict(list)
        for uuid, instance in cloud.instances.items():
            if instance.group is not None:
                self.members[instance.group].append(uuid)


class TargetRules(object):
    """Why a target may not take one instance now (NUMA fit aside).

    Made once per instance and decision (what does not depend on the
    target, such as the deployment set's occupancy, is worked out once),
    then asked for every candidate target: :meth:`why_not`.
    """

    def __init__(self, state, instance, groups):
        """:param groups: the cloud's :class:`GroupIndex`"""
        self.state = state
        self.instance = instance
        cloud = state.cloud
        self.source_name = state.where[instance.uuid]
        self.source = cloud.hosts.get(self.source_name)
        self.group = cloud.groups.get(instance.group)
        self.others = [uuid for uuid in groups.members.get(instance.group, ())
                       if uuid != instance.uuid]
        self._set_plan = None
        if self.group is not None and self.group.deployment_set_strategy:
            self._set_plan = _deployment_set_plan(state, self.group,
                                                  instance, self.others)
        # members not on a host yet (the repack bound boots them) count
        # nowhere
        self._others_hosts = collections.Counter(
            state.where[uuid] for uuid in self.others
            if state.where[uuid] is not None)

    def why_not(self, target):
        """None if ``target`` (a host name) may take the instance now."""
        state, instance = self.state, self.instance
        if target == self.source_name:
            return 'it is the instance\'s own host'
        host = state.cloud.hosts.get(target)
        if host is None:
            return 'there is no such host'
        if host.disabled_reason:
            return 'it is %s' % host.disabled_reason
        if self.source is not None and \
                host.availability_zone != self.source.availability_zone:
            return ('it is in availability zone %s, the instance in %s'
                    % (host.availability_zone,
                       self.source.availability_zone))
        reason = _aggregate_rules(host, instance) or \
            _room(state, host, instance)
        if reason:
            return reason
        if self.group is not None:
            reason = self._group_rules(target)
            if reason:
                return reason
        cap = state.cloud.preemptible_max_per_host
        if instance.preemptible and cap >= 0:
            held = sum(1 for uuid in state.views[target].instances
                       if state.cloud.instances[uuid].preemptible)
            if held >= cap:
                return ('it holds %d preemptible instances, the most '
                        'preemptible_max_per_host=%d allows' % (held, cap))
        return None

    def _group_rules(self, target):
        group = self.group
        if self._set_plan is not None:
            reason = self._set_plan.why_not_host(target)
            return reason and 'deployment set %s: %s' % (group.uuid, reason)
        if group.policy == 'affinity':
            hosts = set(self._others_hosts)
            if hosts and hosts != {target}:
                return ('affinity group %s has its members on %s'
                        % (group.uuid, ', '.join(sorted(hosts))))
        elif group.policy == 'anti-affinity':
            on_target = self._others_hosts.get(target, 0)
            if on_target >= group.max_server_per_host:
                return ('it holds %d member(s) of anti-affinity group %s, '
                        'the most its max_server_per_host=%d allows'
                        % (on_target, group.uuid, group.max_server_per_host))
        return None


def why_not_target(state, instance, target, groups):
    """:meth:`TargetRules.why_not` for one target."""
    return TargetRules(state, instance, groups).why_not(target)


def _room(state, host, instance):
    reason = planning_state.room_for(host, state.views[host.name].usages,
                                     instance.resources)
    return reason and 'placement has no room: %s' % reason


def _aggregate_rules(host, instance):
    for key, value in sorted(instance.required_metadata.items()):
        if value not in host.aggregate_metadata.get(key, ()):
            return ('its aggregates do not have %s=%s, which the flavor '
                    'requires' % (key, value))
    tenants = host.aggregate_metadata.get(TENANT_KEY)
    if tenants and instance.project_id not in tenants:
        return ('its aggregates are isolated to other projects (%s)'
                % TENANT_KEY)
    return None


def _deployment_set_plan(state, group, instance, others):
    """The package's rules (``deployment_set.rules.Plan``) for one member.

    The others where they are now, this one moving.
    """
    cloud = state.cloud
    snapshot = rules.SetSnapshot(
        group_uuid=group.uuid, policy=group.policy,
        max_server_per_host=group.max_server_per_host,
        members=tuple(rules.Member(
            uuid=uuid, hosts=(state.where[uuid],),
            partition=cloud.instances[uuid].partition,
            strategy=group.deployment_set_strategy,
            domains=_domains(cloud, state.where[uuid]))
            for uuid in others if state.where[uuid] is not None),
        moving=True)
    return rules.Plan(snapshot, group.deployment_set_strategy,
                      instance.partition,
                      resolve_domains=lambda names: {
                          name: _domains(cloud, name) for name in names})


def _domains(cloud, name):
    host = cloud.hosts.get(name)
    if host is None or not host.failure_domains:
        return frozenset((rules.own_domain(name),))
    return host.failure_domains
