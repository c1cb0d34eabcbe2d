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

"""Where the members of a deployment set are, and what they asked for.

A *member source* turns the request's server group into a
:class:`~.rules.SetSnapshot`: the group's policy and rule, and for every
other member the hosts it occupies and the hints it was booted with.
``DeploymentSetFilter`` asks its source once per scheduling request.

:class:`DatabaseMemberSource` (the default) reads Nova's databases and
placement, the same everywhere the scheduler runs:

1. the group, afresh from the API database (``InstanceGroup.get_by_uuid``;
   the copy the conductor put in the request may be older than the lock);
2. the members' instance mappings in one query: deleted members
   (``queued_for_delete``) drop out, the rest are in a cell or still a
   build request;
3. each member's hints from its ``RequestSpec`` (API database), cached per
   instance for the life of the process, since a member's hints never
   change;
4. the members' instances, one query per cell that holds any (cell0 holds
   only failed builds and is skipped);
5. for a member the cell does not place yet (a build request, a build
   the compute has not claimed, a move in progress), its allocations in
   placement: the scheduler claims there before it returns, so this is
   where a member chosen a moment ago by another request, or another
   scheduler, shows up first;
6. the failure domains of hosts that are not among the request's
   candidates, from aggregate metadata in one query.

Steps 4 to 6 only run when the request or a member names a strategy: a
plain anti-affinity group costs steps 1 to 3.

:class:`StaticMemberSource` takes the members from the caller instead, for
code that schedules with plain ``HostState`` and ``RequestSpec`` objects and
no database, like the trace simulator.
"""

import collections
import threading

from keystoneauth1 import exceptions as ks_exc
from nova.compute import vm_states
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from oslo_log import log as logging

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import computes
from nova_sched_ext.cloud import errors as cloud_errors
from nova_sched_ext.cloud import groups as cloud_groups
from nova_sched_ext.cloud import set_hints as ds_hints
from nova_sched_ext.cloud import set_rules as rules
from nova_sched_ext import exception as sched_ext_exception

LOG = logging.getLogger(__name__)

#: how many members' hints DatabaseMemberSource keeps per process
HINT_CACHE_SIZE = 4096

# Members in these states hold no host, and nothing in placement either.
_HOSTLESS_STATES = (vm_states.ERROR, vm_states.SHELVED_OFFLOADED,
                    vm_states.DELETED, vm_states.SOFT_DELETED)


class MembersUnavailable(sched_ext_exception.UpstreamUnavailable):
    """The members of a set could not be read; the message says why.

    A cell that does not answer is the cloud reader's
    :class:`~nova_sched_ext.cloud.errors.CellUnavailable`, its message
    followed by what was being read; the filter rejects every host on it.
    """


class Request(object):
    """What a member source needs to know about the request.

    :param instance_uuid: the instance being scheduled now.
    :param own_uuids: every instance of the request (a multi-create);
        never treated as existing members.
    :param hints: the request's :class:`~.hints.SetHints`.
    :param host_states: the candidate ``HostState`` objects, whose compute
        node UUIDs and aggregates spare a database lookup.
    """

    def __init__(self, instance_uuid, own_uuids, hints, host_states=()):
        self.instance_uuid = instance_uuid
        self.own_uuids = frozenset(own_uuids) | {instance_uuid}
        self.hints = hints
        self.host_states = host_states
        self._by_node_uuid = None

    @property
    def hosts_by_node_uuid(self):
        """``{compute node uuid: host}`` of the candidates (built once)."""
        if self._by_node_uuid is None:
            self._by_node_uuid = {
                h.uuid: h.host for h in self.host_states
                if getattr(h, 'uuid', None)}
        return self._by_node_uuid


class MemberSource(object):
    """Interface of member sources."""

    def load(self, spec_obj, request):
        """Return the :class:`~.rules.SetSnapshot` of the request's group.

        :raises MembersUnavailable: if the members cannot be read.
        """
        raise NotImplementedError()

    def resolve_domains(self, host_names):
        """``{host: frozenset(domains)}`` for hosts not among the candidates.

        Hosts left out are domains of their own.
        """
        return {}


class StaticMemberSource(MemberSource):
    """Members supplied by the caller: no database, no placement.

    :param lookup: ``callable(group_uuid) -> iterable of rules.Member``,
        every member of the group that is placed, with its hosts, partition
        (and, if known, failure domains). Members absent from ``lookup``
        do not count.
    :param domains: optional ``callable(host_names) -> {host: frozenset}``
        for member hosts given without ``domains``.

    The group's policy and ``max_server_per_host`` rule come from
    ``spec_obj.instance_group``.  If the instance being scheduled is among
    the members with a host, the request is a move.
    """

    def __init__(self, lookup, domains=None):
        self._lookup = lookup
        self._domains = domains

    def load(self, spec_obj, request):
        group = spec_obj.instance_group
        moving = False
        members = []
        for member in self._lookup(group.uuid) or ():
            if member.uuid == request.instance_uuid:
                moving = bool(member.hosts)
                continue
            if member.uuid in request.own_uuids:
                continue
            members.append(member)
        return rules.SetSnapshot(
            group_uuid=group.uuid, policy=group.policy,
            max_server_per_host=_max_per_host(group),
            members=tuple(members), moving=moving)

    def resolve_domains(self, host_names):
        return self._domains(host_names) if self._domains else {}


#: The deployment-set hints an existing member was booted with.
member_hints = cloud_groups.member_hints
_max_per_host = cloud_groups.max_server_per_host


class _HintCache(object):
    """A bounded, thread-safe ``instance uuid -> SetHints`` map."""

    def __init__(self, size=HINT_CACHE_SIZE):
        self._size = size
        self._data = collections.OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, uuids):
        with self._lock:
            found = {}
            for uuid in uuids:
                if uuid in self._data:
                    self._data.move_to_end(uuid)
                    found[uuid] = self._data[uuid]
            return found

    def put(self, uuid, value):
        with self._lock:
            self._data[uuid] = value
            self._data.move_to_end(uuid)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


class DatabaseMemberSource(MemberSource):
    """Members from Nova's API and cell databases and from placement."""

    def __init__(self):
        self._hints = _HintCache()

    @staticmethod
    def _context():
        return nova_context.get_admin_context()

    def load(self, spec_obj, request):
        context = self._context()
        group_uuid = spec_obj.instance_group.uuid
        try:
            group = objects.InstanceGroup.get_by_uuid(context, group_uuid)
        except exception.InstanceGroupNotFound:
            raise MembersUnavailable('server group %s no longer exists'
                                     % group_uuid)
        wanted = [u for u in group.members or ()
                  if u not in request.own_uuids]
        mappings = {}
        lookup = wanted + [request.instance_uuid]
        for mapping in objects.InstanceMappingList.get_by_instance_uuids(
                context, lookup):
            mappings[mapping.instance_uuid] = mapping
        alive = [u for u in wanted if u in mappings and
                 not mappings[u].queued_for_delete]
        member_hints = self._member_hints(context, alive)
        snapshot = rules.SetSnapshot(
            group_uuid=group.uuid, policy=group.policy,
            max_server_per_host=_max_per_host(group))
        is_set = request.hints.given or any(
            h.strategy is not None for h in member_hints.values())
        if not is_set:
            return snapshot

        current = mappings.get(request.instance_uuid)
        instances = self._instances(context, mappings, alive, current)
        moving = False
        if current is not None and request.instance_uuid in instances:
            moving = (instances[request.instance_uuid].vm_state !=
                      vm_states.BUILDING)
        hosts, counted = self._member_hosts(context, request, mappings,
                                            alive, instances)
        members = []
        for uuid in alive:
            if uuid not in counted:
                continue
            found = member_hints.get(uuid, ds_hints.NO_HINTS)
            members.append(rules.Member(
                uuid=uuid, hosts=tuple(sorted(hosts.get(uuid, ()))),
                partition=found.partition, strategy=found.strategy,
                max_size=found.max_size))
        return rules.SetSnapshot(
            group_uuid=group.uuid, policy=group.policy,
            max_server_per_host=_max_per_host(group),
            members=tuple(members), moving=moving)

    # -- hints ----------------------------------------------------------------

    def _member_hints(self, context, uuids):
        found = self._hints.get_many(uuids)
        for uuid in uuids:
            if uuid in found:
                continue
            value = member_hints(context, uuid)
            self._hints.put(uuid, value)
            found[uuid] = value
        return found

    # -- hosts ----------------------------------------------------------------

    @staticmethod
    def _instances(context, mappings, alive, current):
        """``{uuid: Instance}`` of the members in real cells."""
        by_cell = collections.defaultdict(list)
        cells = {}
        targets = [mappings[u] for u in alive]
        if current is not None:
            targets.append(current)
        for mapping in targets:
            cell = mapping.cell_mapping
            if cell is None or cell.is_cell0():
                continue
            by_cell[cell.uuid].append(mapping.instance_uuid)
            cells[cell.uuid] = cell
        if not by_cell:
            return {}

        def in_cell(cctxt, uuids_by_cell):
            cell_uuid = cctxt.cell_uuid
            return objects.InstanceList.get_by_filters(
                cctxt, filters={'uuid': uuids_by_cell[cell_uuid],
                                'deleted': False},
                expected_attrs=[])

        instances = {}
        try:
            for _cell, result in cloud_cells.in_cells(
                    context, list(cells.values()), in_cell, by_cell):
                for instance in result:
                    instances[instance.uuid] = instance
        except cloud_errors.CellUnavailable as exc:
            raise MembersUnavailable('%s (reading the members %s)' % (
                exc, ', '.join(by_cell[exc.cell_uuid]))) from exc
        return instances

    def _member_hosts(self, context, request, mappings, alive, instances):
        """Hosts per member, and which members count as placed.

        A member counts when it is in a cell (cell0 included: a failed
        build is still a member until it is deleted) or holds a claim in
        placement.  A build request without a claim has not been placed
        yet: when it is, its scheduler sees this request's claims.
        """
        hosts = collections.defaultdict(set)
        counted = set()
        ask_placement = []
        for uuid in alive:
            cell = mappings[uuid].cell_mapping
            if cell is None:
                ask_placement.append(uuid)
                continue
            counted.add(uuid)
            if cell.is_cell0():
                continue
            instance = instances.get(uuid)
            if instance is None:
                # Deleted in the cell, the mapping not yet updated.
                counted.discard(uuid)
                continue
            if instance.host:
                hosts[uuid].add(instance.host)
            if instance.task_state is not None or \
                    instance.vm_state == vm_states.RESIZED or \
                    (not instance.host and
                     instance.vm_state not in _HOSTLESS_STATES):
                # Building, or moving: the destination is claimed in
                # placement before the cell records it.
                ask_placement.append(uuid)
        if ask_placement:
            node_uuids = self._claims(context, ask_placement)
            names = self._node_hosts(context, request, {
                n for nodes in node_uuids.values() for n in nodes})
            for uuid, nodes in node_uuids.items():
                for node in nodes:
                    if node in names:
                        hosts[uuid].add(names[node])
                if nodes:
                    counted.add(uuid)
        return hosts, counted

    @staticmethod
    def _claims(context, uuids):
        """Resource providers each instance holds allocations on."""
        client = report.report_client_singleton()
        claims = {}
        for uuid in uuids:
            try:
                allocations = client.get_allocs_for_consumer(
                    context, uuid).get('allocations') or {}
            except (ks_exc.ClientException,
                    exception.ConsumerAllocationRetrievalFailed) as exc:
                raise MembersUnavailable(
                    'placement did not tell the allocations of member %s: '
                    '%s' % (uuid, exc))
            claims[uuid] = set(allocations)
        return claims

    @staticmethod
    def _node_hosts(context, request, provider_uuids):
        """Compute host of each resource provider that is a compute node.

        Nested providers (PCI devices...) are not compute nodes; the
        instance's VCPU and MEMORY_MB always come from the root, which is.
        """
        names = {}
        unknown = []
        for provider in provider_uuids:
            if provider in request.hosts_by_node_uuid:
                names[provider] = request.hosts_by_node_uuid[provider]
            else:
                unknown.append(provider)
        if not unknown:
            return names
        try:
            names.update(computes.hosts_of_nodes(context, unknown))
        except cloud_errors.CellUnavailable as exc:
            raise MembersUnavailable('%s (reading which hosts the providers '
                                     '%s are)' % (exc, ', '.join(unknown))
                                     ) from exc
        return names

    # -- domains --------------------------------------------------------------

    def resolve_domains(self, host_names):
        key = rules.domain_key()
        aggregates = objects.AggregateList.get_by_metadata_key(
            self._context(), key, hosts=set(host_names))
        return {host: rules.domains_from_aggregates(host, aggregates, key)
                for host in host_names}


# The attribute under which nova_sched_ext.manager.SchedulerManager hands
# the instance UUIDs of a request to the filter; Nova's filters only get
# the RequestSpec, and RequestSpec has no field for them.
_REQUEST_UUIDS_ATTR = '_nova_sched_ext_request_uuids'


def remember_request_uuids(spec_obj, instance_uuids):
    """Tell the filter every instance of this request (not persisted)."""
    setattr(spec_obj, _REQUEST_UUIDS_ATTR,
            tuple(instance_uuids) if instance_uuids else None)


def request_uuids(spec_obj):
    """The instance UUIDs of the request; None if nobody told."""
    return getattr(spec_obj, _REQUEST_UUIDS_ATTR, None)
