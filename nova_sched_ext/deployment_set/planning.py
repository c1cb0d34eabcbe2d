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

"""Whether, and how, a deployment set's rules apply to one request.

:func:`make_plan` reads the request's hints (:mod:`.hints`) and its server
group, loads the set's members from a member source (:mod:`.members`),
checks that the request agrees with the set (one strategy, partitions only
with strategy ``partition``, the size cap) and answers with one of:

- None: the request is not under a set's rules (no group, a group of
  another policy, a plain anti-affinity group);
- a :class:`Refusal`: the request cannot be scheduled in its set, and why;
- a :class:`~.rules.Plan`: the hosts a new member may take.

A plan is made once per request, not once per host or instance:
:func:`remember` keeps it on the RequestSpec, which lives exactly as long
as the request, and :func:`recall` gives it back for the later instances
of a multi-create.  :func:`is_deployment_set` tells the request wrappers
(:mod:`.lock`) whether the request was placed under a set's rules.

Options: ``[nova_sched_ext] deployment_set_max_size`` caps every set;
:mod:`.rules` reads ``deployment_set_domain_key``.
"""

from oslo_log import log as logging

from nova_sched_ext.cloud import set_hints as ds_hints
from nova_sched_ext.cloud import set_rules as rules
from nova_sched_ext import conf
from nova_sched_ext.deployment_set import members

LOG = logging.getLogger(__name__)
CONF = conf.CONF

ANTI_AFFINITY = 'anti-affinity'

# Where the per-request plan is kept: on the RequestSpec itself, so nothing
# is shared between requests and nothing has to be cleaned up.
_PLAN_ATTR = '_nova_sched_ext_deployment_set_plan'

#: what :func:`recall` returns for a request that has no plan yet
NOT_PLANNED = object()


class Refusal(object):
    """The request cannot be scheduled in its set; ``reason`` says why."""

    def __init__(self, reason):
        self.reason = reason


def concerns_a_set(spec_obj):
    """Whether the request may fall under a set's rules at all.

    Only a request with a server group or a deployment-set hint does; the
    others need no plan.
    """
    if _group(spec_obj) is not None:
        return True
    scheduler_hints = _scheduler_hints(spec_obj) or {}
    return any(name in scheduler_hints for name in ds_hints.ALL)


def is_deployment_set(spec_obj):
    """Whether the request was placed under a set's rules."""
    cached = getattr(spec_obj, _PLAN_ATTR, None)
    return cached is not None and isinstance(cached[1], rules.Plan)


def recall(spec_obj):
    """The plan :func:`remember` kept for this request, or NOT_PLANNED.

    A plan holds for as long as the request's group and its list of hosts
    are the objects it was made with: the scheduler appends the host of
    every instance it places to that list, so it is the same list for all
    the instances of one request.
    """
    cached = getattr(spec_obj, _PLAN_ATTR, None)
    if cached is not None and cached[0] == _token(_group(spec_obj)):
        return cached[1]
    return NOT_PLANNED


def remember(spec_obj, plan):
    """Keep ``plan`` (what :func:`make_plan` returned) on the request."""
    setattr(spec_obj, _PLAN_ATTR, (_token(_group(spec_obj)), plan))


def own_hosts(spec_obj, plan):
    """The hosts chosen for the earlier instances of this request."""
    group = _group(spec_obj)
    hosts = (group.hosts if group is not None and 'hosts' in group
             else None) or []
    return hosts[plan.hosts_seen:]


def make_plan(spec_obj, hosts, member_source):
    """The plan of one request: None, a :class:`Refusal` or a Plan.

    :param hosts: the request's candidate ``HostState`` objects
    :param member_source: where the set's members come from
        (:mod:`.members`)
    :raises: whatever the member source raises besides
        ``MembersUnavailable`` (a bug): the caller must not guess then
    """
    group = _group(spec_obj)
    scheduler_hints = _scheduler_hints(spec_obj) or {}
    try:
        request_hints = ds_hints.parse(scheduler_hints)
    except ds_hints.InvalidHints as exc:
        return Refusal(str(exc))
    if group is None:
        given = sorted(n for n in ds_hints.ALL if n in scheduler_hints)
        return Refusal(
            'scheduler hint(s) %s need a server group: boot with '
            '--hint group=<server group UUID> of an anti-affinity '
            'group' % ', '.join(given))
    policy = group.policy if 'policy' in group else None
    if policy != ANTI_AFFINITY:
        if not request_hints.given:
            # Affinity, soft policies: not a deployment set.
            return None
        return Refusal(
            'server group %s has policy %s; a deployment set must be a '
            'server group with policy %s'
            % (group.uuid if 'uuid' in group else '(unknown)', policy,
               ANTI_AFFINITY))
    if 'uuid' not in group:
        if not request_hints.given:
            return None
        return Refusal('the request\'s server group has no UUID')

    own = members.request_uuids(spec_obj)
    request = members.Request(
        spec_obj.instance_uuid, own or (), request_hints, hosts)
    try:
        snapshot = member_source.load(spec_obj, request)
    except members.MembersUnavailable as exc:
        return Refusal('cannot tell where the members of deployment '
                       'set %s are: %s' % (group.uuid, exc))

    refusal = _check_strategy(snapshot, request_hints)
    if refusal is not None:
        return refusal
    strategy = request_hints.strategy or snapshot.strategy
    if strategy is None:
        return _without_strategy(snapshot, request_hints, spec_obj)
    if not snapshot.moving:
        size = len(own) if own else max(1, spec_obj.num_instances or 1)
        refusal = _check_size(snapshot, request_hints, size)
        if refusal is not None:
            return refusal
    plan = rules.Plan(snapshot, strategy, request_hints.partition,
                      host_states=hosts,
                      resolve_domains=member_source.resolve_domains)
    plan.hosts_seen = len((group.hosts if 'hosts' in group else None)
                          or [])
    return plan


def _group(spec_obj):
    return spec_obj.instance_group if 'instance_group' in spec_obj else None


def _scheduler_hints(spec_obj):
    return spec_obj.scheduler_hints if 'scheduler_hints' in spec_obj \
        else None


def _token(group):
    if group is None:
        return None
    hosts = group.hosts if 'hosts' in group else None
    return (id(group), id(hosts))


def _without_strategy(snapshot, request_hints, spec_obj):
    """A plain anti-affinity group: Nova's filter does the work.

    Unless the request gives set hints: a size cap or a partition means
    nothing without a strategy, and dropping them silently would let the
    user believe the set is capped or partitioned.  Inferring a strategy
    instead would be a guess, and would fix the set's strategy for every
    later member.  A move is left alone: its member was accepted before
    this check existed, and must stay movable.
    """
    given = sorted(name for name, value in (
        (ds_hints.MAX_SIZE, request_hints.max_size),
        (ds_hints.PARTITION, request_hints.partition))
        if value is not None)
    if not given:
        return None
    if snapshot.moving:
        LOG.debug('Deployment set hint(s) %(hints)s of a member of server '
                  'group %(group)s, which has no strategy, do not apply to '
                  'its move.',
                  {'hints': ', '.join(given), 'group': snapshot.group_uuid},
                  instance_uuid=spec_obj.instance_uuid)
        return None
    if request_hints.partition is not None:
        # Only one strategy has partitions.
        wanted = ds_hints.PARTITIONED
    else:
        wanted = '%s or %s' % (', '.join(ds_hints.STRATEGIES[:-1]),
                               ds_hints.STRATEGIES[-1])
    return Refusal(
        'scheduler hint(s) %s need a strategy: neither the request nor any '
        'member of server group %s was booted with %s, so the group is a '
        'plain anti-affinity group, without size cap or partitions; add '
        '--hint %s=%s'
        % (', '.join(given), snapshot.group_uuid, ds_hints.STRATEGY,
           ds_hints.STRATEGY, wanted))


def _check_strategy(snapshot, request_hints):
    set_strategy = snapshot.strategy
    if len(snapshot.strategies) > 1:
        LOG.warning('Members of deployment set %(group)s were booted with '
                    'different strategies (%(all)s); the set follows '
                    '%(first)s, the strategy of its first member that '
                    'named one.',
                    {'group': snapshot.group_uuid,
                     'all': ', '.join(sorted(snapshot.strategies)),
                     'first': set_strategy})
    wanted = request_hints.strategy
    if wanted and set_strategy and wanted != set_strategy:
        return Refusal(
            'scheduler hint %s=%s differs from the strategy %s of '
            'deployment set %s' % (ds_hints.STRATEGY, wanted, set_strategy,
                                   snapshot.group_uuid))
    strategy = wanted or set_strategy
    if strategy is None:
        return None
    partition = request_hints.partition
    if strategy == ds_hints.PARTITIONED and partition is None:
        return Refusal(
            'deployment set %s has strategy %s: the request needs the '
            'scheduler hint %s' % (snapshot.group_uuid,
                                   ds_hints.PARTITIONED, ds_hints.PARTITION))
    if strategy != ds_hints.PARTITIONED and partition is not None:
        return Refusal(
            'deployment set %s has strategy %s, which has no partitions: '
            'drop the scheduler hint %s'
            % (snapshot.group_uuid, strategy, ds_hints.PARTITION))
    if strategy != ds_hints.PARTITIONED and \
            snapshot.max_server_per_host > 1:
        return Refusal(
            'server group %s has the rule max_server_per_host=%d, which '
            'strategy %s forbids (only strategy %s lets members of one '
            'partition share a host)'
            % (snapshot.group_uuid, snapshot.max_server_per_host, strategy,
               ds_hints.PARTITIONED))
    return None


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
        return Refusal(
            'deployment set %s has %d member(s); %d more would exceed its '
            'size cap of %d (from %s)'
            % (snapshot.group_uuid, existing, size, cap, source))
    return None
