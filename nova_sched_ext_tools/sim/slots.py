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

"""Large-flavor slots left: how many more big VMs the cloud could take.

For each reference flavor (by default the largest flavors of the trace) and
each host, the number of instances of that flavor that still fit, counted
on a copy of the host by greedy placement with Nova's own
``numa_fit_instance_to_host`` and ``numa_usage_from_instance_numa`` (and the
host-level VCPU / MEMORY_MB check placement would make), one instance after
the other until the next one does not fit.  Flavors are counted
independently of each other: "12 slots of 64c128g and 30 of 32c128g" means
either, not both.

A host's count is cached with the host's
:func:`~nova_sched_ext.fit.hoststamp.version` and reused while
:func:`~nova_sched_ext.fit.hoststamp.unchanged` says the host is (the
replay's consumptions and departures move ``updated`` and the usage), so
sampling during a replay only recounts the hosts that changed.
"""

from nova import objects
from nova.virt import hardware

from nova_sched_ext.fit import hoststamp

# A safety stop: no host takes more than this many instances of one flavor.
MAX_PER_HOST = 1024


class SlotCounter(object):
    """Counts slots of reference flavors over ``HostState`` objects."""

    def __init__(self, factory, flavors):
        """Count slots of ``flavors`` (trace ``Flavor`` shapes).

        ``factory`` is the replay's ``cloud.RequestFactory``: the slots are
        counted with the very instance topologies the requests get.
        """
        self.flavors = tuple(flavors)
        self._templates = [factory.flavor(f)[1] for f in self.flavors]
        # host name -> (hoststamp.Version the counts were made from, counts)
        self._cache = {}

    def host_slots(self, host_state):
        """A tuple: slots of each reference flavor on this host."""
        if not self.flavors:
            return ()
        cached = self._cache.get(host_state.host)
        if cached is not None and hoststamp.unchanged(cached[0], host_state):
            return cached[1]
        # Read before counting, as the fit caches do.
        version = hoststamp.version(host_state)
        counts = tuple(self._greedy(host_state, flavor, template)
                       for flavor, template in zip(self.flavors,
                                                   self._templates))
        self._cache[host_state.host] = (version, counts)
        return counts

    def count(self, host_states):
        """``{flavor name: slots over all hosts}``, largest flavor first."""
        totals = [0] * len(self.flavors)
        for state in host_states:
            for i, n in enumerate(self.host_slots(state)):
                totals[i] += n
        return {f.name: n for f, n in zip(self.flavors, totals)}

    @staticmethod
    def _greedy(host_state, flavor, template):
        topology = host_state.numa_topology
        cpu_capacity = (host_state.vcpus_total *
                        host_state.cpu_allocation_ratio)
        ram_capacity = (host_state.total_usable_ram_mb *
                        host_state.ram_allocation_ratio)
        vcpus_used = host_state.vcpus_used
        ram_used = host_state.total_usable_ram_mb - host_state.free_ram_mb
        limits = objects.NUMATopologyLimits(
            cpu_allocation_ratio=host_state.cpu_allocation_ratio,
            ram_allocation_ratio=host_state.ram_allocation_ratio)
        count = 0
        while count < MAX_PER_HOST:
            if (vcpus_used + flavor.vcpus > cpu_capacity or
                    ram_used + flavor.memory_mb > ram_capacity):
                break
            if template is not None and topology:
                fitted = hardware.numa_fit_instance_to_host(
                    topology, template.obj_clone(), None, limits=limits)
                if fitted is None:
                    break
                topology = hardware.numa_usage_from_instance_numa(
                    topology, fitted)
            vcpus_used += flavor.vcpus
            ram_used += flavor.memory_mb
            count += 1
        return count
