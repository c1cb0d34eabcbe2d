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

"""What oslo-config-generator lists, namespace by namespace.

setup.cfg's ``oslo.config.opts`` entry points name these functions.  The
namespaces are older than this package's one-module-per-group layout and
are named in operators' generator files, so each keeps the options it
listed: ``nova_sched_ext.preemption`` the preemption driver's part of
``[nova_sched_ext]`` and the evictor's section, ``nova_sched_ext.capacity``
and ``nova_sched_ext.capacity_api`` the count's and the services' parts of
``[nova_sched_ext_capacity]``.  The Watcher strategy's options, which live
in watcher.conf, have their own namespace, ``nova_sched_ext.watcher``
(:func:`nova_sched_ext.defrag.watcher_conf.list_opts`).
"""

from nova_sched_ext.conf import capacity
from nova_sched_ext.conf import defrag
from nova_sched_ext.conf import evictor
from nova_sched_ext.conf import fake_virt
from nova_sched_ext.conf import scheduler


def list_scheduler_opts():
    """Namespace ``nova_sched_ext``: ``[nova_sched_ext]`` but preemption."""
    return [(scheduler.nova_sched_ext_group, scheduler.SCHEDULER_OPTS)]


def list_preemption_opts():
    """Namespace ``nova_sched_ext.preemption``: the preemption driver's."""
    return [(scheduler.nova_sched_ext_group, scheduler.preemption_opts),
            ] + evictor.list_opts()


def list_capacity_opts():
    """Namespace ``nova_sched_ext.capacity``: the capacity count's."""
    return [(capacity.capacity_group, capacity.count_opts)]


def list_capacity_api_opts():
    """Namespace ``nova_sched_ext.capacity_api``: its API's and exporter's."""
    return [(capacity.capacity_group,
             capacity.api_opts + capacity.exporter_opts +
             capacity.kept_state_opts)]


def list_defrag_opts():
    """Namespace ``nova_sched_ext.defrag``: the executor's section."""
    return defrag.list_opts()


def list_fake_virt_opts():
    """Namespace ``nova_sched_ext.fake_virt``: the fake NUMA virt driver's."""
    return fake_virt.list_opts()


def list_opts():
    """Every group this package registers on ``nova.conf``, whole."""
    return (scheduler.list_opts() + evictor.list_opts() +
            capacity.list_opts() + defrag.list_opts() +
            fake_virt.list_opts())
