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

from concurrent import futures
import time

from nova import conf as nova_conf
from nova import exception
from nova import objects
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_sched_ext.cloud import preemptible as extra_specs
from nova_sched_ext import coordination
from nova_sched_ext import manager as ext_manager
from nova_sched_ext.preemption import caps
from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import conf as preemption_conf  # noqa: F401
from nova_sched_ext.preemption import evictor as evictor_mod
from nova_sched_ext.preemption import journal as journal_mod
from nova_sched_ext.preemption import notifications
from nova_sched_ext.preemption import reconcile
from nova_sched_ext.preemption import reservation
from nova_sched_ext.preemption import strategies
from nova_sched_ext.preemption import victims as victims_mod
from nova_sched_ext import wrappers

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

CLASS_PATH = 'nova_sched_ext.preemption.driver.PreemptionSchedulerManager'

#: enabled filters not re-run on eviction candidates: they judge the usage
#: the victims hold (NUMA, PCI and instance counts)
USAGE_FILTERS = frozenset((
    'NUMATopologyFilter', 'NUMAFitFilter', 'FastNUMATopologyFilter',
    'PciPassthroughFilter', 'NumInstancesFilter',
    'AggregateNumInstancesFilter', 'IoOpsFilter', 'AggregateIoOpsFilter',
))


#: placement reads of candidate hosts run at once
PLACEMENT_READERS = 8

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


class EvictionFailed(Exception):
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


class _Retry(Exception):
    pass


class _Attempt(object):
    """One eviction for one request, from the plan to the selections."""

    def __init__(self, wrapper, context, spec_obj, instance_uuids):
        self.wrapper = wrapper
        self.manager = wrapper.manager
        self.client = wrapper.manager.placement_client
        self.context = context
        self.spec_obj = spec_obj
        self.instance_uuids = list(instance_uuids)
        self.action = CONF.nova_sched_ext.preemption_action
        # what happened, for the summary
        self.plan = None
        #: victims whose eviction the API accepted (or that were gone)
        self.evicted = []
        #: the victim whose eviction failed, if any
        self.failed = None
        #: the record of the eviction (journal.Entry), once written
        self.entry = None

    # --- the sequence -------------------------------------------------

    def run(self):
        started = time.monotonic()
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
        self.plan = plan
        try:
            before = self.read_victims(plan)
        except _Retry:
            raise
        except Exception:
            LOG.exception('Preemption: request %s: reading the victims\' '
                          'allocations failed; nothing was evicted.',
                          self.context.request_id)
            raise exception.NoValidHost(reason='')
        self.record(plan, resources, before)
        _fault_point('recorded')
        try:
            # Nothing is reserved on a record that may have been taken
            # over while this scheduler stalled (journal.ensure_held).
            self.entry.ensure_held()
        except (journal_mod.LostOwnership,
                coordination.BackendUnavailable) as exc:
            # Nothing reserved: a reconcile finds nothing to undo.
            LOG.error('Preemption: request %(req)s evicts nothing: %(error)s.',
                      {'req': self.context.request_id, 'error': exc})
            raise exception.NoValidHost(
                reason='preemptible instances could not be evicted: the '
                       'eviction was taken over by another scheduler')
        try:
            self.reserve(plan, resources, before)
        except (exception.NoValidHost, _Retry):
            # Nothing reserved: the record goes (or runs out: a reconcile
            # finds nothing to undo).
            self.forget()
            raise
        _fault_point('reserved')
        try:
            self.entry.save(state=journal_mod.RESERVED)
            self.evict(plan)
            self.wait(plan)
            self.entry.save(state=journal_mod.EVICTED)
            _fault_point('gone')
            # Last: once the record is gone nobody rolls this back, and
            # the request may be answered.
            self.entry.finish()
        except journal_mod.LostOwnership as exc:
            # This scheduler was taken for dead: the one that took the
            # record over rolls the eviction back, and only that one.
            LOG.error('Preemption: request %(req)s failed: %(error)s; that '
                      'scheduler rolls the eviction back. Hosts: %(hosts)s; '
                      'evicted: %(evicted)s.',
                      {'req': self.context.request_id, 'error': exc,
                       'hosts': ', '.join(h.host for h in plan.hosts),
                       'evicted': ', '.join(self.evicted) or 'none'})
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
            self.roll_back(before, exc)
            raise exception.NoValidHost(
                reason='preemptible instances could not be evicted: %s'
                       % exc)
        LOG.info('Preemption: request %(req)s served on %(hosts)s after '
                 'evicting %(victims)s in %(s).1f s.',
                 {'req': self.context.request_id,
                  'hosts': ', '.join(h.host for h in plan.hosts),
                  'victims': ', '.join(self.evicted) or 'nothing',
                  's': time.monotonic() - started})
        return self.selections(plan, resources)

    def make_plan(self):
        """``(resources of one instance, candidate hosts, plan or None)``"""
        resources = self.request_resources()
        if resources is None:
            raise exception.NoValidHost(reason='')
        hosts = self.candidate_hosts(resources)
        if not hosts:
            return resources, hosts, None
        request = victims_mod.Request(resources=resources,
                                      spec_obj=self.spec_obj,
                                      count=len(self.instance_uuids))
        return resources, hosts, victims_mod.plan_eviction(
            hosts, request, self.wrapper.strategy)

    def request_resources(self):
        """``{rc: amount}`` of one instance, or None if not servable."""
        if self.spec_obj.obj_attr_is_set('requested_resources') and \
                self.spec_obj.requested_resources:
            LOG.info('Preemption: request %s has port or accelerator '
                     'resources; eviction does not serve it.',
                     self.context.request_id)
            return None
        request = scheduler_utils.resources_from_request_spec(
            self.context, self.spec_obj, self.manager.host_manager,
            enable_pinning_translate=True)
        if request.get_num_of_suffixed_groups():
            LOG.info('Preemption: request %s has granular resource groups; '
                     'eviction does not serve it.', self.context.request_id)
            return None
        self.resource_request = request
        return {rc: n for rc, n in
                request.get_request_group(None).resources.items() if n}

    # --- candidates ---------------------------------------------------

    def candidate_hosts(self, resources):
        """``[victims.CandidateHost]`` that pass the request's constraints."""
        flavor_ids = census.preemptible_flavor_ids(self.context)
        instances = [i for i in census.preemptible_instances(
            self.context, flavor_ids=flavor_ids) if not census.is_going(i)]
        if not instances:
            return []
        by_node = {}
        for instance in instances:
            by_node.setdefault((instance.host, instance.node),
                               []).append(instance)
        # None: every compute node (of the requested cell, if any).
        states = [s for s in
                  self.manager.host_manager.get_host_states_by_uuids(
                      self.context, None, self.spec_obj)
                  if (s.host, s.nodename) in by_node]
        states = self.filter_hosts(states)
        if not states:
            return []

        def describe(state):
            return self.describe_host(
                state, by_node[(state.host, state.nodename)])

        # Four placement reads per host: a few run at once, so a cloud with
        # many hosts of preemptible instances is not read one at a time.
        with futures.ThreadPoolExecutor(
                max_workers=min(PLACEMENT_READERS, len(states))) as pool:
            described = list(pool.map(describe, states))
        return [host for host in described if host is not None]

    def filter_hosts(self, states):
        spec = self.spec_obj
        wanted = {
            'ignore': {h.lower() for h in (spec.ignore_hosts or ())},
            'force': {h.lower() for h in (spec.force_hosts or ())},
            'nodes': set(spec.force_nodes or ()),
        }
        dest = spec.requested_destination \
            if spec.obj_attr_is_set('requested_destination') else None
        zone = spec.availability_zone \
            if spec.obj_attr_is_set('availability_zone') else None
        zones = census.host_availability_zones(self.context) if zone else {}
        group = self.resource_request.get_request_group(None)
        required_aggs = [set(any_of) for any_of in
                         (group.aggregates or ())]
        forbidden_aggs = set(group.forbidden_aggregates or ())
        kept = []
        for state in states:
            name = state.host.lower()
            if name in wanted['ignore'] or \
                    wanted['force'] and name not in wanted['force'] or \
                    wanted['nodes'] and state.nodename not in \
                    wanted['nodes']:
                continue
            if dest is not None and dest.obj_attr_is_set('host') and \
                    dest.host and (dest.host != state.host or (
                        dest.obj_attr_is_set('node') and dest.node and
                        dest.node != state.nodename)):
                continue
            if zone and census.zone_of(zones, state.host) != zone:
                continue
            member_of = {agg.uuid for agg in state.aggregates}
            if any(not (any_of & member_of) for any_of in required_aggs) \
                    or member_of & forbidden_aggs:
                continue
            kept.append(state)
        filters = [f for f in self.manager.host_manager.enabled_filters
                   if type(f).__name__ not in USAGE_FILTERS]
        if kept and filters:
            kept = list(self.manager.host_manager.filter_handler
                        .get_filtered_objects(filters, kept, spec, 0) or [])
        return kept

    def describe_host(self, state, instances):
        """The host as victim selection sees it, or None if unusable."""
        rp_uuid = state.uuid
        traits = self.client.get_provider_traits(self.context,
                                                 rp_uuid).traits
        group = self.resource_request.get_request_group(None)
        required = set(group.required_traits or ()) | set(
            getattr(self.resource_request, '_root_required', ()) or ())
        forbidden = set(group.forbidden_traits or ()) | set(
            getattr(self.resource_request, '_root_forbidden', ()) or ())
        if not required <= set(traits) or forbidden & set(traits):
            return None
        inventories = self._get('/resource_providers/%s/inventories'
                                % rp_uuid)['inventories']
        usages = self._get('/resource_providers/%s/usages'
                           % rp_uuid)['usages']
        consumers = self._get('/resource_providers/%s/allocations'
                              % rp_uuid)['allocations']
        free, max_unit = {}, {}
        for rc, inv in inventories.items():
            capacity = int((inv['total'] - inv['reserved']) *
                           inv['allocation_ratio'])
            free[rc] = max(0, capacity - usages.get(rc, 0))
            max_unit[rc] = inv['max_unit']
        victims = []
        for instance in instances:
            held = consumers.get(instance.uuid, {}).get('resources')
            if not held:
                continue
            victims.append(victims_mod.Victim(
                uuid=instance.uuid, project_id=instance.project_id,
                created_at=instance.created_at, resources=dict(held),
                numa_topology=instance.numa_topology,
                pci_requests=instance.pci_requests))
        if not victims:
            return None
        return victims_mod.CandidateHost(
            host=state.host, nodename=state.nodename, rp_uuid=rp_uuid,
            free=free, host_state=state, victims=victims,
            max_unit=max_unit)

    def _get(self, url):
        resp = self.client.get(url, global_request_id=self.context.global_id)
        if resp is None or not resp:
            raise exception.NoValidHost(
                reason='placement did not answer %s' % url)
        return resp.json()

    # --- reservation --------------------------------------------------

    def read_victims(self, plan):
        """The victims' allocations now, with their consumer generations.

        :raises _Retry: a victim changed since it was chosen
        """
        before = {}
        for placement in plan.placements:
            for victim in placement.victims:
                current = reservation.read_allocations(
                    self.client, self.context, victim.uuid)
                held = current['allocations'].get(
                    placement.host.rp_uuid, {}).get('resources', {})
                if held != dict(victim.resources):
                    LOG.info('Preemption: request %s: victim %s changed '
                             'since it was chosen; planning again.',
                             self.context.request_id, victim.uuid)
                    raise _Retry()
                before[victim.uuid] = current
        return before

    def new_instances(self, plan, resources):
        """``[(instance uuid, rp uuid, resources)]`` the plan places."""
        return [(uuid, placement.host.rp_uuid, resources)
                for uuid, placement in zip(self.instance_uuids,
                                           plan.placements)]

    def record(self, plan, resources, before):
        """Write the eviction down before anything is reserved.

        :raises NoValidHost: the coordination backend is down
        """
        hosts = {victim.uuid: placement.host.host
                 for placement in plan.placements
                 for victim in placement.victims}
        try:
            self.entry = self.wrapper.journal.begin(
                self.context, self.spec_obj,
                self.new_instances(plan, resources),
                {uuid: (hosts[uuid], allocations)
                 for uuid, allocations in before.items()})
        except coordination.BackendUnavailable as exc:
            # The backend logged its outage once.
            LOG.info('Preemption: request %s evicts nothing: the eviction '
                     'cannot be recorded (%s).', self.context.request_id,
                     exc)
            raise exception.NoValidHost(
                reason='preemptible instances are not evicted while the '
                       'scheduler\'s coordination backend is unreachable')

    def forget(self):
        """Delete the record of an eviction that reserved nothing."""
        try:
            self.entry.finish()
        except (coordination.BackendUnavailable,
                journal_mod.LostOwnership) as exc:
            LOG.debug('Preemption: request %s: the record of its eviction '
                      'stays, with nothing to undo: %s',
                      self.context.request_id, exc)

    def reserve(self, plan, resources, before):
        """Reserve the room read in ``before``.

        :raises _Retry: another request changed a victim or a provider
        """
        try:
            reservation.reserve(self.client, self.context,
                                self.new_instances(plan, resources), before,
                                self.spec_obj.project_id,
                                self.spec_obj.user_id)
        except reservation.ReservationFailed as exc:
            LOG.info('Preemption: request %s could not reserve the room '
                     'of its victims: %s', self.context.request_id, exc)
            if exc.conflict:
                raise _Retry()
            raise exception.NoValidHost(
                reason='the room of preemptible instances could not be '
                       'reserved')

    # --- eviction -----------------------------------------------------

    def evict(self, plan):
        evictor = self.wrapper.evictor
        # Everything is re-checked before anything is evicted, so a
        # victim that stopped being preemptible stops the whole eviction.
        for victim in plan.victims:
            evictor.check_preemptible(victim.uuid)
        for placement, uuid in zip(plan.placements, self.instance_uuids):
            names = [v.uuid for v in placement.victims]
            for victim in placement.victims:
                if victim.uuid in self.evicted:
                    continue
                # Recorded first: a scheduler that dies while the API
                # takes the eviction leaves the victim to be checked.
                self.entry.evicting(victim.uuid)
                _fault_point('evicting', victim=victim.uuid)
                # Nothing is sent on a record that may have been taken
                # over while this scheduler stalled (journal.ensure_held).
                self.entry.ensure_held()
                self.failed = victim.uuid
                evictor.evict(victim.uuid, self.action)
                _fault_point('evicted', victim=victim.uuid)
                self.failed = None
                self.evicted.append(victim.uuid)
                self.entry.evicted(victim.uuid)
                self._forget_pending(victim.uuid)
            if not names:
                continue
            LOG.info('Preemption: request %(req)s evicts (%(action)s) '
                     '%(victims)s on host %(host)s for instance %(uuid)s.',
                     {'req': self.context.request_id, 'action': self.action,
                      'victims': ', '.join(names),
                      'host': placement.host.host, 'uuid': uuid})
            notifications.notify_eviction(
                self.context, notifications.EvictionPayload(
                    request_id=self.context.request_id, instance_uuid=uuid,
                    host=placement.host.host,
                    nodename=placement.host.nodename, action=self.action,
                    victims=names,
                    victim_projects=[v.project_id or ''
                                     for v in placement.victims]))

    def _forget_pending(self, uuid):
        # A victim placed in the last caps.PENDING_TTL seconds is shown by
        # no cell once evicted, so its placement record would count
        # against the preemptible caps until it expires: the caps would
        # refuse room they have.
        try:
            self.wrapper.backend.delete(caps.PENDING_KIND, uuid,
                                        owned=False)
        except coordination.BackendUnavailable:
            # The backend logged its outage; the record expires, and until
            # then the caps count one too many, never one too few.
            pass

    def wait(self, plan):
        opts = CONF.nova_sched_ext
        left = self.wrapper.evictor.wait_gone(
            [v.uuid for v in plan.victims], self.action,
            opts.preemption_wait_timeout, opts.preemption_poll_interval)
        if left:
            raise EvictionFailed(
                'still there after %d s: %s'
                % (opts.preemption_wait_timeout, ', '.join(left)))

    def roll_back(self, before, error):
        """Release the reservation; log what an operator needs to know.

        When the record is known to be still this scheduler's, the
        victims not evicted get their allocations back; when the backend
        is down (another scheduler may have taken the record over and
        restored some already), only those the API shows untouched do.
        The record goes once the release is done; if the release fails it
        is left to run out, and a reconcile releases the room later.
        """
        ours = True
        try:
            self.entry.save(state=journal_mod.ROLLING_BACK)
        except journal_mod.LostOwnership as exc:
            LOG.error('Preemption: request %(req)s failed: %(error)s, and '
                      '%(lost)s; that scheduler rolls it back.',
                      {'req': self.context.request_id, 'error': error,
                       'lost': exc})
            return
        except coordination.BackendUnavailable:
            ours = False
        restore = {uuid: alloc for uuid, alloc in before.items()
                   if uuid not in self.evicted}
        for uuid in list(restore):
            # The one whose eviction failed may have started going: its
            # compute host will drop its allocations, which must not come
            # back.
            if (uuid == self.failed or not ours) and \
                    not self._untouched(uuid):
                del restore[uuid]
        released = 'released'
        try:
            reservation.release(self.client, self.context,
                                self.instance_uuids, restore)
        except Exception as exc:
            released = 'NOT released (%s): check the allocations of %s' % (
                exc, ', '.join(self.instance_uuids + sorted(restore)))
            if ours:
                released += ' (a reconcile retries in %d s at most)' % (
                    journal_mod.ttl() +
                    CONF.nova_sched_ext.preemption_reconcile_interval)
            self.entry.abandon()
        else:
            self.forget()
        LOG.error('Preemption: request %(req)s failed: %(error)s. Hosts: '
                  '%(hosts)s; evicted: %(evicted)s; not evicted: '
                  '%(kept)s; reservation %(released)s.',
                  {'req': self.context.request_id, 'error': error,
                   'hosts': ', '.join(h.host for h in self.plan.hosts),
                   'evicted': ', '.join(self.evicted) or 'none',
                   'kept': ', '.join(sorted(restore)) or 'none',
                   'released': released})

    def _untouched(self, uuid):
        """A victim whose failed eviction left it as it was."""
        try:
            return evictor_mod.untouched(self.wrapper.evictor.get(uuid))
        except evictor_mod.EvictionError:
            return False

    # --- answer -------------------------------------------------------

    def selections(self, plan, resources):
        """One list per instance: the reserved host, no alternates.

        An alternate would be built on by the conductor without the
        scheduler, outside the reserved room.
        """
        answer = []
        for placement in plan.placements:
            request = reservation.allocation_request(
                placement.host.rp_uuid, resources)
            answer.append([objects.Selection.from_host_state(
                placement.host.host_state,
                allocation_request=request,
                allocation_request_version=(
                    reservation.ALLOCATION_REQUEST_VERSION))])
        return answer


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
