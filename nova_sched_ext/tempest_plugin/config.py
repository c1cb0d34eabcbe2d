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


"""tempest.conf options of the nova-sched-ext tests: group [nova_sched_ext].

The scheduler filters a cloud runs are read from tempest's own
``[compute-feature-enabled] scheduler_enabled_filters``; the options here
say what else the cloud has.
"""

from oslo_config import cfg

nova_sched_ext_group = cfg.OptGroup(
    name='nova_sched_ext',
    title='nova-sched-ext scheduler plugins',
    help='What the cloud under test has of nova-sched-ext, beyond the '
         'filters listed in [compute-feature-enabled] '
         'scheduler_enabled_filters.')

NovaSchedExtGroup = [
    cfg.BoolOpt(
        'slot_weigher',
        default=False,
        help='NUMASlotWeigher runs in the scheduler (it is in [filter_'
             'scheduler] weight_classes) with a positive multiplier that '
             "dominates Nova's spreading weighers."),
    cfg.StrOpt(
        'slot_reference_flavor',
        default='',
        help="A flavor name listed in nova.conf's [nova_sched_ext] "
             'numa_slot_reference_flavors that does not exist yet: the slot '
             'weigher scenario creates it, sized to its hosts, and deletes '
             'it afterwards. Empty skips that scenario.'),
    cfg.IntOpt(
        'slot_reference_refresh_interval',
        default=300, min=0,
        help="nova.conf's [nova_sched_ext] "
             'numa_slot_reference_refresh_interval: how long the slot '
             'weigher scenario waits for the scheduler to load the flavor '
             'it created. The scenario is skipped above 60 seconds and at '
             '0 (loaded once).'),
    cfg.BoolOpt(
        'deployment_sets',
        default=False,
        help='Deployment sets are enabled: DeploymentSetFilter runs, '
             'preferably under nova-sched-ext-scheduler, which serialises '
             'the members of a set.'),
    cfg.StrOpt(
        'deployment_set_domain_key',
        default='failure_domain',
        help="nova.conf's [nova_sched_ext] deployment_set_domain_key: the "
             'aggregate metadata key naming a failure domain.'),
    cfg.BoolOpt(
        'preemption',
        default=False,
        help='The preemptible evictor (the package scheduler) is enabled.'),
    cfg.BoolOpt(
        'capacity_api',
        default=False,
        help='The capacity API runs and is in the catalog as service type '
             'numa-capacity, readable by the admin credentials: its '
             'scenario boots a server and checks that the capacity of its '
             'flavor drops by exactly one.'),
    cfg.BoolOpt(
        'defrag',
        default=False,
        help='Run the defragmentation scenario: it runs '
             'nova-sched-ext-defrag plan and apply from cli_dir against the '
             'cloud, which live-migrates servers between two hosts of one '
             'NUMA layout. The cloud must live-migrate (the fake NUMA virt '
             'driver does) and defrag_nova_conf must give the command the '
             "cloud's databases and [nova_sched_ext_defrag] credentials."),
    cfg.StrOpt(
        'defrag_nova_conf',
        default='/etc/nova/nova.conf',
        help='The nova.conf that nova-sched-ext-defrag reads in the '
             'defragmentation scenario (--config-file): the cell and API '
             'databases, [placement] and the [nova_sched_ext_defrag] '
             'credentials apply live-migrates with. It must be readable by '
             'the user running tempest.'),
    cfg.StrOpt(
        'cli_dir',
        default='/usr/local/bin',
        help='Directory of the openstack command (python-openstackclient, '
             'with nova-sched-ext installed next to it) that the capacity '
             'scenario runs "openstack capacity list" with, and of '
             'nova-sched-ext-defrag, which the defragmentation scenario '
             'runs. A scenario is skipped when its command is not there.'),
]
