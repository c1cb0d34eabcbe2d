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

"""Defragmentation against a real Nova, with real live migrations.

Two fake libvirt hosts of two NUMA cells, each cell with 4 dedicated
CPUs.  Four 2-CPU pinned servers, two on each host, leave 4 dedicated
CPUs free on each: a large flavor of 8 pinned CPUs over two cells fits
nowhere (NoValidHost).  ``nova-sched-ext-defrag plan`` reads the cloud
(:mod:`nova_sched_ext.defrag.live`: the cell database, the API database,
placement) and plans two moves that empty one host; ``apply`` live-migrates
them through the in-process Compute API with openstacksdk, and the same
large boot then succeeds.  Nova's fake libvirt completes a live migration
when the test says so (as Nova's own NUMA live-migration tests do): the
stub here creates the guest on the destination and ends the source's job.
"""

import importlib
import io
import json
import os
import re
from unittest import mock

import fixtures
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from nova.compute import manager as compute_manager
from nova import context as nova_context
from nova import exception as nova_exc
from openstack import connection

from nova_sched_ext.defrag import live
from nova_sched_ext.defrag import model as defrag_model
from nova_sched_ext_tools.harness import fake_hosts
from tests.functional import base

SMALL = fake_hosts.pinned('small.2', 2, 512)
LARGE = fake_hosts.pinned('large.8', 8, 1024, numa_nodes=2)
HOSTS = ('h1', 'h2')
UNKNOWN = 'f3a9e3d8-0000-4000-8000-000000000000'


def import_cmd():
    """The command's module, without its import-time concurrency choice."""
    with mock.patch('nova_sched_ext.compat.release.monkey_patch'):
        return importlib.import_module('nova_sched_ext.defrag.cmd')


class DefragTest(base.NUMAFitTestBase):

    HOSTS = tuple(fake_hosts.HostLayout(name, cells=2, mem_gib_per_cell=2)
                  for name in HOSTS)

    def setUp(self):
        super().setUp()
        self.cmd = import_cmd()
        self.flags(poll_interval=0.1, migration_timeout=60,
                   group='nova_sched_ext_defrag')
        self.flags(numa_slot_reference_flavors=[LARGE.name],
                   group='nova_sched_ext')
        # The command parses nova.conf; the test's Nova is configured.
        self.useFixture(fixtures.MockPatchObject(
            self.cmd, 'load_config'))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3',
            self._migrate))
        # The same shortcut as Nova's NUMA live-migration tests: clean up
        # the source as after a migration without shared storage.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager.'
            '_live_migration_cleanup_flags',
            lambda *args, **kwargs: (True, True)))
        self.failing_migrations = set()
        #: the migration records apply read through openstacksdk
        self.records_read = []
        self.migrations = []
        self.prechecks = 0
        check = compute_manager.ComputeManager.\
            check_can_live_migrate_destination

        def check_destination(manager, context, instance, *args, **kwargs):
            # The destination's pre-check is where a migration the
            # conductor cannot start fails: the server stays ACTIVE where
            # it was, the migration record says error.
            self.prechecks += 1
            if self.prechecks in self.failing_migrations:
                raise nova_exc.MigrationPreCheckError(
                    reason='the destination refused it (fake)')
            return check(manager, context, instance, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager.'
            'check_can_live_migrate_destination', check_destination))
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.flavor_id(LARGE)
        self.servers = {}
        for index, host in enumerate(('h1', 'h1', 'h2', 'h2')):
            server = self._create_server(
                name='small-%d' % index, flavor_id=self.flavor_id(SMALL),
                host=host, networks='none')
            server = self._wait_for_state_change(server, 'ACTIVE')
            self.servers[server['id']] = server
        self.assertEqual({'h1': 2, 'h2': 2}, self.where())

    # -- the fake hypervisor's side of a live migration ----------------------

    def _migrate(self, domain, destination, params, flags):
        self.migrations.append(domain.UUIDString())
        target = re.search(r'://([^/]+)/', destination).group(1)
        self.computes[target].driver._host.get_connection().createXML(
            params['destination_xml'],
            'fake-createXML-doesnt-care-about-flags')
        domain.complete_job()

    # -- helpers -----------------------------------------------------------

    def sdk_compute(self):
        """The Compute API over openstacksdk, as ``apply`` reaches it."""
        fixture = self.api_fixture
        session = ks_session.Session(
            auth=token_endpoint.Token(fixture.base_url, 'admin'),
            additional_headers={
                'X-Auth-User': 'admin', 'X-User-Id': 'admin',
                'X-Auth-Project-Id': fixture.project_id,
                'X-Roles': 'admin,member,reader'})
        return connection.Connection(session=session,
                                     compute_api_version='2').compute

    def where(self):
        """``{host: servers}`` of the servers, from the API."""
        counts = {}
        for server in self.api.get_servers():
            host = server['OS-EXT-SRV-ATTR:host']
            counts[host] = counts.get(host, 0) + 1
        return counts

    def plan(self, *options):
        """``nova-sched-ext-defrag plan -o FILE``: the plan document."""
        path = os.path.join(self.dir, 'plan.json')
        stdout = io.StringIO()
        self.assertEqual(0, self.cmd.main(
            ['nova-sched-ext-defrag', 'plan', '--config-file', 'nova.conf',
             '-o', path] + list(options), stdout=stdout))
        with open(path) as f:
            return path, json.load(f)

    def apply(self, path, *options):
        stdout = io.StringIO()
        args = self.cmd.build_parser().parse_args(
            ['apply', path, '--config-file', 'nova.conf'] + list(options))
        compute = self.sdk_compute()
        list_migrations = compute.migrations

        def migrations(**query):
            found = list(list_migrations(**query))
            self.records_read.extend(found)
            return found
        compute.migrations = migrations
        code = self.cmd.run_apply(args, stdout, context=self.ctxt,
                                  compute=compute)
        return code, stdout.getvalue().splitlines()

    def boot_large(self):
        results, servers = self.boot('large', LARGE)
        return results[0], servers[0]

    # -- tests -------------------------------------------------------------

    def test_the_reader_sees_what_nova_placed(self):
        cloud = live.read_cloud(nova_context.get_admin_context())
        self.assertEqual(set(HOSTS), set(cloud.hosts))
        self.assertEqual(set(self.servers), set(cloud.instances))
        for instance in cloud.instances.values():
            self.assertIsNone(instance.unmovable)
            self.assertEqual({'PCPU': 2, 'MEMORY_MB': 512},
                             {rc: n for rc, n in instance.resources.items()
                              if rc != 'DISK_GB'})
            self.assertEqual(1, len(instance.numa_topology.cells))
        host = cloud.hosts['h1']
        self.assertEqual(4, host.usages['PCPU'])
        self.assertEqual(2, len(host.numa_topology.cells))
        self.assertEqual('nova', host.availability_zone)

    def test_plan_and_apply_give_the_large_flavor_its_room(self):
        result, server = self.boot_large()
        self.assertTrue(result.no_valid_host, result.fault)
        self.api.delete_server(server['id'])
        self._wait_until_deleted(server)

        path, document = self.plan()
        self.assertEqual(2, len(document['moves']))
        self.assertEqual({LARGE.name: 1}, document['slots_recovered'])
        source = {move['source'] for move in document['moves']}
        target = {move['target'] for move in document['moves']}
        self.assertEqual(1, len(source))
        self.assertEqual(1, len(target))
        self.assertNotEqual(source, target)

        code, lines = self.apply(path)
        self.assertEqual(0, code, lines)
        self.assertEqual(3, len(lines), lines)
        self.assertTrue(lines[0].startswith('[1/2] '), lines)
        self.assertTrue(lines[0].endswith(': moved'), lines)
        self.assertEqual('2 move(s): 2 moved.', lines[2])
        self.assertEqual({target.pop(): 4}, self.where())
        # a move is done once Nova is done at its source too: placement
        # holds nothing there any more, and the migrations are completed
        self.assertNotIn(list(source)[0], self.host_usage())
        records = {m['instance_uuid']: m['status']
                   for m in self.api.get_migrations()}
        self.assertEqual({m['instance']: 'completed'
                          for m in document['moves']}, records)
        # and apply waited for them
        self.assertEqual({m['instance'] for m in document['moves']},
                         {r.server_id for r in self.records_read
                          if r.status == 'completed'})

        result, server = self.boot_large()
        self.assertEqual('ACTIVE', server['status'], result.fault)
        self.assertEqual(source.pop(), result.host)
        self.assertEqual((0, 1), tuple(sorted(result.cells)))

    def test_a_target_filled_meanwhile_is_skipped_with_its_reason(self):
        path, document = self.plan()
        target = document['moves'][0]['target']
        for index in range(2):
            server = self._create_server(
                name='late-%d' % index, flavor_id=self.flavor_id(SMALL),
                host=target, networks='none')
            self._wait_for_state_change(server, 'ACTIVE')

        code, lines = self.apply(path)
        self.assertEqual(0, code, lines)
        self.assertEqual([], self.migrations)
        self.assertIn('skipped (placement has no room', lines[0])
        self.assertEqual('2 move(s): 2 skipped.', lines[2])

    def test_a_failing_migration_stops_with_earlier_moves_in_place(self):
        path, document = self.plan()
        first, second = document['moves']
        self.failing_migrations.add(2)

        code, lines = self.apply(path)
        self.assertEqual(1, code, lines)
        self.assertTrue(lines[0].endswith(': moved'), lines)
        # The conductor's pre-check fails it before the API answers: the
        # server is ACTIVE where it was.
        self.assertIn(': failed (the Compute API refused the live '
                      'migration: BadRequestException: 400', lines[1])
        self.assertIn('No valid host was found', lines[1])
        self.assertTrue(lines[2].startswith('Stopped at move 2 of 2'), lines)
        on = {s['id']: s['OS-EXT-SRV-ATTR:host']
              for s in self.api.get_servers()}
        self.assertEqual(first['target'], on[first['instance']])
        self.assertEqual(second['source'], on[second['instance']])
        self.assertEqual('ACTIVE',
                         self.api.get_server(second['instance'])['status'])

        # Resumed: the first move counts as done, the second is tried again.
        self.failing_migrations.clear()
        code, lines = self.apply(path)
        self.assertEqual(0, code, lines)
        self.assertIn(': already there', lines[0])
        self.assertTrue(lines[1].endswith(': moved'), lines)
        self.assertEqual(2, len(self.migrations))

    def test_bad_input_moves_nothing(self):
        path, document = self.plan()
        document['moves'][1]['instance'] = UNKNOWN
        # edited and signed again: the check of the names is what is shown
        document['checksum'] = defrag_model.plan_checksum(document)
        bad = os.path.join(self.dir, 'bad.json')
        with open(bad, 'w') as f:
            json.dump(document, f)
        stderr = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value
        with mock.patch.object(self.cmd, '_compute',
                               return_value=self.sdk_compute()):
            code = self.cmd.main(['nova-sched-ext-defrag', 'apply', bad],
                                 stdout=io.StringIO())
        self.assertEqual(2, code)
        self.assertEqual(
            'nova-sched-ext-defrag: error: move 2: no instance %s in the '
            'cloud\n' % UNKNOWN,
            stderr.getvalue())
        self.assertEqual([], self.migrations)
        for options, words in ((('--scope-aggregate', 'nowhere'),
                                'no compute host is in a host aggregate'),
                               (('--budget-moves', '-2'), 'negative')):
            stderr.seek(0)
            stderr.truncate()
            self.assertEqual(2, self.cmd.main(
                ['nova-sched-ext-defrag', 'plan'] + list(options),
                stdout=io.StringIO()))
            self.assertIn(words, stderr.getvalue())
