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

"""The ``minimal`` victim strategy: fewest victims, least waste, youngest.

Over all hosts, the placement that minimises, in this order: the number of
victims; the resources wasted (see :func:`~.search.waste`); the age of the
oldest victim (younger is better, so long-running work survives); then host
and node name and victim UUIDs, so that equal inputs give equal answers.
Exact: subsets of each host's victims are tried by increasing size; see
:class:`MinimalVictims` for the bounds that keep it fast, and
:data:`MAX_SUBSETS_PER_HOST` and :data:`MAX_NUMA_FAILURES` for where it
stops being exact or gives up.  It is the default of ``[nova_sched_ext]
preemption_victim_strategy``.
"""

import heapq
import itertools
import math
import operator

from oslo_log import log as logging

from nova_sched_ext.preemption.strategies import base
from nova_sched_ext.preemption.strategies import search as search_mod
from nova_sched_ext.preemption import victims as victims_mod

LOG = logging.getLogger(__name__)

#: Subsets of one size tried exactly on one host; past this many (e.g. 4
#: victims out of 20), the host offers its greedy choice instead.
MAX_SUBSETS_PER_HOST = 2000

#: Victim sets that pass the host level but fail the NUMA check before one
#: request gives up (each check costs about a millisecond per victim).
MAX_NUMA_FAILURES = 200

# Waste is compared rounded to 1e-9; subsets closer than this to the least
# waste of a host are compared in full.
_TOLERANCE = 1e-8


class MinimalVictims(base.VictimStrategy):
    """Fewest victims, then least waste, then youngest victims.

    The search runs level by level, a level being a number of victims, from
    0 upwards; the first level where some subset fits is the optimum.
    Within a level the subsets that fit at the host level are ordered by
    (waste, age of the oldest victim, host name, victim UUIDs), and the
    NUMA check (the costly part) runs in that order and stops at the first
    subset that passes.

    Most hosts are never searched set by set: each enters a level as one
    placeholder heap entry keyed by lower bounds of its subsets' keys
    (:class:`~.search.Bounds`, computed for all hosts in a few passes over
    the victims), refined when it reaches the top of the heap, and searched
    exactly (:meth:`_best`) only when its refined placeholder reaches the
    top again.  The bounds never exceed a subset's key, so the order, and
    the answer, are those of the exhaustive search.  Waste is additive
    over victims (see :func:`~.search.waste`), so each victim's share is
    computed once per request.  When one host has more than
    :data:`MAX_SUBSETS_PER_HOST` subsets of a size, it offers at that size
    the greedy subset (victims ordered by how much of what is lacking they
    free, youngest first) instead, and a debug note is logged: the answer
    may then be above the optimum.
    """

    name = 'minimal'

    def place_one(self, hosts, request):
        need = search_mod.Need({rc: amount for rc, amount
                                in request.resources.items() if amount > 0})
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
                        candidates.append(search_mod.Subset(
                            0, 0.0, 0.0, host.host, host.nodename, (), seq,
                            ()))
                    complete.add(seq)
            else:
                # Each host enters a level as one placeholder keyed by a
                # lower bound of its subsets' keys; the costly exact search
                # runs only for the hosts whose placeholder is reached
                # before a subset that fits is found.
                if bounds is None:
                    bounds = search_mod.Bounds(searches, need)
                candidates = bounds.placeholders(size, searches)
            heapq.heapify(candidates)
            while candidates:
                entry = heapq.heappop(candidates)
                seq = entry.seq
                search = searches[seq]
                if search.hopeless:
                    continue
                if isinstance(entry, search_mod.Placeholder):
                    if not entry.refined and size > 1:
                        refined = bounds.refined(size, seq, search)
                        if refined is not None:
                            heapq.heappush(candidates, refined)
                        continue
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
                chosen = tuple(search.host.victims[i]
                               for i in entry.indices)
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
                        if other.indices != entry.indices:
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
        # A host whose victims cannot cover the deficit is kept: Bounds
        # finds it eligible at no level.
        return search_mod.HostSearch(host, tuple(deficit), base_waste,
                                     lacks)

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
            candidates.append(search_mod.Subset(
                1, round(wasted, 9), -victim.created_ts, name, node,
                (victim.uuid,), seq, (i,)))

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
        """Each victim's share of the waste (see :func:`~.search.waste`)."""
        if search.weights is None:
            search.weights = [need.weight(need.vector(v))
                              for v in search.host.victims]
        return search.weights

    @staticmethod
    def _entry(search, seq, combo, weight):
        """The :class:`~.search.Subset` heap entry of one subset."""
        host = search.host
        victims = host.victims
        oldest = min(victims[i].created_ts for i in combo)
        uuids = tuple(sorted(victims[i].uuid for i in combo))
        return search_mod.Subset(
            len(combo), round(weight - search.base_waste, 9), -oldest,
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
