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

"""The ``[nova_sched_ext_evictor]`` group: the preemption driver's user.

keystoneauth's session, auth and adapter options of the service user the
preemption driver evicts with, like Nova's ``[placement]`` section.  The
driver's other options are ``[nova_sched_ext]``'s
(:mod:`nova_sched_ext.conf.scheduler`).
"""

from oslo_config import cfg

from nova_sched_ext.conf import utils

GROUP_NAME = 'nova_sched_ext_evictor'
#: the service the evictor talks to
SERVICE_TYPE = 'compute'

evictor_group = cfg.OptGroup(
    GROUP_NAME,
    title='nova-sched-ext evictor credentials',
    help='Keystone credentials and endpoint of the Compute API that the '
         'preemption driver uses to evict preemptible servers. The user '
         'must be allowed to delete (or shelve and offload) any server, '
         'i.e. have the admin role under the default policy.')


def register_opts(conf):
    conf.register_group(evictor_group)
    utils.register_service_credentials(conf, evictor_group, SERVICE_TYPE)


def list_opts():
    return [(evictor_group, utils.service_credential_opts(SERVICE_TYPE))]
