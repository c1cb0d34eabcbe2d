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


"""Placement's resource providers, kept current by their generations.

:class:`ProviderState` holds, per resource provider, what placement's
candidate query reads (inventories, usages, traits, aggregates, the
parent), as :class:`~nova_sched_ext.cloud.placement.Provider` with the
generation it was read at.  :meth:`ProviderState.refresh` is one poll:
one ``GET /resource_providers`` (38 ms for 1,000 providers on the
in-process placement of ``nova-sched-ext-bench placement-read``), then
a read of only the providers whose generation changed, appeared or went.
Placement bumps a provider's generation when its inventories, traits or
aggregates change and when allocations are written against it (any
consumer's: the other schedulers' claims, a migration's destination).

It does **not** bump it when allocations are removed: ``DELETE
/allocations/{consumer}`` (an instance deleted, a migration confirmed or
reverted) and a consumer's allocations moved to other providers leave the
generations of the providers they freed as they were
(``placement/objects/allocation.py``: ``delete_all`` deletes rows only;
``_set_allocations`` bumps the providers of the new allocations only).
A poll alone therefore sees every change that takes room and none that
frees it.  Frees reach the state through :meth:`ProviderState.stale`:
whatever learns of one (Nova's computes tell the scheduler of every
deleted instance) marks the provider, and the next poll reads it again.
Until then the state shows less room than placement has, never more:
a request it cannot place is asked of placement's own query before
NoValidHost (:mod:`~nova_sched_ext.cloud.candidate_query`).
``tests/unit/cloud/test_provider_state.py`` pins this placement
behaviour: it fails if placement starts bumping generations on frees.

Claims are counted (:meth:`ProviderState.claimed`): the scheduler's own
when they succeed, the other schedulers' when their casts come
(:mod:`nova_sched_ext.claim_casts`).  The usage goes up at once, before
the next poll, and the claim is counted against the provider: placement
bumps a provider's generation exactly once for each allocation write
against it, so a poll that lists the generation moved by exactly the
claims counted since the record's generation knows the provider without
reading it.  Any other move (a claim not counted, an inventory, trait or
aggregate change) reads it in full, as does a claim counted while the
poll runs.  Counting only ever spares reads: a claim counted that
placement did not see (a cast repeated or late) leaves the state showing
less room than placement has until a read, never more.

A provider is read after the listing that named it, so what is kept may
be newer than its generation says, never older; a change made while it
is read shows as a newer generation at the next poll, which reads the
provider again.  What takes room is therefore in the state at most the
interval between polls plus one poll's time after it happened; what
frees room, that long after :meth:`ProviderState.stale` is called.

Thread-safe: polls and claims take one lock for their updates, and
:meth:`ProviderState.providers` returns a list that later polls do not
change.
"""

import threading
import typing

from nova_sched_ext.cloud import candidate_query


class Changes(typing.NamedTuple):
    """What one poll found: UUIDs added, changed (read again), removed."""

    added: frozenset
    changed: frozenset
    removed: frozenset

    def __bool__(self):
        return bool(self.added or self.changed or self.removed)


class ProviderState(object):
    """Placement's providers, kept current by :meth:`refresh`.

    :param reader: a :class:`~nova_sched_ext.cloud.placement.
        PlacementReader` (its ``listing``, ``read_all``)
    """

    def __init__(self, reader, snapshot=None):
        self._reader = reader
        #: a :class:`~nova_sched_ext.cloud.provider_snapshot.Snapshot` to
        #: take at the first poll, or None
        self._snapshot = snapshot
        self._snapshot_taken = False
        #: {uuid: None}, in order: taken from the snapshot, not read since
        self._unverified = {}
        self._lock = threading.Lock()
        #: {uuid: Provider}, its ``generation`` the listing's at its read,
        #: or None to read it again at the next poll
        self._providers = {}
        #: the UUIDs in the order of placement's last listing
        self._order = ()
        #: {uuid: why} of the providers outside the candidate query's
        #: subset (nested, sharing), checked once per read
        self._outside = {}
        #: whether a poll has completed
        self.ready = False
        #: {uuid: [resources, ...]}: the claims written against the
        #: provider since the generation its record holds, as this process
        #: learnt of them (its own, and the other schedulers' casts), in
        #: its usages already
        self._counted = {}
        #: where the usages resync goes on, and the part of a provider due
        self._resync_cursor = 0
        self._resync_credit = 0.0
        self._resync_at = None

    def refresh(self):
        """One poll; returns the :class:`Changes` it applied.

        The first one takes the snapshot file first, when there is one
        it can use (:mod:`~nova_sched_ext.cloud.provider_snapshot`): it
        then reads what placement changed since the save, not every
        provider.

        A provider with counted claims (:meth:`claimed`) whose listed
        generation moved by exactly their number is not read: those
        claims are all that changed it, and they are in its usages
        already.  Any other move reads it in full.
        """
        if self._snapshot is not None and not self._snapshot_taken:
            self._snapshot_taken = True
            self._take_snapshot()
        with self._lock:
            # Before the listing: a claim counted by now was written
            # before it, so the listing's generation includes it.
            counted_before = {uuid: len(claims)
                              for uuid, claims in self._counted.items()}
        listing = self._reader.listing()
        with self._lock:
            known = {uuid: provider.generation
                     for uuid, provider in self._providers.items()}
        todo, confirmed = [], {}
        for summary in listing:
            uuid = summary['uuid']
            base = known.get(uuid)
            generation = summary.get('generation')
            counted = counted_before.get(uuid, 0)
            if (base is None or not isinstance(generation, int) or
                    generation != base + counted):
                todo.append(summary)
            elif counted:
                confirmed[uuid] = (base, generation, counted)
        verify = self._to_verify(listing, todo, confirmed)
        read = self._reader.read_all(todo + verify)
        listed = [summary['uuid'] for summary in listing]
        with self._lock:
            added, changed = set(), set()
            for index, (summary, provider) in enumerate(zip(todo + verify,
                                                            read)):
                uuid = summary['uuid']
                self._unverified.pop(uuid, None)
                if provider is None:
                    # deleted while this poll read it
                    continue
                provider = self._with_claims_since(
                    uuid, provider, counted_before.get(uuid, 0))
                if uuid in self._providers:
                    if index >= len(todo) and (
                            self._providers[uuid] == provider):
                        continue    # verified: the file had it right
                    changed.add(uuid)
                else:
                    added.add(uuid)
                self._providers[uuid] = provider
                reason = candidate_query.outside_reason(provider)
                if reason:
                    self._outside[uuid] = reason
                else:
                    self._outside.pop(uuid, None)
            self._confirm(confirmed)
            listed_now = set(listed)
            vanished = {summary['uuid'] for summary, provider
                        in zip(todo, read) if provider is None}
            gone = {uuid for uuid in self._providers
                    if uuid not in listed_now or uuid in vanished}
            for uuid in gone:
                del self._providers[uuid]
                self._outside.pop(uuid, None)
                self._unverified.pop(uuid, None)
                self._counted.pop(uuid, None)
            self._order = tuple(uuid for uuid in listed
                                if uuid in self._providers)
            self.ready = True
        return Changes(added=frozenset(added), changed=frozenset(changed),
                       removed=frozenset(gone))

    def _with_claims_since(self, uuid, provider, counted_before):
        """``provider`` as read, with the claims counted after the listing.

        Called with the lock held, for a provider this poll read in full.
        The claims counted before the listing are in what was read.  One
        counted later may or may not be: it is added again (the state
        then shows less room than placement, never more) and the provider
        is read again at the next poll.
        """
        claims = self._counted.pop(uuid, ())
        later = claims[counted_before:]
        if not later:
            return provider
        return provider._replace(usages=_plus(provider.usages, later),
                                 generation=None)

    def _confirm(self, confirmed):
        """Take the listed generations of providers known by their claims.

        Called with the lock held.  A provider marked to be read again, or
        replaced, since the listing is left to the next poll.
        """
        for uuid, (base, generation, counted) in confirmed.items():
            provider = self._providers.get(uuid)
            if provider is None or provider.generation != base:
                continue
            self._providers[uuid] = provider._replace(generation=generation)
            later = self._counted.get(uuid, ())[counted:]
            if later:
                self._counted[uuid] = later
            else:
                self._counted.pop(uuid, None)

    def _take_snapshot(self):
        """Keep the snapshot's providers, as a first read would have."""
        providers = self._snapshot.load()
        if not providers:
            return
        verify = self._snapshot.verify_per_poll > 0
        with self._lock:
            for provider in providers:
                self._providers[provider.uuid] = provider
                reason = candidate_query.outside_reason(provider)
                if reason:
                    self._outside[provider.uuid] = reason
                if verify:
                    self._unverified[provider.uuid] = None
            self._order = tuple(self._providers)

    def _to_verify(self, listing, todo, confirmed=()):
        """Summaries of the providers taken from the snapshot to read now.

        At most ``verify_per_poll`` of those not read since, that this
        poll neither reads anyway nor knows by its counted claims, in the
        listing's order.
        """
        if not self._unverified:
            return []
        limit = self._snapshot.verify_per_poll
        reading = {summary['uuid'] for summary in todo}
        reading.update(confirmed)
        with self._lock:
            unverified = self._unverified
            return [summary for summary in listing
                    if summary['uuid'] in unverified and
                    summary['uuid'] not in reading][:limit]

    def unverified(self):
        """How many providers taken from the snapshot are not read yet."""
        with self._lock:
            return len(self._unverified)

    def save_snapshot(self, force=False):
        """Save the state to the snapshot file, when due (or ``force``).

        Only a state a poll completed is saved.  :returns: whether it was
        saved
        """
        snapshot = self._snapshot
        if snapshot is None or not self.ready or not (
                force or snapshot.due()):
            return False
        with self._lock:
            # A provider with claims counted is saved as one to read
            # again: the file has no place for the count.
            providers = [
                self._providers[uuid] if uuid not in self._counted else
                self._providers[uuid]._replace(generation=None)
                for uuid in self._order]
        return snapshot.save(providers)

    def providers(self):
        """The providers kept, in placement's listing order: a new list."""
        with self._lock:
            return [self._providers[uuid] for uuid in self._order]

    def outside(self):
        """Why a kept provider is outside the candidate query's subset.

        None when every provider is inside it; else one reason (the
        whole cloud is then answered by placement, since placement could
        split a request over a nested or sharing provider).
        """
        # Asked on every query: no walk over the providers.
        with self._lock:
            return next(iter(self._outside.values()), None)

    def named(self, name):
        """The UUIDs of the kept providers called ``name``."""
        with self._lock:
            return [uuid for uuid, provider in self._providers.items()
                    if provider.name == name]

    def stale(self, *uuids):
        """Read the providers ``uuids`` again at the next poll.

        For what a poll cannot see: room freed on them (an instance
        deleted, a migration finished).  A UUID not kept is skipped.
        """
        with self._lock:
            for uuid in uuids:
                provider = self._providers.get(uuid)
                if provider is not None:
                    self._providers[uuid] = provider._replace(
                        generation=None)

    def uuids(self):
        """The UUIDs kept, in placement's listing order."""
        with self._lock:
            return list(self._order)

    def resync_usages(self, uuids=None):
        """Read these providers' usages again, now: one call a provider.

        What a poll cannot see is room freed (usages that went down
        without a new generation); the inventories, traits and aggregates
        of a provider always move its generation.  A provider whose
        generation moved meanwhile, that is marked to be read again, or
        that has claims counted (:meth:`claimed`), is left to the next
        poll.  Returns the UUIDs whose usages changed.

        :param uuids: the providers to read; None: every one kept
        """
        if uuids is None:
            uuids = self.uuids()
        read = self._reader.usages(uuids)
        changed = set()
        with self._lock:
            for uuid, used in read.items():
                provider = self._providers.get(uuid)
                # A provider with claims counted is left to the polls:
                # what was read may or may not hold them.  Only a poll
                # takes a count away, and the resync runs after the poll
                # in the same thread: one counted when the read started
                # is counted still.
                if (provider is None or provider.generation is None or
                        uuid in self._counted):
                    continue
                now = {rc: used.get(rc, 0) for rc in provider.inventories}
                now.update(used)
                if now != dict(provider.usages):
                    if any(amount > provider.usages.get(rc, 0)
                           for rc, amount in now.items()):
                        # A claim whose generation the state has not seen
                        # yet (or whose cast has not come yet): read it
                        # in full, lest the cast count it twice.
                        provider = provider._replace(generation=None)
                    self._providers[uuid] = provider._replace(usages=now)
                    changed.add(uuid)
        return frozenset(changed)

    def resync(self, now, interval, step=None, max_rate=None):
        """After a poll's refresh: read the usages due by ``now``.

        ``now`` is a reading of the poller's clock, taken after the
        refresh.  The first call only starts the clock: the first refresh
        read every provider's usages, however long it took (at 10,000
        providers on a busy placement, longer than the interval; counting
        from its start would read every usage again at once, and leave the
        state too old to be used meanwhile).  Later calls read the share
        of the providers that the time since the previous call is of
        ``interval`` (:meth:`resync_due`), at most the share of two
        ``step`` (the poll interval) when it is given: on a placement that
        answers slowly, a poll longer than the last would otherwise read
        a larger share, and take longer again (at 10,000 providers, three
        schedulers on one busy placement process saw their polls grow from
        9 s to over a minute, older than the state may be used).  The
        resync then falls behind its interval instead.  ``max_rate`` (reads
        a second, None or 0: no cap) caps it too (:meth:`resync_due`).
        """
        since, self._resync_at = self._resync_at, now
        if since is None:
            return frozenset()
        elapsed = now - since
        if step:
            elapsed = min(elapsed, 2.0 * step)
        return self.resync_due(elapsed, interval, max_rate)

    def resync_due(self, elapsed, interval, max_rate=None):
        """Read the usages of the providers due, round-robin.

        Every provider's usages are read once per ``interval`` seconds,
        spread over the polls (``elapsed`` seconds since the last one)
        rather than all at once: at 10,000 providers a poll every second
        reads about 17 of them with a 600 s interval, instead of one poll
        of 10,000 calls every ten minutes.  With ``max_rate`` (reads a
        second) the share is at most ``max_rate * elapsed``: on a cloud
        with more providers than ``interval * max_rate`` a round takes
        ``providers / max_rate`` seconds instead (at 10,000 providers,
        three schedulers with a 600 s interval sent placement 50 usage
        reads a second, two fifths of its time in a burst).  Returns what
        :meth:`resync_usages` returns.
        """
        uuids = self.uuids()
        if not uuids or not interval:
            return frozenset()
        rate = len(uuids) / interval
        if max_rate:
            rate = min(rate, max_rate)
        due = min(len(uuids), self._resync_credit + rate * elapsed)
        count = int(due)
        self._resync_credit = due - count
        if not count:
            return frozenset()
        start = self._resync_cursor % len(uuids)
        chunk = (uuids + uuids)[start:start + count]
        self._resync_cursor = start + count
        return self.resync_usages(chunk)

    def claimed(self, uuid, resources):
        """A claim of ``resources`` on provider ``uuid`` was written.

        This scheduler's own claim, or another scheduler's that it cast
        (:mod:`nova_sched_ext.claim_casts`).  The usage goes up now, and
        the claim is counted: a poll that lists the provider's generation
        moved by exactly the claims counted since its record's generation
        reads nothing of it; any other move reads it in full.  Nothing if
        the provider is not kept.
        """
        with self._lock:
            provider = self._providers.get(uuid)
            if provider is None:
                return
            resources = dict(resources)
            self._providers[uuid] = provider._replace(
                usages=_plus(provider.usages, [resources]))
            self._counted.setdefault(uuid, []).append(resources)


def _plus(usages, claims):
    """``usages`` with the resources of ``claims`` added: a new dict."""
    total = dict(usages)
    for resources in claims:
        for rc, amount in resources.items():
            total[rc] = total.get(rc, 0) + amount
    return total
