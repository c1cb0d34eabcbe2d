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

"""The preemption driver: on-demand requests evict preemptible instances.

:class:`PreemptionSchedulerManager` is the package's scheduler manager
(:class:`nova_sched_ext.manager.SchedulerManager`) with two more request
wrappers, run inside the ones ``[nova_sched_ext] request_wrappers`` names
(the deployment-set lock by default), unless that option names them
itself:

1. ``preemptible_caps``
   (:class:`~nova_sched_ext.preemption.caps.PreemptibleCaps`): the caps on
   preemptible instances per availability zone and per host;
2. ``eviction`` (:class:`Eviction`): when a request for new room (a boot
   or an unshelve) of a NON-preemptible flavor ends in NoValidHost, find
   hosts where free room plus preemptible instances fit it, choose the
   victims (``[nova_sched_ext] preemption_victim_strategy``), reserve their
   room in placement in one atomic ``POST /allocations``, evict them
   through the Compute API (``preemption_action``), wait until they are
   gone (``preemption_wait_timeout``) and return the reserved hosts as the
   request's selections.  Every failure releases the reservation, evicts
   nothing more and ends in NoValidHost with one summary log line.

   Each eviction is recorded on the coordination backend before the
   reservation and kept up to date at each step (:mod:`.journal`); if its
   scheduler dies, another scheduler's reconcile (:mod:`.reconcile`, at
   start-up and every ``preemption_reconcile_interval`` seconds) rolls it
   back once the record's lease ran out.

Preemptible requests never evict; rebuilds, resizes and migrations do not
either (they keep Nova's answer).  Run it with
``[nova_sched_ext] scheduler_driver = preemption`` and
``nova-sched-ext-scheduler``.

What the candidate hosts are checked against (a host full of preemptible
instances never reaches Nova's filters, since placement found no room):

- the resources of the request's flavor (placement, unsuffixed group;
  requests with granular groups or port/accelerator resources are not
  served by eviction), the root provider's required/forbidden traits and
  the required/forbidden aggregates placement would have checked;
- the forced host/node, the requested destination, ``ignore_hosts`` and
  the requested availability zone;
- every enabled filter except those that measure what the victims hold and
  so would reject a host for the very usage the eviction frees:
  :data:`USAGE_FILTERS` (NUMA and PCI fit is checked instead by
  :mod:`.victims` with the victims' usage removed).
"""

import time

from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_sched_ext.cloud import preemptible as extra_specs
from nova_sched_ext import conf
from nova_sched_ext import coordination
from nova_sched_ext import exception as sched_ext_exception
from nova_sched_ext import manager as ext_manager
from nova_sched_ext.preemption import caps
from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import evictor as evictor_mod
from nova_sched_ext.preemption import journal as journal_mod
from nova_sched_ext.preemption import notifications
from nova_sched_ext.preemption import reconcile
from nova_sched_ext.preemption import reservation
from nova_sched_ext.preemption import search
from nova_sched_ext.preemption import strategies
from nova_sched_ext.preemption import victims as victims_mod
from nova_sched_ext import wrappers

CONF = conf.CONF
LOG = logging.getLogger(__name__)

CLASS_PATH = 'nova_sched_ext.preemption.driver.PreemptionSchedulerManager'

#: enabled filters not re-run on eviction candidates (see .search)
USAGE_FILTERS = search.USAGE_FILTERS

#: Test-only: a callable that an eviction calls with the name of each
#: point where its scheduler may die ("recorded", "reserved", "evicting"
#: after a victim's eviction was recorded but before it is sent,
#: "evicted" after each victim's eviction was sent, both with
#: ``victim=``, and "gone"), so that a test can stop it there with an
#: exception no handler catches (a BaseException) and find what a dead
#: scheduler leaves, or stall it there.  None in a real scheduler.
FAULT_INJECTION = None


def _fault_point(point, **details):
    if FAULT_INJECTION is not None:
        FAULT_INJECTION(point, **details)


class EvictionFailed(sched_ext_exception.NovaSchedExtError):
    """One step of an eviction failed; the message says which."""


class Eviction(wrappers.RequestWrapper):
    """Request wrapper: evict preemptible instances for on-demand requests.

    Built once per manager and shared by concurrent requests: everything
    about one request lives in a :class:`_Attempt`.  Options:
    ``[nova_sched_ext] preemption_victim_strategy`` (read once, here),
    ``preemption_action``, ``preemption_wait_timeout``,
    ``preemption_poll_interval`` and the ``[nova_sched_ext_evictor]``
    credentials.
    """

    def __init__(self, manager):
        super().__init__(manager)
        self.strategy = strategies.load_strategy(
            CONF.nova_sched_ext.preemption_victim_strategy)
        self.evictor = evictor_mod.Evictor()
        self.backend = coordination.for_manager(manager)
        # A backend without records would leave no trace of an eviction
        # whose scheduler died: refuse to start instead.
        self.backend.check_records()
        self.journal = journal_mod.Journal(self.backend)
        self.reconciler = reconcile.Reconciler(self.journal, manager,
                                               self.evictor)
        LOG.info('Preemption: victims chosen by strategy %s, evicted by '
                 '%s, evictions recorded on %s.', self.strategy.name,
                 CONF.nova_sched_ext.preemption_action,
                 coordination.safe_url(self.backend.url))

    def start(self):
        """Reconcile now, then every preemption_reconcile_interval s."""
        self.reconciler.start()

    def stop(self):
        self.reconciler.stop()
        self.backend.stop()

    def reconcile(self, context=None):
        """Roll back the evictions of dead schedulers now; see .reconcile."""
        return self.reconciler.run_once(context)

    def __call__(self, call_next, context, spec_obj, instance_uuids):
        try:
            return call_next(context, spec_obj, instance_uuids)
        except exception.NoValidHost:
            try:
                evict = self.may_evict(context, spec_obj, instance_uuids)
            except Exception:
                LOG.exception('Preemption: request %s: cannot tell whether '
                              'it may evict; it does not.',
                              context.request_id)
                evict = False
            if not evict:
                raise
        # Two tries: a lost race for a victim (409) plans again once.
        for _try in range(2):
            attempt = _Attempt(self, context, spec_obj, instance_uuids)
            try:
                return attempt.run()
            except _Retry:
                continue
        raise exception.NoValidHost(
            reason='the room of the preemptible instances chosen was '
                   'taken by another request')

    @staticmethod
    def may_evict(context, spec_obj, instance_uuids):
        if extra_specs.is_preemptible(spec_obj.flavor):
            return False
        return census.needs_new_room(context, spec_obj, instance_uuids)


class _Retry(sched_ext_exception.NovaSchedExtError):
    pass


class _Request(object):
    """One request an eviction serves, as every step of it needs it."""

    def __init__(self, wrapper, context, spec_obj, instance_uuids):
        self.wrapper = wrapper
        self.client = wrapper.manager.placement_client
        self.context = context
        self.spec_obj = spec_obj
        self.instance_uuids = list(instance_uuids)
        self.action = CONF.nova_sched_ext.preemption_action

    def new_instances(self, plan, resources):
        """``[(instance uuid, rp uuid, resources)]`` the plan places."""
        return [(uuid, placement.host.rp_uuid, resources)
                for uuid, placement in zip(self.instance_uuids,
                                           plan.placements)]


class _Progress(object):
    """What one eviction did so far: the steps write it, the summary reads."""

    def __init__(self):
        self.plan = None
        #: victims whose eviction the API accepted (or that were gone)
        self.evicted = []
        #: the victim whose eviction failed, if any
        self.failed = None
        #: the record of the eviction (journal.Entry), once written
        self.entry = None


class _Record(object):
    """Step: the eviction's record on the coordination backend."""

    def __init__(self, request, progress):
        self.request = request
        self.progress = progress

    def write(self, plan, resources, before):
        """Write the eviction down before anything is reserved.

        :raises NoValidHost: the coordination backend is down
        """
        request = self.request
        hosts = {victim.uuid: placement.host.host
                 for placement in plan.placements
                 for victim in placement.victims}
        try:
            self.progress.entry = request.wrapper.journal.begin(
                request.context, request.spec_obj,
                request.new_instances(plan, resources),
                {uuid: (hosts[uuid], allocations)
                 for uuid, allocations in before.items()})
        except coordination.BackendUnavailable as exc:
            # The backend logged its outage once.
            LOG.info('Preemption: request %s evicts nothing: the eviction '
                     'cannot be recorded (%s).', request.context.request_id,
                     exc)
            raise exception.NoValidHost(
                reason='preemptible instances are not evicted while the '
                       'scheduler\'s coordination backend is unreachable')

    def forget(self):
        """Delete the record of an eviction that reserved nothing."""
        try:
            self.progress.entry.finish()
        except (coordination.BackendUnavailable,
                journal_mod.LostOwnership) as exc:
            LOG.debug('Preemption: request %s: the record of its eviction '
                      'stays, with nothing to undo: %s',
                      self.request.context.request_id, exc)


class _Reservation(object):
    """Step: the victims' room, read and reserved in placement."""

    def __init__(self, request):
        self.request = request

    def read_victims(self, plan):
        """The victims' allocations now, with their consumer generations.

        :raises _Retry: a victim changed since it was chosen
        """
        request = self.request
        before = {}
        for placement in plan.placements:
            for victim in placement.victims:
                current = reservation.read_allocations(
                    request.client, request.context, victim.uuid)
                held = current['allocations'].get(
                    placement.host.rp_uuid, {}).get('resources', {})
                if held != dict(victim.resources):
                    LOG.info('Preemption: request %s: victim %s changed '
                             'since it was chosen; planning again.',
                             request.context.request_id, victim.uuid)
                    raise _Retry()
                before[victim.uuid] = current
        return before

    def reserve(self, plan, resources, before):
        """Reserve the room read in ``before``.

        :raises _Retry: another request changed a victim or a provider
        """
        request = self.request
        try:
            reservation.reserve(request.client, request.context,
                                request.new_instances(plan, resources),
                                before, request.spec_obj.project_id,
                                request.spec_obj.user_id)
        except reservation.ReservationFailed as exc:
            LOG.info('Preemption: request %s could not reserve the room '
                     'of its victims: %s', request.context.request_id, exc)
            if exc.conflict:
                raise _Retry()
            raise exception.NoValidHost(
                reason='the room of preemptible instances could not be '
                       'reserved')

    def release(self, restore):
        """Give the new instances' room back, and ``restore`` to victims."""
        reservation.release(self.request.client, self.request.context,
                            self.request.instance_uuids, restore)

    def selections(self, plan, resources):
        """One list per instance: the reserved host, no alternates.

        An alternate would be built on by the conductor without the
        scheduler, outside the reserved room.
        """
        answer = []
        for placement in plan.placements:
            allocation_request = reservation.allocation_request(
                placement.host.rp_uuid, resources)
            answer.append([objects.Selection.from_host_state(
                placement.host.host_state,
                allocation_request=allocation_request,
                allocation_request_version=(
                    reservation.ALLOCATION_REQUEST_VERSION))])
        return answer


class _Evict(object):
    """Step: the victims evicted through the Compute API, and gone."""

    def __init__(self, request, progress):
        self.request = request
        self.progress = progress

    def evict(self, plan):
        request, progress = self.request, self.progress
        evictor = request.wrapper.evictor
        entry = progress.entry
        # Everything is re-checked before anything is evicted, so a
        # victim that stopped being preemptible stops the whole eviction.
        for victim in plan.victims:
            evictor.check_preemptible(victim.uuid)
        for placement, uuid in zip(plan.placements, request.instance_uuids):
            names = [v.uuid for v in placement.victims]
            for victim in placement.victims:
                if victim.uuid in progress.evicted:
                    continue
                # Recorded first: a scheduler that dies while the API
                # takes the eviction leaves the victim to be checked.
                entry.evicting(victim.uuid)
                _fault_point('evicting', victim=victim.uuid)
                # Nothing is sent on a record that may have been taken
                # over while this scheduler stalled (journal.ensure_held).
                entry.ensure_held()
                progress.failed = victim.uuid
                evictor.evict(victim.uuid, request.action)
                _fault_point('evicted', victim=victim.uuid)
                progress.failed = None
                progress.evicted.append(victim.uuid)
                entry.evicted(victim.uuid)
                self._forget_pending(victim.uuid)
            if not names:
                continue
            LOG.info('Preemption: request %(req)s evicts (%(action)s) '
                     '%(victims)s on host %(host)s for instance %(uuid)s.',
                     {'req': request.context.request_id,
                      'action': request.action,
                      'victims': ', '.join(names),
                      'host': placement.host.host, 'uuid': uuid})
            notifications.notify_eviction(
                request.context, notifications.EvictionPayload(
                    request_id=request.context.request_id,
                    instance_uuid=uuid, host=placement.host.host,
                    nodename=placement.host.nodename,
                    action=request.action, victims=names,
                    victim_projects=[v.project_id or ''
                                     for v in placement.victims]))

    def _forget_pending(self, uuid):
        # A victim placed in the last caps.PENDING_TTL seconds is shown by
        # no cell once evicted, so its placement record would count
        # against the preemptible caps until it expires: the caps would
        # refuse room they have.
        try:
            self.request.wrapper.backend.delete(caps.PENDING_KIND, uuid,
                                                owned=False)
        except coordination.BackendUnavailable:
            # The backend logged its outage; the record expires, and until
            # then the caps count one too many, never one too few.
            pass

    def wait(self, plan):
        opts = CONF.nova_sched_ext
        left = self.request.wrapper.evictor.wait_gone(
            [v.uuid for v in plan.victims], self.request.action,
            opts.preemption_wait_timeout, opts.preemption_poll_interval)
        if left:
            raise EvictionFailed(
                'still there after %d s: %s'
                % (opts.preemption_wait_timeout, ', '.join(left)))


class _Rollback(object):
    """Step: what a failed eviction reserved, released."""

    def __init__(self, request, progress, record, reservation_step):
        self.request = request
        self.progress = progress
        self.record = record
        self.reservation = reservation_step

    def roll_back(self, before, error):
        """Release the reservation; log what an operator needs to know.

        When the record is known to be still this scheduler's, the
        victims not evicted get their allocations back; when the backend
        is down (another scheduler may have taken the record over and
        restored some already), only those the API shows untouched do.
        The record goes once the release is done; if the release fails it
        is left to run out, and a reconcile releases the room later.
        """
        request, progress = self.request, self.progress
        ours = True
        try:
            progress.entry.save(state=journal_mod.ROLLING_BACK)
        except journal_mod.LostOwnership as exc:
            LOG.error('Preemption: request %(req)s failed: %(error)s, and '
                      '%(lost)s; that scheduler rolls it back.',
                      {'req': request.context.request_id, 'error': error,
                       'lost': exc})
            return
        except coordination.BackendUnavailable:
            ours = False
        restore = {uuid: alloc for uuid, alloc in before.items()
                   if uuid not in progress.evicted}
        for uuid in list(restore):
            # The one whose eviction failed may have started going: its
            # compute host will drop its allocations, which must not come
            # back.
            if (uuid == progress.failed or not ours) and \
                    not self._untouched(uuid):
                del restore[uuid]
        released = 'released'
        try:
            self.reservation.release(restore)
        except Exception as exc:
            released = 'NOT released (%s): check the allocations of %s' % (
                exc, ', '.join(request.instance_uuids + sorted(restore)))
            if ours:
                released += ' (a reconcile retries in %d s at most)' % (
                    journal_mod.ttl() +
                    CONF.nova_sched_ext.preemption_reconcile_interval)
            progress.entry.abandon()
        else:
            self.record.forget()
        LOG.error('Preemption: request %(req)s failed: %(error)s. Hosts: '
                  '%(hosts)s; evicted: %(evicted)s; not evicted: '
                  '%(kept)s; reservation %(released)s.',
                  {'req': request.context.request_id, 'error': error,
                   'hosts': ', '.join(h.host for h in progress.plan.hosts),
                   'evicted': ', '.join(progress.evicted) or 'none',
                   'kept': ', '.join(sorted(restore)) or 'none',
                   'released': released})

    def _untouched(self, uuid):
        """A victim whose failed eviction left it as it was."""
        try:
            return evictor_mod.untouched(
                self.request.wrapper.evictor.get(uuid))
        except evictor_mod.EvictionError:
            return False


class _Attempt(object):
    """One eviction for one request, from the plan to the selections.

    It orchestrates the steps, each a unit of its own: the candidate
    search (:class:`~.search.CandidateSearch`), the record
    (:class:`_Record`), the reservation (:class:`_Reservation`), the
    eviction (:class:`_Evict`) and the rollback (:class:`_Rollback`).
    """

    def __init__(self, wrapper, context, spec_obj, instance_uuids):
        self.wrapper = wrapper
        self.request = _Request(wrapper, context, spec_obj, instance_uuids)
        self.context = context
        self.spec_obj = spec_obj
        self.instance_uuids = self.request.instance_uuids
        # what happened, for the summary
        self.progress = _Progress()
        self.search = search.CandidateSearch(wrapper.manager, context,
                                             spec_obj)
        self.record = _Record(self.request, self.progress)
        self.reservation = _Reservation(self.request)
        self.evicting = _Evict(self.request, self.progress)
        self.rollback = _Rollback(self.request, self.progress, self.record,
                                  self.reservation)

    # --- the sequence -------------------------------------------------

    def run(self):
        started = time.monotonic()
        progress = self.progress
        try:
            resources, hosts, plan = self.make_plan()
        except (exception.NoValidHost, _Retry):
            raise
        except Exception:
            # Nothing is reserved or evicted yet: the request fails as it
            # would have without the driver.
            LOG.exception('Preemption: request %s: looking for victims '
                          'failed; nothing was evicted.',
                          self.context.request_id)
            raise exception.NoValidHost(reason='')
        if plan is None:
            LOG.info('Preemption: request %(req)s (%(n)d x flavor '
                     '%(flavor)s) cannot be served even by evicting '
                     'preemptible instances (%(hosts)d candidate hosts).',
                     {'req': self.context.request_id,
                      'n': len(self.instance_uuids),
                      'flavor': self.spec_obj.flavor.name,
                      'hosts': len(hosts)})
            raise exception.NoValidHost(reason='')
        progress.plan = plan
        try:
            before = self.reservation.read_victims(plan)
        except _Retry:
            raise
        except Exception:
            LOG.exception('Preemption: request %s: reading the victims\' '
                          'allocations failed; nothing was evicted.',
                          self.context.request_id)
            raise exception.NoValidHost(reason='')
        self.record.write(plan, resources, before)
        _fault_point('recorded')
        try:
            # Nothing is reserved on a record that may have been taken
            # over while this scheduler stalled (journal.ensure_held).
            progress.entry.ensure_held()
        except (journal_mod.LostOwnership,
                coordination.BackendUnavailable) as exc:
            # Nothing reserved: a reconcile finds nothing to undo.
            LOG.error('Preemption: request %(req)s evicts nothing: %(error)s.',
                      {'req': self.context.request_id, 'error': exc})
            raise exception.NoValidHost(
                reason='preemptible instances could not be evicted: the '
                       'eviction was taken over by another scheduler')
        try:
            self.reservation.reserve(plan, resources, before)
        except (exception.NoValidHost, _Retry):
            # Nothing reserved: the record goes (or runs out: a reconcile
            # finds nothing to undo).
            self.record.forget()
            raise
        _fault_point('reserved')
        try:
            progress.entry.save(state=journal_mod.RESERVED)
            self.evicting.evict(plan)
            self.evicting.wait(plan)
            progress.entry.save(state=journal_mod.EVICTED)
            _fault_point('gone')
            # Last: once the record is gone nobody rolls this back, and
            # the request may be answered.
            progress.entry.finish()
        except journal_mod.LostOwnership as exc:
            # This scheduler was taken for dead: the one that took the
            # record over rolls the eviction back, and only that one.
            LOG.error('Preemption: request %(req)s failed: %(error)s; that '
                      'scheduler rolls the eviction back. Hosts: %(hosts)s; '
                      'evicted: %(evicted)s.',
                      {'req': self.context.request_id, 'error': exc,
                       'hosts': ', '.join(h.host for h in plan.hosts),
                       'evicted': ', '.join(progress.evicted) or 'none'})
            raise exception.NoValidHost(
                reason='preemptible instances could not be evicted: the '
                       'eviction was taken over by another scheduler')
        except Exception as exc:
            # Whatever failed (the API, a timeout, the backend, a bug), the
            # reservation must not outlive the request.
            if not isinstance(exc, (EvictionFailed,
                                    evictor_mod.EvictionError,
                                    coordination.BackendUnavailable)):
                LOG.exception('Preemption: request %s: eviction failed.',
                              self.context.request_id)
            self.rollback.roll_back(before, exc)
            raise exception.NoValidHost(
                reason='preemptible instances could not be evicted: %s'
                       % exc)
        LOG.info('Preemption: request %(req)s served on %(hosts)s after '
                 'evicting %(victims)s in %(s).1f s.',
                 {'req': self.context.request_id,
                  'hosts': ', '.join(h.host for h in plan.hosts),
                  'victims': ', '.join(progress.evicted) or 'nothing',
                  's': time.monotonic() - started})
        return self.reservation.selections(plan, resources)

    def make_plan(self):
        """``(resources of one instance, candidate hosts, plan or None)``"""
        resources = self.search.request_resources()
        if resources is None:
            raise exception.NoValidHost(reason='')
        hosts = self.search.candidate_hosts(resources)
        if not hosts:
            return resources, hosts, None
        request = victims_mod.Request(resources=resources,
                                      spec_obj=self.spec_obj,
                                      count=len(self.instance_uuids))
        return resources, hosts, victims_mod.plan_eviction(
            hosts, request, self.wrapper.strategy)


class PreemptionSchedulerManager(ext_manager.SchedulerManager):
    """The package's manager with preemptible caps and eviction."""

    DRIVER_REQUEST_WRAPPERS = ('preemptible_caps', 'eviction')

    def reconcile_evictions(self, context=None):
        """Roll back now the evictions whose scheduler died.

        :returns: one summary per eviction rolled back (see
            :mod:`nova_sched_ext.preemption.reconcile`)
        """
        done = []
        for wrapper in self.request_wrappers:
            if isinstance(wrapper, Eviction):
                done.extend(wrapper.reconcile(context))
        return done
