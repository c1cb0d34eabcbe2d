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

"""The kept providers equal a full read after every poll.

Random clouds in openstack-placement itself (in this process,
:mod:`nova_sched_ext_tools.placement_direct`), random changes made
behind the state's back as other processes make them (claims and
deletions of any consumer, inventory, trait and aggregate changes,
compute nodes added and removed), then one poll: the state equals a
new state's first full read.  A deletion frees room without bumping the
provider's generation (placement's behaviour, pinned below), so each
one is also told to the state (``stale``), as the feed of frees will.
A ``counted`` claim is also told to the state (``claimed``), as the
scheduler's own claims and the other schedulers' casts are: the poll
then reads nothing of a provider that only counted claims changed.
"""

import uuid as uuid_lib

import hypothesis
from hypothesis import strategies as st

from nova_sched_ext.cloud import placement as p
from nova_sched_ext.cloud import provider_state
from nova_sched_ext_tools import placement_direct
from tests import base
from tests.unit.cloud import placement_fixtures as pf

KINDS = ('claim', 'counted', 'delete', 'inventory', 'traits', 'aggregates',
         'add', 'remove')


CONTEXT = placement_direct.Context('req-nse-test-provider-state')


def node(total=16):
    inventories = {
        'VCPU': p.Inventory(total=total, max_unit=total,
                            allocation_ratio=4.0),
        'MEMORY_MB': p.Inventory(total=total * 1024, max_unit=total * 1024)}
    return {'inventories': inventories, 'usages': {}, 'traits': frozenset(),
            'aggregates': frozenset()}


def claim(placement, uuid, resources, state=None):
    """A claim written to placement; counted by ``state`` if given."""
    placement.call('put', '/allocations/%s' % uuid_lib.uuid4(), {
        'allocations': {uuid: {'resources': resources}},
        'project_id': str(uuid_lib.uuid4()),
        'user_id': str(uuid_lib.uuid4()),
        'consumer_generation': None})
    if state is not None:
        state.claimed(uuid, resources)


class TestAgainstAFullRead(base.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(
            pf.InProcessPlacement()).placement

    def state(self):
        client = placement_direct.Counting(self.placement)
        reader = p.PlacementReader(CONTEXT, client=client)
        return provider_state.ProviderState(reader), client

    def full_read(self):
        state, _client = self.state()
        state.refresh()
        return state.providers()

    def consumers(self, uuid):
        return list(self.placement.call(
            'get', '/resource_providers/%s/allocations' % uuid)[
                'allocations'])

    def change(self, kind, uuid, number):
        """One change behind the state's back; False if none was made."""
        base_url = '/resource_providers/%s' % uuid
        if kind in ('claim', 'counted'):
            try:
                claim(self.placement, uuid, {'VCPU': 1 + number % 4})
            except RuntimeError:
                return False        # no room: placement refused it
        elif kind == 'delete':
            consumers = self.consumers(uuid)
            if not consumers:
                return False
            self.placement.call('delete', '/allocations/%s'
                                % consumers[number % len(consumers)])
        elif kind == 'inventory':
            gen = self.placement.call('get', base_url)['generation']
            self.placement.call('put', base_url + '/inventories/VCPU', {
                'resource_provider_generation': gen, 'total': 16,
                'max_unit': 16, 'reserved': number % 3,
                'allocation_ratio': pf.RATIOS[number % len(pf.RATIOS)]})
        elif kind == 'traits':
            gen = self.placement.call('get', base_url)['generation']
            self.placement.call('put', base_url + '/traits', {
                'resource_provider_generation': gen,
                'traits': sorted(pf.TRAITS[:number % 3])})
        elif kind == 'aggregates':
            gen = self.placement.call('get', base_url)['generation']
            self.placement.call('put', base_url + '/aggregates', {
                'resource_provider_generation': gen,
                'aggregates': sorted(pf.AGGREGATES[:number % 3])},
                version='1.19')
        elif kind == 'add':
            self.placement.create([node()])
        elif kind == 'remove':
            for consumer in self.consumers(uuid):
                self.placement.call('delete', '/allocations/%s' % consumer)
            self.placement.call('delete', base_url)
        return True

    def claim(self, uuid, resources, state=None):
        claim(self.placement, uuid, resources, state)

    @hypothesis.settings(
        max_examples=base.hypothesis_examples(0.05, 5), deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck), database=None)
    @hypothesis.given(count=st.integers(1, 4), data=st.data())
    def test_a_poll_equals_a_full_read(self, count, data):
        self.placement.reset()
        self.placement.create([node() for _ in range(count)])
        state, client = self.state()
        first = state.refresh()
        self.assertEqual(count, len(first.added))
        self.assertEqual(self.full_read(), state.providers())
        for _round in range(2):
            touched, counted = set(), set()
            for kind, pick, number in data.draw(st.lists(st.tuples(
                    st.sampled_from(KINDS), st.integers(0, 7),
                    st.integers(0, 11)), max_size=6)):
                listed = [rp.uuid for rp in state.providers()]
                known = [summary['uuid'] for summary in
                         p.PlacementReader(CONTEXT, client=self.placement)
                         .listing()]
                if not known and kind != 'add':
                    continue
                uuid = known[pick % len(known)] if known else None
                if self.change(kind, uuid, number) and uuid in listed:
                    if kind == 'counted':
                        # as the claim's scheduler, or its cast, tells
                        state.claimed(uuid, {'VCPU': 1 + number % 4})
                        counted.add(uuid)
                    else:
                        touched.add(uuid)
                    if kind == 'delete':
                        # room freed: placement's generation stays
                        state.stale(uuid)
            before = client.calls
            changes = state.refresh()
            self.assertEqual(self.full_read(), state.providers())
            # only what changed was read again: the listing, then four
            # reads (inventories, usages, traits, aggregates) a provider;
            # what only counted claims changed, not at all
            self.assertLessEqual(changes.changed, touched)
            self.assertEqual(
                1 + 4 * (len(changes.added) + len(changes.changed)),
                client.calls - before)

    def test_counted_claims_are_known_without_a_read(self):
        kept = self.placement.create([node(), node()])
        state, client = self.state()
        state.refresh()
        self.claim(kept[0].uuid, {'VCPU': 2, 'MEMORY_MB': 512}, state)
        self.claim(kept[0].uuid, {'VCPU': 1}, state)
        self.assertEqual(3, state.providers()[0].usages['VCPU'])
        before = client.calls
        self.assertFalse(state.refresh())
        self.assertEqual(1, client.calls - before)     # the listing only
        self.assertEqual(self.full_read(), state.providers())
        # the count was taken: an uncounted claim now reads it again
        self.claim(kept[0].uuid, {'VCPU': 1})
        self.assertEqual({kept[0].uuid}, state.refresh().changed)
        self.assertEqual(self.full_read(), state.providers())

    def test_a_change_beside_a_counted_claim_reads_the_provider(self):
        kept = self.placement.create([node()])
        state, _client = self.state()
        state.refresh()
        self.claim(kept[0].uuid, {'VCPU': 2}, state)
        self.change('traits', kept[0].uuid, 2)
        self.assertEqual({kept[0].uuid}, state.refresh().changed)
        self.assertEqual(self.full_read(), state.providers())
        self.assertFalse(state.refresh())

    def test_a_claim_counted_twice_shows_less_room_until_read(self):
        # a cast that came twice: never more room than placement has
        kept = self.placement.create([node()])
        state, _client = self.state()
        state.refresh()
        self.claim(kept[0].uuid, {'VCPU': 2}, state)
        state.claimed(kept[0].uuid, {'VCPU': 2})
        self.assertEqual(4, state.providers()[0].usages['VCPU'])
        self.assertEqual({kept[0].uuid}, state.refresh().changed)
        self.assertEqual(self.full_read(), state.providers())

    def test_the_resync_leaves_counted_claims_to_the_polls(self):
        kept = self.placement.create([node()])
        state, client = self.state()
        state.refresh()
        self.claim(kept[0].uuid, {'VCPU': 2}, state)
        # counted, not yet confirmed by a poll: the resync keeps out
        self.assertEqual(frozenset(), state.resync_usages())
        self.assertEqual(2, state.providers()[0].usages['VCPU'])
        state.refresh()
        # a claim nobody told of, found by the resync before a poll:
        # it is read in full at the next one, so a cast that comes
        # late cannot count it twice
        self.claim(kept[0].uuid, {'VCPU': 3})
        self.assertEqual({kept[0].uuid}, state.resync_usages())
        state.claimed(kept[0].uuid, {'VCPU': 3})    # the late cast
        self.assertEqual({kept[0].uuid}, state.refresh().changed)
        self.assertEqual(self.full_read(), state.providers())

    def test_a_poll_with_no_change_reads_the_listing_only(self):
        self.placement.create([node(), node()])
        state, client = self.state()
        state.refresh()
        before = client.calls
        self.assertFalse(state.refresh())
        self.assertEqual(1, client.calls - before)

    def test_a_free_leaves_the_generation_as_it_was(self):
        # Placement's behaviour the state is built around: a claim bumps
        # the provider's generation, a deletion does not.  If placement
        # changes this, a poll alone would see frees too.
        kept = self.placement.create([node()])
        state, _client = self.state()
        self.change('claim', kept[0].uuid, 0)
        self.change('claim', kept[0].uuid, 0)
        state.refresh()
        self.assertEqual(2, state.providers()[0].usages['VCPU'])
        self.change('delete', kept[0].uuid, 0)
        self.assertFalse(state.refresh())
        self.assertEqual(2, state.providers()[0].usages['VCPU'])
        state.stale(kept[0].uuid)
        self.assertEqual({kept[0].uuid}, state.refresh().changed)
        self.assertEqual(1, state.providers()[0].usages['VCPU'])
        self.assertEqual(self.full_read(), state.providers())
        state.stale('not-kept')

    def test_a_removed_provider_goes(self):
        kept = self.placement.create([node(), node()])
        state, _client = self.state()
        state.refresh()
        self.change('remove', kept[0].uuid, 0)
        changes = state.refresh()
        self.assertEqual((frozenset(), frozenset(), {kept[0].uuid}),
                         tuple(changes))
        self.assertEqual([kept[1].uuid],
                         [rp.uuid for rp in state.providers()])
        self.assertFalse(state.refresh())

    def test_an_own_claim_counts_at_once_and_is_read_again(self):
        kept = self.placement.create([node()])
        state, client = self.state()
        state.refresh()
        state.claimed(kept[0].uuid, {'VCPU': 3})
        self.assertEqual(3, state.providers()[0].usages['VCPU'])
        # placement never saw that claim: the next poll reads the
        # provider again, whatever its generation, and has placement's
        # figure
        changes = state.refresh()
        self.assertEqual({kept[0].uuid}, changes.changed)
        self.assertEqual(0, state.providers()[0].usages.get('VCPU', 0))
        state.claimed('not-kept', {'VCPU': 1})
        self.assertEqual(self.full_read(), state.providers())


class TestRefreshRaces(base.TestCase):
    """A provider deleted while a poll reads it."""

    def test_deleted_while_read(self):
        summary = {'uuid': 'a', 'generation': 1}
        provider = p.Provider(uuid='a', name='a', parent_uuid=None,
                              inventories={}, usages={},
                              traits=frozenset(), generation=1)

        class Reader(object):
            rounds = [([summary], [provider]), ([summary], [None])]

            def listing(self):
                return self.rounds[0][0]

            def read_all(self, summaries):
                listed, read = self.rounds.pop(0)
                return read[:len(summaries)] if summaries else []

        reader = Reader()
        state = provider_state.ProviderState(reader)
        self.assertEqual({'a'}, state.refresh().added)
        state.claimed('a', {'VCPU': 1})     # read again at the next poll
        changes = state.refresh()
        self.assertEqual({'a'}, changes.removed)
        self.assertEqual([], state.providers())


class TestCountedClaimsRace(base.TestCase):
    """A claim counted while a poll runs is never lost."""

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(
            pf.InProcessPlacement()).placement
        self.kept = self.placement.create([node()])
        self.client = placement_direct.Counting(self.placement)
        self.reader = p.PlacementReader(CONTEXT, client=self.client)
        self.state = provider_state.ProviderState(self.reader)
        self.state.refresh()
        self.during = None

    def claim(self, vcpus):
        claim(self.placement, self.kept[0].uuid, {'VCPU': vcpus},
              self.state)

    def hook(self, method):
        real = getattr(self.reader, method)

        def hooked(*args):
            during, self.during = self.during, None
            if during is not None and method == 'listing':
                during()
                return real(*args)
            result = real(*args)
            if during is not None:
                during()
            return result
        setattr(self.reader, method, hooked)

    def used(self):
        return self.state.providers()[0].usages.get('VCPU', 0)

    def placement_used(self):
        return self.placement.call(
            'get', '/resource_providers/%s/usages'
            % self.kept[0].uuid)['usages'].get('VCPU', 0)

    def full_read(self):
        state = provider_state.ProviderState(p.PlacementReader(
            CONTEXT, client=self.placement))
        state.refresh()
        return state.providers()

    def test_counted_after_the_listing_stays_counted(self):
        self.hook('listing')
        self.claim(1)
        # written before the listing, counted after it started: the
        # listing's generation is one more than counted before it
        self.during = lambda: self.claim(2)
        self.state.refresh()
        # read in full, the later claim added again: less room, never more
        self.assertGreaterEqual(self.used(), self.placement_used())
        self.state.refresh()
        self.assertEqual(self.full_read(), self.state.providers())

    def test_counted_while_the_provider_is_read(self):
        self.hook('read_all')
        self.claim(1)
        self.change_traits()
        self.during = lambda: self.claim(2)
        self.state.refresh()
        self.assertGreaterEqual(self.used(), self.placement_used())
        self.state.refresh()
        self.assertEqual(self.full_read(), self.state.providers())

    def test_counted_after_a_listing_that_confirmed(self):
        self.hook('read_all')
        self.claim(1)
        self.during = lambda: self.claim(2)
        self.state.refresh()    # confirms the first, keeps the second
        self.assertEqual(self.placement_used(), self.used())
        calls = self.client.calls
        self.assertFalse(self.state.refresh())
        self.assertEqual(1, self.client.calls - calls)
        self.assertEqual(self.full_read(), self.state.providers())

    def change_traits(self):
        url = '/resource_providers/%s' % self.kept[0].uuid
        gen = self.placement.call('get', url)['generation']
        self.placement.call('put', url + '/traits', {
            'resource_provider_generation': gen,
            'traits': sorted(pf.TRAITS[:1])})
