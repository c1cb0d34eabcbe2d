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

"""The ``[nova_sched_ext_defrag]`` group: how defragmentation migrates.

keystoneauth's session, auth and adapter options of the service user that
``nova-sched-ext-defrag apply`` live-migrates the planned moves with (a
section of its own, like the evictor's ``[nova_sched_ext_evictor]``,
because a deployer gives the defragmentation user the right to
live-migrate, not to delete), and how long the executor waits for one
migration.  The Watcher strategy's options are in watcher.conf
(:mod:`nova_sched_ext.defrag.watcher_conf`).
"""

from oslo_config import cfg

from nova_sched_ext.conf import types
from nova_sched_ext.conf import utils

GROUP_NAME = 'nova_sched_ext_defrag'
SERVICE_TYPE = 'compute'

defrag_group = cfg.OptGroup(
    GROUP_NAME,
    title='nova-sched-ext defragmentation',
    help='Keystone credentials and endpoint of the Compute API that '
         'nova-sched-ext-defrag apply live-migrates servers with, and how '
         'it waits for each migration. The user must be allowed to '
         'live-migrate any server to a given host, i.e. have the admin '
         'role under the default policy.')

executor_opts = [
    cfg.IntOpt(
        'migration_timeout',
        default=600, min=1,
        help='Seconds nova-sched-ext-defrag apply waits for one live '
             'migration to end with the server ACTIVE on its planned host. '
             'A migration still running after this time counts as failed: '
             'the run stops there, every earlier move stays in place.'),
    types.FiniteFloatOpt(
        'poll_interval',
        default=5.0, min=0.01,
        help='Seconds between two reads of a migrating server while '
             'nova-sched-ext-defrag apply waits for it.'),
]


def register_opts(conf):
    conf.register_group(defrag_group)
    conf.register_opts(executor_opts, group=defrag_group)
    utils.register_service_credentials(conf, defrag_group, SERVICE_TYPE)


def list_opts():
    return [(defrag_group,
             executor_opts + utils.service_credential_opts(SERVICE_TYPE))]
