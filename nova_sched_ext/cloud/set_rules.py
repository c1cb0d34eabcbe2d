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

"""Which hosts a new member of a deployment set may take.

A rule every reader of deployment sets shares: ``DeploymentSetFilter``
(through :mod:`nova_sched_ext.deployment_set.planning`), the
defragmentation planner's validity check and the simulator place a member
by it, so it sits in the cloud ring, under every feature
(``nova_sched_ext.deployment_set.rules`` is the same module).

A :class:`Plan` is made once per scheduling request, from the set's
existing members (:mod:`nova_sched_ext.deployment_set.members`), and then
answers for every host and
every instance of the request.  It holds no database handle: the
simulator and the unit tests build it from plain objects.

Failure domains are read from host aggregate metadata under
``[nova_sched_ext] deployment_set_domain_key``.  A host outside every such
aggregate is a domain of its own, written ``('host', name)`` so it cannot
collide with a metadata value.
"""

import collections
import dataclasses

from oslo_log import log as logging

from nova_sched_ext.cloud import set_hints as ds_hints
from nova_sched_ext import conf

LOG = logging.getLogger(__name__)
CONF = conf.CONF


def own_domain(host):
    """The failure domain of a host that no aggregate places in one."""
    return ('host', host)


def domain_key():
    return CONF.nova_sched_ext.deployment_set_domain_key


def _domain_values(aggregates, key):
    """The domain names the aggregates give, as Nova reads metadata.

    A value may list several domains, comma-separated, as
    ``aggregate_metadata_get_by_host`` reads aggregate metadata everywhere.
    """
    values = set()
    for aggregate in aggregates:
        value = aggregate.metadata.get(key)
        if value is not None:
            values.update(v.strip() for v in value.split(','))
    return frozenset(values)


def domains_from_aggregates(host, aggregates, key=None):
    """The failure domains of ``host`` given the aggregates it is in."""
    key = key or domain_key()
    values = set()
    for agg in aggregates:
        if host in agg.hosts and key in agg.metadata:
            # As Nova's aggregate_metadata_get_by_host reads a value.
            values.update(v.strip() for v in agg.metadata[key].split(','))
    if not values:
        return frozenset((own_domain(host),))
    return frozenset(values)


@dataclasses.dataclass(frozen=True)
class Member:
    """An existing member of a deployment set, as the rules see it.

    :param uuid: the instance UUID.
    :param hosts: the compute hosts it occupies: one, two while it moves
        (source and destination), none in ERROR or shelved-offloaded.
    :param partition: its ``deployment_set_partition``; None if it was
        booted without one (it then shares a domain with no other member).
    :param strategy: its ``deployment_set_strategy``, if it was given.
    :param max_size: its ``deployment_set_max_size``, if it was given.
    :param domains: the failure domains of ``hosts``, if the caller knows
        them; None lets the plan resolve them from the hosts.
    """

    uuid: str
    hosts: tuple = ()
    partition: int = None
    strategy: str = None
    max_size: int = None
    domains: frozenset = None


@dataclasses.dataclass(frozen=True)
class SetSnapshot:
    """A deployment set as a member source found it for one request.

    :param group_uuid: the server group.
    :param policy: its Nova policy (``anti-affinity`` for a set).
    :param max_server_per_host: its Nova rule (1 if unset).
    :param members: the members that exist or hold a placement claim,
        without the instances of this request.
    :param moving: the request moves an existing member (resize, migrate,
        evacuate, unshelve): it is not in ``members`` and does not count
        against the size cap again.
    """

    group_uuid: str
    policy: str
    max_server_per_host: int = 1
    members: tuple = ()
    moving: bool = False

    @property
    def strategy(self):
        """The set's strategy: that of its first member that named one."""
        for member in self.members:
            if member.strategy is not None:
                return member.strategy
        return None

    @property
    def strategies(self):
        return {m.strategy for m in self.members if m.strategy is not None}

    @property
    def max_size(self):
        """The smallest cap any member asked for, None if none did."""
        sizes = [m.max_size for m in self.members if m.max_size is not None]
        return min(sizes) if sizes else None


class Plan(object):
    """The occupied hosts and domains of one set, for one request.

    :param snapshot: the set's members (:class:`SetSnapshot`).
    :param strategy: the strategy in force for this request.
    :param partition: this request's partition (``partition`` strategy).
    :param host_states: the request's candidate hosts; their aggregates
        give their failure domains without a database lookup.
    :param resolve_domains: ``callable(host_names) -> {host: frozenset}``
        for hosts whose domains neither the members nor the ``HostState``
        objects of the request tell.
    """

    def __init__(self, snapshot, strategy, partition, host_states=(),
                 resolve_domains=None):
        self.snapshot = snapshot
        self.group_uuid = snapshot.group_uuid
        self.strategy = strategy
        self.partition = partition
        self.max_per_host = max(1, snapshot.max_server_per_host) \
            if strategy == ds_hints.PARTITIONED else 1
        self._resolve = resolve_domains
        # host name -> frozenset of domains, filled as hosts are seen.
        self._domains = {}
        # ids of a host's aggregates -> domain names they give; the
        # aggregates live as long as the request's HostState objects.
        self._by_aggregates = {}
        # How many entries instance_group.hosts had when the plan was made:
        # the scheduler appends the host of each instance of the request
        # it has placed (_consume_selected_host), so the entries after
        # this index are this request's own members.
        self.hosts_seen = 0
        self.hosts_list_id = None
        self._host_load = collections.defaultdict(list)
        self._domain_load = collections.defaultdict(set)
        self.learn_hosts(host_states)
        # One lookup for all member hosts that are not candidates.
        self.domains(sorted({h for m in snapshot.members
                             if m.domains is None for h in m.hosts}))
        for member in snapshot.members:
            self._occupy_member(member)

    # -- occupancy ----------------------------------------------------------

    def learn_hosts(self, host_states):
        """Remember the domains of the request's candidate hosts.

        Hosts share their aggregate objects (the ``HostManager`` holds one
        per aggregate), so the metadata is read once per distinct list of
        aggregates, not once per host: thousands of hosts, a few racks.
        """
        key = domain_key()
        known = self._domains
        by_aggregates = self._by_aggregates
        for host_state in host_states:
            host = host_state.host
            if host in known:
                continue
            aggregates = host_state.aggregates
            ids = tuple(map(id, aggregates))
            values = by_aggregates.get(ids)
            if values is None:
                values = by_aggregates[ids] = _domain_values(aggregates, key)
            known[host] = values or frozenset((own_domain(host),))

    def domains(self, host_names):
        """``{host: frozenset(domains)}``, resolving unknown hosts once."""
        unknown = [h for h in host_names if h not in self._domains]
        if unknown:
            found = self._resolve(unknown) if self._resolve else {}
            for host in unknown:
                self._domains[host] = found.get(host) or frozenset(
                    (own_domain(host),))
        return {h: self._domains[h] for h in host_names}

    @staticmethod
    def _partition_of(member):
        # A member booted without a partition conflicts with everyone:
        # give it a partition nobody else has.
        if member.partition is None:
            return ('unknown', member.uuid)
        return member.partition

    def _occupy_member(self, member):
        if not member.hosts:
            return
        partition = self._partition_of(member)
        if member.domains is not None:
            domains = member.domains
        else:
            domains = set()
            for host_domains in self.domains(member.hosts).values():
                domains |= host_domains
        for host in member.hosts:
            self._host_load[host].append(partition)
        for domain in domains:
            self._domain_load[domain].add(partition)

    def _load(self, own_hosts):
        """Host and domain load including this request's own members."""
        if not own_hosts:
            return self._host_load, self._domain_load
        host_load = collections.defaultdict(list, {
            h: list(p) for h, p in self._host_load.items()})
        domain_load = collections.defaultdict(set, {
            d: set(p) for d, p in self._domain_load.items()})
        own_domains = self.domains(own_hosts)
        for host in own_hosts:
            host_load[host].append(self.partition)
            for domain in own_domains[host]:
                domain_load[domain].add(self.partition)
        return host_load, domain_load

    # -- the rules ----------------------------------------------------------

    def why_not(self, host, domains, host_load, domain_load):
        """None if a new member may go on ``host``, else the reason."""
        if self.strategy == ds_hints.HOST:
            if host_load.get(host):
                return 'it already holds a member of the set'
            return None
        taken = [d for d in domains if domain_load.get(d)]
        if self.strategy == ds_hints.DOMAIN:
            if taken:
                return ('its failure domain %s already holds a member of '
                        'the set' % _show(taken[0]))
            return None
        for domain in taken:
            others = domain_load[domain] - {self.partition}
            if others:
                return ('its failure domain %s holds a member of partition '
                        '%s' % (_show(domain), _show(sorted(
                            others, key=str)[0])))
        on_host = len(host_load.get(host, ()))
        if on_host >= self.max_per_host:
            return ('it already holds %d member(s) of partition %s, the '
                    'most the group\'s max_server_per_host=%d allows'
                    % (on_host, self.partition, self.max_per_host))
        return None

    def why_not_host(self, host):
        """None if a new member may go on ``host`` (a name), else why.

        For callers without ``HostState`` objects (the defragmentation
        planner): the host's domains come from ``resolve_domains``.
        """
        host_load, domain_load = self._load(())
        return self.why_not(host, self.domains([host])[host], host_load,
                            domain_load)

    def filter(self, host_states, own_hosts, instance_uuid=None):
        """The hosts of ``host_states`` a new member may take.

        :param own_hosts: hosts already chosen for earlier instances of
            this request.
        """
        self.learn_hosts(host_states)
        host_load, domain_load = self._load(own_hosts)
        host_only = self.strategy == ds_hints.HOST
        loaded_domains = frozenset(domain_load)
        domains = self._domains
        debug = LOG.isEnabledFor(logging.DEBUG)
        kept = []
        for host_state in host_states:
            host = host_state.host
            # Most hosts are in no domain of the set: decide those with
            # one lookup each.
            if host not in host_load and (
                    host_only or domains[host].isdisjoint(loaded_domains)):
                kept.append(host_state)
                continue
            reason = self.why_not(host, domains[host], host_load,
                                  domain_load)
            if reason is None:
                kept.append(host_state)
            elif debug:
                LOG.debug('%(host)s fails deployment set %(group)s '
                          '(strategy %(strategy)s): %(reason)s.',
                          {'host': host, 'group': self.group_uuid,
                           'strategy': self.strategy, 'reason': reason},
                          instance_uuid=instance_uuid)
        return kept


def _show(value):
    if isinstance(value, tuple) and len(value) == 2:
        if value[0] == 'host':
            return '(host %s, no %s metadata)' % (value[1], domain_key())
        if value[0] == 'unknown':
            return '(none, member %s)' % value[1]
    return str(value)
