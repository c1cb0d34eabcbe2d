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

"""The defragmentation planner: which live migrations give large flavors
their room back, in which order.

The search works on *units*: the movable instances of one host whose
departure together frees room for large flavors, evaluated as one (a
lookahead over several moves; moving one small instance off a host alone
rarely recovers a slot, moving the last three off a NUMA cell does).  For
every host and every NUMA cell of it, the units are the smallest
instances touching the cell, one more at a time, wherever one more adds
slots at the source (up to the whole cell), the whole host, and every
instance alone (one that is not among the smallest of its cell may block a
large slot by itself; without these units the search missed most of the
single moves that recover a slot of every reference flavor).  Their
gain at the source is counted exactly and cheaply (the fit engine's model
of the host without them).

Units are taken best first by slots recovered per share of the budget
they spend (:meth:`Planner._ratio`; lazy
greedy on an upper bound: a unit's source gain only shrinks once its
instances land somewhere and cost slots there): the best unit is tried,
its instances, largest first, each moved to the valid target where it
destroys the fewest large-flavor slots, the fullest such host first (best
fit); the slots it then recovers net of what its targets lost are
compared with the next unit's bound, and the unit is kept if it still
leads, else put back with its true figure.  Hosts that received
instances are not drained later and drained hosts receive nothing, so no
instance moves twice.  ``search='greedy'`` restricts units to single
instances: the greedy baseline the tests compare with.  The drain search
runs that baseline too and keeps its plan where it recovers more (rare:
its units took hosts that then refused the single moves greedy makes).

Every move is valid where it is applied, in order
(:func:`~.validity.why_not_target` and the NUMA fit: the fit engine
answers for every host in one call, Nova's ``numa_fit_instance_to_host``
decides the cells of the chosen one, and the plan records Nova's cells).
"""

import collections
import dataclasses
import heapq
import itertools
import time
import typing

import numpy
from oslo_log import log as logging

from nova_sched_ext.defrag import model
from nova_sched_ext.defrag import state as planning_state
from nova_sched_ext.defrag import validity
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model as m

LOG = logging.getLogger(__name__)

SEARCHES = ('drain', 'greedy')
#: Valid targets of one instance whose slot loss is counted exactly, the
#: fullest first (those almost always lose nothing).  16 found the same
#: plans as 8 on 17 of the 18 trace states and budgets of the defrag
#: docs, and 3 slots fewer on the last, at up to 1.4 times the time.
TARGETS_EXAMINED = 8
#: Units of one NUMA cell (prefixes of its smallest instances) kept.
PREFIXES_PER_CELL = 6
#: Hosts with more movable instances are drained by cell only.
MAX_HOST_UNIT = 16

NO_ROOM = 'placement has no room for it'
NO_GAIN = ('moving it, alone or with the other instances of its host or '
           'NUMA cell, recovers no large-flavor slot')


@dataclasses.dataclass
class Move:
    instance: str
    flavor: str
    source: str
    target: str
    memory_mb: int
    #: ``[{'instance_cell', 'host_cell', 'vcpus', 'memory_mb',
    #: 'pinned_cpus'}]``: what Nova gives it on the target
    cells: list
    #: ``{flavor: slots}`` the move itself recovers (after it, on its
    #: source and target, against before it)
    slots_recovered: dict

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Plan:
    moves: list
    slots_before: dict
    slots_after: dict
    #: ``{instance uuid: why it stays}`` for the instances in scope
    left_alone: dict
    budget: model.Budget
    scope: model.Scope
    search: str
    never_move: model.NeverMove = model.NeverMove()
    seconds: float = 0.0
    instances_in_scope: int = 0
    hosts_in_scope: int = 0

    @property
    def slots_recovered(self):
        return {name: self.slots_after[name] - self.slots_before[name]
                for name in self.slots_before}

    @property
    def memory_moved_mb(self):
        return sum(move.memory_mb for move in self.moves)

    def to_dict(self):
        """The plan document, with its checksum (``apply`` checks it)."""
        document = {
            'format': FORMAT,
            'search': self.search,
            'scope': {'availability_zone': self.scope.availability_zone,
                      'aggregate': self.scope.aggregate,
                      'hosts': sorted(self.scope.hosts)
                      if self.scope.hosts is not None else None},
            'budget': dataclasses.asdict(self.budget),
            'never_move': {
                'instances': sorted(self.never_move.instances),
                'projects': sorted(self.never_move.projects)},
            'hosts_in_scope': self.hosts_in_scope,
            'instances_in_scope': self.instances_in_scope,
            'moves': [move.to_dict() for move in self.moves],
            'memory_moved_mb': self.memory_moved_mb,
            'slots_before': dict(self.slots_before),
            'slots_after': dict(self.slots_after),
            'slots_recovered': self.slots_recovered,
            'left_alone': [{'instance': uuid, 'reason': reason}
                           for uuid, reason in sorted(
                               self.left_alone.items())],
            'seconds': round(self.seconds, 3),
        }
        document[model.CHECKSUM] = model.plan_checksum(document)
        return document


FORMAT = model.PLAN_FORMAT


def fitted_cells(fitted):
    """The cells Nova gave an instance, as a plan records them."""
    if fitted is None:
        return []
    cells = []
    for number, cell in enumerate(fitted.cells):
        pinning = cell.cpu_pinning if 'cpu_pinning' in cell and \
            cell.cpu_pinning else {}
        cells.append({'instance_cell': number, 'host_cell': cell.id,
                      'vcpus': len(cell.cpuset | cell.pcpuset),
                      'memory_mb': cell.memory,
                      'pinned_cpus': sorted(set(pinning.values()))})
    return cells


class _FreeRoom(object):
    """Placement's free VCPU and MEMORY_MB of the hosts in scope, as arrays.

    Asked for every host at every decision: kept as numpy arrays, the
    hosts the state changed (:attr:`~.state.PlanningState.changed`)
    refreshed before each answer.  Placement's check itself
    (:mod:`nova_sched_ext.cloud.room`): ``used + amount <= capacity`` and
    ``amount <= max_unit``; where an inventory in scope has a ``min_unit``
    or ``step_size`` above 1, :meth:`hosts_with_room` says None and each
    host answers for itself (:meth:`~.state.HostView.has_room`).
    """

    CLASSES = ('VCPU', 'MEMORY_MB')

    def __init__(self, state, names):
        self.state = state
        self.names = list(names)
        self.index = {name: i for i, name in enumerate(self.names)}
        n = len(self.names)
        self.free = {rc: numpy.zeros(n) for rc in self.CLASSES}
        self.max_unit = {rc: numpy.zeros(n) for rc in self.CLASSES}
        #: whether capacity and max_unit alone decide (units of 1)
        self.exact = not any(
            inventory.min_unit > 1 or inventory.step_size > 1
            for name in self.names
            for rc, inventory in state.views[name].host.inventories.items()
            if rc in self.CLASSES)
        for i, name in enumerate(self.names):
            self._refresh(i, name)
            for rc in self.CLASSES:
                bounds = state.views[name].capacity.get(rc)
                self.max_unit[rc][i] = bounds[1] if bounds else -1
        state.changed.clear()

    def _refresh(self, i, name):
        view = self.state.views[name]
        for rc in self.CLASSES:
            bounds = view.capacity.get(rc)
            self.free[rc][i] = (bounds[0] - view.usages.get(rc, 0)
                                if bounds else -1)

    def _update(self):
        changed = self.state.changed
        for name in changed:
            i = self.index.get(name)
            if i is not None:
                self._refresh(i, name)
        changed.clear()

    def hosts_with_room(self, resources):
        """A boolean array, or None for resources beyond VCPU/MEMORY_MB."""
        if not self.exact or any(rc not in self.CLASSES
                                 for rc, n in resources.items() if n > 0):
            return None
        self._update()
        ok = numpy.ones(len(self.names), dtype=bool)
        for rc, amount in resources.items():
            if amount > 0:
                ok &= (self.free[rc] >= amount) & \
                    (self.max_unit[rc] >= amount)
        return ok

    def memory_left(self):
        self._update()
        return self.free['MEMORY_MB']


class _Unit(typing.NamedTuple):
    host: str
    uuids: tuple
    gain: int
    memory_mb: int
    #: how many units of its host were applied when it was made: a unit
    #: of an older state of its host is stale
    generation: int = 0


def _worth(slots):
    return sum(slots)


def _per_gb(gain, moves, memory_mb):
    return gain / max(memory_mb / 1024.0, 1.0 / 1024)


class Planner(object):
    """One plan: see the module docstring."""

    def __init__(self, cloud, reference_flavors, budget=None, scope=None,
                 never_move=None, search='drain',
                 targets_examined=TARGETS_EXAMINED):
        if search not in SEARCHES:
            raise model.PlanError('unknown search %r; known: %s'
                                  % (search, ', '.join(SEARCHES)))
        self.budget = budget or model.Budget()
        self.scope = scope or model.Scope()
        self.never_move = never_move or model.NeverMove()
        self.search = search
        #: the units and ranking of the search now running
        self._mode = search
        self.targets_examined = targets_examined
        self.scope_hosts = sorted(name for name, host in cloud.hosts.items()
                                  if self.scope.contains(host))
        if not self.scope_hosts:
            raise model.PlanError('the scope (%s) matches no host'
                                  % self.scope.describe())
        self.state = planning_state.PlanningState(cloud, reference_flavors)
        self.groups = validity.GroupIndex(cloud)
        self._shapes = {}
        self._generation = {}
        self._room = _FreeRoom(self.state, self.scope_hosts)

    # -- the engine's view of an instance -------------------------------------

    def _shape(self, instance):
        """The instance's ``model.Shape`` (None: the engine cannot say)."""
        if instance.uuid not in self._shapes:
            shape = m.Shape(vcpus=instance.vcpus,
                            memory_mb=instance.memory_mb)
            if instance.requested_topology is not None:
                try:
                    shape = shape._replace(numa=adapters.request_from_topology(
                        instance.requested_topology))
                except adapters.Unsupported:
                    shape = None
            self._shapes[instance.uuid] = shape
        return self._shapes[instance.uuid]

    # -- units -------------------------------------------------------------

    def _unit_candidates(self, name, movable):
        """The instance sets of host ``name`` a unit may be made of."""
        state = self.state
        view = state.views[name]
        instances = [state.cloud.instances[u] for u in movable]
        instances.sort(key=lambda i: (i.memory_mb, i.vcpus, i.uuid))
        if self._mode == 'greedy':
            return [[(i.uuid,)] for i in instances]
        chains = []
        cells = sorted({c.id for c in view.topology.cells}) \
            if view.topology else []
        for cell_id in cells:
            touching = [i.uuid for i in instances
                        if self._touches(i.uuid, cell_id)]
            if touching:
                chains.append([tuple(touching[:n])
                               for n in range(1, len(touching) + 1)])
        everyone = [i.uuid for i in instances]
        if 1 < len(instances) <= MAX_HOST_UNIT:
            chains.append([tuple(everyone)])
        # Every instance alone too (the greedy baseline's units): one that
        # is not among the smallest of its cell may free a slot by itself.
        chains.extend([(uuid,)] for uuid in everyone)
        return chains

    def _units_of(self, names, movable):
        """The units of hosts ``names`` (see the module docstring).

        Their source gains are counted in one pass of the fit engine.

        Along a chain (a cell's smallest instances, one more at a time)
        a unit is kept where one more instance adds slots, at most
        :data:`PREFIXES_PER_CELL` of them.
        """
        state = self.state
        entries, where = [], []
        for name in names:
            view = state.views[name]
            for chain_number, chain in enumerate(
                    self._unit_candidates(name, movable.get(name, ()))):
                longest = chain[-1]
                prefixes = state.without_each(view, longest) \
                    if len(chain) == len(longest) else \
                    (state.without(view, uuids) for uuids in chain)
                for uuids, (topology, prepared, usages) in zip(chain,
                                                               prefixes):
                    entries.append((view.host, topology or
                                    _nova_without(state, view, uuids),
                                    prepared, usages))
                    where.append((name, chain_number, uuids))
        counted = state.count(entries)
        best = {}
        units = []
        seen = set()
        for (name, chain_number, uuids), slots in zip(where, counted):
            gain = _worth(slots) - _worth(state.views[name].slots)
            key = (name, chain_number)
            so_far, kept = best.get(key, (0, 0))
            if gain <= so_far or kept >= PREFIXES_PER_CELL or \
                    uuids in seen:
                continue
            best[key] = (gain, kept + 1)
            seen.add(uuids)
            units.append(_Unit(
                name, uuids, gain,
                sum(state.cloud.instances[u].memory_mb for u in uuids),
                self._generation.get(name, 0)))
        return units

    def _touches(self, uuid, cell_id):
        placed = self.state.placed[uuid]
        return placed is not None and any(c.id == cell_id
                                          for c in placed.cells)

    # -- moving one unit ---------------------------------------------------

    def _candidates(self, instance, excluded):
        """``(hosts, refused)``: where placement and the engine fit it.

        The hosts with placement room that the fit engine fits the
        instance on, the fullest first (least RAM left after it), and
        ``{host: why not}`` for the others.
        """
        state = self.state
        names, index = self._room.names, self._room.index
        room = self._room.hosts_with_room(instance.resources)
        if room is None:
            room = numpy.array([state.views[name].has_room(
                instance.resources) for name in names], dtype=bool)
        considered = numpy.ones(len(names), dtype=bool)
        for name in excluded:
            if name in index:
                considered[index[name]] = False
        refused = dict.fromkeys(
            [names[i] for i in numpy.flatnonzero(considered & ~room)],
            NO_ROOM)
        roomy = numpy.flatnonzero(considered & room)
        shape = self._shape(instance)
        if shape is not None and shape.numa is not None and len(roomy):
            answers = engine.check_hosts(
                [state.views[names[i]].prepared for i in roomy], shape.numa)
            # UNKNOWN: Nova's fit decides, later.
            fitting = numpy.array([answer != m.NO for answer in answers],
                                  dtype=bool)
            refused.update(dict.fromkeys(
                [names[i] for i in roomy[~fitting]],
                'its free NUMA cells cannot hold it'))
            roomy = roomy[fitting]
        # The fullest first, by name among equals (names are sorted, so
        # the index breaks ties).
        leftover = self._room.memory_left()
        roomy = [names[i] for i in
                 roomy[numpy.lexsort((roomy, leftover[roomy]))]]
        return roomy, refused

    def valid_targets(self, instance, excluded=(), most=None):
        """``(valid hosts, refused)``: the candidates the rules allow.

        Fullest first (:class:`~.validity.TargetRules`), at most ``most``
        of them; ``refused`` says why of the others seen.
        """
        candidates, refused = self._candidates(instance, excluded)
        target_rules = validity.TargetRules(self.state, instance,
                                            self.groups)
        valid = []
        for name in candidates:
            why = target_rules.why_not(name)
            if why:
                refused[name] = why
                continue
            valid.append(name)
            if most is not None and len(valid) >= most:
                break
        return valid, refused

    def _choose(self, instance, excluded):
        """The target where the instance costs the fewest slots.

        :returns: ``((target, Nova's fitted topology), None)``, or
            ``(None, why no host takes it)``
        """
        state = self.state
        examined, refused = self.valid_targets(instance, excluded,
                                               self.targets_examined)
        if not examined:
            return None, _no_target(refused)
        shape = self._shape(instance)
        entries, names = [], []
        for name in examined:
            view = state.views[name]
            entry = state.with_instance(view, instance.uuid, shape) \
                if shape is not None else None
            if entry is not None:
                entries.append((view.host,) + entry)
                names.append(name)
        losses = {}
        for name, after in zip(names, state.count(entries)):
            losses[name] = _worth(state.views[name].slots) - _worth(after)
        # The engine's choice first; hosts it could not place on, after.
        order = sorted(names, key=lambda n: (losses[n], examined.index(n)))
        order += [n for n in examined if n not in losses]
        for name in order:
            fits, fitted = state.nova_fit(instance.uuid, name)
            if not fits:
                refused[name] = ("Nova's NUMA fit finds no cells for it "
                                 "that its claim accounts")
                continue
            return (name, fitted), None
        return None, _no_target(refused)

    def _apply(self, instance, target, fitted):
        state = self.state
        source = state.where[instance.uuid]
        before = [state.views[source].slots, state.views[target].slots]
        state.apply(instance.uuid, target, fitted)
        after = [state.views[source].slots, state.views[target].slots]
        recovered = {
            flavor.name: sum(a[i] - b[i] for a, b in zip(after, before))
            for i, flavor in enumerate(state.flavors)}
        return Move(instance=instance.uuid, flavor=instance.flavor_name,
                    source=source, target=target,
                    memory_mb=instance.memory_mb, cells=fitted_cells(fitted),
                    slots_recovered=recovered)

    def _try(self, unit, excluded):
        """Move the unit's instances, largest first.

        :returns: ``(net slots recovered, moves, None)``, or ``(None,
            moves, why an instance found no target)``; the moves stay
            applied, the caller rolls back what it does not keep
        """
        state = self.state
        before = {unit.host: _worth(state.views[unit.host].slots)}
        moves = []
        for instance in sorted(
                (state.cloud.instances[u] for u in unit.uuids),
                key=lambda i: (-i.memory_mb, -i.vcpus, i.uuid)):
            choice, why = self._choose(instance, excluded | {unit.host})
            if choice is None:
                return None, moves, why
            target, fitted = choice
            before.setdefault(target, _worth(state.views[target].slots))
            moves.append(self._apply(instance, target, fitted))
        net = sum(_worth(state.views[name].slots) - worth
                  for name, worth in before.items())
        return net, moves, None

    # -- the plan ------------------------------------------------------------

    def _ratio(self, moves, ram_mb, all_ram_mb):
        """How a unit is ranked: slots per share of the budget it spends.

        The greedy baseline ranks by slots per GiB moved.  The drain search
        charges a unit the larger of its shares of the move budget and of
        the RAM budget (the RAM of every instance in scope when there is no
        RAM budget), so that a budget counted in moves is spent on the
        moves that recover most, and one counted in RAM on the RAM.
        """
        if self._mode == 'greedy':
            return lambda unit: _per_gb(unit.gain, len(unit.uuids),
                                        unit.memory_mb)
        moves = max(moves, 1)
        ram_mb = max(ram_mb if ram_mb is not None else all_ram_mb, 1)

        def ratio(unit):
            spent = max(len(unit.uuids) / moves, unit.memory_mb / ram_mb)
            return unit.gain / max(spent, 1e-9)
        return ratio

    def _movable(self):
        """``(instances in scope, {uuid: why it stays}, {host: [uuid]})``."""
        state = self.state
        in_scope = set(self.scope_hosts)
        instances = [i for i in state.cloud.instances.values()
                     if i.host in in_scope]
        left_alone, movable = {}, {}
        for instance in instances:
            reason = validity.why_unmovable(state, instance, self.never_move,
                                            self.groups)
            if reason is None and self._shape(instance) is None:
                reason = ('the fit engine has no model of its NUMA '
                          'topology')
            if reason:
                left_alone[instance.uuid] = reason
            else:
                movable.setdefault(instance.host, []).append(instance.uuid)
        return instances, left_alone, movable

    def move_bound(self, moves):
        """The most slots a plan of at most ``moves`` moves can recover.

        A yardstick, not a plan: counted at the sources alone.  Slots only
        grow as instances leave a host and only shrink as they arrive, so
        a host a plan moves ``k`` instances off gains at most its best
        single departure (``k == 1``), its best pair's (``k == 2``) or the
        departure of all its movable instances (``k >= 3``), and its
        targets lose slots or nothing.  The most of these gains that
        ``moves`` moves can buy (a knapsack over hosts, the whole host
        priced at three moves, the least it may cost) bounds every plan of
        the budget, this planner's and any other's.  Unlike the offline
        repack, it moves only what a plan may move.
        """
        state = self.state
        _instances, _left, movable = self._movable()
        entries, where = [], []
        for name, uuids in sorted(movable.items()):
            view = state.views[name]
            sets = [(u,) for u in uuids] + list(
                itertools.combinations(uuids, 2))
            if len(uuids) > 2:
                sets.append(tuple(uuids))
            for gone in sets:
                topology, prepared, usages = state.without(view, gone)
                entries.append((view.host, topology or _nova_without(
                    state, view, gone), prepared, usages))
                where.append((name, min(len(gone), 3)))
        # gains[name][k]: the most k departures (3: all) recover there
        gains = collections.defaultdict(lambda: [0, 0, 0, 0])
        for (name, cost), slots in zip(where, state.count(entries)):
            gain = _worth(slots) - _worth(state.views[name].slots)
            gains[name][cost] = max(gains[name][cost], gain)
        best = [0] * (moves + 1)
        for name in sorted(gains):
            options = [(cost, gain) for cost, gain in
                       enumerate(gains[name]) if cost and gain > 0]
            for spent in range(moves, 0, -1):
                for cost, gain in options:
                    if cost <= spent:
                        best[spent] = max(best[spent],
                                          best[spent - cost] + gain)
        return best[moves]

    def plan(self):
        """The plan: see the module docstring.

        The drain search keeps the greedy baseline's plan where that one
        recovers more (its lazy choice among units may spend moves on
        hosts that then refuse the single moves greedy makes), so that it
        is never worse than the baseline an operator could run instead.
        """
        started = time.monotonic()
        if self.search == 'greedy':
            plan = self._search('greedy')
        else:
            mark = self.state.mark()
            greedy = self._search('greedy')
            greedy_moves = self.state.moves_since(mark)
            self.state.rollback(mark)
            plan = self._search('drain')
            if _worth(greedy.slots_recovered.values()) > \
                    _worth(plan.slots_recovered.values()):
                # The state must end as the returned plan leaves it.
                self.state.rollback(mark)
                self.state.redo(greedy_moves)
                plan = greedy
        plan.search = self.search
        plan.seconds = time.monotonic() - started
        LOG.info('Defragmentation plan (%(search)s): %(moves)d moves, '
                 '%(gb).1f GiB of RAM, slots %(before)s -> %(after)s in '
                 '%(s).2f s.',
                 {'search': self.search, 'moves': len(plan.moves),
                  'gb': plan.memory_moved_mb / 1024.0,
                  'before': sum(plan.slots_before.values()),
                  'after': sum(plan.slots_after.values()),
                  's': plan.seconds})
        return plan

    def _search(self, mode):
        """One search from the state as it is (``mode``: see SEARCHES)."""
        self._mode = mode
        self._generation = {}
        state = self.state
        instances, left_alone, movable = self._movable()
        slots_before = state.total_slots()
        moves_left = self.budget.moves_allowed(len(instances))
        ram_left = self.budget.max_ram_mb
        ratio_of = self._ratio(moves_left, ram_left,
                               sum(i.memory_mb for i in instances))
        heap, counter = [], itertools.count()
        for unit in self._units_of(self.scope_hosts, movable):
            heapq.heappush(heap, (-ratio_of(unit), next(counter), unit,
                                  False))
        drained, received, moved = set(), set(), set()
        why_kept = {}
        moves = []
        over_budget = set()
        while heap and moves_left > 0:
            _key, _n, unit, exact = heapq.heappop(heap)
            if unit.host in received or \
                    unit.generation != self._generation.get(unit.host, 0):
                continue
            if len(unit.uuids) > moves_left or (
                    ram_left is not None and unit.memory_mb > ram_left):
                over_budget.update(unit.uuids)
                continue
            mark = state.mark()
            net, trial_moves, why = self._try(unit, drained)
            if why is not None:
                state.rollback(mark)
                for uuid in unit.uuids:
                    why_kept.setdefault(uuid, why)
                continue
            if net <= 0:
                state.rollback(mark)
                continue
            ratio = ratio_of(unit._replace(gain=net))
            if heap and not exact and ratio < -heap[0][0]:
                state.rollback(mark)
                heapq.heappush(heap, (-ratio, next(counter),
                                      unit._replace(gain=net), True))
                continue
            moves.extend(trial_moves)
            moved.update(unit.uuids)
            drained.add(unit.host)
            self._generation[unit.host] = unit.generation + 1
            received.update(move.target for move in trial_moves)
            moves_left -= len(trial_moves)
            if ram_left is not None:
                ram_left -= unit.memory_mb
            # The drained host's other units start from its new state.
            movable[unit.host] = [u for u in movable.get(unit.host, ())
                                  if u not in moved]
            for again in self._units_of([unit.host], movable):
                heapq.heappush(heap, (-ratio_of(again), next(counter),
                                      again, False))
        for uuids in movable.values():
            for uuid in uuids:
                if uuid in moved:
                    continue
                if uuid in over_budget or (heap and moves_left <= 0):
                    left_alone[uuid] = _budget_spent(self.budget)
                else:
                    left_alone[uuid] = why_kept.get(uuid, NO_GAIN)
        plan = Plan(moves=moves, slots_before=slots_before,
                    slots_after=state.total_slots(), left_alone=left_alone,
                    budget=self.budget, scope=self.scope, search=mode,
                    never_move=self.never_move,
                    instances_in_scope=len(instances),
                    hosts_in_scope=len(self.scope_hosts))
        return plan


def _nova_without(state, view, uuids):
    """Nova's topology of a host without ``uuids``, when it is needed."""
    def topology():
        return state.nova_without(view, [
            state.placed[u] for u in uuids if state.placed[u] is not None])
    return topology


def _budget_spent(budget):
    return ('the budget (%s) is spent on moves that recover more slots'
            % ', '.join('%s %s' % (k.replace('_', ' '), v) for k, v in
                        dataclasses.asdict(budget).items() if v is not None))


def _no_target(refused):
    """Why no host takes an instance: the commonest reason, with a count."""
    if not refused:
        return 'no host in scope fits it (NUMA)'
    counts = {}
    for reason in refused.values():
        counts[reason] = counts.get(reason, 0) + 1
    reason, n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return ('no host in scope takes it: %d host(s) refuse it because %s'
            % (n, reason))


def make_plan(cloud, reference_flavors, budget=None, scope=None,
              never_move=None, search='drain'):
    """:meth:`Planner.plan` in one call."""
    return Planner(cloud, reference_flavors, budget=budget, scope=scope,
                   never_move=never_move, search=search).plan()
