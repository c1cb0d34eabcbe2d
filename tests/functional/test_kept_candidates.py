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

"""Candidates from kept state: no over-commit, no hidden fit (issue 29).

The package's scheduler manager with ``[nova_sched_ext] kept_candidates``
on Nova's cell and API databases and the placement service of Nova's
functional tests; four hosts written as the scale bench writes them
(:func:`nova_sched_ext_tools.bench.scale.populate`), each with room for
one pinned two-cell flavor of 8 vCPUs.  The kept state is polled once, by
the test (the service polls in a thread of its own); then another
process changes placement behind its back:

* **a claim**: the host the scheduler chooses is filled by another
  consumer; the kept state still shows it with room, Nova's claim on it
  fails, and the request lands on an alternate; placement holds no more
  than each host's capacity;
* **a free**: every host is full in the kept state, and one is emptied
  behind its back; the kept answer has no candidate, the request ends in
  NoValidHost, placement's own query is asked, and the request lands on
  the emptied host;
* **a free the kept candidates hide**: the kept state offers a host the
  NUMA filters refuse (its room is all in one cell); the emptied host is
  known to placement only; the request ends in NoValidHost among the
  kept candidates, is asked of placement, and lands.
"""

from unittest import mock
import uuid as uuid_lib

from nova import conf as nova_conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.functional import fixtures as func_fixtures
from nova.virt import hardware
import oslo_messaging as messaging

from nova_sched_ext import kept_candidates
from nova_sched_ext_tools.bench import scale
from tests.functional import test_candidate_limit as limit_test

HOSTS = 4


class KeptCandidatesTest(test.TestCase):

    def setUp(self):
        super().setUp()
        for name in limit_test.QUIET_LOGGERS:
            self.useFixture(limit_test.QuietLogger(name))
        self.flags(service_down_time=3600)
        self.placement = self.useFixture(func_fixtures.PlacementFixture())
        self.ctxt = nova_context.get_admin_context()
        self.cloud = [limit_test.cloud_host(number,
                                            limit_test.BOTH_CELLS_FREE)
                      for number in range(HOSTS)]
        self.by_uuid = {host.uuid: host for host in self.cloud}
        self.flavor = limit_test.write_cloud(self.ctxt, self.cloud,
                                             self.cell_mappings['cell1'])
        self.client = report.report_client_singleton()
        self.manager = scale.make_manager(nova_conf.CONF, scale.PACKAGE,
                                          package_candidates='kept')
        limit_test.load_instance_info(self.ctxt, self.manager.host_manager,
                                      self.cloud)
        self.kept = self.manager.candidate_limit.kept
        self.assertIsInstance(self.kept, kept_candidates.KeptCandidates)
        self.kept.poll()
        # every query placement answers itself, counted (not the kept
        # state's: Nova's pinned flavors ask again with VCPU in place of
        # PCPU, which the kept state answers, here with no candidate)
        self.asked = []
        real = self.client.get_allocation_candidates

        def asked(ctxt, resources):
            self.asked.append(resources.to_querystring())
            return real(ctxt, resources)

        self.useFixture(test.fixtures.MockPatchObject(
            self.client, 'get_allocation_candidates', side_effect=asked))

    def select(self, number):
        """The selected compute node's UUID, or NoValidHost."""
        spec = scale.request_spec(self.ctxt, objects, hardware, self.flavor,
                                  scale.stable_uuid('boot', number))
        try:
            selections = self.manager.select_destinations(
                self.ctxt, spec_obj=spec, instance_uuids=[spec.instance_uuid],
                return_objects=True, return_alternates=True)
        except messaging.ExpectedException as exc:
            self.assertIsInstance(exc.exc_info[1], exception.NoValidHost)
            return exc.exc_info[1]
        return selections[0][0].compute_node_uuid

    def fill(self, uuid):
        """Another process takes all the room of provider ``uuid``."""
        room = self.client.get(
            '/resource_providers/%s/inventories' % uuid,
            version='1.36').json()['inventories']
        usages = self.client.get('/resource_providers/%s/usages' % uuid,
                                 version='1.36').json()['usages']
        consumer = str(uuid_lib.uuid4())
        resources = {rc: (inv['total'] - inv['reserved']) - usages[rc]
                     for rc, inv in room.items()
                     if rc == 'PCPU' and
                     (inv['total'] - inv['reserved']) > usages[rc]}
        resp = self.client.put('/allocations/%s' % consumer, {
            'allocations': {uuid: {'resources': resources}},
            'project_id': 'other', 'user_id': 'other',
            'consumer_generation': None}, version='1.36')
        self.assertEqual(204, resp.status_code, resp.text)
        return consumer

    def free(self, consumer):
        resp = self.client.delete('/allocations/%s' % consumer,
                                  version='1.36')
        self.assertEqual(204, resp.status_code, resp.text)

    def assert_no_over_commit(self):
        for host in self.cloud:
            room = self.client.get(
                '/resource_providers/%s/inventories' % host.uuid,
                version='1.36').json()['inventories']
            usages = self.client.get(
                '/resource_providers/%s/usages' % host.uuid,
                version='1.36').json()['usages']
            for rc, inv in room.items():
                self.assertLessEqual(
                    usages[rc], (inv['total'] - inv['reserved']) *
                    inv['allocation_ratio'], (host.name, rc))

    def test_a_claim_behind_its_back_costs_an_alternate(self):
        first = self.select(1)
        self.assertIn(first, self.by_uuid)
        self.assertEqual([], self.asked)
        self.assertEqual(1, self.kept.counts['kept'])
        # Nova removes the claim (as if the build failed); its clean-up
        # goes through the manager's view and marks the provider
        self.manager.placement_client.delete_allocation_for_instance(
            self.ctxt, scale.stable_uuid('boot', 1), force=True)
        self.kept.poll()
        self.assertEqual(first, self.select(2))
        self.manager.placement_client.delete_allocation_for_instance(
            self.ctxt, scale.stable_uuid('boot', 2), force=True)
        self.kept.poll()

        # another scheduler fills that host; no poll in between
        self.fill(first)
        with mock.patch.object(self.kept, 'claim_failed',
                               wraps=self.kept.claim_failed) as failed:
            landed = self.select(3)
        self.assertIn(landed, self.by_uuid)
        self.assertNotEqual(first, landed)
        failed.assert_called_once_with(
            {'allocations': {first: mock.ANY}, 'mappings': mock.ANY})
        self.assertEqual([], self.asked)
        self.assert_no_over_commit()

    def test_a_free_behind_its_back_is_found_by_placement(self):
        consumers = {host.uuid: self.fill(host.uuid) for host in self.cloud}
        self.kept.poll()
        emptied = self.cloud[2].uuid
        self.free(consumers[emptied])
        # no poll, no word from a compute: only placement knows
        self.assertEqual(emptied, self.select(1))
        # PCPU, then VCPU: both empty in the kept state; then placement
        self.assertEqual(2, self.kept.counts['empty'])
        self.assertEqual(0, self.kept.counts['kept'])
        self.assertEqual(2, len(self.asked))
        self.assertIn('found no host among the kept state\'s candidates '
                      '(0 of limit 1000 (kept state), 0 of limit 1000 (kept '
                      'state)); asking placement', self.stdlog.logger.output)
        self.assert_no_over_commit()

    def test_a_fit_the_kept_candidates_hide_is_found_by_placement(self):
        # host 0's room all in one cell: placement offers it, the NUMA
        # filters refuse it; the others are full in the kept state
        refused = self.cloud[0]
        refused.topology = limit_test.hosts.numa_topology(
            limit_test.cells(limit_test.ONE_CELL_FREE))
        self.write_topology(refused)
        consumers = {host.uuid: self.fill(host.uuid)
                     for host in self.cloud[1:]}
        self.kept.poll()
        emptied = self.cloud[3].uuid
        self.free(consumers[emptied])
        self.assertEqual(emptied, self.select(1))
        self.assertEqual(1, self.kept.counts['kept'])
        self.assertEqual(2, len(self.asked))
        self.assertIn('found no host among the kept state\'s candidates',
                      self.stdlog.logger.output)
        self.assert_no_over_commit()

    def write_topology(self, host):
        limit_test.CandidateLimitTest.write_topology(self, host)
