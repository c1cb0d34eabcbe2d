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

"""Several schedulers race preemptible boots against the caps.

Each scheduler is a manager object of its own with the ``preemptible_caps``
wrapper and its own connection to a private ``redis-server``, and runs two
worker threads; they share nothing else but the cloud they place into
(:class:`FakeCloud`: the cells, which show an instance only once the
conductor created it, and placement, where Nova's claim takes a while).
With the lock on the shared backend the caps hold in every round; with
the test-only switch that leaves the count-and-claim unlocked across
schedulers (each scheduler still serialises its own requests, as before
the shared lock), the same race overshoots them.
"""

import collections
import random
import threading
import time
from unittest import mock

import fixtures
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test

from nova_sched_ext.preemption import caps
from nova_sched_ext.preemption import census
from nova_sched_ext.preemption import extra_specs
from tests import redis_server

ZONES = {'a1': 'az-a', 'a2': 'az-a', 'b1': 'az-b', 'b2': 'az-b'}
PER_AZ = 3
PER_HOST = 2
SCHEDULERS = 3
WORKERS = 2
BOOTS_PER_WORKER = 4
ROUNDS = 8
#: seconds Nova takes to filter, weigh and claim in placement
CLAIM_TIME = 0.01


class FakeCloud(object):
    """The cells and placement every scheduler of the test shares."""

    def __init__(self, seed):
        self.lock = threading.Lock()
        self.random = random.Random(seed)
        #: {instance uuid: host} claimed in placement
        self.claimed = {}
        #: instances the conductor created in a cell
        self.in_cells = set()

    def instances(self, context, *args, **kwargs):
        with self.lock:
            return [mock.Mock(uuid=uuid, host=host)
                    for uuid, host in self.claimed.items()
                    if uuid in self.in_cells]

    def nova_select(self, context, spec_obj, instance_uuids):
        """Nova's own scheduling: any host not ignored, then a claim."""
        ignored = set(spec_obj.ignore_hosts or ())
        zone = spec_obj.availability_zone
        with self.lock:
            hosts = [h for h in sorted(ZONES) if h not in ignored and
                     (zone is None or ZONES[h] == zone)]
            host = self.random.choice(hosts) if hosts else None
        if host is None:
            raise exception.NoValidHost(reason='no host')
        time.sleep(CLAIM_TIME)
        with self.lock:
            self.claimed[instance_uuids[0]] = host
        return [[objects.Selection(service_host=host)]]

    def release(self, context, uuid, force=False):
        with self.lock:
            self.claimed.pop(uuid, None)

    def conductor_builds(self, uuid):
        # Half of the instances reach their cell at once, the others
        # only after the round: the caps see those as pending records.
        with self.lock:
            if self.random.random() < 0.5:
                self.in_cells.add(uuid)

    def per_zone(self):
        return collections.Counter(ZONES[h] for h in self.claimed.values())

    def per_host(self):
        return collections.Counter(self.claimed.values())


class TestSchedulersRaceTheCaps(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.redis = self.useFixture(redis_server.RedisServer())
        self.flags(coordination_url=self.redis.url,
                   preemptible_max_per_az=PER_AZ,
                   preemptible_max_per_host=PER_HOST,
                   group='nova_sched_ext')
        self.cloud = None
        self.useFixture(fixtures.MockPatchObject(
            census, 'preemptible_instances',
            side_effect=lambda *a, **k: self.cloud.instances(*a, **k)))
        self.useFixture(fixtures.MockPatchObject(
            census, 'host_availability_zones',
            side_effect=lambda ctx: dict(ZONES)))
        self.useFixture(fixtures.MockPatchObject(
            census, 'needs_new_room', return_value=True))
        # Nobody deletes an instance in this cloud.
        self.useFixture(fixtures.MockPatchObject(
            census, 'deleted_instance_uuids', return_value=set()))
        self.useFixture(fixtures.MockPatchObject(
            objects.HostMappingList, 'get_all',
            return_value=[mock.Mock(host=h) for h in ZONES]))
        self.flavor = objects.Flavor(name='pre', extra_specs={
            extra_specs.PREEMPTIBLE_KEY: 'true'})

    def scheduler(self):
        """A scheduler manager of its own, with the caps wrapper."""
        manager = mock.Mock()
        manager.placement_client.delete_allocation_for_instance.\
            side_effect = lambda *a, **k: self.cloud.release(*a, **k)
        wrapper = caps.PreemptibleCaps(manager)
        self.addCleanup(wrapper.backend.stop)
        return wrapper

    def race(self, seed):
        """One round; returns ``(per zone, per host)`` at the end."""
        self.redis.flush()
        self.cloud = FakeCloud(seed)
        schedulers = [self.scheduler() for _ in range(SCHEDULERS)]
        start = threading.Barrier(SCHEDULERS * WORKERS)
        errors = []

        def worker(wrapper, number):
            start.wait()
            for boot in range(BOOTS_PER_WORKER):
                uuid = '%08d-0000-4000-8000-%012d' % (seed, number * 100 +
                                                      boot)
                spec_obj = objects.RequestSpec(
                    flavor=self.flavor, ignore_hosts=None,
                    availability_zone='az-a' if number % 3 == 0 else None)
                context = nova_context.RequestContext(
                    'u', 'p', request_id='req-%d-%d' % (number, boot))
                try:
                    wrapper(self.cloud.nova_select, context, spec_obj,
                            [uuid])
                except exception.NoValidHost:
                    continue
                except Exception as exc:
                    errors.append(exc)
                    return
                self.cloud.conductor_builds(uuid)

        threads = [threading.Thread(target=worker, args=(
            schedulers[n % SCHEDULERS], n))
            for n in range(SCHEDULERS * WORKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        for wrapper in schedulers:
            wrapper.backend.stop()
        return self.cloud.per_zone(), self.cloud.per_host()

    def test_the_caps_hold_with_several_schedulers(self):
        for seed in range(ROUNDS):
            per_zone, per_host = self.race(seed)
            self.assertLessEqual(max(per_zone.values()), PER_AZ,
                                 'round %d: %s' % (seed, per_zone))
            self.assertLessEqual(max(per_host.values()), PER_HOST,
                                 'round %d: %s' % (seed, per_host))
            # The caps were the limit, not a lack of attempts.
            self.assertEqual(2 * PER_AZ, sum(per_zone.values()),
                             'round %d: %s' % (seed, per_zone))

    def test_without_the_shared_lock_the_same_race_overshoots(self):
        self.useFixture(fixtures.MockPatchObject(
            caps, '_LOCK_ACROSS_SCHEDULERS', False))
        over = []
        for seed in range(ROUNDS):
            per_zone, per_host = self.race(seed)
            if max(per_zone.values()) > PER_AZ or \
                    max(per_host.values()) > PER_HOST:
                over.append((seed, dict(per_zone), dict(per_host)))
        self.assertNotEqual([], over)
