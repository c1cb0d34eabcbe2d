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

"""The whole broker on fake clouds at the openstacksdk boundary.

Each test checks the issue's proof list on three fake clusters: where the
servers landed, and that no server and no port is left anywhere else.
"""

from nova_sched_ext.broker import choosers
from nova_sched_ext.broker import clusters as broker_clusters
from nova_sched_ext.broker import planning
from nova_sched_ext.broker import service

from tests import base
from tests.unit.broker import fake_cloud
from tests.unit.broker import helpers as h


def request(**kw):
    kw.setdefault('family', 'v.c3.large')
    kw.setdefault('count', 2)
    return planning.Request(image='cirros', network='private', **kw)


class BrokerTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = h.make_config()

    def world(self, room, conf=None):
        conf = conf or self.conf
        self.clouds = h.make_clouds(conf, room)
        self.broker = h.make_broker(conf, self.clouds)
        return self.broker

    def assertOnlyIn(self, cluster, count):
        """``count`` servers, ACTIVE with a port each, in ``cluster`` only."""
        for name, cloud in self.clouds.items():
            if name == cluster:
                self.assertEqual(count, len(cloud.active()), name)
                self.assertEqual(count, len(cloud.servers), name)
                self.assertEqual(count, len(cloud.ports), name)
            else:
                self.assertEqual({}, cloud.servers, name)
                self.assertEqual({}, cloud.ports, name)
                self.assertEqual(0, cloud.networks['private'].used_ips)

    def assertPlaced(self, result, cluster, flavor, count=2):
        self.assertTrue(result.placed, result.error)
        self.assertEqual((cluster, flavor),
                         (result.cluster, result.variant.flavor))
        self.assertEqual(count, len(result.servers))
        self.assertEqual(sorted(result.servers),
                         self.clouds[cluster].active())
        self.assertOnlyIn(cluster, count)


class TestVariants(BrokerTest):

    def test_variant_order_is_honoured(self):
        room = {n: {f: 5 for f in h.VARIANTS} for n in self.conf.clusters}
        room['east-1'][h.DPDK_SINGLE] = 9
        result = self.world(room).place(request())
        self.assertPlaced(result, 'east-1', h.DPDK_SINGLE)
        self.assertEqual([('east-1', h.DPDK_SINGLE, 'active')],
                         [(a.cluster, a.flavor, a.outcome)
                          for a in result.attempts])

    def test_a_full_dpdk_pool_converts_to_the_normal_pool(self):
        room = {'east-1': {h.DPDK_SINGLE: 1, h.DPDK_DUAL: 0,
                           h.NORMAL_SINGLE: 4},
                'west-1': {h.DPDK_SINGLE: 0, h.DPDK_DUAL: 1,
                           h.NORMAL_SINGLE: 3}}
        result = self.world(room).place(request())
        self.assertPlaced(result, 'east-1', h.NORMAL_SINGLE)

    def test_single_numa_first_then_dual(self):
        room = {'east-2': {h.NORMAL_SINGLE: 1, h.NORMAL_DUAL: 6}}
        result = self.world(room).place(request())
        self.assertPlaced(result, 'east-2', h.NORMAL_DUAL)
        room = {'east-2': {h.NORMAL_SINGLE: 2, h.NORMAL_DUAL: 6}}
        result = self.world(room).place(request())
        self.assertPlaced(result, 'east-2', h.NORMAL_SINGLE)

    def test_role_rules(self):
        room = {'west-1': {h.DPDK_DUAL: 5, h.NORMAL_DUAL: 5}}
        result = self.world(room).place(request(role='auto-scaling'))
        self.assertFalse(result.placed)
        self.assertIn('no cluster can take 2 x v.c3.large for role '
                      'auto-scaling', result.error)
        self.assertEqual(0, sum(c.creates for c in self.clouds.values()))
        result = self.world(room).place(request(role='pay-as-you-go'))
        self.assertPlaced(result, 'west-1', h.DPDK_DUAL)
        room = {'west-1': {h.DPDK_SINGLE: 5, h.NORMAL_DUAL: 5}}
        result = self.world(room).place(request(role='preemptible'))
        self.assertPlaced(result, 'west-1', h.NORMAL_DUAL)


class TestFilters(BrokerTest):

    def test_cluster_without_the_image_or_addresses_is_skipped(self):
        room = {n: {h.NORMAL_SINGLE: 5} for n in self.conf.clusters}
        room['east-1'][h.NORMAL_SINGLE] = 9
        room['east-2'][h.NORMAL_SINGLE] = 8
        broker = self.world(room)
        self.clouds['east-1'].images.clear()
        self.clouds['east-2'].networks['private'].total_ips = 1
        result = broker.place(request())
        self.assertPlaced(result, 'west-1', h.NORMAL_SINGLE)
        self.assertEqual(0, self.clouds['east-1'].creates)
        self.assertEqual(0, self.clouds['east-2'].creates)

    def test_cross_cluster_deployment_set_cap(self):
        room = {n: {h.NORMAL_SINGLE: 10} for n in self.conf.clusters}
        broker = self.world(room)
        first = broker.place(request(deployment_set='db', count=2))
        self.assertTrue(first.placed, first.error)
        # the set's group in the first cluster holds the members
        groups = list(self.clouds[first.cluster].groups.values())
        self.assertEqual(['db'], [g.name for g in groups])
        self.assertEqual(sorted(first.servers), sorted(groups[0].member_ids))
        # the next two land elsewhere (most capacity), the cap is 5
        second = broker.place(request(deployment_set='db', count=2))
        self.assertTrue(second.placed, second.error)
        self.assertNotEqual(first.cluster, second.cluster)
        third = broker.place(request(deployment_set='db', count=2))
        self.assertFalse(third.placed)
        self.assertEqual('deployment set db has 4 members across the '
                         'clusters; 2 more would pass its cap of 5',
                         third.error)
        self.assertEqual(4, sum(len(c.servers)
                                for c in self.clouds.values()))

    def test_a_same_named_group_of_another_project_is_not_the_set(self):
        room = {n: {h.NORMAL_SINGLE: 10} for n in self.conf.clusters}
        room['east-1'][h.NORMAL_SINGLE] = 20
        broker = self.world(room)
        east1 = self.clouds['east-1']
        # project-x's own "web", 4 members: with ours it would pass the
        # cap of 5, and it must not get our servers either
        theirs = east1.add_group('web', 'project-x',
                                 ['x-1', 'x-2', 'x-3', 'x-4'])
        result = broker.place(request(deployment_set='web', count=2))
        self.assertPlaced(result, 'east-1', h.NORMAL_SINGLE)
        self.assertEqual(['x-1', 'x-2', 'x-3', 'x-4'], theirs.member_ids)
        ours = [g for g in east1.groups.values() if g is not theirs]
        self.assertEqual([('web', fake_cloud.FakeCloud.PROJECT)],
                         [(g.name, g.project_id) for g in ours])
        self.assertEqual(sorted(result.servers), sorted(ours[0].member_ids))
        # the next request of the set counts our 2 members, not theirs
        second = broker.place(request(deployment_set='web', count=3))
        self.assertTrue(second.placed, second.error)
        third = broker.place(request(deployment_set='web', count=1))
        self.assertEqual('deployment set web has 5 members across the '
                         'clusters; 1 more would pass its cap of 5',
                         third.error)
        self.assertEqual(4, len(theirs.member_ids))

    def test_a_listing_with_other_projects_groups_is_filtered(self):
        # an account whose listing returns every project's groups (a
        # proxy, a policy): the project check still keeps ours apart
        room = {'east-1': {h.NORMAL_SINGLE: 20}}
        broker = self.world(room)
        east1 = self.clouds['east-1']
        theirs = east1.add_group('web', 'project-x', ['x-1'])
        listing = east1.compute.server_groups
        east1.compute.server_groups = (
            lambda all_projects=False: listing(all_projects=True))
        result = broker.place(request(deployment_set='web', count=2))
        self.assertPlaced(result, 'east-1', h.NORMAL_SINGLE)
        self.assertEqual(['x-1'], theirs.member_ids)

    def test_preemptible_cap_per_datacenter(self):
        room = {n: {h.SPOT_NORMAL: 10, h.SPOT_DPDK: 10}
                for n in self.conf.clusters}
        room['east-1'][h.SPOT_DPDK] = 20
        broker = self.world(room)
        spot = request(family='v.c3.large.spot', role='preemptible',
                       count=3)
        first = broker.place(spot)
        self.assertEqual(('east-1', h.SPOT_DPDK),
                         (first.cluster, first.variant.flavor))
        # dc-east (cap 4) holds 3: the next 3 go to dc-west
        second = broker.place(spot)
        self.assertEqual('west-1', second.cluster)
        reasons = {v.cluster: v.reason for v in second.plan.verdicts
                   if v.variant is None}
        self.assertIn('data center dc-east holds 3 preemptible',
                      reasons['east-2'])
        self.assertEqual(0, len(self.clouds['east-2'].servers))


class TestFallback(BrokerTest):

    def test_stale_capacity_lands_in_the_other_cluster(self):
        room = {'east-1': {h.NORMAL_SINGLE: 8},
                'east-2': {h.NORMAL_SINGLE: 3}}
        broker = self.world(room)
        east1 = self.clouds['east-1']
        # Filled behind the broker's back, between its capacity read and
        # its boot: Nova answers NoValidHost.
        east1.on_create.append(lambda: east1.fill(h.NORMAL_SINGLE))
        result = broker.place(request())
        self.assertPlaced(result, 'east-2', h.NORMAL_SINGLE)
        self.assertEqual(
            [('east-1', 'failed'), ('east-2', 'active')],
            [(a.cluster, a.outcome) for a in result.attempts])
        self.assertIn(fake_cloud.NO_VALID_HOST, result.attempts[0].reason)
        self.assertEqual(1, east1.creates)

    def test_ports_left_by_a_failed_boot_are_deleted(self):
        room = {'east-1': {h.NORMAL_SINGLE: 8},
                'east-2': {h.NORMAL_SINGLE: 3}}
        broker = self.world(room)
        east1 = self.clouds['east-1']
        east1.leak_ports = True
        east1.build_polls = None   # never ACTIVE: the boot times out
        result = broker.place(request())
        self.assertPlaced(result, 'east-2', h.NORMAL_SINGLE)
        self.assertIn('only 0 of 2 servers ACTIVE after 30 s',
                      result.attempts[0].reason)
        self.assertIn('delete_port', east1.calls)

    def test_one_cluster_down_or_refusing_credentials(self):
        room = {n: {h.NORMAL_SINGLE: 5} for n in self.conf.clusters}
        room['east-1'][h.NORMAL_SINGLE] = 9
        broker = self.world(room)
        self.clouds['east-1'].go_down()
        self.clouds['west-1'].refuse_credentials()
        result = broker.place(request())
        self.assertPlaced(result, 'east-2', h.NORMAL_SINGLE)
        reasons = {v.cluster: v.reason for v in result.plan.verdicts
                   if v.variant is None}
        self.assertIn('unreachable: Unable to establish connection',
                      reasons['east-1'])
        self.assertIn('requires authentication', reasons['west-1'])

    def test_a_cluster_that_cannot_be_connected_to(self):
        room = {n: {h.NORMAL_SINGLE: 5} for n in self.conf.clusters}
        clouds = h.make_clouds(self.conf, room)
        self.clouds = clouds

        def connect(cluster):
            if cluster.name == 'west-1':
                raise fake_cloud.sdk_exc.ConfigException(
                    'Cloud west-1 was not found.')
            return clouds[cluster.name]
        clock = h.FakeClock()
        broker = service.Broker(self.conf, connect=connect, clock=clock,
                                sleep=clock.sleep)
        result = broker.place(request())
        self.assertTrue(result.placed)
        reasons = {v.cluster: v.reason for v in result.plan.verdicts
                   if v.variant is None}
        self.assertEqual('unreachable: cannot connect: Cloud west-1 was not '
                         'found.', reasons['west-1'])

    def test_capacity_api_down_is_tried_last_on_novas_answer(self):
        room = {'east-1': {h.NORMAL_SINGLE: 3},
                'east-2': {h.NORMAL_SINGLE: 9}}
        broker = self.world(room)
        east1 = self.clouds['east-1']
        east2 = self.clouds['east-2']
        east2.capacity_status = 503
        east1.on_create.append(lambda: east1.fill(h.NORMAL_SINGLE))
        result = broker.place(request())
        self.assertPlaced(result, 'east-2', h.NORMAL_SINGLE)
        self.assertEqual(['east-1', 'east-2'],
                         [a.cluster for a in result.attempts])
        unknown = [c for c in result.plan.candidates if c.capacity is None]
        self.assertEqual({'east-2'}, {c.cluster for c in unknown})
        self.assertEqual(unknown, result.plan.candidates[-len(unknown):])

    def test_bounded_attempts_and_nothing_left(self):
        room = {n: {f: 5 for f in h.VARIANTS} for n in self.conf.clusters}
        conf = h.make_config(broker={'max_attempts': 3, 'boot_timeout': 10,
                                     'poll_interval': 1})
        broker = self.world(room, conf)
        for cloud in self.clouds.values():
            cloud.on_create.append(lambda c=cloud: c.room.clear())
        result = broker.place(request())
        self.assertFalse(result.placed)
        self.assertEqual(3, len(result.attempts))
        self.assertIn('3 boots failed (broker.max_attempts)', result.error)
        for cloud in self.clouds.values():
            self.assertEqual({}, cloud.servers)
            self.assertEqual({}, cloud.ports)

    def _drop_polls(self, cloud, drops):
        """Make the next ``drops`` server listings fail as dropped ones."""
        real_servers = cloud.compute.servers
        left = [drops]

        def servers(**kw):
            if left[0] > 0:
                left[0] -= 1
                raise fake_cloud.ks_exc.ConnectFailure(
                    "('Connection aborted.', RemoteDisconnected('Remote end "
                    "closed connection without response'))")
            return real_servers(**kw)
        cloud.compute.servers = servers
        return left

    def test_a_dropped_poll_does_not_fail_the_boot(self):
        room = {'east-1': {h.NORMAL_SINGLE: 8},
                'east-2': {h.NORMAL_SINGLE: 3}}
        broker = self.world(room)
        east1 = self.clouds['east-1']
        left = self._drop_polls(
            east1, broker_clusters.POLLS_BEFORE_GIVING_UP - 1)
        result = broker.place(request())
        self.assertEqual(0, left[0])
        self.assertPlaced(result, 'east-1', h.NORMAL_SINGLE)
        self.assertEqual([('east-1', 'active')],
                         [(a.cluster, a.outcome) for a in result.attempts])

    def test_a_cluster_that_keeps_failing_polls_is_given_up(self):
        room = {'east-1': {h.NORMAL_SINGLE: 8},
                'east-2': {h.NORMAL_SINGLE: 3}}
        broker = self.world(room)
        east1 = self.clouds['east-1']
        self._drop_polls(east1, broker_clusters.POLLS_BEFORE_GIVING_UP)
        result = broker.place(request())
        self.assertPlaced(result, 'east-2', h.NORMAL_SINGLE)
        self.assertEqual([('east-1', 'failed'), ('east-2', 'active')],
                         [(a.cluster, a.outcome) for a in result.attempts])
        self.assertIn('stopped answering during the boot (%d polls in a row '
                      'failed)' % broker_clusters.POLLS_BEFORE_GIVING_UP,
                      result.attempts[0].reason)
        # the boot given up on was deleted, ports and all
        self.assertEqual({}, east1.servers)
        self.assertEqual({}, east1.ports)

    def test_a_cleanup_that_cannot_finish_stops_the_request(self):
        room = {'east-1': {h.NORMAL_SINGLE: 8},
                'east-2': {h.NORMAL_SINGLE: 3}}
        broker = self.world(room)
        east1 = self.clouds['east-1']
        east1.on_create.append(lambda: east1.fill(h.NORMAL_SINGLE))
        real_delete = east1.compute.delete_server

        def delete_then_fail(server_id, ignore_missing=True):
            real_delete(server_id, ignore_missing)
            east1.go_down()
        east1.compute.delete_server = delete_then_fail
        result = broker.place(request())
        self.assertFalse(result.placed)
        self.assertIn('could not be cleaned up', result.error)
        self.assertIn('by hand', result.error)
        self.assertEqual(0, self.clouds['east-2'].creates)

    def test_round_robin_chooser_from_the_configuration(self):
        conf = h.make_config(broker={'chooser': 'round-robin'})
        room = {n: {h.NORMAL_SINGLE: 9} for n in conf.clusters}
        room['west-1'][h.NORMAL_SINGLE] = 20
        broker = self.world(room, conf)
        self.assertIsInstance(broker.chooser, choosers.RoundRobin)
        placed = [broker.place(request(count=1)).cluster for _ in range(4)]
        self.assertEqual(['east-1', 'east-2', 'west-1', 'east-1'], placed)
