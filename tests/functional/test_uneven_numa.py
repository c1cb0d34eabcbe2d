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

"""Uneven dual-NUMA variants booted through Nova (issue 28).

One host of two NUMA cells of 16 CPUs each, where the pinned (dedicated)
CPUs are 4 on cell 0 and 12 on cell 1: the leftovers a host keeps after
single-NUMA guests took most of one node.  A 16-vCPU pinned flavor with
``hw:numa_nodes=2`` split evenly (8 + 8) fits nowhere; the same flavor
split 12 + 4 by ``hw:numa_cpus.N`` / ``hw:numa_mem.N`` fits, and Nova
puts its larger guest cell on the host cell with more room (instance cell
0 on host cell 1: Nova tries instance cells against the host cells in
every order); its mirror, 4 + 12, fits too, in host cell order.  The
capacity count (the code the API, the exporter and ``openstack capacity
list`` serve) says so before the boots: 0, 1 and 1.

The host has 32 CPUs: more than Nova's libvirt test base lets a fake host
have (its mocked online CPUs and a sanity check stop at 15), so the test
builds the fake connection itself and widens the online CPUs.
"""

from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt.libvirt import host as libvirt_host
import prometheus_client
from prometheus_client import parser as prom_parser
import webob

from nova_sched_ext import capacity
from nova_sched_ext.capacity import api as capacity_api
from nova_sched_ext.capacity import exporter
from nova_sched_ext.capacity import osc
from nova_sched_ext import conf as ext_conf
from nova_sched_ext_tools.harness import fake_hosts as fh
from nova_sched_ext_tools import hosts
from tests.functional import base

HOST = 'uneven'
GIB = 1024
#: cell 0 is CPUs 0-15, cell 1 CPUs 16-31 (fakelibvirt numbers them so)
DEDICATED = '0-3,16-27'
SHARED = '4-5,28-29'
PAGES_2M = 4096      # 8 GiB of 2 MiB pages per cell

FAMILY = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2',
          'hw:mem_page_size': '2MB'}
EVEN = fh.FlavorShape('pin16-even', 16, 8 * GIB, dict(FAMILY))
UNEVEN = fh.FlavorShape('pin16-12-4', 16, 8 * GIB, dict(
    FAMILY, **{'hw:numa_cpus.0': '0-11', 'hw:numa_cpus.1': '12-15',
               'hw:numa_mem.0': '6144', 'hw:numa_mem.1': '2048'}))
MIRROR = fh.FlavorShape('pin16-4-12', 16, 8 * GIB, dict(
    FAMILY, **{'hw:numa_cpus.0': '0-3', 'hw:numa_cpus.1': '4-15',
               'hw:numa_mem.0': '2048', 'hw:numa_mem.1': '6144'}))
FLAVORS = (EVEN, UNEVEN, MIRROR)


class UnevenDualNUMATest(base.NUMAFitTestBase):
    """4 + 12 free pinned CPUs: the uneven variants land, the even not."""

    HOSTS = ()
    NUMA_FIT = True

    def setUp(self):
        super().setUp()
        # the base's mock of the online CPUs (it cannot be patched again)
        libvirt_host.Host.get_online_cpus.return_value = set(range(32))
        self.flags(cpu_dedicated_set=DEDICATED, cpu_shared_set=SHARED,
                   group='compute')
        cell = hosts.Cell(memory_mb=16 * GIB, shared=4, dedicated=12,
                          pages_2m=PAGES_2M)
        connection = fakelibvirt.Connection(
            'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
            hv_version=fakelibvirt.FAKE_QEMU_VERSION,
            host_info=hosts.libvirt_host_info([cell, cell]), hostname=HOST)
        self.start_compute(hostname=HOST, connection=connection)
        for shape in FLAVORS:
            self.flavor_id(shape)

    def counts(self):
        report = capacity.compute(
            nova_context.get_admin_context(),
            flavors=[s.name for s in FLAVORS], by='host').to_dict()
        (scope,) = report['scopes']
        self.assertEqual(HOST, scope['name'])
        return scope['capacity']

    def guest_cells(self, server):
        """``[(host cell, vCPUs, host CPUs, MiB)]`` in guest order."""
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            self.ctxt, server['id'])
        with nova_context.target_cell(self.ctxt,
                                      mapping.cell_mapping) as cctxt:
            topology = objects.InstanceNUMATopology.get_by_instance_uuid(
                cctxt, server['id'])
        return [(c.id, len(c.pcpuset), set(c.cpu_pinning.values()),
                 c.memory) for c in topology.cells]

    def test_uneven_variant_lands_on_the_planned_cells(self):
        free = self.free_pinned()
        self.assertEqual((4, 12), free)
        # The count, as the API / exporter / OSC plugin serve it, with the
        # fit engine and with Nova's own fit.
        expected = {EVEN.name: 0, UNEVEN.name: 1, MIRROR.name: 1}
        self.assertEqual(expected, self.counts())
        self.flags(fit='nova', group='nova_sched_ext_capacity')
        self.assertEqual(expected, self.counts())
        self.flags(fit='engine', group='nova_sched_ext_capacity')
        self.assertEqual(expected, self.served_counts())

        # The even split: 8 pinned CPUs wanted on a cell of 4 free.
        (even,), servers = self.boot('even', EVEN)
        self.assertTrue(even.no_valid_host, even.fault)
        (fpass,) = even.passes
        # placement offered the host (16 PCPU free); NUMAFitFilter refused
        self.assertEqual((base.NUMA_FIT_FILTER, 0), fpass.kept[-1],
                         fpass.render())

        # 12 + 4: guest node 0 (12 vCPUs, 6 GiB) on host cell 1.
        (uneven,), booted = self.boot('uneven', UNEVEN)
        servers.extend(booted)
        self.assertEqual(HOST, uneven.host, uneven.fault)
        self.assertEqual((1, 0), uneven.cells)
        (node0, node1) = self.guest_cells(booted[0])
        self.assertEqual((1, 12, 6144), (node0[0], node0[1], node0[3]))
        self.assertEqual((0, 4, 2048), (node1[0], node1[1], node1[3]))
        self.assertEqual(set(range(16, 28)), node0[2])
        self.assertEqual(set(range(0, 4)), node1[2])
        self.assertEqual((0, 0), self.free_pinned())
        usage = self.host_numa_usage()
        self.assertEqual({fh.PAGE_2M: 1024}, usage[(HOST, 0)]['pages'])
        self.assertEqual({fh.PAGE_2M: 3072}, usage[(HOST, 1)]['pages'])
        self.assertEqual({s.name: 0 for s in FLAVORS}, self.counts())
        self.delete_servers(servers)
        servers = []

        # 4 + 12, the mirror: the same host cells, in host cell order.
        self.assertEqual(expected, self.counts())
        (mirror,), booted = self.boot('mirror', MIRROR)
        servers.extend(booted)
        self.assertEqual(HOST, mirror.host, mirror.fault)
        self.assertEqual((0, 1), mirror.cells)
        (node0, node1) = self.guest_cells(booted[0])
        self.assertEqual((0, 4, 2048), (node0[0], node0[1], node0[3]))
        self.assertEqual((1, 12, 6144), (node1[0], node1[1], node1[3]))
        self.delete_servers(servers)
        self.assert_hosts_idle()

    def served_counts(self):
        """The count as the API, the OSC plugin and the exporter serve it.

        ``openstack capacity list`` makes its table from the API's JSON;
        the exporter counts every flavor, and must say the same.
        """
        app = capacity_api.CapacityApp(
            ext_conf.CONF, nova_context.get_admin_context, check_roles=False)
        query = '&'.join('flavor=%s' % s.name for s in FLAVORS)
        response = webob.Request.blank(
            '/v1/capacity?by=cloud&' + query).get_response(app)
        self.assertEqual(200, response.status_int, response.text)
        columns, rows = osc.ListCapacity.table(response.json)
        (row,) = rows
        self.assertEqual('cloud', row[0])   # (the one host)
        table = dict(zip(columns[2:], row[2:]))

        registry = prometheus_client.CollectorRegistry()
        counter = exporter.CapacityExporter(
            ext_conf.CONF, nova_context.get_admin_context, registry=registry)
        self.assertTrue(counter.refresh())
        text = prometheus_client.generate_latest(registry).decode('utf-8')
        exported = {}
        for family in prom_parser.text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == exporter.PREFIX + 'instances' and \
                        sample.labels['scope'] == 'cloud':
                    exported[sample.labels['flavor']] = int(sample.value)
        self.assertEqual(table, {name: exported[name] for name in table})
        return table

    def free_pinned(self):
        """Free pinned CPUs of the host, per cell, from its compute node."""
        with nova_context.target_cell(
                self.ctxt, self.cell_mappings['cell1']) as cctxt:
            (node,) = objects.ComputeNodeList.get_all(cctxt)
        topology = objects.NUMATopology.obj_from_db_obj(node.numa_topology)
        return tuple(len(c.pcpuset - c.pinned_cpus) for c in topology.cells)
