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

"""Roll back the evictions whose scheduler died.

Every preemption scheduler process runs :meth:`Reconciler.run_once` when
it starts and then every ``[nova_sched_ext] preemption_reconcile_interval``
seconds.  It reads the eviction records (:mod:`.journal`) whose lease ran
out, takes each one over (one process succeeds per record) and rolls it
back, whatever step its scheduler died at:

- **the new instances**: a reservation whose request never became an
  instance on a host is released: the consumer's allocations are emptied
  in placement, with its consumer generation.  A new instance that is on
  a host in its cell keeps them (Nova owns it now).  The request itself
  fails: its scheduler never answered, so the conductor's call times out
  and the instance goes to ERROR; it never lands in the released room.
- **the victims**: those whose eviction was sent stay evicted (they were
  preemptible and chosen); the Compute API decides for the one being
  evicted when its scheduler died.  A victim the API shows untouched (no
  task, not deleted, shelved or in ERROR) whose allocations the
  reservation emptied gets them back.  One with a task under way (being
  deleted, say) is left to Nova, which frees its room.

Then the record is deleted, with one WARNING line saying what was done.
If placement or the Compute API fails, the record is left and its lease
runs out again, so the next reconcile (of any scheduler) tries again;
every step reads the current state first, so doing one twice does no
harm.
"""

import threading

from nova import context as nova_context
from oslo_log import log as logging

from nova_sched_ext import conf
from nova_sched_ext import coordination
from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import evictor as evictor_mod
from nova_sched_ext.preemption import journal as journal_mod
from nova_sched_ext.preemption import reservation

CONF = conf.CONF
LOG = logging.getLogger(__name__)


class Reconciler(object):
    """Finds and rolls back the evictions of dead schedulers.

    :param journal: the manager's :class:`~.journal.Journal`
    :param manager: the scheduler manager (its placement client)
    :param evictor: the :class:`~.evictor.Evictor` (Compute API)
    """

    def __init__(self, journal, manager, evictor):
        self.journal = journal
        self.manager = manager
        self.evictor = evictor
        self._stop = threading.Event()
        self._thread = None

    def run_once(self, context=None):
        """Roll back every stale eviction this process can take over.

        :returns: ``[summary dict]``, one per eviction rolled back
        """
        context = context or nova_context.get_admin_context()
        try:
            stale = self.journal.stale()
        except coordination.BackendUnavailable as exc:
            # The backend logged its outage once.
            LOG.debug('Preemption: no reconcile now: %s', exc)
            return []
        done = []
        for key, record in stale:
            try:
                entry = self.journal.take_over(key, record)
            except (coordination.BackendUnavailable,
                    journal_mod.LostOwnership):
                entry = None
            if entry is None:
                continue
            try:
                summary = self.roll_back(context, entry)
            except Exception as exc:
                LOG.warning('Preemption: the eviction %(key)s of request '
                            '%(req)s, left by scheduler %(owner)s, could '
                            'not be rolled back yet (%(exc)s); the next '
                            'reconcile tries again.',
                            {'key': key, 'req': record.get('request_id'),
                             'owner': record.get('owner'), 'exc': exc})
                entry.abandon()
                continue
            try:
                entry.finish()
            except (coordination.BackendUnavailable,
                    journal_mod.LostOwnership) as exc:
                # Rolled back already: doing it again changes nothing.
                LOG.debug('Preemption: the record %s stays: %s', key, exc)
            done.append(summary)
        return done

    def roll_back(self, context, entry):
        """Undo one eviction; see the module's description."""
        record = entry.record
        client = self.manager.placement_client
        release, kept = [], []
        for consumer in record['consumers']:
            if _became_instance(context, consumer['uuid']):
                kept.append(consumer['uuid'])
            else:
                release.append(consumer['uuid'])
        evicted = set(record['evicted'])
        restore, stay, left = {}, [], []
        for victim in record['victims']:
            uuid = victim['uuid']
            if uuid in evicted:
                stay.append(uuid)
                continue
            # Raises EvictionError if the API does not answer: try later.
            server = self.evictor.get(uuid)
            if server is None:
                stay.append(uuid)
            elif not evictor_mod.untouched(server):
                left.append(uuid)
            elif not reservation.read_allocations(
                    client, context, uuid)['allocations']:
                restore[uuid] = victim['allocations']
        reservation.release(client, context, release, restore)
        summary = {
            'key': entry.key, 'request_id': record.get('request_id'),
            'owner': record.get('owner_was'),
            'state': record.get('state_was', record.get('state')),
            'released': release, 'kept': kept, 'restored': sorted(restore),
            'evicted': stay, 'left': left,
        }
        LOG.warning('Preemption: the eviction %(key)s of request %(req)s '
                    'was left unfinished by scheduler %(owner)s; rolled '
                    'back: reservation released for %(released)s; kept for '
                    'instances on a host: %(kept)s; victims given their '
                    'allocations back: %(restored)s; evicted, they stay '
                    'evicted: %(evicted)s; changing, left to Nova: '
                    '%(left)s.',
                    {'key': entry.key, 'req': summary['request_id'],
                     'owner': summary['owner'],
                     'released': _names(release), 'kept': _names(kept),
                     'restored': _names(sorted(restore)),
                     'evicted': _names(stay), 'left': _names(left)})
        return summary

    # --- the periodic run -----------------------------------------------

    def start(self):
        """Reconcile now, then every ``preemption_reconcile_interval`` s."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name='nova-sched-ext-reconcile', daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:
                LOG.exception('Preemption: the reconcile of evictions '
                              'failed; it runs again in %d s.',
                              CONF.nova_sched_ext.
                              preemption_reconcile_interval)
            self._stop.wait(CONF.nova_sched_ext.preemption_reconcile_interval)

    def stop(self):
        self._stop.set()
        self._thread = None


def _became_instance(context, uuid):
    """Whether ``uuid`` is an instance on a host (in its cell)."""
    _mapping, instance = census.find_instance(context, uuid)
    return instance is not None and bool(instance.host)


def _names(uuids):
    return ', '.join(uuids) or 'none'
