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

"""DeploymentSetFilter with Nova's fakes and a static member source.

The members of a set are given through ``StaticMemberSource`` (the way the
simulator runs the filter); the database-backed source has its own tests
in ``tests.unit.deployment_set.test_members``.
"""

import logging
import threading
from unittest import mock

import fixtures
from nova import objects
from nova.tests.unit.scheduler import fakes
from oslo_config import fixture as config_fixture

from nova_sched_ext import conf
from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import rules
from nova_sched_ext.filters import deployment_set
from tests import base

objects.register_all()

GROUP = '6e8e1cfb-55c7-4d27-9d41-1f2b64d5b1a1'
NEW = 'a0000000-0000-4000-8000-000000000000'
KEY = 'failure_domain'

# Failure domains: rack-a = a1, a2; rack-b = b1, b2; rack-c = c1;
# 'lonely' has no failure-domain metadata: it is a domain of its own.
RACKS = {'rack-a': ('a1', 'a2'), 'rack-b': ('b1', 'b2'), 'rack-c': ('c1',)}
ALL_HOSTS = ('a1', 'a2', 'b1', 'b2', 'c1', 'lonely')


def member_uuid(n):
    return 'b%07d-0000-4000-8000-000000000000' % n


def aggregates():
    aggs = [objects.Aggregate(id=i + 1, name=rack, hosts=list(hosts),
                              metadata={KEY: rack})
            for i, (rack, hosts) in enumerate(sorted(RACKS.items()))]
    # An aggregate without the key must not matter.
    aggs.append(objects.Aggregate(id=10, name='ssd', hosts=list(ALL_HOSTS),
                                  metadata={'ssd': 'true'}))
    return aggs


def host(name, aggs=None):
    aggs = aggregates() if aggs is None else aggs
    return fakes.FakeHostState(name, name, {
        'aggregates': [a for a in aggs if name in a.hosts],
        'uuid': 'c%07d-0000-4000-8000-000000000000' % ALL_HOSTS.index(name)
        if name in ALL_HOSTS else None})


def hosts(names=ALL_HOSTS):
    return [host(n) for n in names]


def group(policy='anti-affinity', max_per_host=None, members_=(),
          placed_hosts=()):
    rules_ = {}
    if max_per_host is not None:
        rules_['max_server_per_host'] = str(max_per_host)
    return objects.InstanceGroup(
        uuid=GROUP, policy=policy, rules=rules_,
        members=list(members_) + [NEW], hosts=list(placed_hosts))


def spec(hints=None, instance_group=None, instance_uuid=NEW,
         num_instances=1, rebuild=False):
    scheduler_hints = {k: [str(v)] if not isinstance(v, list) else v
                       for k, v in (hints or {}).items()}
    if instance_group is not None:
        scheduler_hints['group'] = [instance_group.uuid]
    if rebuild:
        scheduler_hints['_nova_check_type'] = ['rebuild']
    return objects.RequestSpec(
        instance_uuid=instance_uuid, scheduler_hints=scheduler_hints,
        instance_group=instance_group, num_instances=num_instances)


def names(host_states):
    return [h.host for h in host_states]


class FilterTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.conf.config(group='nova_sched_ext',
                         deployment_set_domain_key=KEY)
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_sched_ext', level=logging.DEBUG,
            format='%(levelname)s %(message)s'))
        self.set_members = []
        self.lookup = mock.Mock(side_effect=lambda uuid: list(
            self.set_members))
        self.source = members.StaticMemberSource(
            self.lookup, domains=self.resolve)
        self.filt = deployment_set.DeploymentSetFilter(
            member_source=self.source)

    @staticmethod
    def resolve(host_names):
        aggs = aggregates()
        return {h: rules.domains_from_aggregates(h, aggs, KEY)
                for h in host_names}

    def add_member(self, host_name, partition=None, strategy=None,
                   max_size=None, uuid=None, domains=None):
        uuid = uuid or member_uuid(len(self.set_members))
        self.set_members.append(rules.Member(
            uuid=uuid, hosts=(host_name,) if host_name else (),
            partition=partition, strategy=strategy, max_size=max_size,
            domains=domains))
        return uuid

    def filtered(self, spec_obj, candidates=None):
        candidates = hosts() if candidates is None else candidates
        return names(self.filt.filter_all(candidates, spec_obj))

    def place(self, spec_obj, instance_uuid, candidates=None):
        """What the scheduler does for one instance of a request.

        Filter, take the first host left, and record it as
        ``SchedulerManager._consume_selected_host`` does.
        """
        spec_obj.instance_uuid = instance_uuid
        kept = self.filtered(spec_obj, candidates)
        if not kept:
            return None
        spec_obj.instance_group.hosts.append(kept[0])
        return kept[0]

    def assertRejectedAll(self, spec_obj, *words):
        self.assertEqual([], self.filtered(spec_obj))
        for word in words:
            self.assertIn(word, self.log.output)
        self.assertIn('INFO DeploymentSetFilter rejects the request',
                      self.log.output)


class TestHostStrategy(FilterTestCase):

    def test_hosts_with_a_member_are_rejected(self):
        self.add_member('a1', strategy='host')
        self.add_member('b2', strategy='host')
        kept = self.filtered(spec({'deployment_set_strategy': 'host'},
                                  group()))
        self.assertEqual(['a2', 'b1', 'c1', 'lonely'], kept)

    def test_other_hosts_of_the_same_domain_stay(self):
        self.add_member('a1', strategy='host')
        kept = self.filtered(spec({'deployment_set_strategy': 'host'},
                                  group()))
        self.assertIn('a2', kept)

    def test_first_member_may_go_anywhere(self):
        kept = self.filtered(spec({'deployment_set_strategy': 'host'},
                                  group()))
        self.assertEqual(list(ALL_HOSTS), kept)

    def test_multi_create_spreads_within_the_request(self):
        spec_obj = spec({'deployment_set_strategy': 'host'}, group(),
                        num_instances=3)
        placed = [self.place(spec_obj, member_uuid(100 + i))
                  for i in range(3)]
        self.assertEqual(['a1', 'a2', 'b1'], placed)

    def test_multi_create_runs_out_of_hosts(self):
        spec_obj = spec({'deployment_set_strategy': 'host'}, group(),
                        num_instances=3)
        two = hosts(('a1', 'a2'))
        self.assertEqual('a1', self.place(spec_obj, member_uuid(1), two))
        self.assertEqual('a2', self.place(spec_obj, member_uuid(2), two))
        self.assertIsNone(self.place(spec_obj, member_uuid(3), two))

    def test_members_without_a_host_take_none(self):
        # ERROR or shelved-offloaded members occupy nothing (but count).
        self.add_member(None, strategy='host')
        kept = self.filtered(spec({'deployment_set_strategy': 'host'},
                                  group()))
        self.assertEqual(list(ALL_HOSTS), kept)

    def test_moving_member_of_two_hosts_takes_both(self):
        # A member in the middle of a resize holds source and destination.
        self.set_members.append(rules.Member(
            uuid=member_uuid(1), hosts=('a1', 'b1'), strategy='host'))
        kept = self.filtered(spec({'deployment_set_strategy': 'host'},
                                  group()))
        self.assertEqual(['a2', 'b2', 'c1', 'lonely'], kept)


class TestDomainStrategy(FilterTestCase):

    def test_whole_domain_of_a_member_is_rejected(self):
        self.add_member('a1', strategy='domain')
        kept = self.filtered(spec({'deployment_set_strategy': 'domain'},
                                  group()))
        self.assertEqual(['b1', 'b2', 'c1', 'lonely'], kept)
        self.assertIn('rack-a already holds a member', self.log.output)

    def test_host_without_metadata_is_its_own_domain(self):
        self.add_member('lonely', strategy='domain')
        kept = self.filtered(spec({'deployment_set_strategy': 'domain'},
                                  group()))
        self.assertEqual(['a1', 'a2', 'b1', 'b2', 'c1'], kept)
        self.assertIn('(host lonely, no failure_domain metadata)',
                      self.log.output)

    def test_member_on_a_host_that_is_no_candidate(self):
        # b2 is full: placement did not offer it, yet its member keeps
        # rack-b closed; its domain comes from the source.
        self.add_member('b2', strategy='domain')
        kept = self.filtered(spec({'deployment_set_strategy': 'domain'},
                                  group()),
                             hosts(('a1', 'b1', 'c1')))
        self.assertEqual(['a1', 'c1'], kept)

    def test_domains_given_by_the_source_win(self):
        self.add_member('elsewhere', strategy='domain',
                        domains=frozenset(['rack-c']))
        kept = self.filtered(spec({'deployment_set_strategy': 'domain'},
                                  group()))
        self.assertEqual(['a1', 'a2', 'b1', 'b2', 'lonely'], kept)

    def test_host_in_two_domains_conflicts_with_both(self):
        aggs = aggregates()
        aggs.append(objects.Aggregate(id=20, name='pdu-1', hosts=['b1'],
                                      metadata={KEY: 'pdu-1'}))
        candidates = [host(n, aggs) for n in ALL_HOSTS]
        self.add_member('a1', strategy='domain',
                        domains=frozenset(['pdu-1']))
        kept = self.filtered(spec({'deployment_set_strategy': 'domain'},
                                  group()), candidates)
        self.assertEqual(['a1', 'a2', 'b2', 'c1', 'lonely'], kept)

    def test_comma_separated_domains(self):
        aggs = [objects.Aggregate(id=1, name='x', hosts=['a1'],
                                  metadata={KEY: 'rack-a, row-1'}),
                objects.Aggregate(id=2, name='y', hosts=['b1'],
                                  metadata={KEY: 'rack-b,row-1'})]
        self.add_member('a1', strategy='domain')
        kept = self.filt.filter_all([host('b1', aggs), host('c1', aggs)],
                                    spec({'deployment_set_strategy':
                                          'domain'}, group()))
        # The member's domains come from the source (rack-a only here);
        # b1 is in row-1 too, so put the member there explicitly.
        self.assertEqual(['b1', 'c1'], names(kept))
        self.set_members = [rules.Member(
            uuid=member_uuid(1), hosts=('a1',), strategy='domain',
            domains=rules.domains_from_aggregates('a1', aggs, KEY))]
        kept = self.filt.filter_all([host('b1', aggs), host('c1', aggs)],
                                    spec({'deployment_set_strategy':
                                          'domain'}, group()))
        self.assertEqual(['c1'], names(kept))

    def test_domain_key_is_configurable(self):
        self.conf.config(group='nova_sched_ext',
                         deployment_set_domain_key='rack')
        # No aggregate has 'rack': every host is its own domain.
        self.add_member('a1', strategy='domain')
        kept = self.filtered(spec({'deployment_set_strategy': 'domain'},
                                  group()))
        self.assertEqual(['a2', 'b1', 'b2', 'c1', 'lonely'], kept)

    def test_multi_create_one_per_domain(self):
        spec_obj = spec({'deployment_set_strategy': 'domain'}, group(),
                        num_instances=4)
        placed = [self.place(spec_obj, member_uuid(100 + i))
                  for i in range(5)]
        self.assertEqual(['a1', 'b1', 'c1', 'lonely', None], placed)

    def test_multi_create_honours_existing_members_too(self):
        self.add_member('b2', strategy='domain')
        spec_obj = spec({'deployment_set_strategy': 'domain'}, group(),
                        num_instances=3)
        placed = [self.place(spec_obj, member_uuid(100 + i))
                  for i in range(3)]
        self.assertEqual(['a1', 'c1', 'lonely'], placed)


class TestPartitionStrategy(FilterTestCase):

    def hints(self, partition):
        return {'deployment_set_strategy': 'partition',
                'deployment_set_partition': partition}

    def test_other_partitions_never_share_a_domain(self):
        self.add_member('a1', partition=0, strategy='partition')
        self.add_member('b1', partition=1, strategy='partition')
        kept = self.filtered(spec(self.hints(0), group()))
        # Partition 0 may use rack-a (not host a1), never rack-b.
        self.assertEqual(['a2', 'c1', 'lonely'], kept)
        kept = self.filtered(spec(self.hints(2), group()))
        self.assertEqual(['c1', 'lonely'], kept)
        self.assertIn('holds a member of partition', self.log.output)

    def test_one_partition_shares_a_host_only_if_the_group_allows(self):
        self.add_member('a1', partition=0, strategy='partition')
        self.assertNotIn('a1', self.filtered(spec(self.hints(0), group())))
        self.assertIn('max_server_per_host=1', self.log.output)
        kept = self.filtered(spec(self.hints(0), group(max_per_host=2)))
        self.assertIn('a1', kept)
        self.add_member('a1', partition=0, strategy='partition')
        kept = self.filtered(spec(self.hints(0), group(max_per_host=2)))
        self.assertNotIn('a1', kept)
        self.assertIn('a2', kept)

    def test_member_without_partition_shares_a_domain_with_nobody(self):
        self.add_member('a1', partition=None, strategy='partition')
        for partition in (0, 1):
            kept = self.filtered(spec(self.hints(partition), group()))
            self.assertEqual(['b1', 'b2', 'c1', 'lonely'], kept)

    def test_multi_create_in_one_partition(self):
        self.add_member('b1', partition=1, strategy='partition')
        spec_obj = spec(self.hints(0), group(), num_instances=3)
        placed = [self.place(spec_obj, member_uuid(100 + i))
                  for i in range(3)]
        self.assertEqual(['a1', 'a2', 'c1'], placed)
        # The next request for partition 1 stays out of rack-a and c1.
        for uuid, host_name in zip(range(100, 103), placed):
            self.add_member(host_name, partition=0, strategy='partition',
                            uuid=member_uuid(uuid))
        kept = self.filtered(spec(self.hints(1),
                                  group(members_=[m.uuid for m in
                                                  self.set_members])))
        self.assertEqual(['b2', 'lonely'], kept)

    def test_trace_rule(self):
        # The trace's fault_domain rule: partitions differ -> racks differ;
        # members of one partition may even share a host.
        self.add_member('a1', partition=0, strategy='partition')
        self.add_member('a1', partition=0, strategy='partition')
        kept = self.filtered(spec(self.hints(0), group(max_per_host=1000)))
        self.assertEqual(list(ALL_HOSTS), kept)
        kept = self.filtered(spec(self.hints(1), group(max_per_host=1000)))
        self.assertEqual(['b1', 'b2', 'c1', 'lonely'], kept)


class TestSizeCap(FilterTestCase):

    def fill(self, count, **kwargs):
        for i in range(count):
            self.add_member(ALL_HOSTS[i % 2], strategy='partition',
                            partition=0, **kwargs)

    def hints(self, **extra):
        hints = {'deployment_set_strategy': 'partition',
                 'deployment_set_partition': 0}
        hints.update(extra)
        return hints

    def test_default_cap_is_20(self):
        self.assertEqual(20, conf.CONF.nova_sched_ext.deployment_set_max_size)
        self.fill(19)
        self.assertTrue(self.filtered(spec(self.hints(),
                                           group(max_per_host=100))))
        self.add_member('b1', strategy='partition', partition=0)
        self.assertRejectedAll(spec(self.hints(), group(max_per_host=100)),
                               'has 20 member(s); 1 more would exceed its '
                               'size cap of 20',
                               '[nova_sched_ext] deployment_set_max_size')

    def test_multi_create_that_would_exceed_the_cap(self):
        self.fill(18)
        self.assertRejectedAll(
            spec(self.hints(), group(max_per_host=100), num_instances=3),
            'has 18 member(s); 3 more would exceed its size cap of 20')

    def test_manager_tells_the_request_size(self):
        self.fill(18)
        spec_obj = spec(self.hints(), group(max_per_host=100),
                        num_instances=1)
        members.remember_request_uuids(
            spec_obj, [NEW, member_uuid(200), member_uuid(201)])
        self.assertEqual([], self.filtered(spec_obj))
        self.assertIn('3 more would exceed', self.log.output)

    def test_configured_cap(self):
        self.conf.config(group='nova_sched_ext', deployment_set_max_size=3)
        self.fill(2)
        self.assertTrue(self.filtered(spec(self.hints(),
                                           group(max_per_host=100))))
        self.fill(1)
        self.assertRejectedAll(spec(self.hints(), group(max_per_host=100)),
                               'size cap of 3')

    def test_hint_lowers_the_cap(self):
        self.fill(3)
        self.assertRejectedAll(
            spec(self.hints(deployment_set_max_size=3),
                 group(max_per_host=100)),
            "size cap of 3 (from the request's hint deployment_set_max_size)")

    def test_a_members_hint_lowers_the_cap_for_the_set(self):
        self.fill(1, max_size=2)
        self.fill(1)
        self.assertRejectedAll(spec(self.hints(), group(max_per_host=100)),
                               'size cap of 2 (from the hint '
                               'deployment_set_max_size of a member)')

    def test_hint_cannot_raise_the_cap(self):
        self.assertRejectedAll(
            spec(self.hints(deployment_set_max_size=21), group()),
            'deployment_set_max_size=21 is above 20')

    def test_a_move_is_not_a_new_member(self):
        self.conf.config(group='nova_sched_ext', deployment_set_max_size=2)
        self.fill(2)
        # Three members, the cap lowered to 2 since: a member may still
        # move, it does not join the set again.
        self.add_member('b1', partition=0, strategy='partition', uuid=NEW)
        kept = self.filtered(spec(self.hints(), group(max_per_host=100)))
        self.assertTrue(kept)
        # Whereas a new member is refused.
        self.assertRejectedAll(
            spec(self.hints(), group(max_per_host=100),
                 instance_uuid=member_uuid(99)),
            'has 3 member(s); 1 more would exceed its size cap of 2')


class TestMoves(FilterTestCase):

    def test_own_host_does_not_count(self):
        # host strategy, members on every host but c1; the moving member
        # is on a1.
        for name in ('a2', 'b1', 'b2', 'lonely'):
            self.add_member(name, strategy='host')
        self.add_member('a1', strategy='host', uuid=NEW)
        kept = self.filtered(spec({'deployment_set_strategy': 'host'},
                                  group()))
        # a1 is free as far as the set goes (the move may stay if Nova
        # allows a resize to the same host); c1 was free anyway.
        self.assertEqual(['a1', 'c1'], kept)

    def test_own_domain_does_not_count(self):
        self.add_member('a1', strategy='domain', uuid=NEW)
        self.add_member('b1', strategy='domain')
        kept = self.filtered(spec({'deployment_set_strategy': 'domain'},
                                  group()))
        self.assertEqual(['a1', 'a2', 'c1', 'lonely'], kept)

    def test_move_without_hints_inherits_the_set(self):
        # A member booted before the filter was enabled moves: the set's
        # strategy still applies to it.
        self.add_member('a1', strategy='domain', uuid=NEW)
        self.add_member('b1', strategy='domain')
        kept = self.filtered(spec(None, group()))
        self.assertEqual(['a1', 'a2', 'c1', 'lonely'], kept)


class TestBadInput(FilterTestCase):

    def test_unknown_strategy(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'rack'}, group()),
            "deployment_set_strategy='rack' is not one of host, domain, "
            "partition")
        self.lookup.assert_not_called()

    def test_non_integer_partition(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'partition',
                  'deployment_set_partition': 'two'}, group()),
            "deployment_set_partition='two' is not an integer")

    def test_negative_partition(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'partition',
                  'deployment_set_partition': '-1'}, group()),
            'deployment_set_partition=-1 is below 0')

    def test_partition_beyond_the_configured_number(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'partition',
                  'deployment_set_partition': '7'}, group()),
            'deployment_set_partition=7 is above 6',
            'deployment_set_max_partitions is 7')
        self.conf.config(group='nova_sched_ext',
                         deployment_set_max_partitions=8)
        self.assertTrue(self.filtered(spec(
            {'deployment_set_strategy': 'partition',
             'deployment_set_partition': '7'}, group())))

    def test_partition_strategy_needs_a_partition(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'partition'}, group()),
            'deployment_set_strategy=partition needs the scheduler hint '
            'deployment_set_partition')

    def test_partition_with_another_strategy(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'domain',
                  'deployment_set_partition': '1'}, group()),
            'deployment_set_partition is only valid with '
            'deployment_set_strategy=partition')

    def test_partition_given_to_a_domain_set(self):
        self.add_member('a1', strategy='domain')
        self.assertRejectedAll(
            spec({'deployment_set_partition': '1'}, group()),
            'has strategy domain, which has no partitions')

    def test_joining_a_partition_set_without_a_partition(self):
        self.add_member('a1', strategy='partition', partition=0)
        self.assertRejectedAll(spec(None, group()),
                               'has strategy partition: the request needs '
                               'the scheduler hint deployment_set_partition')

    def test_bad_max_size(self):
        for value, words in (('ten', "deployment_set_max_size='ten' is not "
                              "an integer"),
                             ('0', 'deployment_set_max_size=0 is below 1')):
            self.assertRejectedAll(
                spec({'deployment_set_strategy': 'host',
                      'deployment_set_max_size': value}, group()), words)

    def test_digits_of_other_scripts_are_not_integers(self):
        # int() would read these as 10, 10 and 5.
        for text in ('1_0', '\uff11\uff10', ' 5 '):
            self.assertRejectedAll(
                spec({'deployment_set_strategy': 'host',
                      'deployment_set_max_size': text}, group()),
                'deployment_set_max_size=%r is not an integer' % text)

    def test_long_value_is_cut_in_the_log(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'host',
                  'deployment_set_max_size': '9' * 5000}, group()),
            '... (5000 characters) is above 20')
        self.assertNotIn('9' * 65, self.log.output)
        self.assertLess(len(self.log.output), 1000)

    def test_max_size_without_a_strategy(self):
        # Neither the request nor a member names a strategy: the group is a
        # plain anti-affinity group, which has no size cap; the hint must
        # not be dropped silently.
        self.add_member('a1')
        self.assertRejectedAll(
            spec({'deployment_set_max_size': '3'}, group()),
            'scheduler hint(s) deployment_set_max_size need a strategy',
            'nor any member of server group %s was booted with '
            'deployment_set_strategy' % GROUP,
            '--hint deployment_set_strategy=host, domain or partition')

    def test_partition_without_a_strategy(self):
        self.assertRejectedAll(
            spec({'deployment_set_partition': '1',
                  'deployment_set_max_size': '3'}, group()),
            'scheduler hint(s) deployment_set_max_size, '
            'deployment_set_partition need a strategy',
            '--hint deployment_set_strategy=partition.')

    def test_max_size_without_a_strategy_joins_a_set_with_one(self):
        self.add_member('a1', strategy='host')
        self.assertEqual(['a2', 'b1', 'b2', 'c1', 'lonely'], self.filtered(
            spec({'deployment_set_max_size': '3'}, group())))

    def test_move_of_a_member_booted_without_a_strategy(self):
        # Accepted before the check existed: it must still be able to move
        # (Nova's anti-affinity filter keeps it apart, as before).
        self.add_member('a1', uuid=NEW)
        self.add_member('b1')
        self.assertEqual(list(ALL_HOSTS), self.filtered(
            spec({'deployment_set_max_size': '3'}, group())))
        self.assertNotIn('rejects the request', self.log.output)

    def test_hint_given_twice(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': ['host', 'domain']}, group()),
            'must have exactly one value')

    def test_hints_without_a_group(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'host'}),
            'scheduler hint(s) deployment_set_strategy need a server group')

    def test_group_with_another_policy(self):
        for policy in ('affinity', 'soft-anti-affinity', 'soft-affinity'):
            self.assertRejectedAll(
                spec({'deployment_set_strategy': 'host'},
                     group(policy=policy)),
                'has policy %s; a deployment set must be a server group '
                'with policy anti-affinity' % policy)
        self.lookup.assert_not_called()

    def test_strategy_differs_from_the_sets(self):
        self.add_member('a1', strategy='domain')
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'host'}, group()),
            'deployment_set_strategy=host differs from the strategy domain')

    def test_host_strategy_with_several_servers_per_host(self):
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'host'},
                 group(max_per_host=2)),
            'max_server_per_host=2, which strategy host forbids')

    def test_strategy_is_case_insensitive(self):
        self.assertTrue(self.filtered(
            spec({'deployment_set_strategy': ' Domain '}, group())))

    def test_members_cannot_be_read(self):
        self.lookup.side_effect = members.MembersUnavailable('cell1 is down')
        self.assertRejectedAll(
            spec({'deployment_set_strategy': 'host'}, group()),
            'cannot tell where the members of deployment set', 'cell1 is '
            'down')

    def test_unexpected_error_rejects_and_logs(self):
        self.lookup.side_effect = RuntimeError('boom')
        self.assertEqual([], self.filtered(
            spec({'deployment_set_strategy': 'host'}, group())))
        self.assertIn('DeploymentSetFilter failed; rejecting all hosts',
                      self.log.output)

    def test_rejection_is_logged_once_per_request(self):
        spec_obj = spec({'deployment_set_strategy': 'bad'}, group())
        for _ in range(3):
            self.assertEqual([], self.filtered(spec_obj))
        self.assertEqual(1, self.log.output.count('rejects the request'))


class TestNotADeploymentSet(FilterTestCase):

    def test_no_group_no_hints(self):
        self.assertEqual(list(ALL_HOSTS), self.filtered(spec()))
        self.lookup.assert_not_called()

    def test_other_hints_only(self):
        self.assertEqual(list(ALL_HOSTS), self.filtered(
            spec({'different_host': 'x'})))

    def test_affinity_group_without_hints(self):
        self.assertEqual(list(ALL_HOSTS), self.filtered(
            spec(None, group(policy='affinity'))))
        self.lookup.assert_not_called()

    def test_plain_anti_affinity_group(self):
        # Nova's ServerGroupAntiAffinityFilter does the work; no cap.
        for i in range(25):
            self.add_member('a1')
        self.assertEqual(list(ALL_HOSTS), self.filtered(spec(None, group())))

    def test_rebuild(self):
        self.add_member('a1', strategy='host')
        self.assertEqual(list(ALL_HOSTS), self.filtered(
            spec({'deployment_set_strategy': 'host'}, group(),
                 rebuild=True)))
        self.lookup.assert_not_called()

    def test_host_passes(self):
        self.add_member('a1', strategy='host')
        spec_obj = spec({'deployment_set_strategy': 'host'}, group())
        self.assertFalse(self.filt.host_passes(host('a1'), spec_obj))
        self.assertTrue(self.filt.host_passes(host('a2'), spec_obj))


class TestOncePerRequest(FilterTestCase):

    def test_members_are_read_once_per_request(self):
        self.add_member('a1', strategy='domain')
        spec_obj = spec({'deployment_set_strategy': 'domain'}, group(),
                        num_instances=3)
        for i in range(3):
            self.place(spec_obj, member_uuid(100 + i))
        # And the pass for alternates at the end of the request.
        self.filtered(spec_obj)
        self.assertEqual(1, self.lookup.call_count)
        self.filtered(spec({'deployment_set_strategy': 'domain'}, group()))
        self.assertEqual(2, self.lookup.call_count)

    def test_domains_of_member_hosts_are_resolved_once(self):
        resolver = mock.Mock(side_effect=self.resolve)
        self.source._domains = resolver
        for name in ('a1', 'b1', 'c1'):
            self.add_member(name, strategy='partition', partition=0)
        self.filtered(spec({'deployment_set_strategy': 'partition',
                            'deployment_set_partition': 0},
                           group(max_per_host=5)), hosts(('lonely',)))
        resolver.assert_called_once_with(['a1', 'b1', 'c1'])

    def test_aggregate_metadata_is_read_once_per_aggregate_list(self):
        reads = []

        class CountingAggregate(object):
            def __init__(self, name, hosts):
                self.hosts = hosts
                self._metadata = {KEY: name}

            @property
            def metadata(self):
                reads.append(self)
                return self._metadata

        racks = [CountingAggregate('rack-%d' % r, []) for r in range(3)]
        candidates = [fakes.FakeHostState('h%d' % i, 'h%d' % i, {
            'aggregates': [racks[i % 3]]}) for i in range(300)]
        self.add_member('h0', strategy='domain')
        kept = self.filt.filter_all(
            candidates, spec({'deployment_set_strategy': 'domain'}, group()))
        self.assertEqual(200, len(kept))
        self.assertEqual(3, len(reads))

    def test_concurrent_requests_do_not_mix(self):
        # One filter object serves every request of the process.
        self.add_member('a1', strategy='domain')
        results = {}
        barrier = threading.Barrier(8)

        def run(n):
            spec_obj = spec({'deployment_set_strategy': 'domain'}, group(),
                            num_instances=2)
            barrier.wait()
            first = self.place(spec_obj, member_uuid(300 + 2 * n))
            second = self.place(spec_obj, member_uuid(301 + 2 * n))
            results[n] = (first, second)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual({n: ('b1', 'c1') for n in range(8)}, results)
