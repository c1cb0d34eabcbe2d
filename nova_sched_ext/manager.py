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

"""The scheduler manager of nova-sched-ext.

Nova has had no pluggable scheduler driver since Wallaby; what a filter
cannot do (hold a lock across the placement claims, retry after freeing
room) has to happen around ``SchedulerManager.select_destinations``.  This
subclass runs every scheduling request through a chain of *request
wrappers* (:mod:`nova_sched_ext.wrappers`), outermost first::

    wrapper(call_next, context, spec_obj, instance_uuids) -> selections

A wrapper does its work and calls ``call_next`` with the same arguments to
go on (the innermost ``call_next`` is Nova's own ``select_destinations``);
it may raise ``NoValidHost`` instead, and sees the ``NoValidHost`` of the
calls it wraps as such.  Whatever the caller asked for, wrappers see and
return Selection objects (a list per instance: the selected host, then
alternates if the caller wants them); the manager turns them into the
legacy list of host dicts at the end for a caller that passed
``return_objects=False``, as Nova does.

The chain is ``[nova_sched_ext] request_wrappers`` (entry-point names in
the namespace ``nova_sched_ext.request_wrappers``, default
``deployment_set_lock``), then the wrappers the driver adds
(:attr:`SchedulerManager.DRIVER_REQUEST_WRAPPERS`) that the option does not
name.  It is loaded once, when the manager is built, each wrapper called
with the manager; a name that cannot be loaded stops the service
(:class:`nova_sched_ext.registry.PluginLoadError`).

The wrappers shipped:

- ``deployment_set_lock``
  (:class:`nova_sched_ext.deployment_set.lock.DeploymentSetLock`): the
  per-set lock that makes DeploymentSetFilter safe under concurrent
  requests.
- ``preemptible_caps`` and ``eviction``, which the preemption driver
  (:class:`nova_sched_ext.preemption.driver.PreemptionSchedulerManager`)
  adds: the caps on preemptible instances and the eviction of preemptible
  instances.

With ``[nova_sched_ext] keep_host_state`` the manager's
``HostManager`` keeps the host state between requests
(:class:`nova_sched_ext.host_state.KeptHostManager`).

With ``[nova_sched_ext] kept_candidates`` the manager answers placement's
allocation candidate query from provider state it keeps current
(:mod:`nova_sched_ext.kept_candidates`): the computes' word of instances
gone from or come to a host (``delete_instance_info``,
``update_instance_info``) marks that host's providers to be read again.

Inside every wrapper, right around Nova's own method, the manager widens
placement's candidate limit when the filters found no host among the
candidates placement returned and it may hold more
(:mod:`nova_sched_ext.candidates`): the wrappers, the eviction first, see
NoValidHost only once a wider query found no host either.

The manager is started by ``nova-sched-ext-scheduler``
(:mod:`nova_sched_ext.cmd.scheduler`), which is ``nova-scheduler`` with
this manager: same configuration files, binary name, RPC topic and
workers.
"""

from nova import exception
from nova import objects
from nova.scheduler import manager as nova_manager
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_serialization import jsonutils

from nova_sched_ext import candidates
from nova_sched_ext import claim_casts
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf
from nova_sched_ext.deployment_set import lock as ds_lock
from nova_sched_ext import host_state
from nova_sched_ext import kept_candidates
from nova_sched_ext import wrappers

LOG = logging.getLogger(__name__)

CLASS_PATH = 'nova_sched_ext.manager.SchedulerManager'

# Nova's marker for "no RequestSpec passed" (older conductors).
_SENTINEL = nova_compat.request_spec_sentinel()


class _ConfiguredRequestWrappers(object):
    """``REQUEST_WRAPPERS`` of a manager class that does not set its own.

    The wrapper classes ``[nova_sched_ext] request_wrappers`` names, then
    those of the class's ``DRIVER_REQUEST_WRAPPERS`` the option does not
    name, loaded when the attribute is read: when the manager is built,
    after the configuration is parsed, not when the class is defined.
    """

    def __get__(self, instance, owner):
        configured = list(conf.CONF.nova_sched_ext.request_wrappers)
        added = [name for name in owner.DRIVER_REQUEST_WRAPPERS
                 if name not in configured]
        classes = wrappers.load(configured)
        if added:
            classes += wrappers.load(
                added, option='the request wrappers of the scheduler '
                              'manager %s.%s' % (owner.__module__,
                                                 owner.__name__))
        return tuple(classes)


class SchedulerManager(nova_manager.SchedulerManager):
    """Nova's scheduler manager with request wrappers around scheduling."""

    #: entry-point names of request wrappers this manager adds inside the
    #: configured ones, in this order, unless the option names them (its
    #: order then holds)
    DRIVER_REQUEST_WRAPPERS = ()

    #: factories of the request wrappers, outermost first, each called
    #: with the manager; from the configuration unless a subclass sets a
    #: tuple here, which then replaces the configured chain (the way
    #: before ``[nova_sched_ext] request_wrappers`` existed: register the
    #: wrapper instead)
    REQUEST_WRAPPERS = _ConfiguredRequestWrappers()

    def __init__(self, *args, **kwargs):
        # Before Nova's part, which reads the databases: a wrapper that
        # cannot be loaded is a configuration error, and says so first.
        factories = self.REQUEST_WRAPPERS
        # Before Nova's part too: it reads placement_client.
        self.candidate_limit = candidates.CandidateLimit()
        super().__init__(*args, **kwargs)
        if conf.CONF.nova_sched_ext.keep_host_state:
            host_state.KeptHostManager.adopt(self.host_manager)
        if conf.CONF.nova_sched_ext.kept_candidates:
            kept = self.candidate_limit.kept = \
                kept_candidates.KeptCandidates(self._kept_state_reader)
            if isinstance(self.host_manager, host_state.KeptHostManager):
                # The candidates' rows from the same poll, not per request.
                kept.also_poll(self._poll_host_rows)
            if conf.CONF.nova_sched_ext.kept_state_claim_casts:
                kept.casts = claim_casts.ClaimCasts(kept)
                self.additional_endpoints.append(kept.casts.endpoint)
        self.request_wrappers = [factory(self) for factory in factories]
        LOG.info('nova-sched-ext scheduler manager with request wrappers: '
                 '%s', ', '.join(type(w).__name__
                                 for w in self.request_wrappers) or 'none')
        _warn_without_set_lock(self.request_wrappers)
        self.candidate_limit.log_settings()

    def _kept_state_reader(self):
        from nova import context as nova_context

        from nova_sched_ext.cloud import placement
        return placement.PlacementReader(
            nova_context.get_admin_context(),
            client=super().placement_client,
            workers=conf.CONF.nova_sched_ext.kept_state_workers)

    def _poll_host_rows(self):
        from nova import context as nova_context
        self.host_manager.poll_rows(nova_context.get_admin_context())

    @property
    def placement_client(self):
        # Nova's report client, seen through the candidate limit: the
        # queries of Nova's select_destinations get the widened limit.
        return self.candidate_limit.client(super().placement_client)

    @messaging.expected_exceptions(exception.NoValidHost)
    def select_destinations(
        self, context, request_spec=None,
        filter_properties=None, spec_obj=_SENTINEL,
        instance_uuids=None, return_objects=False, return_alternates=False,
    ):
        if spec_obj is _SENTINEL:
            # What Nova does first, done here so every wrapper gets a
            # RequestSpec.
            spec_obj = objects.RequestSpec.from_primitives(
                context, request_spec, filter_properties)
        parent = super()
        # As Nova does: no alternates in the legacy format.
        return_alternates = return_alternates and return_objects

        def nova_schedule(context, spec_obj, instance_uuids):
            try:
                # Always objects, so wrappers see one format.
                return parent.select_destinations(
                    context, spec_obj=spec_obj, instance_uuids=instance_uuids,
                    return_objects=True,
                    return_alternates=return_alternates)
            except messaging.ExpectedException as exc:
                # Nova's method wraps NoValidHost for the RPC server; the
                # wrappers get the real exception (this method wraps it
                # again on the way out).
                raise exc.exc_info[1]

        def schedule(context, spec_obj, instance_uuids):
            return self.candidate_limit.schedule(
                nova_schedule, context, spec_obj, instance_uuids)

        call = schedule
        for wrapper in reversed(self.request_wrappers):
            call = _chain(wrapper, call)
        selections = call(context, spec_obj, instance_uuids)
        if not return_objects:
            # What Nova's method returns to a caller that wants no objects.
            return jsonutils.to_primitive(
                [sel[0].to_dict() for sel in selections])
        return selections

    def init_host(self, service_ref):
        super().init_host(service_ref)
        if self.candidate_limit.kept is not None:
            self.candidate_limit.kept.start()
        self._call_wrappers('start')

    # What Nova's computes tell every scheduler of their instances: room
    # freed (or taken) on a host, which placement's provider generations
    # do not show for frees.
    def update_instance_info(self, context, host_name, instance_info):
        super().update_instance_info(context, host_name, instance_info)
        self._host_changed(host_name)

    def delete_instance_info(self, context, host_name, instance_uuid):
        super().delete_instance_info(context, host_name, instance_uuid)
        self._host_changed(host_name)

    def _host_changed(self, host_name):
        kept = self.candidate_limit.kept
        if kept is None:
            return
        hm = self.host_manager
        if isinstance(hm, host_state.KeptHostManager):
            uuids = hm.node_uuids(host_name)
        else:
            # Nova's HostManager keeps its HostStates by (host, node).
            uuids = [state.uuid for (host, _node), state in
                     list(getattr(hm, 'host_state_map', {}).items())
                     if host == host_name and getattr(state, 'uuid', None)]
        kept.host_changed(host_name, uuids)

    def graceful_shutdown(self, timeout=None):
        # Nova 34 passes a timeout, 33 none; 31 and 32 never call it.
        nova_compat.manager_graceful_shutdown(super(), timeout)
        self._stop_wrappers()

    def cleanup_host(self):
        super().cleanup_host()
        self._stop_wrappers()

    def _stop_wrappers(self):
        if self.candidate_limit.kept is not None:
            self.candidate_limit.kept.stop()
        self._call_wrappers('stop')

    def _call_wrappers(self, method):
        """Call ``method`` of every wrapper that has it; log failures."""
        for wrapper in self.request_wrappers:
            call = getattr(wrapper, method, None)
            if call is not None:
                try:
                    call()
                except Exception:
                    LOG.exception('Request wrapper %s failed to %s.',
                                  type(wrapper).__name__, method)


def _warn_without_set_lock(request_wrappers):
    """WARN when DeploymentSetFilter runs without the deployment-set lock.

    An empty ``request_wrappers =``, or a list that leaves the lock out,
    is accepted (a scheduler without deployment sets needs no lock), but
    with the filter enabled two concurrent members of a set may land in
    one failure domain.
    """
    if any(isinstance(wrapper, ds_lock.DeploymentSetLock)
           for wrapper in request_wrappers):
        return
    if ds_lock.FILTER_NAME in conf.CONF.filter_scheduler.enabled_filters:
        LOG.warning('[filter_scheduler] enabled_filters has %(filter)s but '
                    '[nova_sched_ext] request_wrappers (%(wrappers)s) does '
                    'not name deployment_set_lock: concurrent requests may '
                    'put two members of a deployment set in one failure '
                    'domain. Add deployment_set_lock to request_wrappers.',
                    {'filter': ds_lock.FILTER_NAME,
                     'wrappers': ', '.join(
                         conf.CONF.nova_sched_ext.request_wrappers) or
                     'empty'})


def _chain(wrapper, call_next):
    def call(context, spec_obj, instance_uuids):
        return wrapper(call_next, context, spec_obj, instance_uuids)
    return call
