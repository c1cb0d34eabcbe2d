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

"""The search state of the minimal strategy, and its heap entries.

:class:`~.minimal.MinimalVictims` orders the sets of victims that free
enough at the host level in a heap of :class:`Subset` entries, by number
of victims, then :func:`waste`, then age.  Most hosts enter it as a
:class:`Placeholder` keyed by lower bounds of their subsets' keys
(:class:`Bounds`), and are searched only if that placeholder reaches the
top.  :class:`Need` and :class:`HostSearch` hold what one request's search
computes once.
"""

import itertools
import operator
import typing

from nova_sched_ext.preemption import victims as victims_mod

# A host's lower bound on waste and its subsets' waste are summed in
# different orders; the bound is lowered by this much (far more than the
# rounding error, far less than the 1e-9 of the comparison) before being
# rounded, so that it never exceeds a subset's rounded waste.
_MARGIN = 1e-10


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


class Need(dict):
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


class HostSearch:
    """Per-request search state of one host (lives for one place_one)."""

    __slots__ = ('host', 'deficit', 'lacks', 'base_waste', 'weights',
                 'greedy', 'noted', 'checked_all', 'hopeless')

    def __init__(self, host, deficit, base_waste, lacks=()):
        self.host = host
        # ((resource class, amount lacking), ...): what the victims must free
        self.deficit = deficit
        # The amount lacking (0 if none) of each requested class, in the
        # order of Need.classes.
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


class Subset(typing.NamedTuple):
    """A heap entry: victims of one host that free enough at host level.

    None at all (``size`` 0) on a host that has room already.

    Entries sort by their first six fields, the order of the minimal
    strategy; ``seq`` and ``indices`` say where the subset is.
    """

    #: how many victims
    size: int
    #: the waste (:func:`waste`), rounded to 1e-9
    waste: float
    #: minus the creation time of the oldest victim: younger sorts first
    age: float
    host: str
    node: str
    #: the victims' UUIDs, sorted
    uuids: tuple
    #: the host's index in the request's list of :class:`HostSearch`
    seq: int
    #: the victims' indices in the host's ``victims``
    indices: tuple


class Placeholder(typing.NamedTuple):
    """A heap entry that stands for every subset of one size on one host.

    Its fields up to ``uuids`` (always empty) are lower bounds of those of
    the host's subsets of ``size`` victims (:class:`Bounds`), so it sorts
    before all of them: the host is searched only when the placeholder
    reaches the top of the heap.
    """

    size: int
    waste: float
    age: float
    host: str
    node: str
    uuids: tuple
    seq: int
    #: False: bounds over every victim of the host; True: over the victims
    #: that can be part of a subset of this size that frees enough
    refined: bool


class Bounds:
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
    (:meth:`.MinimalVictims._best`) runs only if the placeholder is popped,
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
        """A coarse :class:`Placeholder` for each host that may have a subset.

        The waste bound is lowered by a margin and rounded like the
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
        rows = []
        for index, bound, created in zip(eligible, wasted, oldest):
            seq = self.members[index]
            host = searches[seq].host
            rows.append((size, round(bound - _MARGIN, 9), -created,
                         host.host, host.nodename, (), seq, False))
        # One per host of the cloud: _make builds them about twice as
        # fast as calling the class.
        return list(map(Placeholder._make, rows))

    def refined(self, size, seq, search):
        """A refined :class:`Placeholder` of one host, or None if no subset.

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
        return Placeholder(size, round(wasted - _MARGIN, 9), -oldest,
                           host.host, host.nodename, (), seq, True)
