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

"""Replay a trace through Nova's own filter and weigher handlers.

What runs is what ``nova-scheduler`` runs for one instance of a boot
request (``SchedulerManager._schedule``), minus the services around it:

1. placement's VCPU / MEMORY_MB check picks the candidate hosts
   (:func:`~nova_sched_ext_tools.sim.cloud.placement_allows`); each candidate
   gets one allocation candidate, as ``hosts_with_alloc_reqs`` gives it;
2. ``HostFilterHandler.get_filtered_objects`` with the filters of
   ``[filter_scheduler] enabled_filters``, loaded from
   ``available_filters`` with ``get_matching_classes`` and instantiated
   once, as ``HostManager`` does;
3. ``HostWeightHandler.get_weighed_objects`` with the weighers of
   ``[filter_scheduler] weight_classes``, their multipliers read from
   ``nova.conf`` by the weighers themselves;
4. ``_get_sorted_hosts``: ``shuffle_best_same_weighed_hosts`` and a random
   pick among the best ``host_subset_size`` hosts, from a seeded RNG (with
   the default size of 1, the top-weighed host);
5. the claim: the first host, in that order, that still has an allocation
   candidate and on which Nova's ``numa_fit_instance_to_host`` fits the
   request (the compute's claim; with ``NUMATopologyFilter`` enabled it
   always does), gets ``limits['numa_topology']`` as NUMATopologyFilter
   records it and ``HostState.consume_from_request(spec_obj)``, and the
   group bookkeeping of ``_consume_selected_host``.

Modelled beyond the scheduler: the build completes before the next request
arrives (``num_io_ops`` goes back down, as the compute's next report would
set it), and a departure frees the instance's resources as the compute's
resource tracker would report them.

Server groups: ``affinity`` and ``anti-affinity`` requests carry an
``InstanceGroup`` with the group's current members and their hosts, as
``setup_instance_group`` fills it, so Nova's ServerGroupAffinityFilter and
ServerGroupAntiAffinityFilter decide.  ``fault_domain`` requests are
deployment sets of strategy ``partition`` and go through the package's
DeploymentSetFilter (its members come from the replay, not a database),
which is added to enabled_filters when they do not name it.
"""

import collections
import dataclasses
import heapq
import itertools
import random
import time

import nova.conf
from nova import exception
from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from nova.virt import hardware
from oslo_log import log as logging

from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import rules
from nova_sched_ext import exception as sched_ext_exception
from nova_sched_ext_tools.sim import cloud
from nova_sched_ext_tools.sim import slots
from nova_sched_ext_tools.sim import trace

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

# Wall-clock seconds between two rounds of compute heartbeats.
HEARTBEAT_INTERVAL = 20.0

# --fast: filters that pass every host of the simulated cloud (all computes
# are up and enabled; flavors ask for no capabilities; images have no
# properties) ...
ALWAYS_PASSING_FILTERS = ('ComputeFilter', 'ComputeCapabilitiesFilter',
                          'ImagePropertiesFilter')
# ... Nova's server group filters pass every host unless the request has a
# group of their policy ...
GROUP_POLICY_FILTERS = {
    'ServerGroupAffinityFilter': 'affinity',
    'ServerGroupAntiAffinityFilter': 'anti-affinity',
}
# ... weighers that count for nothing when their multiplier is 0.0 ...
ZERO_MULTIPLIER_WEIGHERS = {
    'CPUWeigher': 'cpu_weight_multiplier',
    'NumInstancesWeigher': 'num_instances_weight_multiplier',
    'RAMWeigher': 'ram_weight_multiplier',
}
# ... and weighers whose raw weight is the same on every simulated host.
# Nova normalizes each weigher's weights to 0 when they are all equal, so
# they add exactly 0.0 to every host and cannot change an order.
CONSTANT_WEIGHERS = (
    'BuildFailureWeigher',          # no build ever fails
    'CrossCellWeigher',             # one cell, no moves
    'DiskWeigher',                  # no disk in the model
    'HypervisorVersionWeigher',     # one version everywhere
    'ImagePropertiesWeigher',       # images have no properties
    'IoOpsWeigher',                 # builds complete between requests
    'PCIWeigher',                   # no PCI devices
    'ServerGroupSoftAffinityWeigher',      # no soft-affinity groups
    'ServerGroupSoftAntiAffinityWeigher',  # no soft-anti-affinity groups
)


class SimulationError(sched_ext_exception.NovaSchedExtError):
    """The simulation cannot run as configured; the message says why."""


@dataclasses.dataclass
class Result:
    """What a replay measured.  :meth:`summary` is the JSON form."""

    policy: str
    hosts: int
    fast: bool = False
    requests: int = 0
    placed: int = 0
    rejected: int = 0
    placed_vcpus: int = 0
    placed_memory_mb: int = 0
    rejected_vcpus: int = 0
    departed: int = 0
    late_fit_failures: int = 0
    rejected_by: dict = dataclasses.field(
        default_factory=lambda: {s: 0 for s in trace.STRATEGIES})
    requests_by: dict = dataclasses.field(
        default_factory=lambda: {s: 0 for s in trace.STRATEGIES})
    large_slots_left: dict = dataclasses.field(default_factory=dict)
    decision_seconds: float = 0.0
    elapsed_seconds: float = 0.0
    filters: list = dataclasses.field(default_factory=list)
    weighers: list = dataclasses.field(default_factory=list)
    settings: dict = dataclasses.field(default_factory=dict)
    # with ``sample_every``: one sample before the first request and one
    # every ``sample_every`` requests; always one at the end
    samples: list = dataclasses.field(default_factory=list)
    # per request, in replay order: the host name, or None if rejected
    placements: list = dataclasses.field(default_factory=list)

    @property
    def rejected_non_affinity(self):
        return self.rejected - self.rejected_by[trace.AFFINITY]

    @property
    def mean_decision_ms(self):
        if not self.requests:
            return 0.0
        return self.decision_seconds / self.requests * 1000.0

    def summary(self):
        return {
            'policy': self.policy,
            'hosts': self.hosts,
            'fast': self.fast,
            'requests': self.requests,
            'placed': self.placed,
            'rejected': self.rejected,
            'rejected_non_affinity': self.rejected_non_affinity,
            'placed_vcpus': self.placed_vcpus,
            'placed_ram_gb': self.placed_memory_mb / 1024.0,
            'rejected_vcpus': self.rejected_vcpus,
            'rejected_by': dict(self.rejected_by),
            'requests_by': dict(self.requests_by),
            'departed': self.departed,
            'late_fit_failures': self.late_fit_failures,
            'large_slots_left': dict(self.large_slots_left),
            'large_slots_left_total': sum(self.large_slots_left.values()),
            'mean_decision_ms': round(self.mean_decision_ms, 3),
            'elapsed_s': round(self.elapsed_seconds, 2),
            'filters': list(self.filters),
            'weighers': list(self.weighers),
            'settings': dict(self.settings),
            'samples': list(self.samples),
        }


class _Group(object):
    """A server group of the trace and where its members are."""

    def __init__(self, strategy, group_id):
        self.strategy = strategy
        self.id = group_id
        self.uuid = cloud.stable_uuid('group', strategy, group_id)
        # instance uuid -> (host name, failure domain, partition)
        self.members = {}

    def instance_group(self, new_member):
        """The ``InstanceGroup`` as ``setup_instance_group`` fills it.

        The new member is already in ``members`` (the API adds it before
        scheduling); ``hosts`` are the hosts of the placed members.
        """
        hosts = []
        for host, _domain, _partition in self.members.values():
            if host not in hosts:
                hosts.append(host)
        return objects.InstanceGroup(
            uuid=self.uuid, name='%s-%s' % (self.strategy, self.id),
            project_id='sim-project', user_id='sim-user',
            policy=self.strategy, policies=[self.strategy], _rules={},
            members=list(self.members) + [new_member], hosts=hosts)

    def deployment_set(self, new_member):
        """The group as a deployment set of strategy ``partition``.

        An anti-affinity server group whose ``max_server_per_host`` is
        unbounded: the trace lets members of one partition share hosts, so
        Nova's ServerGroupAntiAffinityFilter must not object.
        """
        hosts = sorted({host for host, _d, _p in self.members.values()})
        return objects.InstanceGroup(
            uuid=self.uuid, name='%s-%s' % (self.strategy, self.id),
            project_id='sim-project', user_id='sim-user',
            policy='anti-affinity', policies=['anti-affinity'],
            rules={'max_server_per_host': str(UNBOUNDED_PER_HOST)},
            members=list(self.members) + [new_member], hosts=hosts)

    def deployment_set_members(self):
        return [rules.Member(uuid=uuid, hosts=(host,), partition=partition,
                             strategy='partition',
                             domains=frozenset([domain]))
                for uuid, (host, domain, partition) in self.members.items()]


# The trace's groups reach about 130 members; deployment sets are capped at
# [nova_sched_ext] deployment_set_max_size, which the simulator raises.
TRACE_MAX_SET_SIZE = 1000
UNBOUNDED_PER_HOST = 100000
# Simulator.book's requests are numbered from here: beyond any trace's seq
# (at most 2**31 - 1), so their instance UUIDs are new.
BOOKING_SEQ = 1 << 40
DEPLOYMENT_SET_FILTER = 'DeploymentSetFilter'


def _named(classes, kind):
    return ['%s.%s' % (c.__module__, c.__name__) for c in classes] or \
        ['(no %s)' % kind]


class Simulator(object):
    """One replay: fresh hosts, filters and weighers from the config."""

    def __init__(self, trace_hosts, policy='configured', seed=0,
                 slot_flavors=(), sample_every=0, progress=None,
                 fast=False, flavors=(), host_states=None):
        """A replay of ``trace_hosts``, or of ``host_states`` if given.

        ``host_states``: ``HostState`` objects to schedule on instead of
        fresh ones built from the trace hosts (a copy of another
        simulator's hosts, for :meth:`book`).
        """
        cloud.register_objects()
        if not (trace_hosts if host_states is None else host_states):
            raise SimulationError('the trace has no hosts')
        self.policy = policy
        self.rng = random.Random(seed)
        self.sample_every = sample_every
        self.progress = progress
        self.fast = fast
        self.factory = cloud.RequestFactory()
        # the flavor table plugins may read; completed by run()
        self.flavor_shapes = list(flavors)
        self.filter_handler = nova_filters.HostFilterHandler()
        self.weight_handler = nova_weights.HostWeightHandler()
        self.filters = self._load_filters()
        self.weighers = self._load_weighers()
        self.hosts = (list(host_states) if host_states is not None
                      else cloud.build_host_states(trace_hosts))
        self.slot_counter = slots.SlotCounter(self.factory, slot_flavors)
        self.groups = {}
        # instance uuid -> (host state, flavor, fitted topology, group key)
        self.instances = {}
        self._last_heartbeat = time.monotonic()
        self.result = self._new_result()

    def _new_result(self):
        return Result(
            policy=self.policy, hosts=len(self.hosts), fast=self.fast,
            filters=[type(f).__name__ for f in self.filters],
            weighers=_named([type(w) for w in self.weighers], 'weigher'),
            settings=current_settings())

    # -- loading plugins the way HostManager does --------------------------

    def _enabled_filter_names(self):
        names = list(CONF.filter_scheduler.enabled_filters)
        if DEPLOYMENT_SET_FILTER not in names:
            # The trace's fault_domain groups are deployment sets.
            names.append(DEPLOYMENT_SET_FILTER)
        return names

    def _load_filters(self):
        available = list(CONF.filter_scheduler.available_filters)
        try:
            classes = self.filter_handler.get_matching_classes(available)
        except (ImportError, exception.ClassNotFound) as exc:
            raise SimulationError(
                'cannot load [filter_scheduler] available_filters %s: %s'
                % (available, exc))
        by_name = {cls.__name__: cls for cls in classes}
        names = self._enabled_filter_names()
        unknown = [n for n in names if n not in by_name]
        if unknown:
            # What HostManager raises as SchedulerHostFilterNotFound.
            raise SimulationError(
                'filter(s) %s of [filter_scheduler] enabled_filters are not '
                'in [filter_scheduler] available_filters (%s)'
                % (', '.join(unknown), ', '.join(available)))
        if self.fast:
            names = self._fast_filters(names, by_name)
        loaded = [by_name[n]() for n in names]
        for filter_ in loaded:
            if type(filter_).__name__ == DEPLOYMENT_SET_FILTER:
                # No database here: the members come from the replay.
                filter_.member_source = members.StaticMemberSource(
                    self._deployment_set_members)
                CONF.set_override('deployment_set_max_size',
                                  TRACE_MAX_SET_SIZE, group='nova_sched_ext')
        return loaded

    def _deployment_set_members(self, group_uuid):
        for group in self.groups.values():
            if group.uuid == group_uuid and \
                    group.strategy == trace.FAULT_DOMAIN:
                return group.deployment_set_members()
        # Affinity and plain anti-affinity groups are no deployment sets.
        return []

    @staticmethod
    def _fast_filters(names, by_name):
        """--fast: the same decisions, without Nova's Python NUMA fit.

        NUMATopologyFilter gives way to NUMAFitFilter, which answers the
        same question in C (its tests check it against Nova's filter); the
        claim still fits the chosen host with Nova's own code and records
        the limits.
        """
        fast = []
        for name in names:
            if name in ALWAYS_PASSING_FILTERS:
                continue
            if name == 'NUMATopologyFilter':
                name = 'NUMAFitFilter'
                if 'NUMAFitFilter' not in by_name:
                    raise SimulationError(
                        '--fast needs NUMAFitFilter in [filter_scheduler] '
                        'available_filters')
            if name not in fast:
                fast.append(name)
        return fast

    def _load_weighers(self):
        names = list(CONF.filter_scheduler.weight_classes)
        try:
            classes = self.weight_handler.get_matching_classes(names)
        except (ImportError, exception.ClassNotFound) as exc:
            raise SimulationError(
                'cannot load [filter_scheduler] weight_classes %s: %s'
                % (names, exc))
        if self.fast:
            classes = [c for c in classes if not self._constant_weigher(c)]
        return [cls() for cls in classes]

    @staticmethod
    def _constant_weigher(cls):
        name = cls.__name__
        if name in ZERO_MULTIPLIER_WEIGHERS and \
                cls.__module__.startswith('nova.scheduler.weights'):
            # multiplier * weight == 0.0 on every host (the simulated
            # aggregates carry no per-aggregate multipliers)
            option = ZERO_MULTIPLIER_WEIGHERS[name]
            return getattr(CONF.filter_scheduler, option) == 0
        if name == 'MetricsWeigher':
            return not CONF.metrics.weight_setting
        return name in CONSTANT_WEIGHERS and cls.__module__.startswith(
            'nova.scheduler.weights')

    # -- one request ---------------------------------------------------------

    def _filters_for(self, spec_obj):
        """--fast: leave out the group filters a request cannot trip.

        Without a group of their policy, Nova's server group filters pass
        every host.
        """
        if not self.fast:
            return self.filters
        policy = (spec_obj.instance_group.policy
                  if spec_obj.instance_group else None)
        active = []
        for filter_ in self.filters:
            name = type(filter_).__name__
            if name in GROUP_POLICY_FILTERS and \
                    GROUP_POLICY_FILTERS[name] != policy:
                continue
            active.append(filter_)
        return active

    def _sorted_hosts(self, spec_obj, hosts):
        """``SchedulerManager._get_sorted_hosts`` with a seeded RNG."""
        filtered = self.filter_handler.get_filtered_objects(
            self._filters_for(spec_obj), hosts, spec_obj, 0)
        if not filtered:
            return []
        weighed = self.weight_handler.get_weighed_objects(
            self.weighers, filtered, spec_obj)
        if CONF.filter_scheduler.shuffle_best_same_weighed_hosts:
            best = [w for w in weighed if w.weight == weighed[0].weight]
            self.rng.shuffle(best)
            weighed = best + weighed[len(best):]
        ordered = [w.obj for w in weighed]
        subset_size = CONF.filter_scheduler.host_subset_size
        subset = ordered[:subset_size] if subset_size < len(ordered) \
            else ordered
        chosen = subset[0] if len(subset) == 1 else self.rng.choice(subset)
        ordered.remove(chosen)
        return [chosen] + ordered

    def _group_for(self, request, instance_uuid):
        key = request.group_key
        if key is None:
            return None, None, None
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(*key)
        if request.strategy in (trace.AFFINITY, trace.ANTI_AFFINITY):
            return group, group.instance_group(instance_uuid), None
        if request.strategy == trace.FAULT_DOMAIN:
            hints = {'group': group.uuid,
                     'deployment_set_strategy': 'partition',
                     'deployment_set_partition': str(request.domain)}
            return group, group.deployment_set(instance_uuid), hints
        raise SimulationError('unknown group strategy %r' % request.strategy)

    def _claim(self, host, spec_obj):
        """The compute's NUMA claim, then the scheduler's consumption."""
        limits = cloud.numa_limits(host, spec_obj)
        if host.numa_topology and spec_obj.numa_topology:
            fitted = hardware.numa_fit_instance_to_host(
                host.numa_topology, spec_obj.numa_topology.obj_clone(),
                host.allocation_candidates[0]['mappings'], limits=limits)
            if fitted is None:
                return False
        # NUMATopologyFilter records these for the host it passes; without
        # it consume_from_request would fit without limits.
        host.limits['numa_topology'] = limits
        host.consume_from_request(spec_obj)
        # The build finishes before the next request; the compute's next
        # report brings the in-flight I/O count back down.
        host.num_io_ops -= 1
        return True

    def schedule(self, request):
        """Place one request; returns the chosen ``HostState`` or None."""
        instance_uuid = cloud.stable_uuid('instance', request.seq)
        group, instance_group, hints = self._group_for(request,
                                                       instance_uuid)
        spec_obj = self.factory.request_spec(
            request.flavor, instance_uuid, instance_group, hints)
        flavor = request.flavor
        started = time.perf_counter()
        candidates = []
        for host in self.hosts:
            if cloud.placement_allows(host, flavor.vcpus, flavor.memory_mb):
                host.allocation_candidates = [
                    {'mappings': {}, 'allocations': {}}]
                candidates.append(host)
        chosen = None
        for host in self._sorted_hosts(spec_obj, candidates):
            if not host.allocation_candidates:
                continue
            if self._claim(host, spec_obj):
                chosen = host
                break
            self.result.late_fit_failures += 1
        if chosen is not None:
            # _consume_selected_host's group bookkeeping.
            if spec_obj.instance_group is not None:
                spec_obj.instance_group.hosts.append(chosen.host)
                spec_obj.instance_group.obj_reset_changes(['hosts'])
            if instance_uuid not in chosen.instances:
                chosen.instances[instance_uuid] = objects.Instance(
                    uuid=instance_uuid)
        self.result.decision_seconds += time.perf_counter() - started
        for host in candidates:
            host.allocation_candidates = []
        if chosen is None:
            return None
        self.instances[instance_uuid] = (chosen, flavor,
                                         spec_obj.numa_topology, group)
        if group is not None:
            group.members[instance_uuid] = (
                chosen.host, cloud.failure_domain(chosen), request.domain)
        return chosen

    def depart(self, instance_uuid):
        """Delete a placed instance: its host gets its resources back."""
        host, flavor, topology, group = self.instances.pop(instance_uuid)
        cloud.free_instance(host, flavor.vcpus, flavor.memory_mb, topology,
                            instance_uuid)
        if group is not None:
            group.members.pop(instance_uuid, None)
        self.result.departed += 1

    # -- the replay ----------------------------------------------------------

    def _sample(self, index):
        self.result.samples.append({
            'request': index, 'placed': self.result.placed,
            'rejected': self.result.rejected,
            'slots': self.slot_counter.count(self.hosts)})

    def _heartbeat(self):
        now = time.monotonic()
        if now - self._last_heartbeat > HEARTBEAT_INTERVAL:
            cloud.heartbeat(self.hosts)
            self._last_heartbeat = now

    def _flavor_table(self, more_shapes):
        shapes = list(self.flavor_shapes)
        for shape in more_shapes:
            if shape not in shapes:
                shapes.append(shape)
        return cloud.flavor_table(self.factory.flavor(shape)[0]
                                  for shape in shapes)

    def run(self, requests):
        """Replay ``requests`` (in arrival order); returns a :class:`Result`.

        A request with a lifetime departs at ``arrival + lifetime``;
        departures due at or before an arrival happen first.
        """
        with self._flavor_table(r.flavor for r in requests):
            return self._run(requests)

    def book(self, shape, progress=None):
        """Boot instances of ``shape`` one after another until none fits.

        Each boot is an ungrouped request through :meth:`schedule`
        (placement's check, the filters, the weighers, the claim), so it
        consumes this simulator's hosts: give it a copy of a cloud
        (``host_states``).  Stops at the first NoValidHost; returns
        ``{host name: instances booked there}``.  ``progress(booked)`` is
        called after each boot.
        """
        booked = collections.Counter()
        # The hosts may come from a cloud counted for longer than
        # service_down_time: the computes report in before the first boot.
        cloud.heartbeat(self.hosts)
        self._last_heartbeat = time.monotonic()
        with self._flavor_table([shape]):
            for number in itertools.count():
                self._heartbeat()
                chosen = self.schedule(trace.Request(
                    seq=BOOKING_SEQ + number, flavor=shape))
                if chosen is None:
                    return dict(booked)
                booked[chosen.host] += 1
                if progress:
                    progress(number + 1)

    def _run(self, requests):
        result = self.result = self._new_result()
        started = time.perf_counter()
        if self.sample_every:
            # Hosts that no request touches are counted once: the final
            # count reuses this one.
            self._sample(0)
        departures = []
        for index, request in enumerate(requests):
            while departures and departures[0][0] <= request.arrival:
                _when, _seq, instance_uuid = heapq.heappop(departures)
                self.depart(instance_uuid)
            self._heartbeat()
            chosen = self.schedule(request)
            result.requests += 1
            result.requests_by[request.strategy] += 1
            if chosen is None:
                result.rejected += 1
                result.rejected_vcpus += request.flavor.vcpus
                result.rejected_by[request.strategy] += 1
                result.placements.append(None)
            else:
                result.placed += 1
                result.placed_vcpus += request.flavor.vcpus
                result.placed_memory_mb += request.flavor.memory_mb
                result.placements.append(chosen.host)
                if request.lifetime is not None:
                    heapq.heappush(departures, (
                        request.arrival + request.lifetime, request.seq,
                        cloud.stable_uuid('instance', request.seq)))
            if self.sample_every and (index + 1) % self.sample_every == 0:
                self._sample(index + 1)
            if self.progress:
                self.progress(self, index + 1)
        result.large_slots_left = self.slot_counter.count(self.hosts)
        if not result.samples or result.samples[-1]['request'] != \
                result.requests:
            result.samples.append({
                'request': result.requests, 'placed': result.placed,
                'rejected': result.rejected,
                'slots': dict(result.large_slots_left)})
        result.elapsed_seconds = time.perf_counter() - started
        return result


def current_settings():
    """The scheduler options that shape a replay, as the replay saw them."""
    fs = CONF.filter_scheduler
    settings = {
        'enabled_filters': list(fs.enabled_filters),
        'weight_classes': list(fs.weight_classes),
        'host_subset_size': fs.host_subset_size,
        'shuffle_best_same_weighed_hosts':
            fs.shuffle_best_same_weighed_hosts,
    }
    for name in sorted(fs.keys()):
        if name.endswith('weight_multiplier'):
            settings[name] = getattr(fs, name)
    return settings
