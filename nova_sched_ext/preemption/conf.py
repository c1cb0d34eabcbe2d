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

"""Options of the preemption driver.

``[nova_sched_ext]`` gets the preemption options;
``[nova_sched_ext_evictor]`` holds the keystoneauth session, auth and
adapter options of the service user the driver evicts with (like Nova's
``[placement]`` section).  Importing this module registers them on
``nova.conf.CONF``; ``list_opts`` feeds ``oslo-config-generator``.
"""

from keystoneauth1 import loading as ks_loading
from nova.conf import utils as confutils
from oslo_config import cfg

from nova_sched_ext import conf as ext_conf
from nova_sched_ext import opt_types

EVICTOR_GROUP_NAME = 'nova_sched_ext_evictor'
#: the service the evictor talks to
EVICTOR_SERVICE_TYPE = 'compute'

ACTION_DELETE = 'delete'
ACTION_SHELVE_OFFLOAD = 'shelve_offload'

evictor_group = cfg.OptGroup(
    EVICTOR_GROUP_NAME,
    title='nova-sched-ext evictor credentials',
    help='Keystone credentials and endpoint of the Compute API that the '
         'preemption driver uses to evict preemptible servers. The user '
         'must be allowed to delete (or shelve and offload) any server, '
         'i.e. have the admin role under the default policy.')

preemption_opts = [
    cfg.StrOpt(
        'preemption_victim_strategy',
        default='minimal',
        help='How the preemption driver chooses the preemptible instances '
             'to evict, by name in the entry-point namespace '
             'nova_sched_ext.victim_strategies: "minimal" minimises the '
             'number of victims, then the resources wasted, and prefers '
             'the youngest; "random" picks random victims that suffice '
             '(for comparison).'),
    cfg.StrOpt(
        'preemption_action',
        default=ACTION_DELETE,
        choices=[
            (ACTION_DELETE, 'Delete the victim.'),
            (ACTION_SHELVE_OFFLOAD,
             'Shelve the victim and offload it from its host; its owner '
             'can unshelve it later, when there is room. Slower: the '
             'driver waits for the offload.'),
        ],
        help='What the preemption driver does to a victim. Only actions '
             'that free the victim\'s placement allocations and its host '
             'resources are offered: stopping or suspending a server keeps '
             'both.'),
    cfg.IntOpt(
        'preemption_wait_timeout',
        default=120, min=1,
        help='Seconds the preemption driver waits for its victims to be '
             'gone (deleted, or offloaded) before it gives up: the request '
             'then fails with NoValidHost and the room is released. It '
             'must stay well under [DEFAULT] long_rpc_timeout, the time the '
             'conductor waits for the scheduler.'),
    opt_types.FiniteFloatOpt(
        'preemption_poll_interval',
        default=1.0, min=0.01,
        help='Seconds between two checks of the victims while the '
             'preemption driver waits for them to go.'),
    cfg.IntOpt(
        'preemption_eviction_ttl',
        default=30, min=2,
        help='Seconds an eviction in progress stays claimed by its scheduler '
             'without a heartbeat. Every eviction is recorded on the '
             'coordination backend ([nova_sched_ext] '
             'deployment_set_lock_url) before the victims\' room is '
             'reserved; its scheduler renews the record every third of '
             'this time. When a scheduler dies, its records run out after '
             'this time and the reconcile of another scheduler rolls them '
             'back: the reservations whose request never became an '
             'instance are released, victims already evicted stay evicted '
             'and the request fails.'),
    cfg.IntOpt(
        'preemption_reconcile_interval',
        default=60, min=1,
        help='Seconds between two reconciles of the evictions whose '
             'scheduler died (their record ran out, see '
             'preemption_eviction_ttl). Every preemption scheduler process '
             'reconciles when it starts and then at this interval; a '
             'record is rolled back by one of them only. The longest a '
             'dead scheduler\'s reservation outlives it is about '
             'preemption_eviction_ttl plus this interval.'),
    cfg.IntOpt(
        'preemptible_max_per_az',
        default=-1, min=-1,
        help='Most preemptible instances one availability zone may hold; '
             'a preemptible request that would exceed it fails with '
             'NoValidHost. -1 means unlimited. Instances of every cell '
             'count, whatever their state, until they are deleted (or '
             'shelved and offloaded). Enforced by the preemption driver '
             'only; exactly, with any number of schedulers, when they all '
             'share one coordination backend ([nova_sched_ext] '
             'deployment_set_lock_url).'),
    cfg.IntOpt(
        'preemptible_max_per_host',
        default=-1, min=-1,
        help='Most preemptible instances one compute host may hold; -1 '
             'means unlimited. Counted like preemptible_max_per_az.'),
    cfg.IntOpt(
        'preemptible_caps_lock_timeout',
        default=60, min=1,
        help='Seconds a preemptible request under a cap waits for the lock '
             'of its availability zone(s), which every scheduler takes on '
             'the coordination backend ([nova_sched_ext] '
             'deployment_set_lock_url) around counting the preemptible '
             'instances and claiming the chosen hosts, so that several '
             'schedulers never overshoot a cap. When the time passes, or '
             'the backend cannot be reached, the request fails with '
             'NoValidHost.'),
]

ALL_OPTS = preemption_opts


def register_opts(conf):
    conf.register_group(ext_conf.nova_sched_ext_group)
    conf.register_opts(ALL_OPTS, group=ext_conf.nova_sched_ext_group)
    conf.register_group(evictor_group)
    confutils.register_ksa_opts(conf, evictor_group, EVICTOR_SERVICE_TYPE)


def service_credential_opts(service_type):
    """The keystoneauth options a service-credentials section lists.

    Session, auth (password plugins shown) and adapter options, as Nova
    lists its ``[placement]`` section's; the package's sections of service
    users (the evictor's, the defragmentation executor's) list these.
    """
    return (ks_loading.get_session_conf_options() +
            ks_loading.get_auth_common_conf_options() +
            ks_loading.get_auth_plugin_conf_options('password') +
            ks_loading.get_auth_plugin_conf_options('v3password') +
            confutils.get_ksa_adapter_opts(service_type))


def list_opts():
    return [
        (ext_conf.nova_sched_ext_group, ALL_OPTS),
        (evictor_group, service_credential_opts(EVICTOR_SERVICE_TYPE)),
    ]


CONF = cfg.CONF
register_opts(CONF)
