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

:func:`count_host` is the one place that answers it, so that a C loop can
replace the Python one later without its callers knowing.  The instances
are placed one after another as Nova places them: each one where
``nova.virt.hardware.numa_fit_instance_to_host`` puts it, its usage
accounted before the next is tried, as the compute's resource tracker
accounts it (``numa_usage_from_instance_numa`` and, for PCI devices,
``PciDeviceStats.apply_requests``), until one does not fit or ``limit`` (what
placement allows) is reached.

Two ways of doing this give the same count:

* the fit engine (:func:`nova_sched_ext.fit.pyfit.place`, which replays
  Nova's fit on the engine's model of the host and accounts the usage on
  it), used wherever its accounting is Nova's;
* Nova's own functions on Nova's objects, used for the rest: a host or
  flavor outside the engine's subset (the engine answers UNKNOWN, or the
  adapters raise ``Unsupported``), PCI devices (the engine places no
  device), and the pinning the engine accounts by sibling-set size rather
  than by CPU id, where the ids decide the next fit: emulator threads
  isolated with the ``require`` or ``isolate`` thread policy, ``require``
  on a host cell with more than two threads per core.  The result says
  which way was taken (the report's ``engine_fallbacks``).
"""

import copy
import typing

from nova import exception as nova_exc
from nova import objects
from nova.virt import hardware
from oslo_config import cfg
from oslo_log import log as logging

from nova_sched_ext.capacity import conf as capacity_conf
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import pyfit

CONF = cfg.CONF
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
        engine=prepared.model, numa_topology=host_state.numa_topology,
        pci_stats=host_state.pci_stats,
        cpu_allocation_ratio=host_state.cpu_allocation_ratio,
        ram_allocation_ratio=host_state.ram_allocation_ratio,
        name=host_state.host)


def engine_places_exactly(host, shape):
    """Whether the engine's accounting of ``shape`` on ``host`` is Nova's.

    The engine keeps, per host cell, how many free CPUs each sibling set
    has, not which: enough for Nova's next fit wherever only those sizes
    matter. They do not where Nova picks particular CPUs the engine cannot
    tell apart (the reserved emulator CPU of the ``require`` and
    ``isolate`` policies, the partly free cores ``require`` leaves when a
    core has more than two threads), so those go to Nova's fit.
    """
    numa = shape.numa
    if numa is None:
        return True
    policies = {c.thread_policy for c in numa.cells
                if c.cpu_policy in _PINNED}
    if not policies:
        return True
    if numa.emulator_threads_isolated and (
            policies & {m.THREAD_REQUIRE, m.THREAD_ISOLATE}):
        return False
    if m.THREAD_REQUIRE in policies and any(
            cell.threads_per_core > 2 for cell in host.cells):
        return False
    return True


def _engine_usable(host_model, shape):
    if CONF.nova_sched_ext_capacity.fit != capacity_conf.FIT_ENGINE:
        return False
    if shape.engine is None or shape.pci_requests:
        return False
    host = host_model.engine
    if host is None or host.status not in (m.HOST_OK, m.HOST_NO_TOPOLOGY):
        return False
    return engine_places_exactly(host, shape.engine)


def _count_engine(host, shape, limit):
    """The count by the fit engine, or None if it cannot tell."""
    count = 0
    try:
        while count < limit:
            after = pyfit.place(host, shape)
            if after is None:
                # place() does not tell "no" from "cannot tell"
                if pyfit.fits(host, shape.numa) == m.UNKNOWN:
                    return None
                break
            host = after
            count += 1
    except m.InvalidInput as exc:
        LOG.debug('Capacity: the fit engine refused %s: %s', shape, exc)
        return None
    return count


def _limits(host_model):
    if host_model.cpu_allocation_ratio is None or \
            host_model.ram_allocation_ratio is None:
        return None
    # what NUMATopologyFilter passes, and the compute's claim after it
    return objects.NUMATopologyLimits(
        cpu_allocation_ratio=host_model.cpu_allocation_ratio,
        ram_allocation_ratio=host_model.ram_allocation_ratio)


def _count_nova(host_model, shape, limit):
    """The count by Nova's own functions, on copies of Nova's objects."""
    topology = host_model.numa_topology
    pci_stats = copy.deepcopy(host_model.pci_stats)
    requests = shape.pci_requests or None
    limits = _limits(host_model)
    count = 0
    while count < limit:
        cells = None
        if shape.instance_topology is not None:
            if not topology:
                break
            fitted = hardware.numa_fit_instance_to_host(
                topology, shape.instance_topology.obj_clone(),
                provider_mapping={}, limits=limits, pci_requests=requests,
                pci_stats=pci_stats)
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


def count_host(host_model, shape, limit):
    """How many instances of ``shape`` fit on ``host_model`` at once.

    :param host_model: a :class:`HostModel`
    :param shape: a :class:`FlavorShape`
    :param limit: the most there can be (what placement allows); the count
        stops there
    :returns: a :class:`HostCount`
    """
    limit = max(int(limit), 0)
    if limit == 0:
        return HostCount(0)
    if shape.instance_topology is None and not shape.pci_requests:
        # Neither NUMATopologyFilter nor PciPassthroughFilter has a say.
        return HostCount(limit)
    if _engine_usable(host_model, shape):
        count = _count_engine(host_model.engine, shape.engine, limit)
        if count is not None:
            return HostCount(count)
    return HostCount(_count_nova(host_model, shape, limit), fallback=True)
