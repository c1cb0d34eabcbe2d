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

"""Hosts with victims pinned where a test wants them, and a plan checker.

Instances are fitted with Nova's own ``numa_fit_instance_to_host`` (on the
one cell the test names) and their usage added with
``numa_usage_from_instance_numa``, so victims carry real pinning.
"""

import collections
import datetime

from nova import objects
from nova.tests.unit.scheduler import fakes
from nova.virt import hardware

from nova_sched_ext.preemption import victims as victims_mod
from nova_sched_ext_tools.bench import victims as bench

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def at(hours):
    """A creation time ``hours`` after T0."""
    return T0 + datetime.timedelta(hours=hours)


def vcpu(vcpus, memory_mb=1024):
    return bench.Shape(vcpus, memory_mb, disk_gb=0)


def pinned(pcpus, memory_mb=1024, nodes=1):
    return bench.Shape(pcpus, memory_mb, dedicated=True, numa_nodes=nodes,
                       disk_gb=0)


class Host:
    """A 2-cell host filled instance by instance, cell by cell.

    Each cell has ``shared`` floating CPUs and ``dedicated`` pinnable ones;
    the host-level capacity is what placement would report.
    """

    def __init__(self, name, shared=2, dedicated=4, memory_mb=8192,
                 cells=2):
        self.name = name
        self.topology = bench.host_topology(cells, shared, dedicated,
                                            memory_mb)
        self.capacity = {'VCPU': int(cells * shared *
                                     bench.CPU_ALLOCATION_RATIO),
                         'PCPU': cells * dedicated,
                         'MEMORY_MB': cells * memory_mb}
        self.used = collections.Counter()
        self.victims = []

    def add(self, shape, cell=None, victim=None, created_at=None):
        """Place an instance (on ``cell`` when it has a NUMA topology).

        :param victim: a UUID to make it a preemptible victim
        """
        fitted = None
        requested = shape.topology()
        if requested is not None:
            cells = self.topology.cells
            if cell is not None:
                cells = [c for c in cells if c.id == cell]
            fitted = hardware.numa_fit_instance_to_host(
                objects.NUMATopology(cells=cells), requested, None,
                limits=objects.NUMATopologyLimits(
                    cpu_allocation_ratio=bench.CPU_ALLOCATION_RATIO,
                    ram_allocation_ratio=bench.RAM_ALLOCATION_RATIO))
            if fitted is None:
                raise AssertionError('%s does not fit on %s cell %s'
                                     % (shape, self.name, cell))
            self.topology = hardware.numa_usage_from_instance_numa(
                self.topology, fitted)
        resources = {rc: n for rc, n in shape.resources().items() if n}
        self.used.update(resources)
        for rc in resources:
            if self.used[rc] > self.capacity[rc]:
                raise AssertionError('%s: %s over capacity' % (self.name, rc))
        if victim is None:
            return None
        result = victims_mod.Victim(
            uuid=victim, project_id='spot', created_at=created_at or T0,
            resources=resources, numa_topology=fitted)
        self.victims.append(result)
        return result

    def candidate(self, with_numa=True, max_unit=None):
        state = fakes.FakeHostState(self.name, self.name, {
            'numa_topology': self.topology, 'pci_stats': None,
            'cpu_allocation_ratio': bench.CPU_ALLOCATION_RATIO,
            'ram_allocation_ratio': bench.RAM_ALLOCATION_RATIO})
        return victims_mod.CandidateHost(
            host=self.name, nodename=self.name, rp_uuid='rp-' + self.name,
            free={rc: self.capacity[rc] - self.used[rc]
                  for rc in self.capacity},
            host_state=state if with_numa else None,
            victims=tuple(self.victims), max_unit=max_unit)


def request(shape, count=1):
    return bench.request_for(shape, count)


def check_plan(hosts, request, plan):
    """Raise AssertionError unless Nova itself can carry out ``plan``.

    On each host of the plan: the planned victims are all on it, the host
    level holds every instance placed there, and Nova's
    ``numa_fit_instance_to_host`` places them one after another once the
    victims' usage is removed.
    """
    if len(plan.placements) != request.count:
        raise AssertionError('%d placements for %d instances'
                             % (len(plan.placements), request.count))
    by_host = collections.defaultdict(list)
    for placement in plan.placements:
        if not any(placement.host is h for h in hosts):
            raise AssertionError('placement on a host not given')
        by_host[id(placement.host)].append(placement)
    for placements in by_host.values():
        host = placements[0].host
        gone = [v for p in placements for v in p.victims]
        if len(set(gone)) != len(gone):
            raise AssertionError('a victim is evicted twice')
        if not set(gone) <= set(host.victims):
            raise AssertionError('a victim of another host')
        freed = victims_mod.freed_resources(gone)
        for rc, amount in request.resources.items():
            room = host.free.get(rc, 0) + freed.get(rc, 0)
            if amount * len(placements) > room:
                raise AssertionError('%s: %s does not hold %d instances'
                                     % (host.host, rc, len(placements)))
        if request.numa_topology is None or host.host_state is None:
            continue
        topology = victims_mod.topology_without(
            host.host_state.numa_topology, gone)
        for _ in placements:
            fitted = victims_mod.nova_fit(topology, host.host_state,
                                          request)
            if fitted is None:
                raise AssertionError('Nova cannot place an instance on %s'
                                     % host.host)
            topology = hardware.numa_usage_from_instance_numa(topology,
                                                              fitted)
