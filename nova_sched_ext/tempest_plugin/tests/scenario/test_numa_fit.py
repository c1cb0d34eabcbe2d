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


"""NUMAFitFilter in a real cloud: NUMA flavors land where their cells fit.

Each scenario derives a flavor from the hosts' described layouts such that
some empty hosts fit it and others do not, although placement would offer
them all (enough VCPU and MEMORY_MB in total). It puts those hosts into an
availability zone and checks where the server lands, or that it gets
NoValidHost when no host's cells fit.

On the devstack-lite and gate clouds (layouts 2x4x4096, 2x4x4096, 1x8x8192):
a one-cell flavor of 8 vCPUs fits only the single 8-CPU cell, a two-cell
flavor only the two-cell hosts, and a three-cell flavor no host.
"""

from tempest.lib import decorators

from nova_sched_ext.tempest_plugin.tests import base


class NUMAFitFilterTest(base.NUMASchedulingTest):
    """NUMA flavors are placed only on hosts whose NUMA cells fit them."""

    required_filters = ('NUMAFitFilter', 'NUMATopologyFilter')

    def _shape_fitting_some_hosts(self, hosts, numa_nodes):
        """(vcpus, memory_mb, fitting hosts, other hosts) for a flavor.

        The other hosts could take the flavor as far as placement knows;
        only their NUMA cells are too few or too small.
        """
        candidates = []
        for layout in sorted({host.layout for host in hosts.values()},
                             key=lambda layout: layout.spec):
            if layout.cells < numa_nodes:
                continue
            # Whole cells of CPUs, half of each cell's memory.
            candidates.append(
                (numa_nodes * layout.cpus_per_cell,
                 numa_nodes * (layout.memory_mb_per_cell // 2)))
        for vcpus, memory_mb in candidates:
            placeable = {name: host for name, host in hosts.items()
                         if host.placeable(vcpus, memory_mb)}
            fitting = {name for name, host in placeable.items()
                       if host.layout.fits_empty(vcpus, memory_mb,
                                                 numa_nodes)}
            others = set(placeable) - fitting
            if fitting and others:
                return vcpus, memory_mb, fitting, others
        raise self.skipException(
            'needs empty hosts with different NUMA layouts, so that a '
            '%d-cell flavor fits the cells of some and not of others that '
            'placement would still offer; layouts: %s'
            % (numa_nodes, ', '.join(sorted(
                '%s=%s' % (name, host.layout) for name, host in
                hosts.items()))))

    def _check_lands_on_fitting_host(self, numa_nodes):
        hosts = self.empty_described_hosts(at_least=2)
        vcpus, memory_mb, fitting, others = self._shape_fitting_some_hosts(
            hosts, numa_nodes)
        zone = self.create_zone(fitting | others)
        flavor = self.create_numa_flavor(vcpus, memory_mb, numa_nodes)

        server = self.boot(flavor, zone)

        self.assertIn(
            self.host_of(server), fitting,
            'a %d-cell flavor of %d vCPUs and %d MiB landed on %s, whose '
            'NUMA cells cannot hold it (fitting: %s; not fitting: %s)'
            % (numa_nodes, vcpus, memory_mb, self.host_of(server),
               sorted(fitting), sorted(others)))

    @decorators.idempotent_id('33b53bcb-26be-425e-8cbe-1e050065ef00')
    def test_one_cell_flavor_lands_on_a_host_with_a_big_enough_cell(self):
        self._check_lands_on_fitting_host(numa_nodes=1)

    @decorators.idempotent_id('c36b5cb9-0b40-4829-bd47-5fc6be4e508e')
    def test_two_cell_flavor_lands_on_a_host_with_two_cells(self):
        self._check_lands_on_fitting_host(numa_nodes=2)

    @decorators.idempotent_id('31139d3f-36a7-4f7e-b554-89c9c79bf7d5')
    def test_flavor_that_fits_no_host_cells_gets_no_valid_host(self):
        hosts = self.empty_described_hosts(at_least=1)
        # One guest cell more than any host has cells, one vCPU and 256 MiB
        # per guest cell: every host has the room, none has the cells.
        numa_nodes = max(host.layout.cells for host in hosts.values()) + 1
        vcpus, memory_mb = numa_nodes, 256 * numa_nodes
        placeable = sorted(name for name, host in hosts.items()
                           if host.placeable(vcpus, memory_mb))
        if not placeable:
            raise self.skipException(
                'no empty host has %d VCPU and %d MiB for a %d-cell flavor'
                % (vcpus, memory_mb, numa_nodes))
        zone = self.create_zone(placeable)
        flavor = self.create_numa_flavor(vcpus, memory_mb, numa_nodes)

        server = self.boot(flavor, zone, wait_until='ERROR')

        self.assert_no_valid_host(server)
