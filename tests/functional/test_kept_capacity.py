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

"""The capacity from kept state equals a full count (issue 29, item 4).

A real Nova (cell and API databases, placement fixture, fake libvirt
computes with NUMA cells), a :class:`~nova_sched_ext.capacity.kept.
KeptCount` polled by the test (the services poll in a thread of their
own), and random changes made the way a cloud makes them: servers booted
and deleted through the API (the computes' records and placement's
allocations move), another consumer's allocation written to placement
behind Nova's back, a compute service disabled and enabled, a host put in
and out of an aggregate with an availability zone.  After each change and
one poll, the kept report equals :func:`nova_sched_ext.capacity.compute`'s
full count, for every grouping, with and without every host's figures,
for the whole cloud and for the zone and its aggregate.

Room freed in placement with no compute record moving (an allocation
deleted by hand) is not seen by a poll: the kept count shows less room
than there is until the usages resync reads the provider again.  The
second test shows both.
"""

import random
import uuid as uuid_lib

from nova import context as nova_context

from nova_sched_ext import capacity
from nova_sched_ext.capacity import kept as kept_capacity
from nova_sched_ext_tools.harness import fake_hosts as fh
from tests.functional import test_capacity
from tests.unit.capacity import api_fakes

GIB = 1024
#: random changes in the first test
STEPS = 10
SEED = 29


class KeptCapacityTest(test_capacity.CapacityTestBase):

    HOSTS = (
        fh.HostLayout('kc-a', cells=2, mem_gib_per_cell=8),
        fh.HostLayout('kc-b', cells=2, mem_gib_per_cell=8,
                      pages_2m_per_cell=1024),
        fh.HostLayout('kc-c', cells=4, mem_gib_per_cell=4),
    )
    SHAPES = (
        fh.pinned('kc-pin2', 2, GIB),
        test_capacity.flavor('kc-shared4', 4, 2 * GIB),
        test_capacity.flavor('kc-two-cells', 4, 4 * GIB,
                             **{'hw:numa_nodes': '2',
                                'hw:cpu_policy': 'dedicated'}),
    )

    def setUp(self):
        super().setUp()
        for shape in self.SHAPES:
            self.flavor_id(shape)
        self.clock = api_fakes.FakeClock()
        self.kept = kept_capacity.KeptCount(
            nova_context.get_admin_context(), clock=self.clock)
        self.names = [shape.name for shape in self.SHAPES]
        self.servers = []

    def kept_report(self, **kwargs):
        report = self.kept.report(flavors=self.names, **kwargs).to_dict()
        report.pop('generated_at')
        return report

    def full_report(self, **kwargs):
        report = self.count(self.names, **kwargs)
        report.pop('generated_at')
        return report

    def assertSameAsFullCount(self, what):
        self.assertIsNone(self.kept.unusable())
        # With per_host, every host is summed; without it, the sums of the
        # last answer of the same query are brought up to date.
        queries = [{'per_host': True}, {}]
        if hasattr(self, 'zone_agg'):
            queries += [{'az': 'kc-az'}, {'aggregate': 'kc-zone'}]
        for by in capacity.BY:
            for query in queries:
                self.assertEqual(self.full_report(by=by, **query),
                                 self.kept_report(by=by, **query),
                                 'after %s, by %s, %s' % (what, by, query))

    def poll(self):
        self.clock.now += 1.0
        self.kept.poll()

    # --- changes, as a cloud makes them -------------------------------------

    def boot_one(self, rng):
        shape = rng.choice(self.SHAPES)
        results, servers = self.boot('kc-%d' % len(self.servers), shape)
        self.servers.extend(servers)
        return 'booting %s (%s)' % (shape.name, results[0].outcome)

    def delete_one(self, rng):
        if not self.servers:
            return self.boot_one(rng)
        server = self.servers.pop(rng.randrange(len(self.servers)))
        self.delete_servers([server])
        return 'deleting %s' % server['name']

    def claim_behind_nova(self, rng):
        host = rng.choice(self.HOSTS).name
        provider = self.compute_rp_uuids[host]
        consumer = str(uuid_lib.uuid4())
        self.write_allocation(consumer, provider, {'VCPU': 2,
                                                   'MEMORY_MB': 2 * GIB})
        return 'another consumer claiming on %s' % host

    def toggle_service(self, rng):
        host = rng.choice(self.HOSTS).name
        service = self.admin_api.get_services(binary='nova-compute',
                                              host=host)[0]
        status = 'enabled' if service['status'] == 'disabled' else 'disabled'
        self.admin_api.put_service(service['id'], {'status': status})
        return 'service of %s %s' % (host, status)

    def move_to_a_zone(self, rng):
        host = rng.choice(self.HOSTS).name
        if not hasattr(self, 'zone_agg'):
            self.zone_agg = self._create_aggregate('kc-zone',
                                                   availability_zone='kc-az')
            self.zone_hosts = set()
        if host in self.zone_hosts:
            self.admin_api.remove_host_from_aggregate(self.zone_agg, host)
            self.zone_hosts.discard(host)
            return '%s out of zone kc-az' % host
        self.admin_api.add_host_to_aggregate(self.zone_agg, host)
        self.zone_hosts.add(host)
        return '%s into zone kc-az' % host

    def write_allocation(self, consumer, provider, resources):
        body = {'allocations': {provider: {'resources': resources}},
                'consumer_generation': None,
                'project_id': str(uuid_lib.uuid4()),
                'user_id': str(uuid_lib.uuid4())}
        response = self.placement.put('/allocations/%s' % consumer, body,
                                      version='1.28')
        self.assertEqual(204, response.status, response.body)

    # --- the tests ----------------------------------------------------------

    def test_kept_count_equals_the_full_count_after_each_change(self):
        self.poll()
        self.assertSameAsFullCount('the first poll')
        rng = random.Random(SEED)
        changes = [self.boot_one, self.delete_one, self.claim_behind_nova,
                   self.toggle_service, self.move_to_a_zone]
        # each kind of change at least once, in a random order
        plan = changes + [rng.choice(changes + [self.boot_one])
                          for _ in range(STEPS - len(changes))]
        rng.shuffle(plan)
        for change in plan:
            what = change(rng)
            self.poll()
            self.assertSameAsFullCount(what)
        # the kept state counted again only the hosts that changed
        self.assertGreater(self.kept.counts['hosts_counted_again'], 0)

    def test_a_free_no_record_tells_of_waits_for_the_resync(self):
        provider = self.compute_rp_uuids['kc-a']
        consumer = str(uuid_lib.uuid4())
        self.write_allocation(consumer, provider, {'VCPU': 2,
                                                   'MEMORY_MB': 12 * GIB})
        self.poll()
        self.assertSameAsFullCount('a claim behind Nova')
        # the nodes' records moved at the first poll (they were new): their
        # providers are read again at the next one too, then no more
        self.poll()
        # deleted by hand: no generation moves, no compute record either
        response = self.placement.delete('/allocations/%s' % consumer)
        self.assertEqual(204, response.status)
        self.poll()
        stale = self.kept_report(by='host')
        full = self.full_report(by='host')
        self.assertNotEqual(full, stale)
        self.assertLess(
            sum(sum(s['capacity'].values()) for s in stale['scopes']),
            sum(sum(s['capacity'].values()) for s in full['scopes']))
        # every provider's usages once per resync interval
        # a whole resync interval at the usual pace of polls (a poll
        # reads at most the share of two poll intervals)
        self.kept.resync_interval = 2 * self.kept.poll_interval
        self.clock.now += self.kept.resync_interval
        self.kept.poll()
        self.assertSameAsFullCount('the resync')
