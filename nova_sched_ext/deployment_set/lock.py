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

"""One lock per deployment set, held around select-and-claim.

Why: ``DeploymentSetFilter`` sees a member as soon as its scheduler has
claimed it in placement, but two requests filtering at the same moment
see neither claim, and may both pick the same failure domain.  Nova's late
check in ``nova-compute`` only knows hosts, not domains or partitions.
Holding a lock per set from before the filters run until the claims are
made (``SchedulerManager.select_destinations``) orders such requests: the
second one filters after the first one's claims are in placement.

How: :class:`SetLocks` takes the set's lock on the scheduler's
coordination backend (:mod:`nova_sched_ext.coordination`): a lock inside
the process (the scheduler's worker threads) and a `tooz
<https://docs.openstack.org/tooz/>`_ lock across processes, on the backend
of ``[nova_sched_ext] coordination_url`` (redis for several hosts;
shared by all schedulers) or, if that is unset, file locks in
``[nova_sched_ext] deployment_set_lock_dir`` (only the scheduler processes
of one host).  A request that cannot get the lock within
``deployment_set_lock_timeout`` seconds, or whose backend is down, fails
with NoValidHost: placing it without the lock could break the set.  An
outage of the backend is logged once (and its end once), not per request;
requests without a set never touch the backend.

:class:`DeploymentSetLock` is the request wrapper ``deployment_set_lock``
(``[nova_sched_ext] request_wrappers``, the default) that
:class:`nova_sched_ext.manager.SchedulerManager` runs around every request.
It locks the requests that carry an anti-affinity server group, when
DeploymentSetFilter is enabled; others pass straight through.  Unless
``[nova_sched_ext] deployment_set_alternates`` is set, it also drops the
alternate hosts of the members of a set: the conductor would build on them
after a failure without asking the scheduler, so without the filter and
without the lock.
"""

import time

from nova import exception
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_sched_ext import conf
from nova_sched_ext import coordination
from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import planning
from nova_sched_ext import wrappers

LOG = logging.getLogger(__name__)
CONF = conf.CONF

FILTER_NAME = 'DeploymentSetFilter'
LOCK_PREFIX = 'nova-sched-ext-deployment-set-'

LockUnavailable = coordination.LockUnavailable
backend_url = coordination.backend_url
_safe_url = coordination.safe_url


class SetLocks(object):
    """Locks by deployment set, within and across processes.

    Thread-safe.

    :param url: a tooz URL (None: the options, read at each use)
    :param backend: the :class:`~nova_sched_ext.coordination.Backend` to
        lock on, shared with the manager's other wrappers (``url`` is then
        ignored)
    """

    def __init__(self, url=None, backend=None):
        self.backend = backend or coordination.Backend(url)

    @property
    def url(self):
        return self.backend.url

    def acquire(self, group_uuid, timeout):
        """Take the lock of a set; returns what :meth:`release` needs.

        :raises coordination.LockTimeout: another request held it for
            ``timeout`` seconds
        :raises coordination.BackendUnavailable: the backend is down
        """
        return self.backend.acquire([LOCK_PREFIX + group_uuid], timeout,
                                    'of deployment set %s' % group_uuid)

    def release(self, held):
        self.backend.release(held)

    def stop(self):
        self.backend.stop()


def deployment_set_group(spec_obj):
    """The UUID of the request's anti-affinity server group, or None."""
    group = spec_obj.instance_group if 'instance_group' in spec_obj \
        else None
    if group is None or 'uuid' not in group:
        return None
    if ('policy' in group and group.policy) != 'anti-affinity':
        return None
    return group.uuid


class DeploymentSetLock(wrappers.RequestWrapper):
    """Request wrapper: hold the set's lock around select-and-claim.

    Registered as ``deployment_set_lock`` in the namespace
    ``nova_sched_ext.request_wrappers``.  Also tells DeploymentSetFilter
    every instance UUID of the request, so it does not mistake them for
    members placed by someone else.
    """

    def __init__(self, manager, locks=None):
        super().__init__(manager)
        self.locks = locks or SetLocks(
            backend=coordination.for_manager(manager))

    def _filter_enabled(self):
        host_manager = getattr(self.manager, 'host_manager', None)
        enabled = getattr(host_manager, 'enabled_filters', None) or ()
        return any(type(f).__name__ == FILTER_NAME for f in enabled)

    def __call__(self, call_next, context, spec_obj, instance_uuids):
        members.remember_request_uuids(spec_obj, instance_uuids)
        group_uuid = deployment_set_group(spec_obj)
        if group_uuid is None or \
                scheduler_utils.request_is_rebuild(spec_obj) or \
                not self._filter_enabled():
            return call_next(context, spec_obj, instance_uuids)
        timeout = CONF.nova_sched_ext.deployment_set_lock_timeout
        started = time.monotonic()
        try:
            held = self.locks.acquire(group_uuid, timeout)
        except coordination.BackendUnavailable as exc:
            # The backend logged its outage once; this is one request.
            LOG.debug('Not scheduling instance(s) %(uuids)s of deployment '
                      'set %(group)s: %(why)s.',
                      {'uuids': _request_uuids(spec_obj, instance_uuids),
                       'group': group_uuid, 'why': exc})
            raise exception.NoValidHost(
                reason='The lock of the server group could not be taken: '
                       'the scheduler\'s coordination backend is '
                       'unreachable, and members of a deployment set are '
                       'never placed without it.')
        except LockUnavailable as exc:
            LOG.error('Not scheduling instance(s) %(uuids)s of deployment '
                      'set %(group)s: %(why)s.',
                      {'uuids': _request_uuids(spec_obj, instance_uuids),
                       'group': group_uuid, 'why': exc})
            raise exception.NoValidHost(
                reason='The lock of the server group could not be taken.')
        LOG.debug('Took the lock of deployment set %(group)s in %(ms).1f '
                  'ms.', {'group': group_uuid,
                          'ms': (time.monotonic() - started) * 1000})
        try:
            selections = call_next(context, spec_obj, instance_uuids)
        finally:
            self.locks.release(held)
        return self._without_alternates(spec_obj, selections)

    @staticmethod
    def _without_alternates(spec_obj, selections):
        """Drop alternates of set members unless the deployer wants them.

        The conductor builds on an alternate without the scheduler, hence
        without DeploymentSetFilter and without this lock.
        """
        if CONF.nova_sched_ext.deployment_set_alternates or \
                not planning.is_deployment_set(spec_obj):
            return selections
        if not selections or not isinstance(selections[0], list):
            # The legacy answer (a list of dicts) has no alternates.
            return selections
        return [per_instance[:1] for per_instance in selections]

    def stop(self):
        self.locks.stop()


def _request_uuids(spec_obj, instance_uuids):
    return ', '.join(instance_uuids or ()) or spec_obj.instance_uuid
