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

"""The versioned notification of an eviction.

Event type ``nova_sched_ext.preemption.evict``, priority INFO, publisher
``nova-sched-ext-scheduler:<host>``, sent through Nova's versioned
notifier: it goes where ``[notifications]`` and
``[oslo_messaging_notifications]`` send Nova's versioned notifications
(nowhere when ``notification_format = unversioned``).  The payload is an
oslo.versionedobjects primitive of :class:`EvictionPayload` (namespace
``nova_sched_ext``), one per new instance that evicted servers::

    {"nova_object.name": "EvictionPayload",
     "nova_object.namespace": "nova_sched_ext",
     "nova_object.version": "1.0",
     "nova_object.data": {"request_id": "req-...",
                          "instance_uuid": "<the new instance>",
                          "host": "compute-1", "nodename": "compute-1",
                          "action": "delete",
                          "victims": ["<uuid>", ...],
                          "victim_projects": ["<project id>", ...]}}
"""

from nova import conf as nova_conf
from nova import rpc
from oslo_log import log as logging
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fields

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

EVENT_TYPE = 'nova_sched_ext.preemption.evict'
PUBLISHER = 'nova-sched-ext-scheduler'


# Not in Nova's object registry: the payload is ours and only serialised.
@ovo_base.VersionedObjectRegistry.register_if(False)
class EvictionPayload(ovo_base.VersionedObject):
    """Who evicted what, where."""

    OBJ_PROJECT_NAMESPACE = 'nova_sched_ext'
    # The keys Nova's versioned notifications use.
    OBJ_SERIAL_NAMESPACE = 'nova_object'
    # Version 1.0: initial version
    VERSION = '1.0'

    fields = {
        'request_id': fields.StringField(nullable=True),
        'instance_uuid': fields.UUIDField(),
        'host': fields.StringField(),
        'nodename': fields.StringField(nullable=True),
        'action': fields.StringField(),
        'victims': fields.ListOfStringsField(),
        'victim_projects': fields.ListOfStringsField(),
    }


def notify_eviction(context, payload):
    """Send the notification of one eviction; never raises.

    A notification that cannot be sent must not undo an eviction that
    happened; the failure is logged.
    """
    try:
        notifier = rpc.get_versioned_notifier(
            '%s:%s' % (PUBLISHER, CONF.host))
        notifier.info(context, EVENT_TYPE, payload.obj_to_primitive())
    except Exception:
        LOG.exception('Could not send the %s notification of request %s.',
                      EVENT_TYPE, payload.request_id)
