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

"""The caps on preemptible instances, per availability zone and per host.

:class:`PreemptibleCaps` is a request wrapper (``preemptible_caps`` in the
namespace ``nova_sched_ext.request_wrappers``) that the preemption driver
adds.  A request for preemptible instances that need new room (a boot, an
unshelve) is scheduled with the hosts that are at their cap, or in a zone
at its cap, in ``ignore_hosts``; after Nova chose the hosts the counts are
checked again with the request's own instances (a multi-create may fill a
zone on its own), and a request beyond a cap releases its claims and fails
with NoValidHost and one warning.

Counting (``[nova_sched_ext] preemptible_max_per_az``,
``preemptible_max_per_host``): the instances of every cell whose embedded
flavor is preemptible and that are on a host (see :mod:`.census`), plus the
placements of every scheduler in the last minutes that the cells do not
show yet (the conductor creates the instances after the scheduler
answers): each scheduler records its placements on the coordination
backend (:mod:`nova_sched_ext.coordination`) for :data:`PENDING_TTL`
seconds.  A record is dropped as soon as the cells show its instance on a
host, or show it deleted (its owner deleted it before it was counted).

Exact across schedulers: the count, Nova's choice and claim of the hosts,
the check and the record of the placements happen under a lock per
availability zone on the same backend, so two requests that could land in
one zone never count at the same moment.  A request for a zone takes that
zone's lock; a request for no zone takes the locks of every zone (in
order, so two requests never wait for each other in a circle).  If Nova
picks a host outside the locked zones (no zone filtering configured), the
claims are dropped and the request runs again under every zone's lock.
The lock is held only around that count-and-claim, and only by
preemptible requests under a cap.  When the backend is down such requests
are refused with NoValidHost: a cap is never lifted by an outage.
"""

import collections
import threading

from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_sched_ext.cloud import preemptible as extra_specs
from nova_sched_ext import conf
from nova_sched_ext import coordination
from nova_sched_ext.preemption import census
from nova_sched_ext import wrappers

CONF = conf.CONF
LOG = logging.getLogger(__name__)

#: seconds a placement counts before the cells show it
PENDING_TTL = 600
#: the record kind of the placements the cells do not show yet
PENDING_KIND = 'preemptible-pending'
#: the prefix of the lock of an availability zone
LOCK_PREFIX = 'nova-sched-ext-preemptible-caps-'

#: Test-only switch: False takes an in-process lock only, as before the
#: shared lock existed, so a test can show the overshoot the lock prevents.
_LOCK_ACROSS_SCHEDULERS = True

#: what :meth:`PreemptibleCaps._count_and_claim` returns when Nova chose a
#: host outside the zones it had locked
_OUTSIDE_LOCKED_ZONES = object()


class PreemptibleCaps(wrappers.RequestWrapper):
    """Request wrapper: enforce the caps on preemptible instances."""

    def __init__(self, manager):
        super().__init__(manager)
        self.backend = coordination.for_manager(manager)
        # Only with _LOCK_ACROSS_SCHEDULERS off.
        self._process_lock = threading.Lock()

    @staticmethod
    def limits():
        opts = CONF.nova_sched_ext
        return opts.preemptible_max_per_az, opts.preemptible_max_per_host

    def __call__(self, call_next, context, spec_obj, instance_uuids):
        per_az, per_host = self.limits()
        if (per_az < 0 and per_host < 0) or \
                not extra_specs.is_preemptible(spec_obj.flavor) or \
                not census.needs_new_room(context, spec_obj, instance_uuids):
            return call_next(context, spec_obj, instance_uuids)
        zone = spec_obj.availability_zone \
            if spec_obj.obj_attr_is_set('availability_zone') else None
        # The requested zone's lock first; every zone's if Nova strays.
        for only_zone in ([zone] if zone else []) + [None]:
            held = self._lock(context, spec_obj, instance_uuids, only_zone)
            try:
                selections = self._count_and_claim(
                    call_next, context, spec_obj, instance_uuids, per_az,
                    per_host, held['zones'])
            finally:
                self._unlock(held)
            if selections is not _OUTSIDE_LOCKED_ZONES:
                return selections
        raise exception.NoValidHost(
            reason='the chosen hosts are in no availability zone')

    # --- the lock -------------------------------------------------------

    def _lock(self, context, spec_obj, instance_uuids, zone):
        """Lock ``zone``, or every zone if None.

        :returns: ``{'zones': the zones locked (None: all), ...}``
        """
        if not _LOCK_ACROSS_SCHEDULERS:
            self._process_lock.acquire()
            return {'zones': None, 'held': None}
        try:
            if zone is None:
                zones = sorted(set(census.host_availability_zones(
                    context).values()) | {CONF.default_availability_zone})
            else:
                zones = [zone]
            held = self.backend.acquire(
                [LOCK_PREFIX + z for z in zones],
                CONF.nova_sched_ext.preemptible_caps_lock_timeout,
                'of the preemptible caps of availability zone(s) %s'
                % ', '.join(zones))
        except coordination.BackendUnavailable as exc:
            raise _backend_unreachable(context, exc)
        except Exception as exc:
            self._refuse(context, spec_obj, instance_uuids,
                         'the lock of the caps could not be taken: %s' % exc)
            raise exception.NoValidHost(
                reason='the preemptible caps could not be locked')
        # A zone the lock names counts every host of it; one missing
        # from the list (no aggregate yet) is checked after the choice.
        return {'zones': None if zone is None else set(zones),
                'held': held}

    def _unlock(self, held):
        if not _LOCK_ACROSS_SCHEDULERS:
            self._process_lock.release()
        else:
            self.backend.release(held['held'])

    # --- count and claim, under the lock --------------------------------

    def _count_and_claim(self, call_next, context, spec_obj, instance_uuids,
                         per_az, per_host, locked_zones):
        try:
            counts = self._counts(context)
            zones = census.host_availability_zones(context)
            full, why = self._full_hosts(context, counts, zones, per_az,
                                         per_host)
        except coordination.BackendUnavailable as exc:
            raise _backend_unreachable(context, exc)
        except Exception:
            # A cap that cannot be checked is not lifted.
            LOG.exception('Preemptible request %s refused: the '
                          'preemptible instances could not be counted.',
                          context.request_id)
            raise exception.NoValidHost(
                reason='the preemptible instances could not be counted')
        original = spec_obj.ignore_hosts \
            if spec_obj.obj_attr_is_set('ignore_hosts') else None
        if full:
            spec_obj.ignore_hosts = sorted(set(original or ()) | full)
        try:
            selections = call_next(context, spec_obj, instance_uuids)
        except exception.NoValidHost:
            if why:
                self._refuse(context, spec_obj, instance_uuids,
                             'no room outside the hosts at a cap (%s)'
                             % why)
            raise
        finally:
            spec_obj.ignore_hosts = original
        chosen = [per_instance[0].service_host
                  for per_instance in selections]
        if locked_zones is not None and any(
                census.zone_of(zones, host) not in locked_zones
                for host in chosen):
            LOG.info('Preemptible request %s: Nova chose hosts outside '
                     'the zone(s) %s it asked for; counting again under '
                     'the lock of every zone.', context.request_id,
                     ', '.join(sorted(locked_zones)))
            self._release(context, instance_uuids)
            return _OUTSIDE_LOCKED_ZONES
        over = self._over(counts, zones, chosen, per_az, per_host)
        if over:
            self._release(context, instance_uuids)
            self._refuse(context, spec_obj, instance_uuids, over)
            raise exception.NoValidHost(
                reason='the cap on preemptible instances is reached '
                       '(%s)' % over)
        try:
            for uuid, host in zip(instance_uuids or (), chosen):
                self.backend.put(PENDING_KIND, uuid, {'host': host},
                                 PENDING_TTL, replace=True)
        except coordination.BackendUnavailable as exc:
            # Unrecorded, the placements would be invisible to the other
            # schedulers until the cells show them.
            self._release(context, instance_uuids)
            raise _backend_unreachable(context, exc)
        return selections

    def _counts(self, context):
        """Preemptible instances per host, the pending ones included."""
        instances = census.preemptible_instances(context)
        counts = census.count_by_host(instances)
        known = {instance.uuid for instance in instances}
        pending = {}
        for uuid, record, holder in self.backend.items(PENDING_KIND):
            if uuid in known or holder is None:
                # Shown by the cells now, or too old: the cells know.
                self.backend.delete(PENDING_KIND, uuid, owned=False)
            else:
                pending[uuid] = record['host']
        # An instance its owner deleted before any count saw it in a cell
        # would hold its place until the record ran out.
        for uuid in census.deleted_instance_uuids(context, pending):
            self.backend.delete(PENDING_KIND, uuid, owned=False)
            del pending[uuid]
        counts.update(pending.values())
        return counts

    @staticmethod
    def _full_hosts(context, counts, zones, per_az, per_host):
        """Hosts that cannot take one more preemptible instance.

        :returns: ``(set of host names, why as text)``
        """
        full, why = set(), []
        if per_host >= 0:
            at_cap = sorted(h for h, n in counts.items() if n >= per_host)
            full.update(at_cap)
            if per_host == 0:
                why.append('hosts at their cap of 0 per host: all')
            elif at_cap:
                why.append('hosts at their cap of %d per host: %s'
                           % (per_host, ', '.join(at_cap)))
        if per_az >= 0:
            by_zone = collections.Counter()
            for host, n in counts.items():
                by_zone[census.zone_of(zones, host)] += n
            full_zones = sorted(z for z, n in by_zone.items() if n >= per_az)
            if full_zones or per_az == 0:
                hosts = {m.host for m in objects.HostMappingList.get_all(
                    context)}
                full.update(h for h in hosts if per_az == 0 or
                            census.zone_of(zones, h) in full_zones)
                why.append('availability zones at their cap of %d: %s'
                           % (per_az, ', '.join(full_zones) or 'all'))
        return full, '; '.join(why)

    @staticmethod
    def _refuse(context, spec_obj, instance_uuids, why):
        LOG.warning('Preemptible request %(req)s for %(n)d instance(s) of '
                    'flavor %(flavor)s refused by the preemptible caps: '
                    '%(why)s.',
                    {'req': context.request_id,
                     'n': len(instance_uuids or ()),
                     'flavor': spec_obj.flavor.name, 'why': why})

    @staticmethod
    def _over(counts, zones, chosen, per_az, per_host):
        """What the chosen hosts would exceed, as text; '' if nothing."""
        after = collections.Counter(counts)
        after.update(chosen)
        problems = []
        if per_host >= 0:
            for host in sorted(set(chosen)):
                if after[host] > per_host:
                    problems.append('host %s would hold %d (max %d per host)'
                                    % (host, after[host], per_host))
        if per_az >= 0:
            by_zone = collections.Counter()
            for host, n in after.items():
                by_zone[census.zone_of(zones, host)] += n
            for zone in sorted({census.zone_of(zones, h) for h in chosen}):
                if by_zone[zone] > per_az:
                    problems.append('zone %s would hold %d (max %d per '
                                    'availability zone)'
                                    % (zone, by_zone[zone], per_az))
        return '; '.join(problems)

    def _release(self, context, instance_uuids):
        for uuid in instance_uuids or ():
            self.manager.placement_client.delete_allocation_for_instance(
                context, uuid, force=True)


def _backend_unreachable(context, exc):
    """The NoValidHost of a request whose caps need a backend that is down.

    The backend logged its outage once; this is one request.
    """
    LOG.debug('Preemptible request %s refused: %s.', context.request_id, exc)
    return exception.NoValidHost(
        reason='the preemptible caps cannot be checked: the scheduler\'s '
               'coordination backend is unreachable')
