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

"""The capacity from kept state: nova_sched_ext.capacity.kept.

Placement is openstack-placement itself, in this process
(:mod:`nova_sched_ext_tools.placement_direct`); Nova's side (compute
nodes, services, aggregates) is a stand-in for the kept compute state,
whose own reads the functional ``test_kept_capacity`` runs on Nova's
databases.  The kept report equals the full count of the same state
(:func:`~nova_sched_ext.capacity.service.assemble` of what
``PlacementReader.trees`` reads) after random claims, frees, inventory
changes, services disabled and hosts moved in and out of a zone, for
every grouping and selection; only the hosts that changed are counted
again, and only they are judged and summed again.
"""

import copy
import datetime
import logging
import os
import random
import uuid as uuid_lib

import fixtures
from nova import objects
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.capacity import kept as kept_capacity
from nova_sched_ext.capacity import service
from nova_sched_ext.capacity import sources
from nova_sched_ext.cloud import compute_state
from nova_sched_ext.cloud import errors as cloud_errors
from nova_sched_ext.cloud import flavors as cloud_flavors
from nova_sched_ext.cloud import placement as p
from nova_sched_ext import conf
from nova_sched_ext_tools import placement_direct
from tests import base
from tests.unit.capacity import api_fakes
from tests.unit.capacity import test_flavors
from tests.unit.capacity import test_service
from tests.unit.cloud import placement_fixtures as pf

CONTEXT = placement_direct.Context('req-nse-test-kept-capacity')
NOW = datetime.datetime(2026, 12, 4, tzinfo=datetime.timezone.utc)
HOSTS = 6


class FakeComputes(object):
    """The kept compute state: hosts set by the test."""

    def __init__(self, hosts, aggregates, cells):
        self.hosts = hosts
        self.aggregates = aggregates
        self.cells = cells
        self.changed = frozenset()
        self.fail = None

    def refresh(self):
        if self.fail is not None:
            raise self.fail
        changed, self.changed = self.changed, frozenset()
        return changed

    def snapshot(self):
        return compute_state.Snapshot(hosts=tuple(self.hosts),
                                      aggregates=tuple(self.aggregates),
                                      cells=tuple(self.cells))


def inventories():
    return {'PCPU': p.Inventory(total=8, max_unit=8),
            'VCPU': p.Inventory(total=8, max_unit=8, allocation_ratio=4.0),
            'MEMORY_MB': p.Inventory(total=16384, max_unit=16384),
            'DISK_GB': p.Inventory(total=1000, max_unit=1000)}


class KeptCountTest(base.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()
        self.placement = self.useFixture(pf.InProcessPlacement()).placement
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext', level=logging.INFO))
        rps = self.placement.create([
            {'inventories': inventories(), 'usages': {}, 'traits': (),
             'aggregates': ()} for _ in range(HOSTS)])
        self.rps = [rp.uuid for rp in rps]
        self.zone = test_service.aggregate(1, 'zone-a', ['h0', 'h1'],
                                           availability_zone='az-a')
        self.hosts = []
        for number, rp in enumerate(self.rps):
            name = 'h%d' % number
            state = test_service.host_state(name)
            state.uuid = rp
            aggs = [self.zone] if number < 2 else []
            state.aggregates = aggs
            cell = test_service.CELL1 if number % 2 else test_service.CELL2
            self.hosts.append(sources.Host(
                state=state, cell=cell, aggregates=aggs,
                availability_zone=sources.host_availability_zone(aggs)))
        self.computes = FakeComputes(self.hosts, [self.zone],
                                     [test_service.CELL1,
                                      test_service.CELL2])
        self.useFixture(fixtures.MockPatchObject(
            compute_state, 'ComputeState', lambda *a, **kw: self.computes))
        self.flavors = [test_service.PINNED2, test_service.PINNED4,
                        test_service.SHARED]
        self.useFixture(fixtures.MockPatchObject(
            cloud_flavors, 'all_flavors',
            side_effect=lambda ctx: list(self.flavors)))
        self.counted = self.useFixture(fixtures.MockPatchObject(
            service, 'count_one_host', wraps=service.count_one_host)).mock
        self.clock = api_fakes.FakeClock()
        self.client = placement_direct.Counting(self.placement)
        self.reader = p.PlacementReader(CONTEXT, client=self.client)
        self.kept = kept_capacity.KeptCount(context=CONTEXT,
                                            reader=self.reader,
                                            clock=self.clock)

    def read_trees(self):
        """Every live host's tree, read from placement now."""
        live = [h for h in self.computes.snapshot().hosts if not h.skipped]
        return p.PlacementReader(CONTEXT, client=self.placement).trees(
            [h.uuid for h in live])

    def full(self, by='cloud', trees=None, **kwargs):
        """What compute() reports of the same cloud: read in full now.

        :param trees: :meth:`read_trees` of the same state, if read already
        """
        cloud = self.computes.snapshot().cloud()
        selected, agg = service.select(cloud, az=kwargs.get('az'),
                                       aggregate=kwargs.get('aggregate'))
        trees = trees if trees is not None else self.read_trees()
        # what compute() reads: the trees of the selection's live hosts
        trees = {h.uuid: trees[h.uuid] for h in selected
                 if not h.skipped and h.uuid in trees}
        report = service.assemble(NOW, cloud_flavors.pick(self.flavors),
                                  cloud, selected,
                                  agg, trees, by=by, az=kwargs.get('az'),
                                  per_host=kwargs.get('per_host', False))
        return dict(report.to_dict(), generated_at=None)

    def kept_report(self, by='cloud', **kwargs):
        return dict(self.kept.report(by=by, **kwargs).to_dict(),
                    generated_at=None)

    def assertSame(self, what):
        # per_host sums every host; without it the sums of the last answer
        # of the same query are brought up to date
        trees = self.read_trees()
        for by in service.BY:
            for selection in ({}, {'az': 'az-a'}, {'aggregate': 'zone-a'}):
                for per_host in (False, True):
                    self.assertEqual(
                        self.full(by=by, per_host=per_host, trees=trees,
                                  **selection),
                        self.kept_report(by=by, per_host=per_host,
                                         **selection),
                        'after %s, by %s, %s, per_host %s'
                        % (what, by, selection, per_host))

    def claim(self, rp, resources, consumer=None):
        consumer = consumer or str(uuid_lib.uuid4())
        self.placement.call('put', '/allocations/%s' % consumer, {
            'allocations': {rp: {'resources': resources}},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None})
        return consumer

    def free(self, consumer):
        self.placement.call('delete', '/allocations/%s' % consumer)

    def set_reserved(self, rp, rc, reserved):
        body = self.placement.call('get',
                                   '/resource_providers/%s/inventories' % rp)
        inventory = dict(body['inventories'][rc], reserved=reserved)
        self.placement.call(
            'put', '/resource_providers/%s/inventories/%s' % (rp, rc),
            {'resource_provider_generation':
                body['resource_provider_generation'], **inventory})

    def move(self, index, aggregates):
        """Host ``index`` now in ``aggregates``: a new Host, as polled."""
        host = self.hosts[index]
        state = copy.copy(host.state)
        state.aggregates = aggregates
        self.hosts[index] = sources.Host(
            state=state, cell=host.cell, aggregates=aggregates,
            availability_zone=sources.host_availability_zone(aggregates),
            skipped=host.skipped)
        return host.uuid

    def poll(self, nodes=()):
        self.computes.changed = frozenset(nodes)
        self.clock.now += 1.0
        return self.kept.poll()

    # --- the tests -----------------------------------------------------------

    def test_not_used_before_a_poll_nor_once_too_old(self):
        self.assertEqual('not_ready', self.kept.unusable()[0])
        self.poll()
        self.assertIsNone(self.kept.unusable())
        self.clock.now += self.kept.max_age + 1
        self.assertEqual('too_old', self.kept.unusable()[0])

    def test_equal_to_a_full_count_after_random_changes(self):
        rng = random.Random(4)
        self.poll()
        self.assertSame('the first poll')
        consumers = []
        for step in range(12):
            rp_index = rng.randrange(HOSTS)
            rp = self.rps[rp_index]
            kind = rng.choice(('claim', 'free', 'reserve', 'disable',
                               'move'))
            if kind == 'claim':
                consumers.append((rp_index, self.claim(
                    rp, {'PCPU': rng.randint(1, 4),
                         'MEMORY_MB': 1024 * rng.randint(1, 4)})))
                nodes = ()
            elif kind == 'free' and consumers:
                rp_index, consumer = consumers.pop(rng.randrange(
                    len(consumers)))
                self.free(consumer)
                # the compute's record moves when its instance goes
                nodes = (self.rps[rp_index],)
            elif kind == 'reserve':
                self.set_reserved(rp, 'MEMORY_MB', 1024 * rng.randint(0, 8))
                nodes = ()
            elif kind == 'move':
                host = self.hosts[rp_index]
                nodes = (self.move(rp_index, [] if host.aggregates
                                   else [self.zone]),)
            else:
                host = self.hosts[rp_index]
                state = host.state
                skipped = (None if host.skipped else
                           sources.SKIP_SERVICE_DISABLED)
                self.hosts[rp_index] = sources.Host(
                    state=state, cell=host.cell, aggregates=host.aggregates,
                    availability_zone=host.availability_zone,
                    skipped=skipped)
                nodes = (rp,)
            self.poll(nodes)
            self.assertSame('step %d (%s on h%d)' % (step, kind, rp_index))

    def test_only_the_hosts_that_changed_are_counted_again(self):
        self.poll()
        self.kept_report()
        self.assertEqual(HOSTS, self.counted.call_count)
        self.counted.reset_mock()
        self.kept_report(by='az')
        self.assertEqual(0, self.counted.call_count)
        self.claim(self.rps[2], {'PCPU': 2})
        self.poll()
        self.kept_report()
        self.assertEqual([self.rps[2]], [c.args[0].uuid for c in
                                         self.counted.call_args_list])
        # a new set of flavors is counted on every host, once
        self.counted.reset_mock()
        self.flavors = [test_service.PINNED2]
        self.poll()
        self.kept_report()
        self.kept_report()
        self.assertEqual(HOSTS, self.counted.call_count)
        # an extra spec changed: a flavor of its own
        self.counted.reset_mock()
        self.flavors = [test_flavors.flavor(
            'pin2', vcpus=2, memory_mb=1024,
            **{'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'})]
        self.poll()
        self.kept_report()
        self.assertEqual(HOSTS, self.counted.call_count)

    def test_the_first_poll_reads_every_provider_once(self):
        # every node is new to the first poll: its providers are read
        # then, not again at the next poll
        before = self.client.calls
        self.poll(self.rps)
        self.assertEqual(1 + 4 * HOSTS, self.client.calls - before)
        before = self.client.calls
        self.poll()
        self.assertEqual(1, self.client.calls - before)

    def test_a_restart_from_the_snapshot_counts_as_a_full_count(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'capacity.json')
        config = self.useFixture(config_fixture.Config(conf.CONF))
        config.config(group='nova_sched_ext_capacity',
                      kept_state_snapshot_file=path,
                      kept_state_snapshot_verify_per_poll=0)
        self.kept = kept_capacity.KeptCount(context=CONTEXT,
                                            reader=self.reader,
                                            clock=self.clock)
        self.poll(self.rps)
        self.kept.stop()
        self.claim(self.rps[1], {'PCPU': 4})
        self.kept = kept_capacity.KeptCount(context=CONTEXT,
                                            reader=self.reader,
                                            clock=self.clock)
        before = self.client.calls
        self.poll(self.rps)
        # the listing, then the one provider placement marked
        self.assertEqual(1 + 4, self.client.calls - before)
        self.assertEqual(self.full(per_host=True),
                         self.kept_report(per_host=True))

    def test_a_free_is_read_when_the_record_moves_and_at_the_next_poll(self):
        consumer = self.claim(self.rps[0], {'PCPU': 8})
        self.poll()
        self.poll()
        before = self.client.calls
        self.free(consumer)
        # the compute's record moved before placement freed the room
        self.poll([self.rps[0]])
        self.assertSame('the free')
        # the listing, and the node's provider read again (4 calls) at
        # that poll and at the next one
        self.poll()
        self.assertEqual((1 + 4) * 2, self.client.calls - before)
        before = self.client.calls
        self.poll()
        self.assertEqual(1, self.client.calls - before)

    def test_a_free_nothing_tells_of_waits_for_the_resync(self):
        consumer = self.claim(self.rps[1], {'PCPU': 8})
        self.poll()
        self.poll()
        self.free(consumer)
        self.poll()
        self.assertNotEqual(self.full(by='host'), self.kept_report(by='host'))
        # polls at the usual pace over a whole resync interval read each
        # provider's usages once (a poll reads at most the share of two
        # poll intervals)
        self.kept.resync_interval = 2 * self.kept.poll_interval
        self.clock.now += self.kept.resync_interval
        self.kept.poll()
        self.assertSame('the resync')
        self.assertIn('the resync found the usages of 1 provider(s) changed',
                      self.log.output)

    def test_nested_and_sharing_providers_are_counted_as_read(self):
        child = str(uuid_lib.uuid4())
        self.placement.call('post', '/resource_providers', {
            'uuid': child, 'name': 'child',
            'parent_provider_uuid': self.rps[0]})
        self.placement.call(
            'put', '/resource_providers/%s/inventories' % child, {
                'resource_provider_generation': 0,
                'inventories': {'PCPU': {'total': 4}}})
        self.poll()
        self.assertSame('a nested provider')
        self.claim(child, {'PCPU': 2})
        self.poll()
        self.assertSame('a claim on it')

    def test_a_failed_poll_keeps_the_state_and_is_logged_once(self):
        self.poll()
        report = self.kept_report()
        self.computes.fail = cloud_errors.CellUnavailable(
            uuids.cell1, 'the cell database is down')
        self.kept._poller.once()
        self.kept._poller.once()
        self.assertEqual(1, self.log.output.count(
            'Kept capacity state: cannot poll'))
        self.assertEqual(report, self.kept_report())
        self.computes.fail = None
        self.kept._poller.once()
        self.assertIn('Kept capacity state: placement and the cells polled '
                      'again.', self.log.output)

    # --- the sums of the last answer, brought up to date ---------------------

    def judged(self, **kwargs):
        """The hosts an answer judges (skip checks, then kept count)."""
        with fixtures.MockPatchObject(service, 'judge',
                                      wraps=service.judge) as judge:
            self.kept_report(**kwargs)
        return sorted(call.args[0].name for call in judge.mock.call_args_list)

    def test_an_answer_judges_only_the_hosts_that_changed(self):
        self.poll()
        every = sorted(h.name for h in self.hosts)
        self.assertEqual(every, self.judged())
        self.assertEqual([], self.judged())
        self.claim(self.rps[2], {'PCPU': 2})
        self.poll()
        self.assertEqual(['h2'], self.judged())
        self.assertEqual([], self.judged())
        # each query keeps its own sums
        self.assertEqual(['h0', 'h1'], self.judged(az='az-a'))
        self.assertEqual(every, self.judged(by='cell'))
        # the hosts' own scopes follow every host
        self.assertEqual(every, self.judged(per_host=True))
        self.assertSame('a claim')

    def test_changes_of_every_poll_since_the_last_answer_are_summed(self):
        self.poll()
        self.kept_report()
        self.claim(self.rps[1], {'PCPU': 2})
        self.poll()
        self.claim(self.rps[4], {'PCPU': 4})
        self.poll()
        self.poll()
        self.assertEqual(['h1', 'h4'], self.judged())
        self.assertSame('two claims, three polls')

    def test_an_answer_older_than_the_changes_kept_sums_every_host(self):
        self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.capacity.kept.CHANGES_KEPT', 2))
        self.poll()
        self.kept_report()
        self.kept_report(by='az')
        self.claim(self.rps[3], {'PCPU': 2})
        self.poll()
        self.poll()
        self.assertEqual(['h3'], self.judged())
        # three polls since that answer, the changes of two kept: the
        # claim is no longer among them
        self.claim(self.rps[0], {'PCPU': 2})
        self.poll()
        self.poll()
        self.poll()
        self.assertEqual(self.full(), self.kept_report())
        self.assertEqual(sorted(h.name for h in self.hosts), self.judged(
            by='az'))

    def test_hosts_leaving_and_joining_the_selection(self):
        self.poll()
        self.assertSame('the first poll')
        # h0 out of the zone and its aggregate, h4 in
        self.poll([self.move(0, []), self.move(4, [self.zone])])
        # h0 left the selection: taken out, not judged
        self.assertEqual(['h4'], self.judged(aggregate='zone-a'))
        self.assertSame('h0 out of zone-a, h4 in')
        # every host out: the zone and its aggregate show no host
        self.poll([self.move(1, []), self.move(4, [])])
        self.assertSame('no host left in zone-a')
        # a host gone from the cloud, and one that never reported
        gone = self.hosts.pop(5)
        state = test_service.host_state('h9')
        state.uuid = None
        self.hosts.append(sources.Host(
            state=state, cell=test_service.CELL1, aggregates=[],
            availability_zone=sources.host_availability_zone([]),
            skipped=sources.SKIP_NO_SERVICE))
        self.poll([gone.uuid])
        self.assertSame('h5 gone, h9 not reporting')
        self.hosts.pop()
        self.poll()
        self.assertSame('h9 gone')

    def test_a_new_set_of_flavors_is_summed_on_its_own(self):
        self.poll()
        self.assertSame('the first poll')
        self.flavors = [test_service.PINNED2, test_service.HUGE]
        self.poll()
        self.assertSame('other flavors')
        self.claim(self.rps[0], {'PCPU': 2})
        self.poll()
        self.assertSame('a claim')

    def test_sharing_providers_sum_every_host(self):
        # h0 and h1 draw their disk from a pool: its room is theirs
        # together, not added up, so every answer sums every host
        pool = self.placement.create([{
            'inventories': {'DISK_GB': p.Inventory(total=60, max_unit=60)},
            'usages': {}, 'traits': (p.SHARING_TRAIT,),
            'aggregates': (pf.AGGREGATES[0],)}])[0]
        for rp in self.rps[:2]:
            self.set_aggregates(rp, [pf.AGGREGATES[0]])
            self.drop_inventory(rp, 'DISK_GB')
        self.poll()
        self.assertTrue(self.kept._view.sharing)
        self.assertSame('a pool')
        every = sorted(h.name for h in self.hosts)
        self.assertEqual(every, self.judged())
        self.claim(pool.uuid, {'DISK_GB': 30})
        self.poll()
        self.assertSame('a claim on the pool')
        # h0 and h1 each see the whole pool: the cloud takes less than
        # the hosts' figures added up
        hosts = self.kept_report(by='host')['scopes']
        cloud = self.kept_report()['scopes'][0]
        self.assertLess(cloud['capacity']['pin2'],
                        sum(s['capacity']['pin2'] for s in hosts))

    def set_aggregates(self, rp, aggregates):
        body = self.placement.call(
            'get', '/resource_providers/%s/aggregates' % rp, version='1.19')
        self.placement.call(
            'put', '/resource_providers/%s/aggregates' % rp,
            {'aggregates': aggregates, 'resource_provider_generation':
                body['resource_provider_generation']}, version='1.19')

    def drop_inventory(self, rp, rc):
        body = self.placement.call('get',
                                   '/resource_providers/%s/inventories' % rp)
        inventories = {name: inv for name, inv in body['inventories'].items()
                       if name != rc}
        self.placement.call(
            'put', '/resource_providers/%s/inventories' % rp,
            {'resource_provider_generation':
                body['resource_provider_generation'],
             'inventories': inventories})
