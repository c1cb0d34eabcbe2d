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


"""How many instances of one flavor one host takes at the same time.

:func:`count_hosts` (and :func:`count_host` for one pair) is the one place
that answers it.  The instances
are placed one after another as Nova places them: each one where
``nova.virt.hardware.numa_fit_instance_to_host`` puts it, its usage
accounted before the next is tried, as the compute's resource tracker
accounts it (``numa_usage_from_instance_numa`` and, for PCI devices,
``PciDeviceStats.apply_requests``), until one does not fit or ``limit`` (what
placement allows) is reached.

Two ways of doing this give the same count:

* the fit engine (``fit.engine.place_counts``: the C helper's
  ``nse_place_counts``, or its twin ``pyfit.place_counts``, which replays
  Nova's fit on the engine's model of the host and accounts the usage on
  it), used wherever its accounting is Nova's, for many hosts and flavors
  in one call;
* Nova's own functions on Nova's objects, used for the rest: a host or
  flavor outside the engine's subset (the engine answers UNKNOWN, or the
  adapters raise ``Unsupported``), PCI devices (the engine places no
  device), and the pinning the engine accounts by sibling-set size rather
  than by CPU id, where the ids decide the next fit: emulator threads
  isolated with the ``require`` or ``isolate`` thread policy, ``require``
  on a host cell with more than two threads per core; and a pair where
  Nova's fit places an instance whose pinning the claim would not account
  as the engine does (a cell Nova's pair cache placed with the pinning of
  another host cell, or none: the engine answers "cannot tell").  The
  result says which way was taken (the report's ``engine_fallbacks``).
"""

import copy
import typing

from nova import exception as nova_exc
from nova.virt import hardware
from oslo_log import log as logging

from nova_sched_ext import conf
from nova_sched_ext.conf import capacity as capacity_conf
from nova_sched_ext.fit import engine as fit_engine
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import nova_fit

CONF = conf.CONF
LOG = logging.getLogger(__name__)

_PINNED = (m.CPU_DEDICATED, m.CPU_MIXED)


class HostModel(typing.NamedTuple):
    """One host as both ways of counting need it."""

    #: the fit engine's ``model.Host`` (``adapters.prepared_host().model``)
    engine: typing.Any
    #: Nova's ``NUMATopology`` of the host, or None
    numa_topology: typing.Any
    #: Nova's ``PciDeviceStats`` of the host, or None
    pci_stats: typing.Any
    cpu_allocation_ratio: typing.Optional[float]
    ram_allocation_ratio: typing.Optional[float]
    name: str = ''
    #: the engine's ``PreparedHost`` of ``engine`` (its packed record), or
    #: None to prepare it when counting
    prepared: typing.Any = None


def _prepared(host_model):
    if host_model.prepared is not None:
        return host_model.prepared
    if host_model.engine is None:
        return fit_engine.prepare(fit_engine.UNSUPPORTED_HOST)
    return fit_engine.prepare(host_model.engine)


class FlavorShape(typing.NamedTuple):
    """One flavor as both ways of counting need it."""

    #: the fit engine's ``model.Shape``, or None where it has none
    engine: typing.Any
    #: Nova's ``InstanceNUMATopology`` of the flavor, or None
    instance_topology: typing.Any
    #: ``InstancePCIRequest`` list, or None
    pci_requests: typing.Optional[list] = None
    name: str = ''


class HostCount(typing.NamedTuple):
    instances: int
    #: True when Nova's own fit counted (the engine could not)
    fallback: bool = False


def host_model(host_state, prepared):
    """A :class:`HostModel` of a Nova ``HostState`` and its prepared host."""
    return HostModel(
        engine=prepared.model, prepared=prepared,
        numa_topology=host_state.numa_topology,
        pci_stats=host_state.pci_stats,
        cpu_allocation_ratio=host_state.cpu_allocation_ratio,
        ram_allocation_ratio=host_state.ram_allocation_ratio,
        name=host_state.host)


#: How far the engine's accounting of a shape is Nova's (see
#: :func:`engine_places_exactly`).
EXACT, EXACT_UP_TO_TWO_THREADS, NOT_EXACT = 'exact', 'two-threads', 'no'


def _exactness(shape):
    """Whether the engine accounts ``shape`` (a ``model.Shape``) as Nova.

    The engine keeps, per host cell, how many free CPUs each sibling set
    has, not which: enough for Nova's next fit wherever only those sizes
    matter. They do not where Nova picks particular CPUs the engine cannot
    tell apart (the reserved emulator CPU of the ``require`` and
    ``isolate`` policies: :data:`NOT_EXACT`; the partly free cores
    ``require`` leaves when a core has more than two threads:
    :data:`EXACT_UP_TO_TWO_THREADS`), so those go to Nova's fit.
    """
    numa = shape.numa
    if numa is None:
        return EXACT
    policies = {c.thread_policy for c in numa.cells
                if c.cpu_policy in _PINNED}
    if numa.emulator_threads_isolated and (
            policies & {m.THREAD_REQUIRE, m.THREAD_ISOLATE}):
        return NOT_EXACT
    if m.THREAD_REQUIRE in policies:
        return EXACT_UP_TO_TWO_THREADS
    return EXACT


def _exact_on(host, exactness):
    if exactness == EXACT:
        return True
    if exactness == NOT_EXACT:
        return False
    return all(cell.threads_per_core <= 2 for cell in host.cells)


def engine_places_exactly(host, shape):
    """Whether the engine's accounting of ``shape`` on ``host`` is Nova's.

    :param host: a ``model.Host``
    :param shape: a ``model.Shape``
    """
    return _exact_on(host, _exactness(shape))


def _engine_shapes(shapes):
    """Per flavor, ``(engine shape, exactness)``, or None: Nova's fit only."""
    if CONF.nova_sched_ext_capacity.fit != capacity_conf.FIT_ENGINE:
        return [None] * len(shapes)
    usable = []
    for shape in shapes:
        engine_shape = shape.engine
        if (engine_shape is None or shape.pci_requests or
                m.shape_problem(engine_shape) is not None):
            usable.append(None)
            continue
        exactness = _exactness(engine_shape)
        usable.append(None if exactness == NOT_EXACT
                      else (engine_shape, exactness))
    return usable


def _engine_host(host_model):
    """The host's engine model, or None where the engine cannot count it."""
    host = host_model.engine
    if host is None or host.status not in (m.HOST_OK, m.HOST_NO_TOPOLOGY):
        return None
    return host


def count_nova(host_model, shape, limit):
    """The count by Nova's own functions, on copies of Nova's objects.

    The way :func:`count_hosts` counts what the engine does not, and the
    reference the benchmark and the tests compare the engine with.
    """
    topology = host_model.numa_topology
    pci_stats = copy.deepcopy(host_model.pci_stats)
    requests = shape.pci_requests or None
    # what NUMATopologyFilter passes, and the compute's claim after it
    limits = nova_fit.host_limits(host_model)
    count = 0
    while count < limit:
        cells = None
        if shape.instance_topology is not None:
            if not topology:
                break
            fitted = nova_fit.fit(
                topology, shape.instance_topology, limits,
                pci_requests=requests, pci_stats=pci_stats,
                provider_mapping={})
            if fitted is None:
                break
            try:
                topology = hardware.numa_usage_from_instance_numa(
                    topology, fitted)
            except nova_exc.NovaException as exc:
                # The compute's resource tracker would fail the same way.
                LOG.warning('Capacity: Nova cannot account instance %d of '
                            'flavor %s on host %s: %s', count + 1,
                            shape.name, host_model.name, exc)
                break
            cells = fitted.cells
        if requests:
            # PciPassthroughFilter, then the claim of the devices
            if not pci_stats:
                break
            try:
                pci_stats.apply_requests(requests, {}, cells)
            except nova_exc.PciDeviceRequestFailed:
                break
        count += 1
    return count


def count_hosts(host_models, shapes, limits):
    """:func:`count_host` of every host and shape, in one engine pass.

    The pairs the fit engine counts exactly are counted in one call into
    it (the C helper when it is in use: ``fit.engine.place_counts``); the
    others, and any pair the engine cannot tell, by Nova's own functions.

    :param host_models: :class:`HostModel` objects
    :param shapes: :class:`FlavorShape` objects
    :param limits: host-major, one per host and shape: the most there can
        be (what placement allows)
    :returns: host-major :class:`HostCount` objects
    """
    host_models, shapes = list(host_models), list(shapes)
    n_shapes = len(shapes)
    limits = [max(int(limit), 0) for limit in limits]
    if len(limits) != len(host_models) * n_shapes:
        raise ValueError('%d limits for %d hosts and %d flavors'
                         % (len(limits), len(host_models), n_shapes))
    engine_shapes = _engine_shapes(shapes)
    counted = [k for k, s in enumerate(engine_shapes) if s is not None]
    # Neither NUMATopologyFilter nor PciPassthroughFilter has a say on
    # these: placement decides alone.
    placement_only = [k for k, shape in enumerate(shapes)
                      if shape.instance_topology is None and
                      not shape.pci_requests]
    # HostCount is immutable: one object per count (10,000 hosts x 20
    # flavors is 200,000 pairs, with few distinct counts)
    made = {}

    def engine_count(n):
        result = made.get(n)
        if result is None:
            result = made[n] = HostCount(n)
        return result

    results = [None] * len(limits)
    engine_limits = []
    for h, host in enumerate(host_models):
        base = h * n_shapes
        for k in placement_only:
            results[base + k] = engine_count(limits[base + k])
        engine_host = _engine_host(host) if counted else None
        for k in counted:
            limit = limits[base + k]
            if limit == 0:
                results[base + k] = engine_count(0)
            use = (engine_host is not None and results[base + k] is None and
                   limit <= m.MAX_INSTANCES and
                   _exact_on(engine_host, engine_shapes[k][1]))
            engine_limits.append(limit if use else 0)
    if any(engine_limits):
        answers = fit_engine.place_counts(
            [_prepared(host) for host in host_models],
            [engine_shapes[k][0] for k in counted], engine_limits)
        n_counted = len(counted)
        for h in range(len(host_models)):
            base, first = h * n_shapes, h * n_counted
            for j, k in enumerate(counted):
                i = first + j
                if engine_limits[i] and answers[i] >= 0:
                    results[base + k] = engine_count(answers[i])
    for at, result in enumerate(results):
        if result is None and limits[at] == 0:
            results[at] = engine_count(0)
    for at, result in enumerate(results):
        if result is None:
            h, k = divmod(at, n_shapes)
            results[at] = HostCount(
                count_nova(host_models[h], shapes[k], limits[at]),
                fallback=True)
    return results


def count_host(host_model, shape, limit):
    """How many instances of ``shape`` fit on ``host_model`` at once.

    :param host_model: a :class:`HostModel`
    :param shape: a :class:`FlavorShape`
    :param limit: the most there can be (what placement allows); the count
        stops there
    :returns: a :class:`HostCount`
    """
    return count_hosts([host_model], [shape], [limit])[0]
