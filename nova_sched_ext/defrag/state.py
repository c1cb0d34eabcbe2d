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

"""The cloud while a plan is made: moves played on copies, slots counted.

:class:`PlanningState` holds, per host, Nova's ``NUMATopology`` with the
usage of the instances now on it, the placement usages, the fit engine's
model of the host and its large-flavor slots.  A move is applied with
Nova's own functions (Nova's fit on the target, with the limits
NUMATopologyFilter passes and the target's PCI devices,
:func:`nova_sched_ext.fit.nova_fit.fit`; ``numa_usage_from_instance_numa`` to
account it there and to free it at the source), so what the plan says
Nova will do is what Nova computes; the engine then models the changed
hosts again (:func:`nova_sched_ext.fit.adapters.host_model`).

Slots are counted exactly as ``nova-sched-ext-capacity`` counts them
(:func:`nova_sched_ext.fit.count.count_hosts`: the fit engine, Nova's
fit where the engine cannot tell; placement's limit from the host's
inventories).  The search asks "what if" many times: for an instance
without pinned CPUs the host without it is modelled at the engine's level
(:func:`engine_without`, the inverse of the engine's own accounting, which
is Nova's), for the others through Nova's objects.

Every change is journalled, so that a trial (a set of moves the search
only considers) is rolled back exactly (:meth:`PlanningState.mark`,
:meth:`PlanningState.rollback`).
"""

import collections
import dataclasses
import uuid as uuid_lib

from nova import exception as nova_exc
from nova.virt import hardware
from oslo_log import log as logging

from nova_sched_ext.cloud import claims
from nova_sched_ext.cloud import placement
from nova_sched_ext.cloud import room
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import count as capacity_count
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import nova_fit
from nova_sched_ext.fit import pyfit

LOG = logging.getLogger(__name__)


def stable_node_uuid(name):
    """A UUID for a host name, the same in every run."""
    return str(uuid_lib.uuid5(_NODE_NAMESPACE, name))


_NODE_NAMESPACE = uuid_lib.UUID('4f3c2a1e-6d7b-4e8f-9a0b-1c2d3e4f5a6b')


def limits_of(host):
    """The limits NUMATopologyFilter records for a host that passes."""
    return nova_fit.host_limits(host)


def engine_host(numa_topology, host):
    """The fit engine's model of a host, prepared (its packed record)."""
    return engine.prepare(adapters.host_model(
        numa_topology, None, host.cpu_allocation_ratio,
        host.ram_allocation_ratio))


def _shared_only(topology):
    return all(cell.cpu_policy in (None, 'shared') and
               not cell.cpuset_reserved for cell in topology.cells)


def engine_without(model, topology):
    """``model`` (a ``model.Host``) once the instance of ``topology`` left.

    What ``numa_usage_from_instance_numa(free=True)`` does to the fields
    the engine reads, for an instance without pinned CPUs: the cells'
    shared CPU and memory usage and the pages of the page size it used go
    down (never below 0).  None where the engine cannot say (pinned CPUs,
    a host it does not model).
    """
    if model.status != m.HOST_OK or not _shared_only(topology):
        return None
    cells = list(model.cells)
    position = {cell.id: i for i, cell in enumerate(cells)}
    for instance_cell in topology.cells:
        i = position.get(instance_cell.id)
        if i is None:
            return None
        cell = cells[i]
        changes = {
            'cpu_usage': max(0, cell.cpu_usage - len(instance_cell.cpuset)),
            'memory_usage': max(0, cell.memory_usage - instance_cell.memory),
        }
        if cell.pages:
            size = instance_cell.pagesize if (
                'pagesize' in instance_cell and instance_cell.pagesize) \
                else min(p.size_kb for p in cell.pages)
            changes['pages'] = tuple(
                p._replace(used=max(0, p.used - instance_cell.memory * 1024 //
                                    p.size_kb)) if p.size_kb == size else p
                for p in cell.pages)
        cells[i] = cell._replace(**changes)
    return model._replace(cells=tuple(cells))


class HostView(object):
    """One host as the plan has it now."""

    __slots__ = ('host', 'topology', 'usages', 'instances', 'prepared',
                 'slots', 'capacity')

    def __init__(self, host, topology, usages, instances):
        self.host = host
        self.topology = topology
        self.usages = usages
        self.instances = instances      # set of uuids
        self.prepared = None
        self.slots = None
        #: ``{resource class: (capacity, max_unit)}``, read once
        #: (:func:`nova_sched_ext.cloud.room.capacity`)
        self.capacity = {rc: (room.capacity(inventory), inventory.max_unit)
                         for rc, inventory in host.inventories.items()}

    def has_room(self, resources):
        """Placement's check, quickly: :func:`room_for` is None."""
        usages, capacity = self.usages, self.capacity
        for rc, amount in resources.items():
            if amount <= 0:
                continue
            bounds = capacity.get(rc)
            if bounds is None or amount > bounds[1] or \
                    usages.get(rc, 0) + amount > bounds[0] or \
                    not room.allows(self.host.inventories[rc], amount):
                return False
        return True

    @property
    def name(self):
        return self.host.name


def tree_of(host, usages):
    """The host's placement tree (one provider) with ``usages``."""
    return placement.Tree(providers=(placement.Provider(
        uuid=host.name, name=host.name, parent_uuid=None,
        inventories=host.inventories, usages=usages, traits=frozenset()),))


def room_for(host, usages, resources):
    """None if placement can allocate ``resources`` on the host, else why.

    Placement's rule (:mod:`nova_sched_ext.cloud.room`), class by class.
    """
    for rc, amount in sorted(resources.items()):
        if amount <= 0:
            continue
        inventory = host.inventories.get(rc)
        if inventory is None:
            return 'it has no %s inventory' % rc
        reason = room.why_not(inventory, rc, usages.get(rc, 0), amount)
        if reason is not None:
            return reason
    return None


def add_usages(usages, resources, sign=1):
    result = dict(usages)
    for rc, amount in resources.items():
        result[rc] = result.get(rc, 0) + sign * amount
    return result


class PlanningState(object):
    """The cloud while moves are planned; see the module docstring."""

    def __init__(self, cloud, reference_flavors):
        """The state of ``cloud`` before any move.

        :param cloud: a :class:`~.model.Cloud`; it is not changed
        :param reference_flavors: ``capacity.flavors.FlavorRequest``
            objects, the flavors whose slots are counted
        """
        self.cloud = cloud
        self.flavors = list(reference_flavors)
        self.flavor_shapes = [capacity_count.FlavorShape(
            engine=r.shape, instance_topology=r.instance_topology,
            pci_requests=r.pci_requests, name=r.name) for r in self.flavors]
        self._simple = [self._simple_query(r) for r in self.flavors]
        self.where = {uuid: i.host for uuid, i in cloud.instances.items()}
        self.placed = {uuid: i.numa_topology
                       for uuid, i in cloud.instances.items()}
        on_host = collections.defaultdict(set)
        for uuid, instance in cloud.instances.items():
            if instance.host is not None:
                on_host[instance.host].add(uuid)
        self.views = {name: HostView(host, host.numa_topology,
                                     dict(host.usages), on_host[name])
                      for name, host in cloud.hosts.items()}
        self._journal = []
        #: hosts changed since :meth:`take_changed` was last called
        self.changed = set()
        self.count_all()

    # -- slots -------------------------------------------------------------

    def _limits(self, host, usages):
        limits = []
        tree = None
        for flavor, simple in zip(self.flavors, self._simple):
            if simple is not None:
                limits.append(min(
                    room.units(host.inventories[rc], usages.get(rc, 0),
                               amount)
                    if rc in host.inventories else 0
                    for rc, amount in simple))
                continue
            if not flavor.queries or flavor.invalid:
                limits.append(0)
                continue
            tree = tree or tree_of(host, usages)
            limits.append(claims.placement_limit(tree, flavor.queries))
        return limits

    @staticmethod
    def _simple_query(flavor):
        """``((rc, amount), ...)`` of a flavor placement limits simply.

        Where placement's limit on a host of one provider without traits
        is the least of its inventories' (``room.units``): one query
        of one unnumbered group, no required trait; else None.
        """
        if flavor.invalid or len(flavor.queries) != 1:
            return None
        query = flavor.queries[0]
        if query.root_required or len(query.groups) != 1 or \
                query.groups[0].same_provider or \
                query.groups[0].required_traits:
            return None
        return tuple(sorted(query.groups[0].resources.items()))

    def count(self, entries):
        """Slots of each reference flavor, in one pass of the fit engine.

        ``entries`` are ``(host, topology, prepared, usages)``.

        ``topology`` may be a callable giving Nova's ``NUMATopology``: it is
        called only where the engine cannot count and Nova's fit must.
        """
        entries = list(entries)
        if not entries:
            return []
        models, limits = [], []
        for host, topology, prepared, usages in entries:
            models.append(self._host_model(host, None if callable(topology)
                                           else topology, prepared))
            limits.extend(self._limits(host, usages))
        counts = capacity_count.count_hosts(models, self.flavor_shapes,
                                            limits)
        n = len(self.flavors)
        result = []
        for i, (host, topology, prepared, usages) in enumerate(entries):
            mine = counts[i * n:(i + 1) * n]
            if callable(topology) and any(c.fallback for c in mine):
                mine = capacity_count.count_hosts(
                    [self._host_model(host, topology(), prepared)],
                    self.flavor_shapes, limits[i * n:(i + 1) * n])
            result.append(tuple(c.instances for c in mine))
        return result

    @staticmethod
    def _host_model(host, topology, prepared):
        return capacity_count.HostModel(
            engine=prepared.model, prepared=prepared, numa_topology=topology,
            pci_stats=host.pci_stats,
            cpu_allocation_ratio=host.cpu_allocation_ratio,
            ram_allocation_ratio=host.ram_allocation_ratio, name=host.name)

    def count_all(self):
        views = list(self.views.values())
        for view in views:
            if view.prepared is None:
                view.prepared = engine_host(view.topology, view.host)
        stale = [v for v in views if v.slots is None]
        for view, slots in zip(stale, self.count(
                [(v.host, v.topology, v.prepared, v.usages)
                 for v in stale])):
            view.slots = slots

    def total_slots(self):
        """``{flavor name: slots}`` over every host."""
        totals = [0] * len(self.flavors)
        for view in self.views.values():
            for i, n in enumerate(view.slots):
                totals[i] += n
        return {f.name: n for f, n in zip(self.flavors, totals)}

    # -- what if -----------------------------------------------------------

    def without(self, view, uuids):
        """``(topology, prepared, usages)`` of a host without ``uuids``.

        The topology is None where only the engine's model was changed
        (:func:`engine_without`); :meth:`count` asks for Nova's objects
        only where the engine cannot count.
        """
        usages = dict(view.usages)
        placed = []
        for uuid in uuids:
            usages = add_usages(usages, self.cloud.instances[uuid].resources,
                                -1)
            if self.placed[uuid] is not None:
                placed.append(self.placed[uuid])
        model = view.prepared.model
        for topology in placed:
            model = engine_without(model, topology)
            if model is None:
                break
        if model is not None:
            # Less usage than a host within the bounds: within them too.
            return None, engine.prepare(model, checked=True), usages
        topology = self.nova_without(view, placed)
        return topology, engine_host(topology, view.host), usages

    def without_each(self, view, uuids):
        """:meth:`without` of each prefix of ``uuids``, one more each time.

        The engine's model is carried from one prefix to the next.
        """
        usages = dict(view.usages)
        model = view.prepared.model
        for n, uuid in enumerate(uuids):
            usages = add_usages(usages, self.cloud.instances[uuid].resources,
                                -1)
            placed = self.placed[uuid]
            if model is not None and placed is not None:
                model = engine_without(model, placed)
            if model is not None:
                yield None, engine.prepare(model, checked=True), usages
            else:
                yield self.without(view, uuids[:n + 1])

    @staticmethod
    def nova_without(view, placed):
        """Nova's topology of ``view`` without the topologies ``placed``."""
        topology = view.topology
        for instance_topology in placed:
            topology = hardware.numa_usage_from_instance_numa(
                topology, instance_topology, free=True)
        return topology

    def slots_without(self, view, uuids):
        """Slots of each reference flavor on a host without ``uuids``."""
        topology, prepared, usages = self.without(view, uuids)

        def nova_topology():
            return self.nova_without(view, [
                self.placed[u] for u in uuids if self.placed[u] is not None])
        return self.count([(view.host, topology or nova_topology, prepared,
                            usages)])[0]

    # -- moves -------------------------------------------------------------

    def nova_fit(self, uuid, target):
        """``(fits, fitted topology)`` of the instance on ``target`` now.

        Nova's fit with the filter's limits and the target's PCI devices
        (:func:`nova_sched_ext.fit.nova_fit.fit`); an instance without a
        NUMA topology fits (placement alone decides) with None.  A
        topology whose pinning the target's claim would refuse
        (``numa_usage_from_instance_numa`` raises: Nova's fit can hand a
        cell the pinning it computed in another host cell, issue 31) does
        not fit: the migration's claim would fail there.
        """
        instance = self.cloud.instances[uuid]
        view = self.views[target]
        if instance.requested_topology is None:
            return True, None
        if not view.topology:
            return False, None
        fitted = nova_fit.fit(
            view.topology, instance.requested_topology,
            limits_of(view.host),
            pci_stats=getattr(view.host, 'pci_stats', None),
            provider_mapping={})
        if fitted is None:
            return False, None
        try:
            hardware.numa_usage_from_instance_numa(view.topology, fitted)
        except nova_exc.NovaException as exc:
            LOG.debug('Defragmentation: the claim of %s on %s would fail: '
                      '%s', uuid, target, exc)
            return False, None
        return True, fitted

    def with_instance(self, view, uuid, shape):
        """``(topology, prepared, usages)`` of ``view`` with the instance.

        Added as the fit engine places it (``shape``: its
        ``model.Shape``), or None if the engine does not place it there.

        The topology is a callable giving Nova's, for :meth:`count`.
        """
        instance = self.cloud.instances[uuid]
        usages = add_usages(view.usages, instance.resources)
        if shape.numa is None:
            return view.topology, view.prepared, usages
        after = pyfit.place(view.prepared.model, shape)
        if after is None:
            return None

        def nova_topology():
            fits, fitted = self.nova_fit(uuid, view.name)
            return hardware.numa_usage_from_instance_numa(
                view.topology, fitted) if fits else view.topology
        # Nova's fit keeps usage within the cells: within the bounds.
        return nova_topology, engine.prepare(after, checked=True), usages

    def apply(self, uuid, target, fitted):
        """Move the instance to ``target`` where Nova fitted it."""
        instance = self.cloud.instances[uuid]
        # No source: an instance not on any host yet (the repack bound
        # boots them).
        source = self.views.get(self.where[uuid])
        dest = self.views[target]
        self._journal.append((uuid, self.where[uuid], self.placed[uuid],
                              source and _saved(source), _saved(dest)))
        placed = self.placed[uuid]
        if source is not None:
            if placed is not None:
                source.topology = hardware.numa_usage_from_instance_numa(
                    source.topology, placed, free=True)
            source.usages = add_usages(source.usages, instance.resources,
                                       -1)
            source.instances = source.instances - {uuid}
        if fitted is not None:
            dest.topology = hardware.numa_usage_from_instance_numa(
                dest.topology, fitted)
        dest.usages = add_usages(dest.usages, instance.resources)
        dest.instances = dest.instances | {uuid}
        self.where[uuid] = target
        self.placed[uuid] = fitted
        for view in (source, dest):
            if view is not None:
                view.prepared = engine_host(view.topology, view.host)
                view.slots = None
                self.changed.add(view.name)
        self.count_all()

    def relocate(self, uuid, target):
        """The instance is on ``target`` now; its hosts are not accounted.

        Where it is, without Nova's usage accounting of :meth:`apply`:
        for a caller that reads the source and the target again
        (:meth:`refresh`) before it asks anything of them, and meanwhile
        needs only where the instance is (another move's group rules).
        """
        source = self.views.get(self.where.get(uuid))
        if source is not None:
            source.instances = source.instances - {uuid}
        dest = self.views.get(target)
        if dest is not None:
            dest.instances = dest.instances | {uuid}
        self.where[uuid] = target

    def settle(self):
        """The moves applied so far are facts, not a trial: forget them.

        Rolling back is no longer possible; the journal stops growing
        (the executor applies every move it makes, a run of many moves).
        """
        del self._journal[:]

    def refresh(self, part):
        """Take the hosts of ``part``, read again, as they are now.

        ``part`` is a :class:`~.model.Cloud` of some hosts, the instances
        on them and their groups (:func:`~.model.part_of`).  Its hosts
        replace the state's, with their instances; an instance the state
        had on one of them and ``part`` does not is dropped (deleted, or
        gone to a host not read).  Every other host stays as it was.
        The cloud given to the state is not changed: the state takes a
        copy.  Not for a trial: :meth:`settle` first.
        """
        if self._journal:
            raise RuntimeError('refresh during a trial of %d move(s)'
                               % len(self._journal))
        cloud = self.cloud = dataclasses.replace(
            self.cloud, hosts=dict(self.cloud.hosts),
            instances=dict(self.cloud.instances),
            groups=dict(self.cloud.groups))
        read = set(part.hosts)
        for name in read & set(self.views):
            for uuid in self.views[name].instances - set(part.instances):
                del cloud.instances[uuid]
                del self.where[uuid]
                del self.placed[uuid]
        on_host = collections.defaultdict(set)
        for uuid, instance in part.instances.items():
            before = self.views.get(self.where.get(uuid))
            if before is not None and before.name not in read:
                before.instances = before.instances - {uuid}
            cloud.instances[uuid] = instance
            self.where[uuid] = instance.host
            self.placed[uuid] = instance.numa_topology
            if instance.host is not None:
                on_host[instance.host].add(uuid)
        cloud.groups.update(part.groups)
        for name, host in part.hosts.items():
            cloud.hosts[name] = host
            self.views[name] = HostView(host, host.numa_topology,
                                        dict(host.usages), on_host[name])
            self.changed.add(name)
        self.count_all()

    def mark(self):
        return len(self._journal)

    def moves_since(self, mark):
        """What the moves applied since ``mark`` did, for :meth:`redo`.

        Taken before a :meth:`rollback` to ``mark``, it lets the state
        come back to where those moves left it without computing them
        again (Nova's usage accounting of every move is most of a search's
        time).
        """
        entries = self._journal[mark:]
        touched = {name for entry in entries for name in
                   (entry[1], self.where[entry[0]]) if name is not None}
        return (mark, list(entries),
                {uuid: (self.where[uuid], self.placed[uuid])
                 for uuid, *_rest in entries},
                {name: _saved(self.views[name]) for name in touched})

    def redo(self, moves):
        """Apply again the moves :meth:`moves_since` took, as they were.

        The state must be back at their mark (:meth:`rollback`).
        """
        mark, entries, placements, views = moves
        if len(self._journal) != mark:
            raise RuntimeError('redo from journal length %d, taken at %d'
                               % (len(self._journal), mark))
        self._journal.extend(entries)
        for uuid, (where, placed) in placements.items():
            self.where[uuid] = where
            self.placed[uuid] = placed
        for name, saved in views.items():
            _restore(self.views[name], saved)
            self.changed.add(name)

    def rollback(self, mark):
        while len(self._journal) > mark:
            uuid, source_name, placed, source_saved, dest_saved = \
                self._journal.pop()
            dest_name = self.where[uuid]
            if source_name is not None:
                _restore(self.views[source_name], source_saved)
                self.changed.add(source_name)
            _restore(self.views[dest_name], dest_saved)
            self.changed.add(dest_name)
            self.where[uuid] = source_name
            self.placed[uuid] = placed


def _saved(view):
    return (view.topology, view.usages, view.instances, view.prepared,
            view.slots)


def _restore(view, saved):
    (view.topology, view.usages, view.instances, view.prepared,
     view.slots) = saved
