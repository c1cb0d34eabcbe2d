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

"""DeploymentSetFilter decides the trace's ``fault_domain`` rule exactly.

The trace (``huawei-topo-vm``) says: members of a group whose partition
(``domain``) numbers differ never share a rack; members of one partition
may share racks and hosts, and a group has up to ~130 members.  That is
strategy ``partition`` with the size cap raised and
``max_server_per_host`` unbounded, fed by the simulator's own objects
(``HostState`` with rack aggregates, ``RequestSpec.from_components``) and a
``StaticMemberSource`` - no database, as the simulator runs it.

Random groups are placed one member at a time; at every step the hosts the
filter keeps must be exactly the hosts the rule allows.
"""

import logging
import random

import fixtures
from nova import objects
from oslo_config import fixture as config_fixture

from nova_sched_ext import conf
from nova_sched_ext.deployment_set import members
from nova_sched_ext.deployment_set import rules
from nova_sched_ext.filters import deployment_set
from nova_sched_ext_tools.sim import cloud
from nova_sched_ext_tools.sim import trace
from tests import base

PARTITIONS = 3
UNBOUNDED = 100000


class TestTraceFaultDomainRule(base.TestCase):

    def setUp(self):
        super().setUp()
        cloud.register_objects()
        # Thousands of per-host debug lines; Nova's test fixtures of an
        # earlier test in the same worker may have left debug logging on.
        self.useFixture(fixtures.FakeLogger(name='nova_sched_ext',
                                            level=logging.INFO))
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.conf.config(group='nova_sched_ext',
                         deployment_set_domain_key=cloud.FAILURE_DOMAIN_KEY,
                         deployment_set_max_size=1000)
        self.hosts = cloud.build_host_states(trace.synthetic_hosts(
            60, seed=3, hosts_per_rack=6))
        self.factory = cloud.RequestFactory()
        self.flavor = trace.Flavor(vcpus=2, memory_mb=2048, numa_nodes=1)
        # group uuid -> {instance uuid: (host, rack, partition)}
        self.placed = {}
        self.filt = deployment_set.DeploymentSetFilter(
            member_source=members.StaticMemberSource(self.lookup))

    def lookup(self, group_uuid):
        return [rules.Member(uuid=uuid, hosts=(host,), partition=partition,
                             strategy='partition',
                             domains=frozenset([rack]))
                for uuid, (host, rack, partition)
                in self.placed.get(group_uuid, {}).items()]

    def spec(self, group_uuid, instance_uuid, partition):
        group_members = self.placed.setdefault(group_uuid, {})
        hosts = sorted({h for h, _, _ in group_members.values()})
        group = objects.InstanceGroup(
            uuid=group_uuid, policy='anti-affinity',
            rules={'max_server_per_host': str(UNBOUNDED)},
            members=list(group_members) + [instance_uuid], hosts=hosts)
        hints = {'group': group_uuid,
                 'deployment_set_strategy': 'partition',
                 'deployment_set_partition': str(partition)}
        return self.factory.request_spec(self.flavor, instance_uuid, group,
                                         hints)

    def allowed_by_the_trace_rule(self, group_uuid, partition):
        taken = {rack for _, rack, other in
                 self.placed[group_uuid].values() if other != partition}
        return [h.host for h in self.hosts
                if cloud.failure_domain(h) not in taken]

    def test_same_hosts_as_the_rule_at_every_step(self):
        rng = random.Random(7)
        groups = [cloud.stable_uuid('group', n) for n in range(6)]
        checked = narrowed = 0
        for step in range(240):
            group_uuid = rng.choice(groups)
            partition = rng.randrange(PARTITIONS)
            instance_uuid = cloud.stable_uuid('instance', step)
            spec_obj = self.spec(group_uuid, instance_uuid, partition)
            kept = [h.host for h in self.filt.filter_all(self.hosts,
                                                         spec_obj)]
            expected = self.allowed_by_the_trace_rule(group_uuid, partition)
            self.assertEqual(expected, kept, 'step %d' % step)
            checked += 1
            narrowed += len(kept) < len(self.hosts)
            if kept:
                name = rng.choice(kept)
                host = next(h for h in self.hosts if h.host == name)
                self.placed[group_uuid][instance_uuid] = (
                    host.host, cloud.failure_domain(host), partition)
        # The groups grew past Nova's usual sizes and the rule bit often.
        self.assertGreater(max(len(m) for m in self.placed.values()), 30)
        self.assertGreater(narrowed, checked // 2)
