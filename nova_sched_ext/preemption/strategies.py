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

"""Victim-selection strategies (``nova_sched_ext.victim_strategies``).

The driver picks one by name with :func:`load_strategy` (option
``[nova_sched_ext] preemption_victim_strategy``).  A strategy places one
instance at a time (:meth:`VictimStrategy.place_one`);
:meth:`VictimStrategy.choose` runs it for every instance of a request through
:func:`~nova_sched_ext.preemption.victims.plan_eviction`, all or nothing.

``minimal`` (:class:`MinimalVictims`, the default)
    Over all hosts, the placement that minimises, in this order: the number
    of victims; the resources wasted (see :func:`waste`); the age of the
    oldest victim (younger is better, so long-running work survives); then
    host and node name and victim UUIDs, so that equal inputs give equal
    answers.  Exact: subsets of each host's victims are tried by increasing
    size; see the class for the bounds that keep it fast.

``random`` (:class:`RandomVictims`)
    Aardvark-like, for comparison: a random host among those where the
    request fits once all its victims are gone, then random victims one at
    a time until it fits.

A third party adds a strategy by subclassing :class:`VictimStrategy` and
registering it in the entry-point namespace.  Strategies are shared by
concurrent requests: they keep no per-request state on ``self`` (the random
strategy's generator is shared, so with a seed its sequence depends on the
order of concurrent requests).
"""

import heapq
import itertools
import math
import operator
import random

from oslo_log import log as logging
from stevedore import extension

from nova_sched_ext.preemption import victims as victims_mod

LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_sched_ext.victim_strategies'
DEFAULT_STRATEGY = 'minimal'

#: Subsets of one size tried exactly on one host; past this many (e.g. 4
#: victims out of 20), the host offers its greedy choice instead.
MAX_SUBSETS_PER_HOST = 2000

#: Victim sets that pass the host level but fail the NUMA check before one
#: request gives up (each check costs about a millisecond per victim).
MAX_NUMA_FAILURES = 200

# Waste is compared rounded to 1e-9; subsets closer than this to the least
# waste of a host are compared in full.
_TOLERANCE = 1e-8

# A host's lower bound on waste and its subsets' waste are summed in
# different orders; the bound is lowered by this much (far more than the
# rounding error, far less than the 1e-9 of the comparison) before being
# rounded, so that it never exceeds a subset's rounded waste.
_MARGIN = 1e-10

# The last item of a host's placeholder heap entry: its bounds are coarse
# (every victim counts) or refined (only the victims that can be part of a
# subset of that size count).
_COARSE = None
_REFINED = 'refined'


class VictimStrategy:
    """Base class of victim-selection strategies."""

    #: The entry-point name.
    name = None

    def place_one(self, hosts, request):
        """Choose where one instance goes and whom it evicts there.

        :param hosts: :class:`~.victims.CandidateHost` objects, reflecting
            the instances of the request already placed
        :param request: the :class:`~.victims.Request`
        :returns: a :class:`~.victims.Placement` naming one of ``hosts``, or
            None when no host can take the instance
        """
        raise NotImplementedError()

    def choose(self, hosts, request):
        """A :class:`~.victims.Plan` for every instance, or None."""
        return victims_mod.plan_eviction(hosts, request, self)


def waste(resources, free, freed):
    """Resources freed beyond the need, in units of the request.

    For every resource class the request asks for, what the victims free
    beyond what the host still lacked, divided by the amount requested:
    evicting a 4-vCPU instance for a 2-vCPU request on a host with no free
    vCPU wastes 1.0 (one more request's worth of vCPUs).  Resource classes
    the request does not ask for are not counted.  Being relative to the
    request, it compares hosts fairly whatever their size.  It is additive
    over victims: each victim contributes the sum over the requested classes
    of what it holds divided by the amount requested, minus, once per
    subset, the host's lacking amounts divided the same way.
    """
    total = 0.0
    for rc, amount in resources.items():
        if amount <= 0:
            continue
        lacking = max(0, amount - free.get(rc, 0))
        total += max(0, freed.get(rc, 0) - lacking) / amount
    return total


class _Need(dict):
    """The request's resources, with the tuples the hot loops use."""

    def __init__(self, resources):
        super().__init__(resources)
        self.classes = tuple(self)
        self.amounts = tuple(self.values())
        self.zeros = (0,) * len(self.classes)
        self.position = {rc: i for i, rc in enumerate(self.classes)}
        # Share of the waste of each distinct vector of amounts: victims of
        # one flavor share it, whatever their host.
        self._weights = {}

    def vector(self, victim):
        """What the victim holds of each requested class, in order."""
        return tuple(map(victim.resources.get, self.classes, self.zeros))

    def weight(self, vector):
        """A victim's share of the waste (see :func:`waste`)."""
        weight = self._weights.get(vector)
        if weight is None:
            weight = self._weights[vector] = sum(
                map(operator.truediv, vector, self.amounts))
        return weight


class _HostSearch:
    """Per-request search state of one host (lives for one place_one)."""

    __slots__ = ('host', 'deficit', 'lacks', 'base_waste', 'weights',
                 'greedy', 'noted', 'checked_all', 'hopeless')

    def __init__(self, host, deficit, base_waste, lacks=()):
        self.host = host
        # ((resource class, amount lacking), ...): what the victims must free
        self.deficit = deficit
        # The amount lacking (0 if none) of each requested class, in the
        # order of _Need.classes.
        self.lacks = lacks
        # waste(subset) = sum of the victims' weights - base_waste
        self.base_waste = base_waste
        self.weights = None
        self.greedy = None
        self.noted = False
        # Whether the NUMA check with every victim gone ran, and failed.
        self.checked_all = False
        self.hopeless = False


def _column(resources, rc):
    """What each mapping of ``resources`` holds of ``rc`` (0 if absent)."""
    try:
        # One C-level pass when every victim holds the class.
        return list(map(operator.itemgetter(rc), resources))
    except KeyError:
        return [held.get(rc, 0) for held in resources]


class _Bounds:
    """Lower bounds of the heap keys of every host's subsets, per size.

    Built once per request from a few passes over all the victims, each
    a comprehension or a ``map`` of a builtin (no Python call per victim):
    per host and requested class the least and the most a victim holds,
    and the creation times of the host's victims, youngest first.  A
    subset of ``size`` victims then

    * covers a class only if ``size`` times the most a victim holds does;
    * frees of each class at least ``size`` times the least a victim
      holds, so it wastes at least the sum over the requested classes of
      what that frees beyond the lacking amount (see :func:`waste`);
    * has an oldest victim no younger than the host's ``size``-th
      youngest.

    These give each host a placeholder heap entry that sorts before every
    entry of its own subsets of that size; its exact search
    (:meth:`MinimalVictims._best`) runs only if the placeholder is popped,
    i.e. if no subset of a better key fitted first.
    """

    def __init__(self, searches, need):
        # Hosts with no victim never get past level 0.
        self.members = [seq for seq, search in enumerate(searches)
                        if search.host.victims]
        victim_lists = [searches[seq].host.victims for seq in self.members]
        self.counts = list(map(len, victim_lists))
        offsets = list(itertools.accumulate(self.counts, initial=0))
        self.slices = slices = list(map(slice, offsets[:-1], offsets[1:]))
        resources = [victim.resources for victims in victim_lists
                     for victim in victims]
        self.amounts = need.amounts
        # Per requested class: what each victim holds (all hosts one after
        # the other), the least and the most a victim of each host holds,
        # and what each host lacks.
        self.columns, self.least, self.most, self.lacks = [], [], [], []
        for position, rc in enumerate(need.classes):
            column = _column(resources, rc)
            self.columns.append(column)
            self.least.append(list(map(min, map(column.__getitem__,
                                                slices))))
            lacks = [searches[seq].lacks[position] for seq in self.members]
            self.lacks.append(lacks)
            # Only needed where something is lacking.
            self.most.append(list(map(max, map(column.__getitem__, slices)))
                             if any(lacks) else None)
        # Creation times are compared as datetimes where they all compare
        # (all aware, or all naive, none unknown), and only the ones a
        # bound uses are converted: converting 20,000 of them costs more
        # than the rest of the bounds.  Seconds since the epoch are
        # monotonic in the datetime, so the bounds are the same.
        created = [victim.created_at for victims in victim_lists
                   for victim in victims]
        try:
            youngest = list(map(max, map(created.__getitem__, slices)))
            self.seconds = victims_mod.timestamp
        except TypeError:
            created = victims_mod.created_timestamps(
                itertools.chain.from_iterable(victim_lists))
            youngest = list(map(max, map(created.__getitem__, slices)))
            self.seconds = float
        self.created = created
        self.youngest = list(map(self.seconds, youngest))
        self.index = {seq: index for index, seq in enumerate(self.members)}

    def placeholders(self, size, searches):
        """A placeholder heap entry for each host that may have a subset.

        ``(size, waste bound, -oldest bound, host, node, (), seq, None)``;
        the waste bound is lowered by a margin and rounded like the
        subsets' waste, so that it never exceeds theirs.
        """
        eligible = [size <= n for n in self.counts]
        for most, lacks in zip(self.most, self.lacks):
            if most is not None:
                eligible = [ok and size * high >= lack
                            for ok, high, lack in zip(eligible, most, lacks)]
        eligible = [index for index in itertools.compress(
            range(len(eligible)), eligible)
            if not searches[self.members[index]].hopeless]
        if not eligible:
            return []
        wasted = [0.0] * len(eligible)
        for least, lacks, amount in zip(self.least, self.lacks,
                                        self.amounts):
            wasted = [w + (size * low - lack) / amount
                      if size * low > lack else w
                      for w, low, lack in zip(
                          wasted, map(least.__getitem__, eligible),
                          map(lacks.__getitem__, eligible))]
        # The oldest victim of a subset is at most the size-th youngest.
        if size == 1:
            oldest = list(map(self.youngest.__getitem__, eligible))
        else:
            created, slices = self.created, self.slices
            oldest = list(map(self.seconds, [
                sorted(created[slices[index]], reverse=True)[size - 1]
                for index in eligible]))
        entries = []
        for index, bound, created in zip(eligible, wasted, oldest):
            seq = self.members[index]
            host = searches[seq].host
            entries.append((
                size, round(bound - _MARGIN, 9), -created, host.host,
                host.nodename, (), seq, _COARSE))
        return entries

    def refined(self, size, seq, search):
        """A tighter placeholder for one host, or None if it has no subset.

        Every victim of a subset that covers a lacking amount ``L`` holds at
        least ``L - (size - 1) * most`` of that class; only such victims
        count for the bounds.
        """
        index = self.index[seq]
        where = self.slices[index]
        held = [column[where] for column in self.columns]
        useful = range(self.counts[index])
        for part, most, lacks in zip(held, self.most, self.lacks):
            lack = lacks[index]
            if lack > 0:
                # (most is not None where some host lacks the class)
                floor = lack - (size - 1) * most[index]
                useful = [i for i in useful if part[i] >= floor]
        if len(useful) < size:
            return None
        wasted = 0.0
        for part, lacks, amount in zip(held, self.lacks, self.amounts):
            freed = sum(sorted([part[i] for i in useful])[:size])
            lack = lacks[index]
            if freed > lack:
                wasted += (freed - lack) / amount
        created = self.created[where]
        oldest = self.seconds(sorted([created[i] for i in useful],
                                     reverse=True)[size - 1])
        host = search.host
        return (size, round(wasted - _MARGIN, 9), -oldest, host.host,
                host.nodename, (), seq, _REFINED)


class MinimalVictims(VictimStrategy):
    """Fewest victims, then least waste, then youngest victims.

    The search runs level by level, a level being a number of victims, from
    0 upwards; the first level where some subset fits is the optimum.
    Within a level the subsets that fit at the host level are ordered by
    (waste, age of the oldest victim, host name, victim UUIDs), and the
    NUMA check (the costly part) runs in that order and stops at the first
    subset that passes.

    Most hosts are never searched set by set: each enters a level as one
    placeholder heap entry keyed by lower bounds of its subsets' keys
    (:class:`_Bounds`, computed for all hosts in a few passes over the
    victims), refined when it reaches the top of the heap, and searched
    exactly (:meth:`_best`) only when its refined placeholder reaches the
    top again.  The bounds never exceed a subset's key, so the order, and
    the answer, are those of the exhaustive search.  Waste is additive
    over victims (see :func:`waste`), so each victim's share is computed
    once per request.  When one host has more than
    :data:`MAX_SUBSETS_PER_HOST` subsets of a size, it offers at that size
    the greedy subset (victims ordered by how much of what is lacking they
    free, youngest first) instead, and a debug note is logged: the answer
    may then be above the optimum.
    """

    name = 'minimal'

    def place_one(self, hosts, request):
        need = _Need({rc: amount for rc, amount in request.resources.items()
                      if amount > 0})
        searches = []
        for host in hosts:
            search = self._prepare(host, need)
            if search is not None:
                searches.append(search)
        if not searches:
            return None
        first = 0 if any(not s.deficit for s in searches) else 1
        last = max(len(s.host.victims) for s in searches)
        bounds = None
        failed = 0
        for size in range(first, last + 1):
            complete = set()
            if size == 0:
                candidates = []
                for seq, search in enumerate(searches):
                    if not search.deficit:
                        host = search.host
                        candidates.append((0, 0.0, 0.0, host.host,
                                           host.nodename, (), seq, ()))
                    complete.add(seq)
            else:
                # Each host enters a level as one placeholder keyed by a
                # lower bound of its subsets' keys; the costly exact search
                # runs only for the hosts whose placeholder is reached
                # before a subset that fits is found.
                if bounds is None:
                    bounds = _Bounds(searches, need)
                candidates = bounds.placeholders(size, searches)
            heapq.heapify(candidates)
            while candidates:
                entry = heapq.heappop(candidates)
                seq = entry[-2]
                search = searches[seq]
                if search.hopeless:
                    continue
                if entry[-1] is _COARSE and size > 1:
                    refined = bounds.refined(size, seq, search)
                    if refined is not None:
                        heapq.heappush(candidates, refined)
                    continue
                if entry[-1] is _COARSE or entry[-1] is _REFINED:
                    if size == 1:
                        entries = []
                        self._singles(search, seq, need, entries)
                        complete.add(seq)
                    else:
                        best = self._best(search, seq, size, need)
                        entries = () if best is None else (best,)
                    for other in entries:
                        heapq.heappush(candidates, other)
                    continue
                chosen = tuple(search.host.victims[i] for i in entry[-1])
                if victims_mod.numa_fits(search.host, request,
                                         chosen) is True:
                    return victims_mod.Placement(search.host, chosen)
                failed += 1
                if failed > MAX_NUMA_FAILURES:
                    LOG.warning('Victim selection: %(n)d sets of victims '
                                'passed the host-level check but failed '
                                'the NUMA one; giving up rather than '
                                'spending more time, so the request is '
                                'not served. Its NUMA needs (pinned CPUs '
                                'per cell, huge pages) may exceed what the '
                                'hosts with preemptible instances have.',
                                {'n': failed - 1})
                    return None
                if not search.checked_all:
                    # Once per host: if the request does not fit even with
                    # every victim gone, no subset of them will.
                    search.checked_all = True
                    if victims_mod.numa_fits(
                            search.host, request,
                            search.host.victims) is not True:
                        search.hopeless = True
                        continue
                if seq not in complete:
                    complete.add(seq)
                    others = []
                    self._subsets(search, seq, size, need, others)
                    for other in others:
                        if other[-1] != entry[-1]:
                            heapq.heappush(candidates, other)
        return None

    @staticmethod
    def _prepare(host, need):
        max_unit = host.max_unit
        free = host.free
        deficit = []
        lacks = []
        base_waste = 0.0
        for rc, amount in need.items():
            if max_unit and amount > max_unit.get(rc, amount):
                return None
            lacking = amount - free.get(rc, 0)
            if lacking > 0:
                deficit.append((rc, lacking))
                lacks.append(lacking)
                base_waste += lacking / amount
            else:
                lacks.append(0)
        if deficit and not host.victims:
            return None
        # A host whose victims cannot cover the deficit is kept: _Bounds
        # finds it eligible at no level.
        return _HostSearch(host, tuple(deficit), base_waste, lacks)

    @staticmethod
    def _singles(search, seq, need, candidates):
        """Heap entries of the single victims that fit the request.

        Host level only; the common case, kept to one tight pass.
        """
        host = search.host
        deficit = search.deficit
        base = search.base_waste
        classes, amounts, zeros = need.classes, need.amounts, need.zeros
        name, node = host.host, host.nodename
        if len(deficit) == 1:
            (rc, lacking), = deficit
            fitting = [(i, v) for i, v in enumerate(host.victims)
                       if v.resources.get(rc, 0) >= lacking]
        elif len(deficit) == 2:
            (rc, lacking), (rc2, lacking2) = deficit
            fitting = [(i, v) for i, v in enumerate(host.victims)
                       if v.resources.get(rc, 0) >= lacking and
                       v.resources.get(rc2, 0) >= lacking2]
        else:
            fitting = [(i, v) for i, v in enumerate(host.victims)
                       if all(v.resources.get(rc, 0) >= lacking
                              for rc, lacking in deficit)]
        for i, victim in fitting:
            get = victim.resources.get
            wasted = sum(map(operator.truediv, map(get, classes, zeros),
                             amounts)) - base
            candidates.append((1, round(wasted, 9), -victim.created_ts, name,
                               node, (victim.uuid,), seq, (i,)))

    def _subsets(self, search, seq, size, need, candidates):
        """Heap entries of the subsets of ``size`` >= 2 victims that fit.

        Host level only.
        """
        host = search.host
        victims = host.victims
        deficit = search.deficit
        if math.comb(len(victims), size) <= MAX_SUBSETS_PER_HOST:
            held = [[victim.resources.get(rc, 0) for victim in victims]
                    for rc, _lacking in deficit]
            # A victim holding less than the lacking amount minus what
            # size - 1 of the largest hold is in no subset that fits.
            useful = range(len(victims))
            for amounts, (_rc, lacking) in zip(held, deficit):
                floor = lacking - (size - 1) * max(amounts)
                useful = [i for i in useful if amounts[i] >= floor]
            combos = [combo for combo in
                      itertools.combinations(useful, size)
                      if all(sum(amounts[i] for i in combo) >= lacking
                             for amounts, (_rc, lacking) in zip(held,
                                                                deficit))]
        else:
            if not search.noted:
                search.noted = True
                LOG.debug('Victim selection: host %(host)s has %(n)d '
                          'victims; subsets of %(size)d or more are chosen '
                          'greedily there.', {'host': host.host,
                                              'n': len(victims),
                                              'size': size})
            combo = tuple(sorted(self._greedy(search)[:size]))
            combos = [combo] if all(
                sum(victims[i].resources.get(rc, 0) for i in combo) >= lacking
                for rc, lacking in deficit) else []
        if not combos:
            return
        weights = self._victim_weights(search, need)
        for combo in combos:
            candidates.append(self._entry(
                search, seq, combo, sum(weights[i] for i in combo)))

    @staticmethod
    def _victim_weights(search, need):
        """Each victim's share of the waste (see :func:`waste`)."""
        if search.weights is None:
            search.weights = [need.weight(need.vector(v))
                              for v in search.host.victims]
        return search.weights

    @staticmethod
    def _entry(search, seq, combo, weight):
        """The heap entry of one subset: its key, then where it is."""
        host = search.host
        victims = host.victims
        oldest = min(victims[i].created_ts for i in combo)
        uuids = tuple(sorted(victims[i].uuid for i in combo))
        return (len(combo), round(weight - search.base_waste, 9), -oldest,
                host.host, host.nodename, uuids, seq, combo)

    def _best(self, search, seq, size, need, bound=math.inf):
        """The heap entry of the host's best subset of ``size`` >= 2 victims.

        Same order as :meth:`_subsets` but without building an entry per
        subset: only the subsets within rounding of the least waste are
        compared in full.  None when no subset fits at the host level or
        none wastes at most ``bound``.
        """
        victims = search.host.victims
        count = len(victims)
        if math.comb(count, size) > MAX_SUBSETS_PER_HOST:
            entries = []
            self._subsets(search, seq, size, need, entries)
            return entries[0] if entries else None
        deficit = search.deficit
        # Victims holding the same amounts of the requested classes
        # (typically: of the same flavor) are interchangeable at the host
        # level, so the search runs over kinds of victims and how many of
        # each to take, lightest kinds first.
        by_vector = {}
        vector = need.vector
        for index, victim in enumerate(victims):
            by_vector.setdefault(vector(victim), []).append(index)
        weight = need.weight
        positions = [need.position[rc] for rc, _lacking in deficit]
        kinds = sorted(
            ((weight(vec),) + tuple(vec[p] for p in positions), members)
            for vec, members in by_vector.items())
        lackings = [lacking for _rc, lacking in deficit]
        classes = range(len(deficit))
        best = [bound + search.base_waste]
        near = []

        def pick(start, remaining, total, partial, chosen):
            if not remaining:
                if all(partial[c] >= lackings[c] for c in classes):
                    near.append((total, chosen))
                    best[0] = min(best[0], total)
                return
            for position in range(start, len(kinds)):
                kind, members = kinds[position]
                # Later kinds weigh at least as much as this one.
                if total + kind[0] * remaining > best[0] + _TOLERANCE:
                    return
                for take in range(1, min(remaining, len(members)) + 1):
                    pick(position + 1, remaining - take,
                         total + kind[0] * take,
                         [partial[c] + kind[1 + c] * take for c in classes],
                         chosen + ((position, take),))

        if size == 2:
            # The usual case past one victim: two tight loops over kinds.
            for first, (kind, members) in enumerate(kinds):
                if 2 * kind[0] > best[0] + _TOLERANCE:
                    break
                if len(members) > 1 and all(2 * kind[1 + c] >= lackings[c]
                                            for c in classes):
                    near.append((2 * kind[0], ((first, 2),)))
                    best[0] = min(best[0], 2 * kind[0])
                for second in range(first + 1, len(kinds)):
                    other = kinds[second][0]
                    total = kind[0] + other[0]
                    if total > best[0] + _TOLERANCE:
                        break
                    for c in classes:
                        if kind[1 + c] + other[1 + c] < lackings[c]:
                            break
                    else:
                        near.append((total, ((first, 1), (second, 1))))
                        best[0] = min(best[0], total)
        else:
            pick(0, size, 0.0, [0] * len(deficit), ())
        near = [(total, tuple(sorted(itertools.chain.from_iterable(parts))))
                for total, chosen in near if total <= best[0] + _TOLERANCE
                for parts in itertools.product(*[
                    itertools.combinations(kinds[position][1], take)
                    for position, take in chosen])]
        if not near:
            return None
        return min(self._entry(search, seq, combo, total)
                   for total, combo in near if total <= best[0] + _TOLERANCE)

    @staticmethod
    def _greedy(search):
        if search.greedy is None:
            victims = search.host.victims

            def score(i):
                resources = victims[i].resources
                covered = sum(min(resources.get(rc, 0), lacking) / lacking
                              for rc, lacking in search.deficit)
                return (-covered, -victims[i].created_ts, victims[i].uuid)

            search.greedy = sorted(range(len(victims)), key=score)
        return tuple(search.greedy)


class RandomVictims(VictimStrategy):
    """Aardvark-like random choice, for comparison.

    A random host among those where the request fits once every victim on
    it is gone; then random victims there, one at a time, until it fits.

    :param seed: seed of the strategy's own ``random.Random``
    """

    name = 'random'

    def __init__(self, seed=None):
        self.rng = random.Random(seed)

    def place_one(self, hosts, request):
        # The first host of a random order that fits once all its victims
        # are gone is a uniform choice among those hosts; the costly NUMA
        # check runs only until one is found.
        order = [h for h in hosts
                 if victims_mod.host_level_fits(h, request.resources,
                                                h.victims)]
        self.rng.shuffle(order)
        host = next((h for h in order
                     if victims_mod.numa_fits(h, request, h.victims) is True),
                    None)
        if host is None:
            return None
        order = list(host.victims)
        self.rng.shuffle(order)
        for count in range(len(order) + 1):
            chosen = tuple(order[:count])
            if victims_mod.host_fits(host, request, chosen) is True:
                return victims_mod.Placement(host, chosen)
        # Unreachable: the host fits with all of them.
        return None


def available_strategies():
    """Names registered in the strategies' entry-point namespace."""
    return sorted(extension.ExtensionManager(NAMESPACE).names())


def load_strategy(name=DEFAULT_STRATEGY, **kwargs):
    """Instantiate the strategy registered under ``name``.

    :param kwargs: passed to the strategy's constructor (e.g. ``seed``)
    :raises ValueError: no strategy of that name; the message lists them
    """
    manager = extension.ExtensionManager(NAMESPACE)
    if name not in manager.names():
        raise ValueError(
            'Unknown preemption victim strategy %r; available: %s. Check '
            '[nova_sched_ext] preemption_victim_strategy.'
            % (name, ', '.join(sorted(manager.names())) or '(none)'))
    return manager[name].plugin(**kwargs)
