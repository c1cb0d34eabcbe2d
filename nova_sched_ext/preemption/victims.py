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

"""Which preemptible instances to evict so that a request fits.

Pure logic: no RPC, no database, no placement call.  The scheduler driver
describes the candidate hosts (:class:`CandidateHost`: what placement can
still allocate, the host's ``HostState`` and the preemptible instances on it
as :class:`Victim`) and the request (:class:`Request`); a strategy
(:mod:`nova_sched_ext.preemption.strategies`) picks the victims and
:func:`plan_eviction` returns a :class:`Plan`, or None when the request
cannot be served even by evicting every preemptible instance.

A request fits on a host once some victims are gone (:func:`host_fits`)
when

* **host level**: for every resource class of the request, the amount is at
  most what placement can still allocate plus what the victims hold, and at
  most the provider's ``max_unit``;
* **NUMA level** (only when the request has a NUMA topology and the host a
  ``HostState``): the victims' instance NUMA usage is removed from a copy of
  the host's NUMA topology, and the package's fit engine (C helper or its
  Python twin) answers; where it cannot decide, Nova's own
  ``numa_fit_instance_to_host`` does.

PCI devices held by victims are not returned to the host's PCI pools: when
the request needs PCI devices, does not fit with the pools as they are, and
some victim holds PCI devices, the answer is *unknown* (None), which the
strategies treat as "does not fit".
"""

import copy
import dataclasses
import datetime
import functools
import itertools
import typing

from nova import exception as nova_exc
from nova.virt import hardware
from oslo_log import log as logging

from nova_sched_ext.cloud import room
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model
from nova_sched_ext.fit import nova_fit as fit_nova_fit

LOG = logging.getLogger(__name__)

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def timestamp(created):
    """A creation time as seconds since the epoch (naive means UTC).

    None (unknown) counts as the oldest possible: minus infinity.  The
    value of :attr:`Victim.created_ts`.
    """
    if created is None:
        return float('-inf')
    if created.tzinfo is None:
        created = created.replace(tzinfo=datetime.timezone.utc)
    return (created - _EPOCH).total_seconds()


def created_timestamps(victims):
    """``created_ts`` of each victim, in order, for many victims at once.

    Values already cached on a victim are reused; the others are computed
    in one pass and cached as the property would: its first access costs
    several times the computation, and the driver builds new victims for
    every request.
    """
    victims = list(victims)
    known = [victim.__dict__.get('created_ts') for victim in victims]
    if None not in known:
        return known
    result = [
        ts if ts is not None else
        (at - _EPOCH).total_seconds() if at is not None and at.tzinfo
        else timestamp(at)
        for ts, at in zip(known, [victim.created_at for victim in victims])]
    for victim, ts, cached in zip(victims, result, known):
        if cached is None:
            victim.__dict__['created_ts'] = ts
    return result


@dataclasses.dataclass(frozen=True, eq=False)
class Victim:
    """A preemptible instance that may be evicted.

    Two victims are equal when their UUIDs are.

    :param uuid: the instance UUID
    :param project_id: the instance's project
    :param created_at: when the instance was created (naive means UTC;
        None counts as the oldest)
    :param resources: placement resource class -> amount the instance holds
        on the host's root provider, e.g. ``{'VCPU': 2, 'MEMORY_MB': 2048}``
    :param numa_topology: its ``InstanceNUMATopology`` (with CPU pinning and
        host cell ids, as Nova stores it), or None
    :param pci_requests: its ``InstancePCIRequests`` or None; only used to
        know whether evicting it would free PCI devices
    """

    uuid: str
    project_id: str
    created_at: datetime.datetime
    resources: typing.Mapping[str, int]
    numa_topology: typing.Any = None
    pci_requests: typing.Any = None

    def __eq__(self, other):
        if not isinstance(other, Victim):
            return NotImplemented
        return self.uuid == other.uuid

    def __hash__(self):
        return hash(self.uuid)

    @functools.cached_property
    def created_ts(self):
        """``created_at`` as seconds since the epoch (naive means UTC).

        An unknown creation time counts as the oldest possible.
        """
        return timestamp(self.created_at)

    @functools.cached_property
    def holds_pci(self):
        requests = self.pci_requests
        if requests is None:
            return False
        requests = getattr(requests, 'requests', requests)
        return bool(requests)


@dataclasses.dataclass(frozen=True, eq=False)
class CandidateHost:
    """A compute node where victims could be evicted.

    :param host: compute host name
    :param nodename: hypervisor node name
    :param rp_uuid: UUID of the node's root resource provider
    :param free: resource class -> amount placement can still allocate
        (:func:`nova_sched_ext.cloud.room.free`)
    :param host_state: the node's Nova ``HostState`` (NUMA topology, PCI
        stats, allocation ratios), or None when NUMA does not matter
    :param victims: the preemptible instances on the node
    :param max_unit: resource class -> placement ``max_unit``, optional
    :param inventories: resource class -> placement inventory
        (:class:`nova_sched_ext.cloud.placement.Inventory`), optional: its
        ``min_unit`` and ``step_size`` are checked too
    """

    host: str
    nodename: str
    rp_uuid: str
    free: typing.Mapping[str, int]
    host_state: typing.Any = None
    victims: typing.Sequence[Victim] = ()
    max_unit: typing.Optional[typing.Mapping[str, int]] = None
    inventories: typing.Optional[typing.Mapping[str, typing.Any]] = None


@dataclasses.dataclass(frozen=True, eq=False)
class Request:
    """What is being scheduled.

    :param resources: placement resources of one instance
    :param spec_obj: the Nova ``RequestSpec`` (NUMA topology, PCI requests,
        flavor), or None for a host-level-only decision
    :param count: instances to place, all or nothing
    """

    resources: typing.Mapping[str, int]
    spec_obj: typing.Any = None
    count: int = 1

    @functools.cached_property
    def numa_topology(self):
        spec = self.spec_obj
        if spec is None or not spec.obj_attr_is_set('numa_topology'):
            return None
        return spec.numa_topology or None

    @functools.cached_property
    def pci_requests(self):
        spec = self.spec_obj
        if spec is None or not spec.obj_attr_is_set('pci_requests'):
            return None
        # Nova's numa_fit_instance_to_host takes the list of requests, as
        # NUMATopologyFilter passes it, not the InstancePCIRequests object.
        requests = spec.pci_requests
        return (requests.requests if requests else None) or None

    @functools.cached_property
    def fit_request(self):
        """``(model Request or None, PCI request list or None)``.

        The first item is None when the fit engine cannot describe the
        request.
        """
        try:
            return adapters.request_from_spec(self.spec_obj)
        except adapters.Unsupported as exc:
            LOG.debug('Victim selection: the fit engine does not support '
                      'this request (%s); asking Nova for every host.', exc)
            return None, None


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one instance goes and whom it evicts there."""

    host: CandidateHost
    victims: typing.Tuple[Victim, ...]


@dataclasses.dataclass(frozen=True)
class Plan:
    """Placements for every instance of a request, in instance order."""

    placements: typing.List[Placement]

    @property
    def victims(self):
        """Every distinct victim, in placement order."""
        seen = set()
        result = []
        for placement in self.placements:
            for victim in placement.victims:
                if victim not in seen:
                    seen.add(victim)
                    result.append(victim)
        return tuple(result)

    @property
    def hosts(self):
        """Every distinct host, in placement order."""
        seen = set()
        result = []
        for placement in self.placements:
            if id(placement.host) not in seen:
                seen.add(id(placement.host))
                result.append(placement.host)
        return tuple(result)


def freed_resources(victims):
    """resource class -> total amount the victims hold."""
    freed = {}
    for victim in victims:
        for rc, amount in victim.resources.items():
            freed[rc] = freed.get(rc, 0) + amount
    return freed


def host_level_fits(host, resources, victims=()):
    """Whether ``resources`` fit in the host's free room plus the victims'."""
    max_unit = host.max_unit or {}
    inventories = host.inventories or {}
    freed = freed_resources(victims) if victims else {}
    free = host.free
    for rc, amount in resources.items():
        if amount <= 0:
            continue
        if rc in max_unit and amount > max_unit[rc]:
            return False
        if rc in inventories and not room.allows(inventories[rc], amount):
            return False
        if amount > free.get(rc, 0) + freed.get(rc, 0):
            return False
    return True


def topology_without(topology, victims):
    """A copy of a host NUMA topology with the victims' usage removed.

    :raises Exception: whatever Nova raises when a victim's pinning does not
        match the host (stale data)
    """
    for victim in victims:
        if victim.numa_topology:
            topology = hardware.numa_usage_from_instance_numa(
                topology, victim.numa_topology, free=True)
    return topology


def nova_fit(topology, host_state, request):
    """Nova's fit with the filter's limits (:func:`.fit.nova_fit.fit`).

    :returns: the fitted instance topology (with pinning), or None
    """
    return fit_nova_fit.fit(
        topology, request.numa_topology, fit_nova_fit.host_limits(
            host_state, fit_nova_fit.spec_network_metadata(
                request.spec_obj)),
        pci_requests=request.pci_requests, pci_stats=host_state.pci_stats)


def _engine_fits(topology, host_state, fit_request, pci_requests):
    host = adapters.host_model(topology, host_state.pci_stats,
                               host_state.cpu_allocation_ratio,
                               host_state.ram_allocation_ratio)
    pci = None
    if fit_request.pci is not None:
        pci = adapters.host_pci(host_state, pci_requests[0])
    return engine.fits(host, fit_request, pci)


def _numa_fits_topology(topology, host_state, request):
    """True / False for one (already victim-free) host topology."""
    fit_request, pci_requests = request.fit_request
    if fit_request is not None:
        answer = _engine_fits(topology, host_state, fit_request,
                              pci_requests)
        if answer != model.UNKNOWN:
            return answer == model.YES
    return nova_fit(topology, host_state, request) is not None


def numa_fits(host, request, victims=()):
    """The NUMA half of :func:`host_fits` (True, False or None)."""
    if request.numa_topology is None or host.host_state is None:
        return True
    host_state = host.host_state
    if not host_state.numa_topology:
        # Nova's NUMATopologyFilter rejects a NUMA request on such a host.
        return False
    try:
        topology = topology_without(host_state.numa_topology, victims)
    except Exception as exc:
        LOG.warning('Victim selection: cannot remove the NUMA usage of '
                    'victims %(victims)s from host %(host)s (%(error)s); '
                    'the host is not considered with them.',
                    {'victims': [v.uuid for v in victims],
                     'host': host.host, 'error': exc})
        return None
    if _numa_fits_topology(topology, host_state, request):
        return True
    if request.pci_requests and any(v.holds_pci for v in victims):
        # The victims' PCI devices would come back, which is not modelled:
        # decide without PCI, and say "unknown" if that would fit.
        without_pci = _without_pci(request)
        if _numa_fits_topology(topology, host_state, without_pci):
            return None
    return False


def _without_pci(request):
    spec = request.spec_obj.obj_clone()
    spec.pci_requests = None
    return Request(resources=request.resources, spec_obj=spec,
                   count=request.count)


def host_fits(host, request, victims=()):
    """Whether one instance fits on ``host`` once ``victims`` are evicted.

    :returns: True, False, or None when it cannot be told (the victims' PCI
        devices, stale NUMA data).  Never changes its arguments.
    """
    if not host_level_fits(host, request.resources, victims):
        return False
    return numa_fits(host, request, victims)


def apply_placement(host, request, victims, fitted_topology=None,
                    topology=None):
    """A copy of ``host`` after evicting ``victims`` and placing one instance.

    :param fitted_topology: the placed instance's fitted
        ``InstanceNUMATopology`` (from :func:`nova_fit`), None without NUMA
    :param topology: the host's NUMA topology without the victims, if the
        caller already has it
    """
    gone = set(victims)
    freed = freed_resources(victims)
    free = dict(host.free)
    for rc in set(free) | set(freed) | set(request.resources):
        free[rc] = max(0, free.get(rc, 0) + freed.get(rc, 0) -
                       request.resources.get(rc, 0))
    host_state = host.host_state
    if host_state is not None and host_state.numa_topology and (
            gone or fitted_topology is not None):
        if topology is None:
            topology = topology_without(host_state.numa_topology, victims)
        if fitted_topology is not None:
            topology = hardware.numa_usage_from_instance_numa(
                topology, fitted_topology)
        # A shallow copy: the caller's HostState keeps its own topology.
        host_state = copy.copy(host_state)
        host_state.numa_topology = topology
    return dataclasses.replace(
        host, free=free, host_state=host_state,
        victims=tuple(v for v in host.victims if v not in gone))


def plan_eviction(hosts, request, strategy):
    """Place every instance of ``request``, evicting victims as needed.

    Instances are placed one after another with ``strategy.place_one``;
    after each, the chosen host's free resources and NUMA usage reflect the
    placed instance and the evicted victims (on copies: the caller's hosts
    and HostStates are never changed).

    :returns: a :class:`Plan` whose placements name the caller's
        :class:`CandidateHost` objects, or None when not every instance can
        be placed (never a partial plan)
    """
    if request.count < 1:
        raise ValueError('a request places at least one instance, not %r'
                         % request.count)
    originals = list(hosts)
    working = list(originals)
    placements = []
    for index in range(request.count):
        placement = strategy.place_one(working, request)
        if placement is None:
            if index:
                LOG.info('Victim selection: only %(placed)d of %(count)d '
                         'instances can be placed; evicting nothing.',
                         {'placed': index, 'count': request.count})
            return None
        position = next(i for i, h in enumerate(working)
                        if h is placement.host)
        placements.append(Placement(originals[position], placement.victims))
        fitted = topology = None
        chosen = working[position]
        if (request.numa_topology is not None and
                chosen.host_state is not None):
            topology = topology_without(
                chosen.host_state.numa_topology, placement.victims)
            fitted = nova_fit(topology, chosen.host_state, request)
            if fitted is None:
                LOG.warning('Victim selection: the fit engine and Nova '
                            'disagree on host %s; evicting nothing.',
                            chosen.host)
                return None
        try:
            # The last instance too: its claim must account the pinning
            # Nova's fit chose (issue 31), or the victims go for nothing.
            working[position] = apply_placement(
                chosen, request, placement.victims, fitted, topology)
        except nova_exc.NovaException as exc:
            LOG.warning('Victim selection: the claim of instance %(index)d '
                        'on host %(host)s would fail (%(error)s); evicting '
                        'nothing.', {'index': index + 1,
                                     'host': chosen.host, 'error': exc})
            return None
    return Plan(placements)


def brute_force_optimum(hosts, request):
    """The fewest victims one instance of ``request`` needs, or None.

    Exhaustive over every subset of every host's victims, smallest first:
    for tests and the benchmark, exponential in the victims per host.
    """
    best = None
    for host in hosts:
        victims = list(host.victims)
        limit = len(victims) if best is None else min(best - 1, len(victims))
        for size in range(limit + 1):
            if any(host_fits(host, request, subset) is True
                   for subset in itertools.combinations(victims, size)):
                best = size
                break
        if best == 0:
            return 0
    return best
