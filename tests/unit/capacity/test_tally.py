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

"""The capacity's sums: service.Tally and service.Tallied.

A Tallied brought up to date host by host (:meth:`Tallied.changed`, what
the kept state does) must be what :meth:`Tallied.of` makes of the same
hosts summed from nothing (what a full count does), whatever changed: a
host's figures, a host skipped or counted again, a host moved to another
cell, zone or aggregate, a host that leaves or joins the selection, hosts
that draw from sharing providers.
"""

import random
import typing

from nova_sched_ext.capacity import pools
from nova_sched_ext.capacity import service
from nova_sched_ext.capacity import sources
from tests import base

NAMES = ('small', 'medium', 'large')
CELLS = ('cell1', 'cell2')
ZONES = ('az-a', 'az-b', 'nova')
REASONS = (sources.SKIP_SERVICE_DOWN, sources.SKIP_SERVICE_DISABLED,
           sources.SKIP_NO_PROVIDER)


class Aggregate(typing.NamedTuple):
    id: int
    name: str


AGGREGATES = tuple(Aggregate(i, 'agg-%d' % i) for i in range(4))


class FakeHost(typing.NamedTuple):
    """What the sums read of a ``sources.Host``."""

    uuid: typing.Optional[str]
    name: str
    nodename: str
    cell_name: str
    availability_zone: str
    aggregates: tuple


def random_host(rng, number):
    return FakeHost(
        # a node that never reported has no UUID
        uuid=None if number % 7 == 6 else 'node-%d' % number,
        name='h%d' % (number % 5), nodename='n%d' % number,
        cell_name=rng.choice(CELLS), availability_zone=rng.choice(ZONES),
        aggregates=tuple(rng.sample(AGGREGATES, rng.randint(0, 2))))


def random_outcome(rng, host):
    if rng.random() < 0.25:
        return service.Outcome(host, rng.choice(REASONS), None)
    capacity = {name: rng.choice((0, 0, 1, 3, 8)) for name in NAMES}
    host_pools = {}
    if rng.random() < 0.3:
        name = rng.choice(NAMES)
        host_pools[name] = pools.HostPools(
            rng.randint(1, 4), {'DISK_GB': (rng.choice(('p1', 'p2')),)})
    return service.Outcome(host, None, service.HostResult(
        host=host, capacity=capacity,
        placement_only={name: rng.randint(0, 9) for name in NAMES},
        free_vcpus=rng.randint(0, 16), free_memory_mb=rng.randint(0, 4096),
        fallbacks=rng.randint(0, 2), pools=host_pools))


class TallyTest(base.TestCase):

    def assertSameSums(self, expected, actual, what):
        self.assertEqual(expected.overall, actual.overall, what)
        self.assertEqual(expected.tallies, actual.tallies, what)
        self.assertEqual(expected.outcomes, actual.outcomes, what)

    def check_changes(self, by, agg, seed):
        rng = random.Random(seed)
        hosts = [random_host(rng, number) for number in range(24)]
        outcomes = {service.host_key(h): random_outcome(rng, h)
                    for h in hosts}
        tallied = service.Tallied.of(by, agg, NAMES, dict(outcomes))
        for step in range(30):
            changes = {}
            for _ in range(rng.randint(1, 5)):
                kind = rng.choice(('figures', 'moved', 'left', 'joined'))
                if kind == 'joined' or not outcomes:
                    host = random_host(rng, 100 + step * 10 + len(changes))
                    changes[service.host_key(host)] = random_outcome(
                        rng, host)
                    continue
                key = rng.choice(sorted(outcomes, key=str))
                if kind == 'left':
                    changes[key] = None
                    continue
                host = outcomes[key].host
                if kind == 'moved':
                    host = random_host(rng, int(host.nodename[1:]))._replace(
                        uuid=host.uuid)
                    if host.uuid is None:
                        # a new Host object: the kept state names it anew
                        changes[key] = None
                        key = service.host_key(host)
                changes[key] = random_outcome(rng, host)
            for key, outcome in changes.items():
                if outcome is None:
                    outcomes.pop(key, None)
                else:
                    outcomes[key] = outcome
            tallied = tallied.changed(changes)
            self.assertSameSums(
                service.Tallied.of(by, agg, NAMES, dict(outcomes)), tallied,
                'by %s, step %d' % (by, step))

    def test_changed_sums_equal_new_sums(self):
        for seed, (by, agg) in enumerate((
                ('cloud', None), ('cell', None), ('az', None),
                ('aggregate', None), ('aggregate', AGGREGATES[1]))):
            self.check_changes(by, agg, seed)

    def test_a_group_left_by_all_its_hosts_is_no_longer_tallied(self):
        host = FakeHost('node-1', 'h1', 'n1', 'cell1', 'az-a', ())
        other = FakeHost('node-2', 'h2', 'n2', 'cell2', 'az-a', ())
        outcomes = {h.uuid: service.Outcome(h, sources.SKIP_SERVICE_DOWN,
                                            None) for h in (host, other)}
        tallied = service.Tallied.of('cell', None, NAMES, outcomes)
        self.assertEqual({'cell1', 'cell2'}, set(tallied.tallies))
        tallied = tallied.changed({'node-1': None})
        self.assertEqual({'cell2'}, set(tallied.tallies))
        self.assertEqual({sources.SKIP_SERVICE_DOWN: 1},
                         tallied.overall.skipped)

    def test_the_hosts_own_scopes_need_the_selections_order(self):
        rng = random.Random(3)
        hosts = [random_host(rng, number) for number in range(3)]
        tallied = service.Tallied.of('host', None, NAMES, {
            service.host_key(h): random_outcome(rng, h) for h in hosts})
        flavors = [FakeFlavor(name) for name in NAMES]
        self.assertEqual(
            sum(1 for o in tallied.outcomes.values() if o.result),
            len(service.scopes_by('host', tallied, flavors, [])))
        changed = tallied.changed({'node-0': None})
        self.assertRaises(ValueError, service.scopes_by, 'host', changed,
                          flavors, [])


class FakeFlavor(typing.NamedTuple):
    name: str
    vcpus: int = 1
    memory_mb: int = 512
