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

"""The Compute API side of an eviction, through openstacksdk.

The driver evicts as a service user, with the credentials of the
``[nova_sched_ext_evictor]`` section (keystoneauth session, auth and
adapter options, like Nova's ``[placement]``): the API does the eviction
exactly as if an administrator did it, with its checks, its instance
actions and its notifications, and the victim's owner sees it in the
server's action log.
"""

import threading
import time

from openstack import exceptions as sdk_exc
from oslo_log import log as logging

from nova_sched_ext.cloud import preemptible as extra_specs
from nova_sched_ext.cloud import session as cloud_session
from nova_sched_ext import conf
from nova_sched_ext.conf import evictor as evictor_conf
from nova_sched_ext.conf import scheduler as scheduler_conf
from nova_sched_ext import exception as sched_ext_exception

CONF = conf.CONF
LOG = logging.getLogger(__name__)

#: the first microversion that shows the extra specs of a server's flavor
FLAVOR_EXTRA_SPECS_VERSION = '2.47'


#: statuses of a server whose room something (an eviction, Nova) took
TAKEN_STATUSES = ('DELETED', 'SOFT_DELETED', 'SHELVED', 'SHELVED_OFFLOADED',
                  'ERROR')


def untouched(server):
    """Whether the API shows ``server`` as it was: no task, room held."""
    return server is not None and not server.task_state and \
        server.status not in TAKEN_STATUSES


class EvictionError(sched_ext_exception.NovaSchedExtError):
    """The Compute API refused or failed an eviction step."""


class NotPreemptible(EvictionError):
    """A victim is not (or no longer) preemptible: it must not be evicted."""


def load_session(group=evictor_conf.GROUP_NAME):
    """A keystoneauth session with the evictor's service credentials."""
    return cloud_session.load_session(group)


def connect(session, group=evictor_conf.GROUP_NAME):
    """An openstacksdk connection to the Compute API over ``session``."""
    return cloud_session.connect(session, group)


class Evictor(object):
    """Evicts servers; one per driver, shared by concurrent requests.

    The connection is built on first use (the Compute API need not be up
    when the scheduler starts) and shared: openstacksdk connections and
    keystoneauth sessions are safe to use from several threads.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._connection = None

    @property
    def compute(self):
        with self._lock:
            if self._connection is None:
                self._connection = connect(load_session())
            return self._connection.compute

    def get(self, uuid):
        """The server as the API shows it now, or None if it is gone."""
        try:
            return self.compute.get_server(uuid)
        except sdk_exc.NotFoundException:
            return None
        except sdk_exc.SDKException as exc:
            raise EvictionError('cannot read server %s: %s' % (uuid, exc))

    def check_preemptible(self, uuid):
        """Read the server again; raise unless it is still preemptible.

        The flavor's extra specs are those embedded in the server (what it
        was booted or resized with), shown from microversion 2.47 on.

        :returns: the server, or None if it is gone already
        :raises NotPreemptible: it is not preemptible (or the API does not
            say)
        """
        server = self.get(uuid)
        if server is None:
            return None
        flavor = server.flavor or {}
        specs = flavor.get('extra_specs') if isinstance(flavor, dict) \
            else getattr(flavor, 'extra_specs', None)
        if specs is None:
            raise NotPreemptible(
                'the Compute API shows no flavor extra specs for server %s '
                '(microversion %s or later is needed)'
                % (uuid, FLAVOR_EXTRA_SPECS_VERSION))
        if not extra_specs.is_preemptible(dict(specs)):
            raise NotPreemptible('server %s is not preemptible' % uuid)
        return server

    def evict(self, uuid, action):
        """Re-check that ``uuid`` is preemptible, then delete or shelve it.

        :returns: False if the server was gone already, else True
        :raises NotPreemptible, EvictionError:
        """
        server = self.check_preemptible(uuid)
        if server is None:
            return False
        try:
            if action == scheduler_conf.ACTION_SHELVE_OFFLOAD:
                if server.status == 'SHELVED':
                    self.compute.shelve_offload_server(uuid)
                elif server.status != 'SHELVED_OFFLOADED':
                    self.compute.shelve_server(uuid)
            else:
                self.compute.delete_server(uuid)
        except sdk_exc.NotFoundException:
            return False
        except sdk_exc.SDKException as exc:
            raise EvictionError('%s of server %s failed: %s'
                                % (action, uuid, exc))
        return True

    def is_gone(self, uuid, action):
        """Whether the eviction of ``uuid`` has freed its host.

        Deleted: the API no longer shows it.  Shelved: it is offloaded (a
        server that stops at SHELVED, when ``[DEFAULT]
        shelved_offload_time`` is not 0, is offloaded now).

        :raises EvictionError: the server went to ERROR
        """
        server = self.get(uuid)
        if server is None:
            return True
        if server.status == 'ERROR':
            raise EvictionError('server %s went to ERROR while being '
                                'evicted' % uuid)
        if action != scheduler_conf.ACTION_SHELVE_OFFLOAD:
            return False
        if server.status == 'SHELVED_OFFLOADED':
            return True
        if server.status == 'SHELVED' and not server.task_state:
            try:
                self.compute.shelve_offload_server(uuid)
            except sdk_exc.SDKException as exc:
                raise EvictionError('shelve_offload of server %s failed: %s'
                                    % (uuid, exc))
        return False

    def wait_gone(self, uuids, action, timeout, interval):
        """Wait until every server of ``uuids`` is gone.

        :returns: the uuids still there when ``timeout`` seconds passed
        :raises EvictionError: one went to ERROR
        """
        left = list(uuids)
        deadline = time.monotonic() + timeout
        while True:
            left = [uuid for uuid in left if not self.is_gone(uuid, action)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(interval)
