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


"""The service user's session for the Compute API.

A feature that acts through the Compute API (the preemption's evictor,
the defragmentation's live migrations) does so as a service user whose
keystoneauth session, auth and adapter options are a section of nova.conf
of its own (like Nova's ``[placement]``): the API then does the work
exactly as if an administrator did it, with its checks, instance actions
and notifications.  Each feature registers its section; this module loads
a session from one and opens the openstacksdk connection over it.
"""

from keystoneauth1 import loading as ks_loading
import openstack
from oslo_config import cfg

CONF = cfg.CONF


def load_session(group):
    """A keystoneauth session with the credentials of section ``group``."""
    auth = ks_loading.load_auth_from_conf_options(CONF, group)
    return ks_loading.load_session_from_conf_options(CONF, group, auth=auth)


def connect(session, group):
    """An openstacksdk connection to the Compute API over ``session``.

    The endpoint is chosen by ``group``'s adapter options
    (``valid_interfaces``, ``region_name``, ``endpoint_override``,
    ``service_name``).
    """
    opts = CONF[group]
    kwargs = {
        'session': session,
        'compute_api_version': '2',
        'interface': opts.valid_interfaces,
    }
    if opts.region_name:
        kwargs['region_name'] = opts.region_name
    if opts.endpoint_override:
        kwargs['compute_endpoint_override'] = opts.endpoint_override
    if opts.service_name:
        kwargs['compute_service_name'] = opts.service_name
    return openstack.connection.Connection(**kwargs)
