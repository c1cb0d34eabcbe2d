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

How: :class:`SetLocks` combines a lock inside the process (the scheduler's
worker threads) with a `tooz <https://docs.openstack.org/tooz/>`_ lock
across processes, on the backend of ``[nova_sched_ext]
deployment_set_lock_url`` (redis, memcached, etcd3, zookeeper...; shared by
all schedulers) or, if that is unset, file locks in ``[nova_sched_ext]
deployment_set_lock_dir`` (only the scheduler processes of one host).  A
request that cannot get the lock within ``deployment_set_lock_timeout``
seconds, or whose backend is down, fails with NoValidHost: placing it
without the lock could break the set.

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

import os
import threading
import time
import uuid

from nova import exception
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging
from oslo_utils import encodeutils
from tooz import coordination

from nova_sched_ext import conf
from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import planning
from nova_sched_ext import wrappers

LOG = logging.getLogger(__name__)
CONF = conf.CONF

FILTER_NAME = 'DeploymentSetFilter'
LOCK_PREFIX = 'nova-sched-ext-deployment-set-'


class LockUnavailable(Exception):
    """The lock of a set could not be taken; the message says why."""


def backend_url():
    """The tooz URL the locks use: the option, else the file backend."""
    opts = CONF.nova_sched_ext
    if opts.deployment_set_lock_url:
        return opts.deployment_set_lock_url
    return 'file://%s' % os.path.abspath(opts.deployment_set_lock_dir)


class SetLocks(object):
    """Locks by deployment set, within and across processes.

    Thread-safe.  The tooz coordinator is started on first use in each
    process: ``nova-scheduler`` forks its workers after the manager is
    built, and a coordinator must not cross a fork.
    """

    def __init__(self, url=None):
        self._url = url
        self._guard = threading.Lock()
        self._pid = None
        self._coordinator = None
        # name -> [threading.Lock, users]
        self._local = {}

    @property
    def url(self):
        return self._url or backend_url()

    def _reset_after_fork(self):
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._coordinator = None
            self._local = {}

    def _get_coordinator(self):
        # Called with self._guard held.
        if self._coordinator is None:
            member_id = '%s-%d-%s' % (CONF.host, os.getpid(),
                                      uuid.uuid4().hex[:8])
            coordinator = coordination.get_coordinator(
                self.url, encodeutils.safe_encode(member_id))
            coordinator.start(start_heart=True)
            self._coordinator = coordinator
        return self._coordinator

    def _local_lock(self, name):
        with self._guard:
            self._reset_after_fork()
            entry = self._local.setdefault(name, [threading.Lock(), 0])
            entry[1] += 1
            return entry[0]

    def _drop_local(self, name):
        with self._guard:
            entry = self._local.get(name)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._local[name]

    def acquire(self, group_uuid, timeout):
        """Take the lock of a set; returns what :meth:`release` needs.

        :raises LockUnavailable: on timeout or if the backend fails.
        """
        name = LOCK_PREFIX + group_uuid
        deadline = time.monotonic() + timeout
        local = self._local_lock(name)
        if not local.acquire(timeout=timeout):
            self._drop_local(name)
            raise LockUnavailable(
                'another request of this scheduler process held the lock '
                'of deployment set %s for more than %s s'
                % (group_uuid, timeout))
        try:
            with self._guard:
                coordinator = self._get_coordinator()
            lock = coordinator.get_lock(encodeutils.safe_encode(name))
            left = max(0.0, deadline - time.monotonic())
            if not lock.acquire(blocking=left or False):
                raise LockUnavailable(
                    'another scheduler held the lock of deployment set %s '
                    'on %s for more than %s s'
                    % (group_uuid, _safe_url(self.url), timeout))
        except LockUnavailable:
            local.release()
            self._drop_local(name)
            raise
        except Exception as exc:
            local.release()
            self._drop_local(name)
            LOG.exception('The deployment set lock backend %s failed.',
                          _safe_url(self.url))
            raise LockUnavailable('the lock backend %s failed: %s'
                                  % (_safe_url(self.url), exc))
        return name, local, lock

    def release(self, held):
        name, local, lock = held
        try:
            if not lock.release():
                LOG.warning('The lock %s was no longer held when it was '
                            'released: its backend may have expired it.',
                            name)
        except Exception:
            LOG.exception('Could not release the lock %s.', name)
        finally:
            local.release()
            self._drop_local(name)

    def stop(self):
        with self._guard:
            if self._coordinator is not None and self._pid == os.getpid():
                try:
                    self._coordinator.stop()
                except Exception:
                    LOG.exception('Could not stop the tooz coordinator.')
            self._coordinator = None


def _safe_url(url):
    """The backend URL without credentials, for log lines."""
    scheme, sep, rest = url.partition('://')
    if '@' in rest:
        rest = rest.split('@', 1)[1]
    return scheme + sep + rest


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
        self.locks = locks or SetLocks()

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
        except LockUnavailable as exc:
            LOG.error('Not scheduling instance(s) %(uuids)s of deployment '
                      'set %(group)s: %(why)s.',
                      {'uuids': ', '.join(instance_uuids or ()) or
                       spec_obj.instance_uuid, 'group': group_uuid,
                       'why': exc})
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
