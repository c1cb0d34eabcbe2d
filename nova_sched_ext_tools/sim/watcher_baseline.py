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

"""Watcher's VM workload consolidation on the simulator's cloud.

python-watcher (an optional extra: ``pip install python-watcher``) is run
as its own code, in a process of its own (:mod:`.watcher_run`):
``VMWorkloadConsolidation.execute()`` on a Watcher ``ModelRoot`` of the
same cloud (one ``ComputeNode`` per host, its vCPUs
and RAM, ratio 1.0 as the replay; one ``Instance`` per instance, mapped to
its host), with a datasource that reports what the simulator knows: every
instance uses all of its vCPUs and RAM (the trace has no utilization), a
host the sum of its instances.  Watcher's actions (``migrate`` with a
``destination_node``) are then applied in order on the planner's state,
each checked as a live migration would be (:mod:`nova_sched_ext.defrag`'s
rules and Nova's NUMA fit on the destination: Watcher knows nothing of
NUMA cells, groups or deployment sets, so some of its moves fail there and
are counted as refused), and the large-flavor slots counted after.
"""

import json
import subprocess
import sys

from nova_sched_ext.defrag import state as planning_state
from nova_sched_ext.defrag import validity
from nova_sched_ext import exception as sched_ext_exception


class WatcherUnavailable(sched_ext_exception.NovaSchedExtError):
    """Watcher's strategy cannot run; the message says why."""


def cloud_description(cloud):
    """The cloud as :mod:`.watcher_run` reads it (plain JSON)."""
    return {
        'hosts': [{'name': name, 'uuid': planning_state.stable_node_uuid(name),
                   'vcpus': host.inventories['VCPU'].total,
                   'memory_mb': host.inventories['MEMORY_MB'].total,
                   'vcpu_ratio': host.cpu_allocation_ratio,
                   'memory_ratio': host.ram_allocation_ratio}
                  for name, host in sorted(cloud.hosts.items())],
        'instances': [{'uuid': uuid, 'host': instance.host,
                       'vcpus': instance.vcpus,
                       'memory_mb': instance.memory_mb}
                      for uuid, instance in sorted(cloud.instances.items())],
    }


def run_strategy(cloud, python=sys.executable):
    """Watcher's ``migrate`` actions: ``[(instance, source, destination)]``.

    Watcher runs in a process of its own (:mod:`.watcher_run`): it and Nova
    both register options named ``host`` on oslo.config's global
    ``CONF``, so one process cannot import both (``DuplicateOptError``).

    :raises WatcherUnavailable: python-watcher is not installed, or its
        strategy failed
    """
    done = subprocess.run(
        [python, '-m', 'nova_sched_ext_tools.sim.watcher_run'],
        input=json.dumps(cloud_description(cloud)), capture_output=True,
        text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise WatcherUnavailable(lines[-1] if lines else
                                 'exit status %d' % done.returncode)
    return [tuple(move) for move in json.loads(done.stdout)['moves']]


def apply_moves(cloud, flavors, moves, limit=None):
    """Apply Watcher's moves in order, as live migrations would be checked.

    :returns: ``(slots after, moves applied, moves refused)``
    """
    state = planning_state.PlanningState(cloud, flavors)
    groups = validity.GroupIndex(cloud)
    applied = refused = 0
    for uuid, source, destination in moves[:limit]:
        instance = cloud.instances[uuid]
        if state.where[uuid] != source:
            refused += 1
            continue
        why = validity.why_not_target(state, instance, destination, groups)
        fits, fitted = state.nova_fit(uuid, destination)
        if why or not fits:
            refused += 1
            continue
        state.apply(uuid, destination, fitted)
        applied += 1
    return state.total_slots(), applied, refused
