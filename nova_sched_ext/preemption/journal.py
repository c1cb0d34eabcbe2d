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

"""Evictions in progress, recorded where every scheduler can see them.

An eviction moves the victims' room to the new instances in placement
(the *reservation*) before it deletes the victims; if its scheduler died
then, the reservation would outlive it: room held for a request that
never becomes an instance.  So each eviction is written down on the
coordination backend (:mod:`nova_sched_ext.coordination`) **before** the
reservation, kept up to date at every step, and deleted when the request
is answered.  Its scheduler holds the record's lease and renews it (every
third of ``[nova_sched_ext] preemption_eviction_ttl``); when the
scheduler dies the lease runs out, and the reconcile of another scheduler
(:mod:`.reconcile`) takes the record over and rolls the eviction back.

A record (JSON, key: a random id)::

    {"version": 1,
     "owner": "<host>:<pid>:<random>",     # the scheduler that wrote it
     "request_id": "req-...",
     "created_at": "...", "updated_at": "...",  # updated_at: its heartbeat
     "state": "reserving",                 # see STATES
     "project_id": "...", "user_id": "...",
     "consumers": [{"uuid": "<new instance>", "rp_uuid": "...",
                    "resources": {"PCPU": 4, ...}}],
     "victims": [{"uuid": "...", "host": "...",
                  "allocations": <GET /allocations/{uuid} before>}],
     "evicting": "<victim uuid>" or null,  # eviction being sent
     "evicted": ["<victim uuid>", ...]}    # eviction accepted (or gone)

Every write by the owner checks, atomically, that nobody took the record
over; one that finds it taken raises :class:`LostOwnership`, and the owner
then leaves everything to the scheduler that took it.

A scheduler stalled longer than the lease (CPU starvation, a long GC
pause) is taken for dead while it still runs: when it resumes, its next
write fails, but the step it was about to take (a reservation, a
victim's eviction) would be sent on a record another scheduler is
rolling back.  So before each such step the owner calls
:meth:`Entry.ensure_held`: the record is surely still its own only if the
last write that renewed the lease *started* less than half a lease ago
by this process's monotonic clock (which runs on through a stall);
otherwise it writes the record again, which checks atomically that
nobody took it over.  Past that check the step has at least half a lease
before anybody can take the record: a stall longer than that inside the
step itself is the one window left, as the Compute API and placement
take no fencing token (see doc/source/coordination.rst).
"""

import time
import uuid

from oslo_utils import timeutils

from nova_sched_ext import conf
from nova_sched_ext import exception as sched_ext_exception

CONF = conf.CONF

#: the record kind on the coordination backend
KIND = 'evictions'
RECORD_VERSION = 1

#: the states of a record, in the order an eviction goes through them
RESERVING = 'reserving'      # recorded; the reservation is being sent
RESERVED = 'reserved'        # the reservation is in placement
EVICTING = 'evicting'        # victims are being evicted
EVICTED = 'evicted'          # every victim is gone; answering
ROLLING_BACK = 'rolling-back'  # the owner itself is rolling back
RECONCILING = 'reconciling'  # another scheduler took it over
STATES = (RESERVING, RESERVED, EVICTING, EVICTED, ROLLING_BACK, RECONCILING)


class LostOwnership(sched_ext_exception.NovaSchedExtError):
    """Another scheduler took the record over: its lease had run out."""


def ttl():
    return CONF.nova_sched_ext.preemption_eviction_ttl


def monotonic():
    """This process's clock for the lease; a test drives it (a stall)."""
    return time.monotonic()


class Journal(object):
    """The evictions in progress on one scheduler manager's backend."""

    def __init__(self, backend):
        self.backend = backend

    def begin(self, context, spec_obj, new_instances, before):
        """Record an eviction before its reservation.

        :param new_instances: ``[(instance uuid, rp uuid, resources)]``
        :param before: ``{victim uuid: (host, read_allocations answer)}``
        :returns: the :class:`Entry`, lease held and kept alive
        :raises coordination.BackendUnavailable:
        """
        now = timeutils.utcnow().isoformat()
        record = {
            'version': RECORD_VERSION,
            'owner': self.backend.owner,
            'request_id': context.request_id,
            'created_at': now,
            'updated_at': now,
            'state': RESERVING,
            'project_id': spec_obj.project_id,
            'user_id': spec_obj.user_id,
            'consumers': [{'uuid': instance, 'rp_uuid': rp_uuid,
                           'resources': dict(resources)}
                          for instance, rp_uuid, resources in new_instances],
            'victims': [{'uuid': victim, 'host': host,
                         'allocations': allocations}
                        for victim, (host, allocations) in before.items()],
            'evicting': None,
            'evicted': [],
        }
        key = uuid.uuid4().hex
        started = monotonic()
        self.backend.put(KIND, key, record, ttl(), keep_alive=True)
        return Entry(self, key, record, written_at=started)

    def stale(self):
        """``[(key, record)]`` whose lease ran out: their owner is gone."""
        return [(key, record) for key, record, holder in
                self.backend.items(KIND) if holder is None]

    def take_over(self, key, record):
        """Hold a stale record; returns its :class:`Entry` or None.

        One scheduler only succeeds, whatever the number trying.
        """
        if not self.backend.take_over(KIND, key, ttl()):
            return None
        entry = Entry(self, key, record, written_at=None)
        # A reconcile that died halfway leaves what it found first.
        entry.save(state=RECONCILING, reconciled_by=self.backend.owner,
                   state_was=record.get('state_was', record.get('state')),
                   owner_was=record.get('owner_was', record.get('owner')))
        return entry


class Entry(object):
    """One eviction's record, held by this scheduler."""

    def __init__(self, journal, key, record, written_at=None):
        self.journal = journal
        self.key = key
        self.record = record
        #: :func:`monotonic` when the last write that renewed the lease
        #: started (None: not known to be held)
        self.written_at = written_at

    def save(self, **changes):
        """Write ``changes``; renews the lease.

        :raises LostOwnership: another scheduler took it over
        :raises coordination.BackendUnavailable:
        """
        self.record.update(changes,
                           updated_at=timeutils.utcnow().isoformat())
        started = monotonic()
        if not self.journal.backend.update(KIND, self.key, self.record,
                                           ttl()):
            self.written_at = None
            raise LostOwnership(
                'the record %s of this eviction was taken over by another '
                'scheduler: its lease ran out' % self.key)
        self.written_at = started

    def ensure_held(self):
        """Make sure nobody can take the record over for half a lease.

        Called right before a step that must not be taken on a record
        another scheduler rolls back.  Free if the last write started
        less than half a lease ago; otherwise (this scheduler stalled
        since) the record is written again, which fails if it was taken.

        :raises LostOwnership: another scheduler took it over
        :raises coordination.BackendUnavailable:
        """
        if self.written_at is None or \
                monotonic() - self.written_at >= ttl() / 2.0:
            self.save()

    def evicting(self, victim):
        self.save(state=EVICTING, evicting=victim)

    def evicted(self, victim):
        self.save(evicting=None,
                  evicted=self.record['evicted'] + [victim])

    def finish(self):
        """Delete the record: the request is answered, or rolled back.

        :raises LostOwnership: another scheduler took it over first
        :raises coordination.BackendUnavailable:
        """
        if not self.journal.backend.delete(KIND, self.key):
            raise LostOwnership(
                'the record %s of this eviction was taken over by another '
                'scheduler before it was finished' % self.key)

    def abandon(self):
        """Stop renewing the lease: a reconcile rolls it back later."""
        self.journal.backend.drop_lease(KIND, self.key)
