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

The set's members are read once per request (not once per host or
instance) by a member source (:mod:`nova_sched_ext.deployment_set.members`):
from Nova's databases and placement by default, or from the caller (pass
``member_source=`` or set :attr:`DeploymentSetFilter.member_source`).

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

from nova_sched_ext import conf
from nova_sched_ext.deployment_set import hints as ds_hints
from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import rules

LOG = logging.getLogger(__name__)
CONF = conf.CONF

ANTI_AFFINITY = 'anti-affinity'

# Where the per-request plan is kept: on the RequestSpec itself, which
# lives exactly as long as the request, so nothing is shared between
# requests and nothing has to be cleaned up.
_PLAN_ATTR = '_nova_sched_ext_deployment_set_plan'


def is_deployment_set(spec_obj):
    """Whether the filter placed this request under a set's rules."""
    cached = getattr(spec_obj, _PLAN_ATTR, None)
    return cached is not None and isinstance(cached[1], rules.Plan)


class _Refusal(object):
    """The request cannot be scheduled in its set; ``reason`` says why."""

    def __init__(self, reason):
        self.reason = reason


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
        if scheduler_utils.request_is_rebuild(spec_obj):
            return hosts
        group = spec_obj.instance_group \
            if 'instance_group' in spec_obj else None
        scheduler_hints = spec_obj.scheduler_hints \
            if 'scheduler_hints' in spec_obj else None
        if group is None and not any(
                name in (scheduler_hints or {}) for name in ds_hints.ALL):
            return hosts
        try:
            plan = self._plan(spec_obj, group, scheduler_hints, hosts)
            if plan is None:
                return hosts
            if isinstance(plan, _Refusal):
                return []
            return plan.filter(hosts, self._own_hosts(group, plan),
                               spec_obj.instance_uuid)
        except Exception:
            # The set's guarantee matters more than this one request.
            LOG.exception('DeploymentSetFilter failed; rejecting all hosts '
                          'for this request rather than risk breaking the '
                          'deployment set.',
                          instance_uuid=spec_obj.instance_uuid)
            return []

    # -- the plan of a request -------------------------------------------

    @staticmethod
    def _token(group):
        if group is None:
            return None
        hosts = group.hosts if 'hosts' in group else None
        return (id(group), id(hosts))

    @staticmethod
    def _own_hosts(group, plan):
        hosts = (group.hosts if 'hosts' in group else None) or []
        return hosts[plan.hosts_seen:]

    def _plan(self, spec_obj, group, scheduler_hints, hosts):
        """The cached plan of this request, made on first use."""
        token = self._token(group)
        cached = getattr(spec_obj, _PLAN_ATTR, None)
        if cached is not None and cached[0] == token:
            return cached[1]
        plan = self._make_plan(spec_obj, group, scheduler_hints, hosts)
        if isinstance(plan, _Refusal):
            LOG.info('DeploymentSetFilter rejects the request: %s. No host '
                     'can take it; it fails with NoValidHost.', plan.reason,
                     instance_uuid=spec_obj.instance_uuid)
        setattr(spec_obj, _PLAN_ATTR, (token, plan))
        return plan

    def _make_plan(self, spec_obj, group, scheduler_hints, hosts):
        try:
            request_hints = ds_hints.parse(scheduler_hints)
        except ds_hints.InvalidHints as exc:
            return _Refusal(str(exc))
        if group is None:
            given = sorted(n for n in ds_hints.ALL if n in scheduler_hints)
            return _Refusal(
                'scheduler hint(s) %s need a server group: boot with '
                '--hint group=<server group UUID> of an anti-affinity '
                'group' % ', '.join(given))
        policy = group.policy if 'policy' in group else None
        if policy != ANTI_AFFINITY:
            if not request_hints.given:
                # Affinity, soft policies: not a deployment set.
                return None
            return _Refusal(
                'server group %s has policy %s; a deployment set must be a '
                'server group with policy %s'
                % (group.uuid if 'uuid' in group else '(unknown)', policy,
                   ANTI_AFFINITY))
        if 'uuid' not in group:
            if not request_hints.given:
                return None
            return _Refusal('the request\'s server group has no UUID')

        own = members.request_uuids(spec_obj)
        request = members.Request(
            spec_obj.instance_uuid, own or (), request_hints, hosts)
        try:
            snapshot = self.member_source.load(spec_obj, request)
        except members.MembersUnavailable as exc:
            return _Refusal('cannot tell where the members of deployment '
                            'set %s are: %s' % (group.uuid, exc))

        refusal = self._check_strategy(snapshot, request_hints)
        if refusal is not None:
            return refusal
        strategy = request_hints.strategy or snapshot.strategy
        if strategy is None:
            return self._without_strategy(snapshot, request_hints, spec_obj)
        if not snapshot.moving:
            size = len(own) if own else max(1, spec_obj.num_instances or 1)
            refusal = self._check_size(snapshot, request_hints, size)
            if refusal is not None:
                return refusal
        plan = rules.Plan(snapshot, strategy, request_hints.partition,
                          host_states=hosts,
                          resolve_domains=self.member_source.resolve_domains)
        plan.hosts_seen = len((group.hosts if 'hosts' in group else None)
                              or [])
        return plan

    @staticmethod
    def _without_strategy(snapshot, request_hints, spec_obj):
        """A plain anti-affinity group: Nova's filter does the work.

        Unless the request gives set hints: a size cap or a partition
        means nothing without a strategy, and dropping them silently would
        let the user believe the set is capped or partitioned.  Inferring
        a strategy instead would be a guess, and would fix the set's
        strategy for every later member.  A move is left alone: its member
        was accepted before this check existed, and must stay movable.
        """
        given = sorted(name for name, value in (
            (ds_hints.MAX_SIZE, request_hints.max_size),
            (ds_hints.PARTITION, request_hints.partition))
            if value is not None)
        if not given:
            return None
        if snapshot.moving:
            LOG.debug('Deployment set hint(s) %(hints)s of a member of '
                      'server group %(group)s, which has no strategy, do '
                      'not apply to its move.',
                      {'hints': ', '.join(given),
                       'group': snapshot.group_uuid},
                      instance_uuid=spec_obj.instance_uuid)
            return None
        if request_hints.partition is not None:
            # Only one strategy has partitions.
            wanted = ds_hints.PARTITIONED
        else:
            wanted = '%s or %s' % (', '.join(ds_hints.STRATEGIES[:-1]),
                                   ds_hints.STRATEGIES[-1])
        return _Refusal(
            'scheduler hint(s) %s need a strategy: neither the request nor '
            'any member of server group %s was booted with %s, so the '
            'group is a plain anti-affinity group, without size cap or '
            'partitions; add --hint %s=%s'
            % (', '.join(given), snapshot.group_uuid, ds_hints.STRATEGY,
               ds_hints.STRATEGY, wanted))

    @staticmethod
    def _check_strategy(snapshot, request_hints):
        set_strategy = snapshot.strategy
        if len(snapshot.strategies) > 1:
            LOG.warning('Members of deployment set %(group)s were booted '
                        'with different strategies (%(all)s); the set '
                        'follows %(first)s, the strategy of its first '
                        'member that named one.',
                        {'group': snapshot.group_uuid,
                         'all': ', '.join(sorted(snapshot.strategies)),
                         'first': set_strategy})
        wanted = request_hints.strategy
        if wanted and set_strategy and wanted != set_strategy:
            return _Refusal(
                'scheduler hint %s=%s differs from the strategy %s of '
                'deployment set %s' % (ds_hints.STRATEGY, wanted,
                                       set_strategy, snapshot.group_uuid))
        strategy = wanted or set_strategy
        if strategy is None:
            return None
        partition = request_hints.partition
        if strategy == ds_hints.PARTITIONED and partition is None:
            return _Refusal(
                'deployment set %s has strategy %s: the request needs the '
                'scheduler hint %s' % (snapshot.group_uuid,
                                       ds_hints.PARTITIONED,
                                       ds_hints.PARTITION))
        if strategy != ds_hints.PARTITIONED and partition is not None:
            return _Refusal(
                'deployment set %s has strategy %s, which has no '
                'partitions: drop the scheduler hint %s'
                % (snapshot.group_uuid, strategy, ds_hints.PARTITION))
        if strategy != ds_hints.PARTITIONED and \
                snapshot.max_server_per_host > 1:
            return _Refusal(
                'server group %s has the rule max_server_per_host=%d, '
                'which strategy %s forbids (only strategy %s lets members '
                'of one partition share a host)'
                % (snapshot.group_uuid, snapshot.max_server_per_host,
                   strategy, ds_hints.PARTITIONED))
        return None

    @staticmethod
    def _check_size(snapshot, request_hints, size):
        configured = CONF.nova_sched_ext.deployment_set_max_size
        caps = [(configured, '[nova_sched_ext] deployment_set_max_size')]
        if request_hints.max_size is not None:
            caps.append((request_hints.max_size, 'the request\'s hint %s'
                         % ds_hints.MAX_SIZE))
        if snapshot.max_size is not None:
            caps.append((snapshot.max_size, 'the hint %s of a member'
                         % ds_hints.MAX_SIZE))
        cap, source = min(caps, key=lambda c: c[0])
        existing = len(snapshot.members)
        if existing + size > cap:
            return _Refusal(
                'deployment set %s has %d member(s); %d more would exceed '
                'its size cap of %d (from %s)'
                % (snapshot.group_uuid, existing, size, cap, source))
        return None
