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

"""A state started from a snapshot file equals a full read.

On openstack-placement itself (in this process): a state is saved, the
cloud changes behind its back as other processes change it (claims and
frees of any consumer, inventory, trait and aggregate changes, nodes added
and removed), then a new state starts from the file.  Its first poll reads
only what placement marked changed; it never shows more room than
placement has; once every provider taken from the file has been verified
it equals a full read.  A file that cannot be used costs a full read and
one line.
"""

import json
import logging
import os

import fixtures
from oslo_config import fixture as config_fixture

from nova_sched_ext.cloud import placement as p
from nova_sched_ext.cloud import provider_snapshot
from nova_sched_ext.cloud import provider_state
from nova_sched_ext import conf
from nova_sched_ext_tools import placement_direct
from tests import base
from tests.unit.cloud import placement_fixtures as pf
from tests.unit.cloud import test_provider_state

CONTEXT = placement_direct.Context('req-nse-test-provider-snapshot')


class Clock(object):

    def __init__(self, now=5000.0):
        self.now = now

    def __call__(self):
        return self.now


def provider(uuid='a', generation=3, **fields):
    values = dict(
        uuid=uuid, name='node-%s' % uuid, parent_uuid=None,
        inventories={'VCPU': p.Inventory(total=16, reserved=1, min_unit=1,
                                         max_unit=8, step_size=1,
                                         allocation_ratio=4.0)},
        usages={'VCPU': 5}, traits=frozenset(['HW_CPU_X86_AVX2']),
        aggregates=frozenset(['agg-1']), generation=generation)
    values.update(fields)
    return p.Provider(**values)


class TestFile(base.TestCase):
    """The file itself: what is written is what is taken."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'providers.json')
        self.wall = Clock(1.0e9)
        self.clock = Clock()
        self.log = self.useFixture(fixtures.FakeLogger(
            name=provider_snapshot.__name__, level=logging.DEBUG))

    def snapshot(self, **options):
        values = dict(interval=300, max_age=3600, verify_per_poll=0)
        values.update(options)
        return provider_snapshot.Snapshot(
            self.path, what='Kept test state', wall_clock=self.wall,
            clock=self.clock, **values)

    def test_what_is_saved_is_what_is_taken(self):
        providers = [provider('a'), provider('b', generation=None,
                                             parent_uuid='a', usages={},
                                             aggregates=frozenset())]
        self.assertTrue(self.snapshot().save(providers))
        self.assertEqual(0o640, os.stat(self.path).st_mode & 0o777)
        self.assertEqual([], [name for name in os.listdir(self.dir)
                              if name.endswith('.tmp')])
        taken = self.snapshot().load()
        self.assertEqual(providers, taken)
        self.assertIsInstance(
            taken[0].inventories['VCPU'].allocation_ratio, float)
        self.assertIn('took 2 provider(s) from snapshot', self.log.output)

    @staticmethod
    def with_inventory_values(values):
        document = provider_snapshot.encode([provider()], 1.0e9)
        document['providers'][0]['inventories']['VCPU'] = values
        return document

    def test_a_file_that_cannot_be_used_is_one_line(self):
        snapshot = self.snapshot()
        self.assertIsNone(snapshot.load())
        self.assertIn('no snapshot at %s yet' % self.path, self.log.output)
        cases = [
            (b'{"format": "nova-sched-ext kept', 'Unterminated string'),
            (b'[1, 2]', 'not a kept provider state file'),
            (json.dumps({'format': provider_snapshot.FORMAT,
                         'version': 2}).encode(), 'layout version 2'),
            (json.dumps(dict(provider_snapshot.encode(
                [provider()], 1.0e9), providers=[{'uuid': 'a'}])).encode(),
             "damaged (KeyError: 'name')"),
            (json.dumps(self.with_inventory_values([1, 0, 1, 1, 1, 1.0, 7]))
             .encode(), 'an inventory of 7 values'),
            (b'{"format": "\xc3\x28"}', "'utf-8' codec can't decode"),
        ]
        for content, reason in cases:
            with open(self.path, 'wb') as stream:
                stream.write(content)
            self.assertIsNone(snapshot.load(), content)
            last = self.log.output.strip().splitlines()[-1]
            self.assertIn('snapshot %s not used (' % self.path, last)
            self.assertIn(reason, last)
            self.assertIn('reading every provider', last)

    def test_a_file_too_old_is_not_taken(self):
        self.snapshot().save([provider()])
        self.wall.now += 3600
        self.assertEqual([provider()], self.snapshot().load())
        self.wall.now += 1
        self.assertIsNone(self.snapshot().load())
        self.assertIn('is 3601 s old, older than kept_state_snapshot_max_age '
                      '(3600 s)', self.log.output)

    def test_a_save_that_fails_warns_once_a_reason(self):
        snapshot = provider_snapshot.Snapshot(
            os.path.join(self.dir, 'missing', 'providers.json'), 300, 3600,
            0, 'Kept test state', clock=self.clock)
        self.assertFalse(snapshot.save([provider()]))
        # tried again an interval later, not at every poll
        self.assertFalse(snapshot.due())
        self.clock.now += 300
        self.assertFalse(snapshot.save([provider()]))
        warnings = [line for line in self.log.output.splitlines()
                    if 'cannot save the snapshot' in line]
        self.assertEqual(2, len(warnings))
        self.assertIn('FileNotFoundError: No such file or directory',
                      warnings[0])
        # the second time at debug: the fixture's format shows no level,
        # so count what the warnings alone would be
        quiet = self.useFixture(fixtures.FakeLogger(
            name=provider_snapshot.__name__, level=logging.WARNING))
        self.assertFalse(snapshot.save([provider()]))
        self.assertEqual('', quiet.output)
        self.assertFalse(snapshot.due())

    def test_saves_are_due_every_interval(self):
        snapshot = self.snapshot(interval=300)
        self.assertTrue(snapshot.due())
        snapshot.save([provider()])
        self.clock.now += 299
        self.assertFalse(snapshot.due())
        self.clock.now += 1
        self.assertTrue(snapshot.due())
        # a state taken from the file is the file's: no save at once
        self.snapshot(interval=300).load()
        taken = self.snapshot(interval=300)
        taken.load()
        self.assertFalse(taken.due())

    def test_from_options(self):
        config = self.useFixture(config_fixture.Config(conf.CONF))
        self.assertIsNone(provider_snapshot.Snapshot.from_options(
            conf.CONF.nova_sched_ext, 'x'))
        config.config(group='nova_sched_ext_capacity',
                      kept_state_snapshot_file=self.path,
                      kept_state_snapshot_interval=60,
                      kept_state_snapshot_max_age=120,
                      kept_state_snapshot_verify_per_poll=7)
        snapshot = provider_snapshot.Snapshot.from_options(
            conf.CONF.nova_sched_ext_capacity, 'x')
        self.assertEqual((self.path, 60, 120, 7),
                         (snapshot.path, snapshot.interval,
                          snapshot.max_age, snapshot.verify_per_poll))


class TestStartFromASnapshot(base.TestCase):
    """A state started from a file, against placement's own answers."""

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(
            pf.InProcessPlacement()).placement
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'providers.json')
        self.useFixture(fixtures.FakeLogger(
            name=provider_snapshot.__name__, level=logging.INFO))

    def change(self, kind, uuid, number=0):
        return test_provider_state.TestAgainstAFullRead.change(
            self, kind, uuid, number)

    def consumers(self, uuid):
        return test_provider_state.TestAgainstAFullRead.consumers(
            self, uuid)

    def state(self, verify_per_poll=0):
        client = placement_direct.Counting(self.placement)
        reader = p.PlacementReader(CONTEXT, client=client)
        snapshot = provider_snapshot.Snapshot(
            self.path, 300, 3600, verify_per_poll, 'Kept test state')
        return provider_state.ProviderState(reader, snapshot), client

    def full_read(self):
        reader = p.PlacementReader(CONTEXT, client=self.placement)
        state = provider_state.ProviderState(reader)
        state.refresh()
        return state.providers()

    def saved_cloud(self, count=6):
        nodes = self.placement.create(
            [test_provider_state.node() for _ in range(count)])
        uuids = [rp.uuid for rp in nodes]
        for uuid in uuids[:3]:
            self.change('claim', uuid, 1)
        state, _client = self.state()
        self.assertFalse(state.save_snapshot(force=True))   # not polled
        state.refresh()
        self.assertTrue(state.save_snapshot(force=True))
        return uuids

    def test_the_first_poll_reads_only_what_placement_marked(self):
        uuids = self.saved_cloud()
        # behind the file's back: what placement marks with a generation
        self.change('claim', uuids[3], 2)
        self.change('inventory', uuids[4], 1)
        self.change('traits', uuids[5], 2)
        self.change('aggregates', uuids[0], 2)
        self.change('remove', uuids[1])
        self.placement.create([test_provider_state.node()])
        state, client = self.state()
        changes = state.refresh()
        self.assertEqual(self.full_read(), state.providers())
        self.assertEqual({uuids[3], uuids[4], uuids[5], uuids[0]},
                         changes.changed)
        self.assertEqual({uuids[1]}, changes.removed)
        self.assertEqual(1, len(changes.added))
        # the listing, then four reads of each of the five marked or new
        self.assertEqual(1 + 4 * 5, client.calls)
        self.assertEqual(0, state.unverified())

    def test_room_freed_meanwhile_is_less_room_until_verified(self):
        uuids = self.saved_cloud()
        for uuid in uuids[:3]:
            self.change('delete', uuid)      # no new generation
        state, client = self.state(verify_per_poll=2)
        state.refresh()
        theirs = {rp.uuid: rp for rp in self.full_read()}
        freed_unseen = 0
        for rp in state.providers():
            for rc, used in theirs[rp.uuid].usages.items():
                # never more room than placement has
                self.assertGreaterEqual(rp.usages.get(rc, 0), used)
            freed_unseen += rp.usages != theirs[rp.uuid].usages
        self.assertGreater(freed_unseen, 0)
        self.assertEqual(4, state.unverified())     # 6 less the first 2
        # two polls more verify the other four: placement's figures
        state.refresh()
        changes = state.refresh()
        self.assertEqual(0, state.unverified())
        self.assertEqual(self.full_read(), state.providers())
        self.assertLessEqual(changes.changed, set(uuids))
        before = client.calls
        self.assertFalse(state.refresh())
        self.assertEqual(1, client.calls - before)   # the listing alone

    def test_verification_finds_what_no_generation_marks(self):
        # A provider made again with the same UUID can come back at the
        # generation the file has: the file's traits then look current.
        self.saved_cloud(count=2)
        with open(self.path) as stream:
            document = json.load(stream)
        document['providers'][0]['traits'] = ['HW_CPU_X86_AVX2']
        with open(self.path, 'w') as stream:
            json.dump(document, stream)
        unverified, _client = self.state(verify_per_poll=0)
        unverified.refresh()
        self.assertNotEqual(self.full_read(), unverified.providers())
        state, _client = self.state(verify_per_poll=1)
        changed = state.refresh().changed
        self.assertEqual(1, state.unverified())
        changed |= state.refresh().changed
        self.assertEqual({document['providers'][0]['uuid']}, changed)
        self.assertEqual(0, state.unverified())
        self.assertEqual(self.full_read(), state.providers())

    def test_a_snapshot_of_another_cloud_costs_a_full_read(self):
        self.saved_cloud(count=2)
        self.placement.reset()
        self.placement.ensure(pf.CLASSES, pf.TRAITS)
        self.placement.create([test_provider_state.node()])
        state, client = self.state(verify_per_poll=5)
        changes = state.refresh()
        self.assertEqual(1, len(changes.added))
        self.assertEqual(2, len(changes.removed))
        self.assertEqual(self.full_read(), state.providers())
        self.assertEqual(0, state.unverified())
        self.assertEqual(1 + 4, client.calls)

    def test_a_claim_marked_before_the_save_is_read_at_the_first_poll(self):
        uuids = self.saved_cloud(count=2)
        state, _client = self.state()
        state.refresh()
        state.claimed(uuids[0], {'VCPU': 1})      # never reached placement
        self.assertTrue(state.save_snapshot(force=True))
        started, client = self.state()
        self.assertEqual({uuids[0]}, started.refresh().changed)
        self.assertEqual(1 + 4, client.calls)
        self.assertEqual(self.full_read(), started.providers())
