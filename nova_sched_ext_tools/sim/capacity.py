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

"""``nova-sched-ext-sim --capacity``: the capacity count against booking.

For the largest flavors of a trace, on a simulated cloud (the trace's
hosts before any request, or after a replay), these figures per flavor and
host:

exact
    what ``nova-sched-ext-capacity`` counts:
    :func:`nova_sched_ext.capacity.count.count_host` (the package's fit
    engine, Nova's own fit where the engine's accounting is not Nova's),
    capped by :func:`~nova_sched_ext.cloud.claims.placement_limit`
    of the host's VCPU and MEMORY_MB (:func:`placement_tree`);
greedy
    the simulator's count with Nova's code alone
    (:class:`~nova_sched_ext_tools.sim.slots.SlotCounter`: Nova's
    ``numa_fit_instance_to_host`` and ``numa_usage_from_instance_numa``
    on a copy of the host until the next instance does not fit);
booked (with ``booking``)
    instances of the flavor booked one after another into a copy of the
    whole simulated cloud through the simulator's scheduler
    (:meth:`~nova_sched_ext_tools.sim.replay.Simulator.book`:
    placement's check, the enabled filters and weighers, the claim with
    Nova's fit) until NoValidHost, counted per host.  NUMAFitFilter (the
    package's C fit) runs before NUMATopologyFilter, or instead of it with
    ``--fast``, and could hide a host: so after the NoValidHost Nova's
    NUMATopologyFilter checks every host placement still offers, and a
    host it passes is one the booking missed (:attr:`FlavorFigures.missed`);
placement only
    the os-capacity formula,
    :func:`~nova_sched_ext.cloud.claims.placement_only` on the same
    tree: per host the minimum over VCPU and MEMORY_MB of
    ``floor(free / requested)``.

Exact, greedy and booked are compared host by host; the over-count is the
placement only figure against the exact one.  Each flavor is counted on
its own ("either, not both"), as everywhere else in the package.
"""

import copy
import dataclasses
import os
import time
import typing

from nova.scheduler.filters import numa_topology_filter

from nova_sched_ext.capacity import count as capacity_count
from nova_sched_ext.capacity import flavors as capacity_flavors
from nova_sched_ext.cloud import claims
from nova_sched_ext.cloud import placement
from nova_sched_ext.fit import adapters
from nova_sched_ext_tools.sim import cloud
from nova_sched_ext_tools.sim import replay
from nova_sched_ext_tools.sim import slots
from nova_sched_ext_tools.sim import trace

#: How the default trace is to be cited wherever its figures are shown.
TRACE_SOURCE = ('github.com/mdl1104/Dataset-for-topology-aware-VM-placement '
                '(public dataset, converted to CSV)')
#: The directory name of that trace (``trace.DATA_DIR_NAME``'s last part).
TRACE_DIR = os.path.basename(trace.DATA_DIR_NAME)

FLAVORS_CHOSEN_BY = ('the distinct flavors of the requests files, largest '
                     'first by vCPUs, then RAM, then NUMA nodes')
#: Differing hosts listed per flavor and state (the count says how many).
MAX_LISTED = 20


def trace_source(hosts_path):
    """The citation of the trace ``hosts_path`` belongs to, or None."""
    if hosts_path and os.path.basename(os.path.dirname(
            os.path.abspath(hosts_path))) == TRACE_DIR:
        return TRACE_SOURCE
    return None


def choose_flavors(flavor_lists):
    """The distinct flavors of several traces, largest first.

    Largest by vCPUs, then RAM, then NUMA nodes
    (:meth:`~nova_sched_ext_tools.sim.trace.Flavor.sort_key`).
    """
    shapes = set()
    for flavors in flavor_lists:
        shapes.update(flavors)
    return sorted(shapes, key=trace.Flavor.sort_key)


def placement_tree(host_state):
    """A simulated host as placement would hold it: one provider.

    Its VCPU and MEMORY_MB inventories are the host's totals with its
    allocation ratios, ``max_unit`` the total and nothing reserved, and the
    usages what the host has consumed: the same check as
    :func:`~nova_sched_ext_tools.sim.cloud.placement_allows`.
    """
    used_ram = host_state.total_usable_ram_mb - host_state.free_ram_mb
    inventories = {
        'VCPU': placement.Inventory(
            total=host_state.vcpus_total, max_unit=host_state.vcpus_total,
            allocation_ratio=host_state.cpu_allocation_ratio),
        'MEMORY_MB': placement.Inventory(
            total=host_state.total_usable_ram_mb,
            max_unit=host_state.total_usable_ram_mb,
            allocation_ratio=host_state.ram_allocation_ratio),
    }
    provider = placement.Provider(
        uuid=host_state.uuid, name=host_state.host, parent_uuid=None,
        inventories=inventories,
        usages={'VCPU': host_state.vcpus_used, 'MEMORY_MB': used_ram},
        traits=frozenset())
    return placement.Tree(providers=(provider,))


def _one_candidate(host_state, use):
    """Run ``use(host_state)`` while the host has one allocation candidate.

    What a fresh boot on a compute node provider has; the fit engine's
    model and NUMATopologyFilter fit once per candidate.
    """
    saved = host_state.allocation_candidates
    host_state.allocation_candidates = [{'mappings': {}, 'allocations': {}}]
    try:
        return use(host_state)
    finally:
        host_state.allocation_candidates = saved


def _prepared_model(host_state):
    return capacity_count.host_model(
        host_state, adapters.prepared_host(host_state))


class Counts(object):
    """Per flavor and host, the exact and the os-capacity figures."""

    def __init__(self, factory, shapes):
        self.shapes = tuple(shapes)
        self._requests = [capacity_flavors.flavor_request(
            factory.flavor(shape)[0]) for shape in self.shapes]
        self._flavor_shapes = [capacity_count.FlavorShape(
            engine=r.shape, instance_topology=r.instance_topology,
            pci_requests=r.pci_requests, name=r.name)
            for r in self._requests]

    def host(self, host_state):
        """``[(exact, fell back to Nova's fit, placement only)]``."""
        model = _one_candidate(host_state, _prepared_model)
        tree = placement_tree(host_state)
        figures = []
        for request, shape in zip(self._requests, self._flavor_shapes):
            if request.invalid or not request.queries:
                figures.append((0, False, 0))
                continue
            limit = claims.placement_limit(tree, request.queries)
            counted = capacity_count.count_host(model, shape, limit)
            figures.append((counted.instances, counted.fallback,
                            claims.placement_only(tree,
                                                  request.queries[0])))
        return figures


@dataclasses.dataclass
class FlavorFigures:
    """One flavor on one simulated cloud."""

    flavor: trace.Flavor
    #: {host name: instances}, over every host of the cloud: the count of
    #: count_host, the simulator's per-host greedy, os-capacity's formula
    exact: dict = dataclasses.field(default_factory=dict)
    greedy: dict = dataclasses.field(default_factory=dict)
    placement_only: dict = dataclasses.field(default_factory=dict)
    #: hosts counted with Nova's fit instead of the engine's
    engine_fallbacks: int = 0
    #: with booking: {host name: instances booked}, else None
    booked: dict = None
    #: with booking: hosts Nova's NUMATopologyFilter (and placement) still
    #: took after the booking's NoValidHost
    missed: list = dataclasses.field(default_factory=list)
    #: with booking: its wall-clock seconds
    booking_seconds: float = None

    def total(self, which):
        return sum((getattr(self, which) or {}).values())

    @property
    def differing_hosts(self):
        """``[(host, exact, greedy, booked)]`` where they are not all equal.

        ``booked`` is None without booking.
        """
        booked = self.booked
        hosts = set(self.exact) | set(self.greedy) | set(booked or ())
        rows = []
        for host in sorted(hosts, key=_natural):
            row = (host, self.exact.get(host, 0), self.greedy.get(host, 0),
                   None if booked is None else booked.get(host, 0))
            if len({n for n in row[1:] if n is not None}) > 1:
                rows.append(row)
        return rows

    @property
    def equal(self):
        return not self.differing_hosts and not self.missed

    @property
    def over_count_pct(self):
        """os-capacity against exact, in percent (None if exact is 0)."""
        exact = self.total('exact')
        if not exact:
            return None
        return (self.total('placement_only') - exact) * 100.0 / exact

    def to_dict(self):
        pct = self.over_count_pct
        result = {
            'vcpus': self.flavor.vcpus, 'memory_mb': self.flavor.memory_mb,
            'numa_nodes': self.flavor.numa_nodes,
            'exact': self.total('exact'), 'greedy': self.total('greedy'),
            'placement_only': self.total('placement_only'),
            'over_count_pct': None if pct is None else round(pct, 1),
            'engine_fallbacks': self.engine_fallbacks,
            'equal': self.equal,
            'differing_hosts': [
                {'host': h, 'exact': e, 'greedy': g, 'booked': b}
                for h, e, g, b in self.differing_hosts[:MAX_LISTED]],
            'differing_host_count': len(self.differing_hosts),
        }
        if self.booked is not None:
            result['booked'] = self.total('booked')
            result['booking_s'] = round(self.booking_seconds, 1)
            result['missed_by_booking'] = list(self.missed[:MAX_LISTED])
        return result


@dataclasses.dataclass
class StateFigures:
    """The figures of all flavors on one simulated cloud."""

    #: ``hosts.csv`` for the trace's hosts, else the replayed trace's name
    state: str
    hosts: int
    flavors: list
    #: the replay's :class:`~.replay.Result`, None before any request
    result: typing.Any = None
    elapsed_seconds: float = 0.0

    @property
    def equal(self):
        return all(f.equal for f in self.flavors)

    def to_dict(self):
        result = {
            'state': self.state, 'hosts': self.hosts,
            'equal': self.equal,
            'elapsed_s': round(self.elapsed_seconds, 1),
            'flavors': {f.flavor.name: f.to_dict() for f in self.flavors},
        }
        if self.result is not None:
            r = self.result
            result['replay'] = {
                'requests': r.requests, 'placed': r.placed,
                'rejected': r.rejected, 'policy': r.policy, 'fast': r.fast,
                'elapsed_s': round(r.elapsed_seconds, 1)}
        return result


def booked(simulator, shape, progress=None):
    """Book ``shape`` into a copy of ``simulator``'s cloud until NoValidHost.

    Returns ``({host: instances booked}, [hosts missed], seconds)``: the
    missed hosts are those where, after the NoValidHost, placement and
    Nova's NUMATopologyFilter would still take one more.
    """
    started = time.perf_counter()
    twin = replay.Simulator(
        None, policy=simulator.policy, fast=simulator.fast,
        flavors=simulator.flavor_shapes,
        host_states=copy.deepcopy(simulator.hosts))
    per_host = twin.book(shape, progress=progress)
    missed = nova_would_take(twin, shape)
    return per_host, missed, time.perf_counter() - started


def nova_would_take(simulator, shape):
    """Hosts of ``simulator`` that placement and NUMATopologyFilter pass."""
    numa_filter = numa_topology_filter.NUMATopologyFilter()
    spec = simulator.factory.request_spec(
        shape, cloud.stable_uuid('capacity-check', shape.name))
    return [state.host for state in simulator.hosts
            if cloud.placement_allows(state, shape.vcpus, shape.memory_mb) and
            _one_candidate(state, lambda s: numa_filter.host_passes(s, spec))]


def measure(label, simulator, shapes, booking=False, progress=None,
            result=None):
    """The :class:`StateFigures` of ``simulator``'s hosts as they are now.

    :param shapes: the trace flavors to count
    :param booking: also book each flavor (:func:`booked`)
    :param progress: ``progress(text)`` for a line of progress, or None
    :param result: the replay's result that made this cloud, if any
    """
    started = time.perf_counter()
    counts = Counts(simulator.factory, shapes)
    greedy = simulator.slot_counter
    if greedy.flavors != tuple(shapes):
        greedy = slots.SlotCounter(simulator.factory, shapes)
    figures = [FlavorFigures(flavor=s) for s in shapes]
    for state in simulator.hosts:
        for figure, (exact, fallback, only), n in zip(
                figures, counts.host(state), greedy.host_slots(state)):
            figure.exact[state.host] = exact
            figure.engine_fallbacks += fallback
            figure.placement_only[state.host] = only
            figure.greedy[state.host] = n
    for figure in figures if booking else ():
        figure.booked, figure.missed, figure.booking_seconds = booked(
            simulator, figure.flavor)
        if progress:
            progress('%s: booked %d of %s in %.0f s' % (
                label, figure.total('booked'), figure.flavor.name,
                figure.booking_seconds))
    return StateFigures(
        state=label, hosts=len(simulator.hosts), flavors=figures,
        result=result,
        elapsed_seconds=time.perf_counter() - started)


# --- output ----------------------------------------------------------------

def _natural(host):
    head, _sep, tail = host.rpartition('-')
    return (head, int(tail), '') if tail.isdigit() else (host, -1, host)


def _pct(value):
    return '-' if value is None else '%.1f %%' % value


def _rows(state, booking):
    columns = ('exact', 'greedy') + (('booked',) if booking else ()) + (
        'placement_only',)
    header = ('flavor', 'exact', 'greedy') + (
        ('booked',) if booking else ()) + ('os-capacity', 'over-count')
    return [header] + [
        (f.flavor.name,) + tuple(str(f.total(c)) for c in columns) +
        (_pct(f.over_count_pct),) for f in state.flavors]


def _title(state):
    if state.result is None:
        return '%s: %d hosts, before any request' % (state.state,
                                                     state.hosts)
    r = state.result
    return ('after %s: %d requests replayed on %d fresh hosts (%d placed, '
            '%d rejected; policy %s%s)' % (
                state.state, r.requests, state.hosts, r.placed, r.rejected,
                r.policy, ', --fast' if r.fast else ''))


@dataclasses.dataclass
class Report:
    """What ``nova-sched-ext-sim --capacity`` prints."""

    #: the hosts file (None for synthetic hosts) and how to name the hosts
    hosts_path: str
    hosts_label: str
    #: the flavors counted, largest first
    shapes: list
    #: the requests files the flavors were chosen from (and replayed)
    sources: list
    booking: bool = False
    fast: bool = False
    states: list = dataclasses.field(default_factory=list)

    @property
    def equal(self):
        return all(s.equal for s in self.states)

    @property
    def source(self):
        return trace_source(self.hosts_path)

    def header(self):
        lines = [
            'capacity of the %d largest flavors of %s (by vCPUs, then RAM, '
            'then NUMA nodes) on %s' % (
                len(self.shapes), ', '.join(self.sources) or 'the trace',
                self.hosts_label),
            '  exact: nova_sched_ext.capacity count_host (the fit engine)',
            '  greedy: per host, Nova\'s numa_fit_instance_to_host and '
            'numa_usage_from_instance_numa until the next does not fit',
        ]
        if self.booking:
            lines.append(
                '  booked: boots into a copy of the cloud through the '
                'simulator\'s scheduler%s until NoValidHost; then Nova\'s '
                'NUMATopologyFilter checks that no host is left'
                % (' (--fast pipeline)' if self.fast else ''))
        lines += [
            '  os-capacity: per host, min over VCPU and MEMORY_MB of '
            'floor(free / requested); over-count: against exact',
        ]
        if self.source:
            lines.append('  trace: %s' % self.source)
        return lines

    def table(self, rst=False):
        """The report as text: the header, then one table per state."""
        lines = self.header()
        for state in self.states:
            lines += [''] + _state_table(state, rst, self.booking)
        return '\n'.join(lines)

    def to_dict(self):
        return {
            'hosts_file': self.hosts_path, 'source': self.source,
            'flavors': [{'name': s.name, 'vcpus': s.vcpus,
                         'memory_mb': s.memory_mb,
                         'numa_nodes': s.numa_nodes} for s in self.shapes],
            'flavors_chosen_by': FLAVORS_CHOSEN_BY,
            'requests_files': list(self.sources),
            'booking': self.booking,
            'fast': self.fast,
            'states': [s.to_dict() for s in self.states],
            'equal': self.equal,
        }


def _state_table(state, rst, booking):
    rows = _rows(state, booking)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [_title(state)]
    if rst:
        rule = ' '.join('=' * w for w in widths)
        body = [' '.join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                for row in rows]
        lines += [rule, body[0], rule] + body[1:] + [rule]
    else:
        lines += ['  '.join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths)))
                  for row in rows]
    for figure in state.flavors:
        if figure.differing_hosts:
            lines.append('  %s: the counts differ on %d hosts, e.g. %s '
                         '(exact/greedy%s)' % (
                             figure.flavor.name, len(figure.differing_hosts),
                             ', '.join('%s %s' % (d[0], '/'.join(
                                 str(n) for n in d[1:] if n is not None))
                                 for d in figure.differing_hosts[:3]),
                             '/booked' if booking else ''))
        if figure.missed:
            lines.append('  %s: after the booking\'s NoValidHost, Nova\'s '
                         'NUMATopologyFilter still passes %d hosts, e.g. %s'
                         % (figure.flavor.name, len(figure.missed),
                            ', '.join(figure.missed[:3])))
    return lines
