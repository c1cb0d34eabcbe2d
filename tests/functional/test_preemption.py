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

"""The preemption driver in a real Nova: API, conductor, scheduler, computes.

Two fake hosts, one NUMA cell each with 8 pinned CPUs.  Preemptible
servers (2 pinned CPUs each) fill them; nova-scheduler runs the package's
preemption driver, and its evictor reaches the in-process Compute API
through openstacksdk with an admin token.
"""

import threading
import time

import fixtures
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from nova.tests.functional.api import client as api_client
from openstack.compute.v2 import _proxy as compute_proxy
from openstack import exceptions as sdk_exc
import oslo_messaging as messaging

from nova_sched_ext import coordination
from nova_sched_ext.preemption import driver
from nova_sched_ext.preemption import extra_specs
from nova_sched_ext.preemption import journal
from nova_sched_ext.preemption import notifications
from nova_sched_ext.preemption import reservation
from nova_sched_ext_tools.harness import fake_hosts
from nova_sched_ext_tools.harness import scenarios
from tests.functional import base
from tests import redis_server

PRE = fake_hosts.shaped('pre.2', 2, 512, {
    'hw:cpu_policy': 'dedicated', extra_specs.PREEMPTIBLE_KEY: 'true'})
PRE_SHARED = fake_hosts.shaped('pre.s1', 1, 256, {
    extra_specs.PREEMPTIBLE_KEY: 'true'})
ON_DEMAND = fake_hosts.pinned('od.4', 4, 512)
ON_DEMAND_HOST = fake_hosts.pinned('od.8', 8, 512)
HOSTS = ('h1', 'h2')


class PreemptionTestBase(base.NUMAFitTestBase):

    HOSTS = tuple(fake_hosts.HostLayout(name, cells=1, mem_gib_per_cell=4)
                  for name in HOSTS)

    def setUp(self):
        # Before Nova's set-up starts a first scheduler: its reconcile
        # reads the records at once.
        self.flags(deployment_set_lock_dir=self.useFixture(
            fixtures.TempDir()).path, group='nova_sched_ext')
        super().setUp()
        self.flags(scheduler_driver='preemption',
                   preemption_wait_timeout=30, preemption_poll_interval=0.05,
                   group='nova_sched_ext')
        self.useFixture(fixtures.MockPatch(
            'nova_sched_ext.preemption.evictor.load_session',
            side_effect=self._evictor_session))
        self.scheduler.stop()
        self.scheduler = self._setup_scheduler_service()
        self.addCleanup(self.scheduler.stop)

    def _setup_scheduler_service(self):
        return self.start_service('scheduler', manager=driver.CLASS_PATH)

    def _evictor_session(self):
        # The in-process API authenticates with headers (keystone is
        # stubbed out); the evictor is an admin, as in a real deployment.
        fixture = self.api_fixture
        return ks_session.Session(
            auth=token_endpoint.Token(fixture.base_url, 'admin'),
            additional_headers={
                'X-Auth-User': 'admin', 'X-User-Id': 'admin',
                'X-Auth-Project-Id': fixture.project_id,
                'X-Roles': 'admin,member,reader'})

    # -- helpers ------------------------------------------------------------

    def fill(self, count=8, shape=PRE):
        """Boot ``count`` preemptible servers one by one (oldest first)."""
        servers = []
        for index in range(count):
            results, booted = self.boot('pre-%d' % index, shape)
            self.assertEqual('ACTIVE', booted[0]['status'],
                             results[0].fault)
            servers.extend(booted)
        return servers

    def boot_at_once(self, shape, names):
        """Post one server per name, each from a thread; wait for all."""
        if self.image_id is None:
            self.image_id = self._build_server()['imageRef']
        bodies = [{'server': self._build_server(
            name=name, image_uuid=self.image_id,
            flavor_id=self.flavor_id(shape), networks='none')}
            for name in names]
        posted = []
        threads = [threading.Thread(
            target=lambda b=b: posted.append(self.api.post_server(b)))
            for b in bodies]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [self._wait_until_built(server) for server in posted]

    def existing(self, servers):
        """The ids of ``servers`` that the API still shows."""
        ids = {s['id'] for s in self.api.get_servers(detail=False)}
        return [s['id'] for s in servers if s['id'] in ids]

    def expected_usage(self):
        """Placement usage per host the servers that exist should make."""
        usage = {}
        for server in self.api.get_servers():
            if server['status'] != 'ACTIVE':
                continue
            flavor = server['flavor']
            pinned = flavor['extra_specs'].get('hw:cpu_policy') == \
                'dedicated'
            host = usage.setdefault(server['OS-EXT-SRV-ATTR:host'], {})
            rc = 'PCPU' if pinned else 'VCPU'
            for key, amount in ((rc, flavor['vcpus']),
                                ('MEMORY_MB', flavor['ram']),
                                ('DISK_GB', flavor['disk'])):
                host[key] = host.get(key, 0) + amount
        return usage

    def assertPlacementMatchesServers(self):
        # Nothing leaked, nothing lost: placement holds exactly what the
        # existing servers use.
        self.assertEqual(self.expected_usage(), self.host_usage())

    def evictions(self):
        return [n for n in self.notifier.versioned_notifications
                if n['event_type'] == notifications.EVENT_TYPE]


class PreemptionTest(PreemptionTestBase):

    def test_on_demand_boot_evicts_the_minimal_victims(self):
        servers = self.fill()
        self.assertEqual({'h1': {'PCPU': 8, 'MEMORY_MB': 2048, 'DISK_GB': 4},
                          'h2': {'PCPU': 8, 'MEMORY_MB': 2048,
                                 'DISK_GB': 4}}, self.host_usage())
        host_of = {s['id']: s['OS-EXT-SRV-ATTR:host'] for s in servers}

        results, booted = self.boot('on-demand', ON_DEMAND)

        self.assertEqual('ACTIVE', booted[0]['status'], results[0].fault)
        host = results[0].host
        left = self.existing(servers)
        gone = [s['id'] for s in servers if s['id'] not in left]
        # 4 pinned CPUs take two victims of 2, on the host it landed on.
        self.assertEqual(2, len(gone), gone)
        self.assertEqual({host}, {host_of[uuid] for uuid in gone})
        # The minimal strategy prefers the youngest victims.
        on_host = [s['id'] for s in servers if host_of[s['id']] == host]
        self.assertEqual(sorted(on_host[-2:]), sorted(gone))
        self.assertPlacementMatchesServers()
        # 4 for the new server, 2 x 2 for the preemptible ones left.
        self.assertEqual(8, self.host_usage()[host]['PCPU'])
        evictions = self.evictions()
        self.assertEqual(1, len(evictions))
        payload = evictions[0]['payload']
        self.assertEqual('EvictionPayload', payload['nova_object.name'])
        self.assertEqual('1.0', payload['nova_object.version'])
        data = payload['nova_object.data']
        self.assertEqual(booted[0]['id'], data['instance_uuid'])
        self.assertEqual(host, data['host'])
        self.assertEqual(sorted(gone), sorted(data['victims']))
        self.assertEqual('delete', data['action'])
        self.assertIn('Preemption: request', self.stdlog.logger.output)
        self.assertIn('evicts (delete) ', self.stdlog.logger.output)

    def test_shelve_offload_action_keeps_the_victims_for_their_owners(self):
        self.flags(preemption_action='shelve_offload', group='nova_sched_ext')
        servers = self.fill()

        results, booted = self.boot('on-demand', ON_DEMAND)

        self.assertEqual('ACTIVE', booted[0]['status'], results[0].fault)
        statuses = sorted(self.api.get_server(s['id'])['status']
                          for s in servers)
        self.assertEqual(['ACTIVE'] * 6 + ['SHELVED_OFFLOADED'] * 2,
                         statuses)
        self.assertPlacementMatchesServers()
        data = self.evictions()[0]['payload']['nova_object.data']
        self.assertEqual('shelve_offload', data['action'])

    def test_victims_are_only_taken_in_the_requested_zone(self):
        aggregate = self.api.post_aggregate(
            {'aggregate': {'name': 'zone-1', 'availability_zone': 'zone-1'}})
        self.api.add_host_to_aggregate(aggregate['id'], 'h1')
        servers = self.fill()
        host_of = {s['id']: s['OS-EXT-SRV-ATTR:host'] for s in servers}
        self.assertEqual(4, list(host_of.values()).count('h1'))
        # Two on-demand servers into zone-1 take all of h1's victims, none
        # of h2's, whatever their age.
        for name in ('od-1', 'od-2'):
            request = self._build_server(
                name=name, image_uuid=self.image_id,
                flavor_id=self.flavor_id(ON_DEMAND), networks='none',
                az='zone-1')
            server = self._wait_until_built(self.api.post_server(
                {'server': request}))
            self.assertEqual('ACTIVE', server['status'], server.get('fault'))
            self.assertEqual('h1', server['OS-EXT-SRV-ATTR:host'])
        left = self.existing(servers)
        self.assertEqual(['h2'] * 4, [host_of[uuid] for uuid in left])
        self.assertPlacementMatchesServers()

    def test_a_requested_host_is_where_victims_are_taken(self):
        servers = self.fill()
        host_of = {s['id']: s['OS-EXT-SRV-ATTR:host'] for s in servers}
        # Unconstrained, the youngest victims' host would be chosen.
        target = ({'h1', 'h2'} - {host_of[servers[-1]['id']]}).pop()
        request = self._build_server(
            name='on-demand', image_uuid=self.image_id,
            flavor_id=self.flavor_id(ON_DEMAND), networks='none',
            host=target)
        server = self._wait_until_built(self.api.post_server(
            {'server': request}))
        self.assertEqual('ACTIVE', server['status'], server.get('fault'))
        self.assertEqual(target, server['OS-EXT-SRV-ATTR:host'])
        left = self.existing(servers)
        gone = [s['id'] for s in servers if s['id'] not in left]
        self.assertEqual([target] * 2, [host_of[uuid] for uuid in gone])
        self.assertPlacementMatchesServers()

    def test_preemptible_boot_on_a_full_cloud_evicts_nothing(self):
        servers = self.fill()
        results, _ = self.boot('more-pre', PRE)
        self.assertTrue(results[0].no_valid_host, results[0].fault)
        self.assertEqual(len(servers), len(self.existing(servers)))
        self.assertEqual([], self.evictions())
        self.assertPlacementMatchesServers()

    def test_multi_create_not_fully_served_evicts_nothing(self):
        servers = self.fill()
        # Three whole hosts are asked for; there are two.
        results, _ = self.boot('big', ON_DEMAND_HOST, count=3)
        self.assertEqual([True] * 3, [r.no_valid_host for r in results],
                         [r.fault for r in results])
        self.assertEqual(len(servers), len(self.existing(servers)))
        self.assertEqual([], self.evictions())
        self.assertPlacementMatchesServers()

    def test_multi_create_served_by_eviction(self):
        servers = self.fill()
        results, booted = self.boot('big', ON_DEMAND_HOST, count=2)
        self.assertEqual(['ACTIVE'] * 2, [s['status'] for s in booted],
                         [r.fault for r in results])
        self.assertEqual(set(HOSTS), {r.host for r in results})
        self.assertEqual([], self.existing(servers))
        self.assertEqual(2, len(self.evictions()))
        self.assertPlacementMatchesServers()

    def test_compute_api_failing_mid_eviction_loses_nothing(self):
        servers = self.fill()
        real_delete = compute_proxy.Proxy.delete_server
        calls = []

        def delete_server(proxy, server, *args, **kwargs):
            calls.append(server)
            if len(calls) == 2:
                raise sdk_exc.HttpException(message='API down',
                                            http_status=503)
            return real_delete(proxy, server, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'openstack.compute.v2._proxy.Proxy.delete_server',
            delete_server))
        results, booted = self.boot('on-demand', ON_DEMAND)

        self.assertTrue(results[0].no_valid_host, results[0].fault)
        self.assertEqual(2, len(calls))
        # The first victim was deleted before the API failed; the second
        # is untouched and has its allocations back; the failed server
        # holds nothing.
        left = self.existing(servers)
        self.assertEqual(len(servers) - 1, len(left))
        self.assertNotIn(calls[0], left)
        self.assertIn(calls[1], left)
        self._wait_until_gone_from_placement(calls[0])
        self.assertEqual({}, self.placement.get(
            '/allocations/%s' % booted[0]['id']).body['allocations'])
        self.assertPlacementMatchesServers()
        self.assertIn('Preemption: request', self.stdlog.logger.output)
        self.assertIn('reservation released', self.stdlog.logger.output)

    def test_a_victim_no_longer_preemptible_is_not_evicted(self):
        servers = self.fill()
        # Between the plan and the eviction, one chosen victim stops being
        # preemptible (as after a resize): the re-check through the API
        # sees it, and nothing at all is evicted.
        real_reserve = reservation.reserve
        changed = []

        def reserve(client, context, new_instances, victims, *args):
            real_reserve(client, context, new_instances, victims, *args)
            uuid = sorted(victims)[-1]
            instance = self._instance(uuid)
            instance.flavor.extra_specs = {
                k: v for k, v in instance.flavor.extra_specs.items()
                if k != extra_specs.PREEMPTIBLE_KEY}
            instance.save()
            changed.append(uuid)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_sched_ext.preemption.reservation.reserve', reserve))
        results, booted = self.boot('on-demand', ON_DEMAND)
        self.assertTrue(results[0].no_valid_host, results[0].fault)
        self.assertEqual(1, len(changed))
        self.assertEqual(len(servers), len(self.existing(servers)))
        self.assertEqual({}, self.placement.get(
            '/allocations/%s' % booted[0]['id']).body['allocations'])
        self.assertPlacementMatchesServers()
        self.assertIn('server %s is not preemptible' % changed[0],
                      self.stdlog.logger.output)
        self.assertEqual([], self.evictions())

    def _wait_until_gone_from_placement(self, uuid):
        for _ in range(200):
            if not self.placement.get(
                    '/allocations/%s' % uuid).body['allocations']:
                return
            threading.Event().wait(0.05)
        self.fail('%s still has allocations' % uuid)


class ReservationRaceTest(PreemptionTestBase):

    def test_two_reservations_of_one_victim_cannot_both_succeed(self):
        # Two schedulers chose the same victim from the same view of
        # placement: both read its consumer generation before either
        # reserved.  (The placement fixture runs on one shared sqlite
        # connection, so real concurrent transactions are not isolated
        # here; the interleaving is reproduced step by step instead.)
        servers = self.fill(count=1)
        victim = servers[0]['id']
        host = servers[0]['OS-EXT-SRV-ATTR:host']
        client = self.scheduler.manager.placement_client
        seen_by_first = reservation.read_allocations(client, self.ctxt,
                                                     victim)
        seen_by_second = reservation.read_allocations(client, self.ctxt,
                                                      victim)
        rp_uuid = self.compute_rp_uuids[host]
        resources = {'PCPU': 2, 'MEMORY_MB': 512, 'DISK_GB': 1}
        first = '0d1b0f6e-0000-4000-8000-000000000001'
        second = '0d1b0f6e-0000-4000-8000-000000000002'

        reservation.reserve(client, self.ctxt,
                            [(first, rp_uuid, resources)],
                            {victim: seen_by_first}, 'project', 'user')
        exc = self.assertRaises(
            reservation.ReservationFailed, reservation.reserve, client,
            self.ctxt, [(second, rp_uuid, resources)],
            {victim: seen_by_second}, 'project', 'user')

        self.assertTrue(exc.conflict, exc)
        allocations = self.placement.get(
            '/resource_providers/%s/allocations' % rp_uuid).body
        self.assertEqual({first: {'resources': resources}},
                         allocations['allocations'])
        # The loser can release nothing of the winner's.
        reservation.release(client, self.ctxt, [second], {})
        self.assertEqual({host: resources}, self.host_usage())

    def test_concurrent_on_demand_boots_share_no_victim(self):
        servers = self.fill()
        # Each on-demand server needs a whole host: two fit, a third not.
        done = self.boot_at_once(ON_DEMAND_HOST, ('od-a', 'od-b', 'od-c'))
        active = [s for s in done if s['status'] == 'ACTIVE']
        self.assertEqual(2, len(active), [s.get('fault') for s in done])
        self.assertEqual(set(HOSTS),
                         {s['OS-EXT-SRV-ATTR:host'] for s in active})
        self.assertEqual([], self.existing(servers))
        self.assertPlacementMatchesServers()


class CapsTest(PreemptionTestBase):

    def test_caps_per_host_and_per_zone_hold(self):
        self.flags(preemptible_max_per_host=2, preemptible_max_per_az=3,
                   group='nova_sched_ext')
        placed = []
        for index in range(3):
            results, _ = self.boot('pre-%d' % index, PRE_SHARED)
            self.assertIsNotNone(results[0].host, results[0].fault)
            placed.append(results[0].host)
        self.assertLessEqual(max(placed.count(h) for h in HOSTS), 2)
        results, _ = self.boot('pre-over', PRE_SHARED)
        self.assertTrue(results[0].no_valid_host, results[0].fault)
        self.assertIn('refused by the preemptible caps: no room outside '
                      'the hosts at a cap (', self.stdlog.logger.output)
        self.assertIn('availability zones at their cap of 3: nova)',
                      self.stdlog.logger.output)
        self.assertPlacementMatchesServers()

    def test_cap_per_host_steers_to_other_hosts(self):
        self.flags(preemptible_max_per_host=1, group='nova_sched_ext')
        hosts = []
        for index in range(2):
            results, _ = self.boot('pre-%d' % index, PRE_SHARED)
            hosts.append(results[0].host)
        self.assertEqual(sorted(HOSTS), sorted(hosts))
        results, _ = self.boot('pre-over', PRE_SHARED, count=1)
        self.assertTrue(results[0].no_valid_host, results[0].fault)
        self.assertPlacementMatchesServers()

    def test_a_server_deleted_at_once_frees_its_place_under_the_cap(self):
        # Deleted before any count saw it in its cell, its placement
        # record must not keep counting until it runs out (10 minutes).
        self.flags(preemptible_max_per_az=1, group='nova_sched_ext')
        results, servers = self.boot('pre-first', PRE_SHARED)
        self.assertIsNotNone(results[0].host, results[0].fault)
        self.delete_servers(servers)
        results, _ = self.boot('pre-second', PRE_SHARED)
        self.assertIsNotNone(results[0].host, results[0].fault)
        self.assertPlacementMatchesServers()

    def test_multi_create_beyond_the_cap_fails_whole(self):
        self.flags(preemptible_max_per_az=2, group='nova_sched_ext')
        results, _ = self.boot('pre', PRE_SHARED, count=3)
        self.assertEqual([True] * 3, [r.no_valid_host for r in results])
        self.assertEqual({}, self.host_usage())


class SeveralSchedulersTestBase(PreemptionTestBase):
    """Three scheduler managers behind the one RPC topic, on one redis.

    Nova's test base runs one scheduler service; its RPC endpoint hands
    each request, in turn, to one of three manager objects, each with its
    own request wrappers and its own connection to a private
    ``redis-server``, as three scheduler processes would.  They share the
    databases and placement, as schedulers do.
    """

    #: scheduler managers in all
    SCHEDULERS = 3

    def setUp(self):
        # Before the scheduler starts: its backend is made on first use.
        self.redis = self.useFixture(redis_server.RedisServer())
        self.flags(coordination_url=self.redis.url,
                   group='nova_sched_ext')
        super().setUp()
        others = []
        for _ in range(self.SCHEDULERS - 1):
            manager = driver.PreemptionSchedulerManager()
            self.addCleanup(manager.cleanup_host)
            others.append(manager)
        self.served_by = base.serve_in_turn(self.scheduler.manager, others)


class SeveralSchedulersCapsTest(SeveralSchedulersTestBase):

    def test_concurrent_preemptible_boots_never_overshoot_the_cap(self):
        self.flags(preemptible_max_per_az=3, preemptible_max_per_host=2,
                   group='nova_sched_ext')
        for _round in range(2):
            done = self.boot_at_once(
                PRE_SHARED, ['race-%d' % n for n in range(8)])
            active = [s for s in done if s['status'] == 'ACTIVE']
            self.assertEqual(3, len(active), [s.get('fault') for s in done])
            hosts = [s['OS-EXT-SRV-ATTR:host'] for s in active]
            self.assertLessEqual(max(hosts.count(h) for h in HOSTS), 2)
            for server in done:
                if server['status'] != 'ACTIVE':
                    self.assertIn('No valid host', server['fault']['message'])
            self.assertPlacementMatchesServers()
            self.delete_servers(done)
        # Every manager served some of the requests.
        self.assertEqual(set(range(self.SCHEDULERS)), set(self.served_by))


class SimulatedCrash(BaseException):
    """A scheduler dying at a point of an eviction: no handler runs.

    A BaseException: the driver's ``except Exception`` clean-up never
    sees it, so what is left is what a killed process leaves.
    """


class EvictionCrashTest(PreemptionTestBase):
    """A scheduler dies mid-eviction; another one's reconcile cleans up.

    The scheduler's RPC endpoint turns the crash into what the conductor
    gets from a dead scheduler (its call times out) and stops the dead
    one's heartbeat, so its eviction record runs out.  A second manager
    object, on the same private redis, reconciles.
    """

    def setUp(self):
        # Before the scheduler starts: its backend is made on first use.
        self.redis = self.useFixture(redis_server.RedisServer())
        self.flags(coordination_url=self.redis.url,
                   preemption_eviction_ttl=2, group='nova_sched_ext')
        super().setUp()
        endpoint = self.scheduler.manager
        serve = endpoint.select_destinations
        self.dead_backend = coordination.for_manager(endpoint)

        def select_destinations(*args, **kwargs):
            try:
                return serve(*args, **kwargs)
            except SimulatedCrash as crash:
                # Dead: no more heartbeats; no answer, so the conductor's
                # call times out.
                self.dead_backend.stop()
                raise messaging.MessagingTimeout(
                    'the scheduler died at %s' % crash)

        endpoint.select_destinations = select_destinations
        self.at_point = []

    def crash_at(self, point, nth=1):
        """Die the ``nth`` time the eviction reaches ``point``."""
        def inject(name, **details):
            if name == point:
                self.at_point.append(details)
                if len(self.at_point) == nth:
                    raise SimulatedCrash(name)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_sched_ext.preemption.driver.FAULT_INJECTION', inject))

    def allocations(self, uuid):
        return self.placement.get('/allocations/%s' % uuid).body[
            'allocations']

    def crash_then_reconcile(self, point, nth=1):
        """Boot on a full cloud, die at ``point``; reconcile elsewhere.

        :returns: ``(preemptible servers, the failed server, the
            reconcile's summary)``
        """
        servers = self.fill()
        self.crash_at(point, nth)
        results, booted = self.boot('on-demand', ON_DEMAND)
        failed = booted[0]
        # The request failed, as after a dead scheduler: no answer.
        self.assertEqual('ERROR', failed['status'])
        self.assertIn('MessagingTimeout', failed['fault']['message'])
        # Its reservation outlived the scheduler.
        self.assertNotEqual({}, self.allocations(failed['id']))
        records = self.dead_backend.items(journal.KIND)
        self.assertEqual(1, len(records))
        # Another scheduler, once the record ran out.
        deadline = time.monotonic() + 120  # a hang guard, not a measure
        while records[0][2] is not None:
            self.assertLess(time.monotonic(), deadline, records)
            time.sleep(0.2)
            records = self.dead_backend.items(journal.KIND)
        other = driver.PreemptionSchedulerManager()
        self.addCleanup(other.cleanup_host)
        done = other.reconcile_evictions(self.ctxt)
        self.assertEqual(1, len(done), done)
        summary = done[0]
        self.assertEqual([failed['id']], summary['released'])
        self.assertEqual({}, self.allocations(failed['id']))
        # Nothing left to reconcile, by anyone.
        self.assertEqual([], coordination.for_manager(other).items(
            journal.KIND))
        self.assertEqual([], other.reconcile_evictions(self.ctxt))
        return servers, failed, summary

    def assertNothingLost(self, servers, summary, victims, deleted):
        """Deleted victims are gone; the others have their room back."""
        self.assertEqual(sorted(victims), sorted(
            summary['restored'] + summary['evicted'] + summary['left']))
        for uuid in deleted:
            try:
                self._wait_until_gone({'id': uuid})
            except api_client.OpenStackApiNotFoundException:
                pass
        left = self.existing(servers)
        self.assertEqual(len(servers) - len(deleted), len(left))
        for uuid in set(victims) - set(deleted):
            self.assertIn(uuid, left)
            self.assertNotEqual({}, self.allocations(uuid))
        self.assertPlacementMatchesServers()

    def test_dead_after_the_reservation_before_any_victim(self):
        servers, failed, summary = self.crash_then_reconcile('reserved')
        # The victims were never touched: they get their room back.
        victims = summary['restored']
        self.assertEqual(2, len(victims))
        self.assertEqual([], summary['evicted'])
        self.assertNothingLost(servers, summary, victims, deleted=[])

    def test_dead_between_two_victims(self):
        servers, failed, summary = self.crash_then_reconcile('evicted')
        first = self.at_point[0]['victim']
        # The first one's eviction was sent (the record did not know it
        # had been accepted: the API says so); the second one is restored.
        self.assertEqual(1, len(summary['restored']))
        self.assertNotIn(first, summary['restored'])
        victims = summary['restored'] + [first]
        self.assertNothingLost(servers, summary, victims, deleted=[first])

    def test_dead_after_the_last_victim(self):
        servers, failed, summary = self.crash_then_reconcile('evicted', 2)
        victims = [details['victim'] for details in self.at_point]
        self.assertEqual([], summary['restored'])
        self.assertNothingLost(servers, summary, victims, deleted=victims)

    def test_dead_with_every_victim_gone_before_answering(self):
        servers, failed, summary = self.crash_then_reconcile('gone')
        self.assertEqual([], summary['restored'])
        self.assertEqual(2, len(summary['evicted']))
        self.assertNothingLost(servers, summary, summary['evicted'],
                               deleted=summary['evicted'])


class FastNUMAFilterPreemptionTest(PreemptionTestBase):
    """Eviction with FastNUMATopologyFilter in NUMATopologyFilter's place.

    The victim search must not run it on hosts whose room the victims
    still hold (``driver.USAGE_FILTERS``), or no host would ever qualify.
    """

    NUMA_FIT = scenarios.FAST_NUMA

    test_on_demand_boot_evicts_the_minimal_victims = (
        PreemptionTest.test_on_demand_boot_evicts_the_minimal_victims)


class ReloadedHostStatePreemptionTest(base.ReloadedHostStateMixin,
                                      PreemptionTest):
    """The evictions with the host state built as Nova does."""

    # Two of them: each costs some 20 s, and the reload is Nova's own path.
    VARIANT_TESTS = ('test_multi_create_served_by_eviction',
                     'test_compute_api_failing_mid_eviction_loses_nothing')


class ReloadedHostStateReservationRaceTest(base.ReloadedHostStateMixin,
                                           ReservationRaceTest):
    """Concurrent evictions, the host state built as Nova does."""

    VARIANT_TESTS = ('test_concurrent_on_demand_boots_share_no_victim',)
