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


"""Defragmentation in a real cloud: planned live migrations give room back.

Run when tempest.conf says so (``[nova_sched_ext] defrag = True``, written
by the devstack plugin with ``NOVA_SCHED_EXT_DEFRAG=True``). The scenarios
run ``nova-sched-ext-defrag`` from ``[nova_sched_ext] cli_dir`` with
``--config-file`` ``[nova_sched_ext] defrag_nova_conf``: ``plan`` reads the
cloud's databases and placement, ``apply`` live-migrates with the
credentials of that file's ``[nova_sched_ext_defrag]``.

Two empty hosts of one layout with at least two NUMA cells go into a zone
of their own. The flavors are sized from the layout, so that memory (which
is not overcommitted) fragments the cells: a one-cell *small* flavor takes
more than half of a cell, so a cell holds one; a two-cell *large* flavor
takes as much of each of two cells, so it needs two cells that hold no
small. One small on each host leaves the large no host (NoValidHost);
moving one small next to the other empties a host for it.

The sizes also leave placement room for a third small on the host that
received the move, so that only the host's NUMA cells keep one off it:
that checks that the destination claimed its free cell for the moved
server (a NUMA-aware live migration).

Servers go to a given host with the ``host`` of compute API 2.74, through
the scheduler's filters: a forced ``zone:host`` skips them, and without
the limits NUMATopologyFilter records, Nova's claim on the host does not
check a cell's memory.

Nova's resource tracker counts a live-migrated server on its new host
through the migration's claim until the host's next
``update_available_resource`` periodic task: deleting the server before
that leaves its cells taken there. A scenario therefore ends by waiting
until ``plan`` sees the zone's large-flavor slots back, so that the next
scenario finds empty hosts really empty.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

from oslo_log import log as logging
from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from nova_sched_ext.tempest_plugin.tests import base

CONF = config.CONF
LOG = logging.getLogger(__name__)
COMMAND = 'nova-sched-ext-defrag'
#: Seconds one run of the command may take: it imports Nova, reads the
#: cloud and, for apply, waits for a live migration (a loaded gate node).
COMMAND_TIMEOUT = 600
#: Seconds to wait for the hosts' NUMA cells to be free again after the
#: servers are gone: a periodic task of each compute, every 60 s by default.
SETTLE_TIMEOUT = 180
SETTLE_INTERVAL = 5


class DefragTest(base.NUMASchedulingTest):
    """nova-sched-ext-defrag plan and apply, against the cloud itself."""

    # Servers are put on a given host through the scheduler (``host``).
    min_microversion = '2.74'

    @classmethod
    def skip_checks(cls):
        if not CONF.nova_sched_ext.defrag:
            raise cls.skipException(
                'the defragmentation scenario is not enabled for this cloud '
                '([nova_sched_ext] defrag = False)')
        super().skip_checks()

    def setUp(self):
        super().setUp()
        self.command = os.path.join(CONF.nova_sched_ext.cli_dir, COMMAND)
        if not os.access(self.command, os.X_OK):
            raise self.skipException(
                'no %s at %s ([nova_sched_ext] cli_dir)'
                % (COMMAND, self.command))
        # The command needs the databases and credentials in it; a gate
        # may run tempest as a user that cannot read it.
        if not os.access(CONF.nova_sched_ext.defrag_nova_conf, os.R_OK):
            raise self.skipException(
                'cannot read %s ([nova_sched_ext] defrag_nova_conf)'
                % CONF.nova_sched_ext.defrag_nova_conf)
        self.workdir = tempfile.mkdtemp(prefix='nse-defrag-')
        self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)

    # -- the command ---------------------------------------------------------

    def defrag(self, *args):
        """Run the command with the cloud's nova.conf; its output."""
        argv = [self.command, args[0], '--config-file',
                CONF.nova_sched_ext.defrag_nova_conf] + list(args[1:])
        result = subprocess.run(argv, capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT)
        self.assertEqual(
            0, result.returncode,
            '%s exited %d\nstdout:\n%s\nstderr:\n%s'
            % (' '.join(argv), result.returncode, result.stdout,
               result.stderr))
        return result.stdout

    def plan(self, zone, flavor):
        """The plan document for the large flavor's slots in the zone."""
        path = os.path.join(self.workdir, 'plan-%s.json' % flavor['name'])
        self.defrag('plan', '--scope-az', zone, '--flavor', flavor['name'],
                    '-o', path)
        with open(path) as stream:
            return path, json.load(stream)

    # -- the cloud -----------------------------------------------------------

    def flavors(self, hosts):
        """(small, large) flavors sized to the hosts, as described above."""
        layout = hosts[0].layout
        cell_mb = layout.memory_mb_per_cell
        room_mb = min(host.room('MEMORY_MB') for host in hosts)
        # More than half a cell, and three of them within placement's room.
        small_mb = min(cell_mb, room_mb // 3)
        if small_mb * 2 <= cell_mb:
            raise self.skipException(
                'hosts of %s with %d MiB of placement room cannot show '
                'fragmentation by memory: a third of the room is not more '
                'than half a cell' % (layout, room_mb))
        small = self.create_numa_flavor(vcpus=1, memory_mb=small_mb,
                                        numa_nodes=1)
        large = self.create_numa_flavor(vcpus=2, memory_mb=2 * small_mb,
                                        numa_nodes=2)
        return small, large

    def fragmented_zone(self):
        """A zone of two hosts with one small on each; the large fits none.

        :returns: (zone, small flavor, large flavor, {server id: host})
        """
        hosts = self.empty_hosts_alike(
            2, lambda host: host.layout,
            'two empty hosts of one NUMA layout with two cells or more',
            accept=lambda host: host.layout.cells >= 2)
        zone = self.create_zone([host.name for host in hosts])
        small, large = self.flavors(hosts)
        # Cleanups run last first: this one after the servers are deleted.
        empty_slots = sum(
            min(host.layout.cells // 2,
                host.room('MEMORY_MB') // large['ram']) for host in hosts)
        self.addCleanup(self.wait_for_free_cells, zone, large, empty_slots)
        placed = {}
        for host in hosts:
            server = self.boot(small, zone, host=host.name)
            placed[server['id']] = self.host_of(server)
        self.assertEqual(sorted(host.name for host in hosts),
                         sorted(placed.values()))
        self.assert_no_valid_host(self.boot(large, zone, wait_until='ERROR'))
        return zone, small, large, placed

    def wait_for_free_cells(self, zone, large, slots):
        """Wait until ``plan`` counts the zone's empty-host large slots."""
        deadline = time.time() + SETTLE_TIMEOUT
        while True:
            counted = self.plan(zone, large)[1]['slots_before'][large['name']]
            if counted == slots:
                return
            if time.time() > deadline:
                raise lib_exc.TimeoutException(
                    'the hosts of zone %s still hold %d of %d slots of %s '
                    '%d s after their servers were deleted'
                    % (zone, slots - counted, slots, large['name'],
                       SETTLE_TIMEOUT))
            LOG.info('Zone %s: %d of %d large slots free; waiting for the '
                     "computes' resource update", zone, counted, slots)
            time.sleep(SETTLE_INTERVAL)

    def where(self, server_ids):
        """``{server id: host}``, each server ACTIVE with no task."""
        hosts = {}
        for server_id in server_ids:
            server = self.admin_servers_client.show_server(
                server_id)['server']
            self.assertEqual('ACTIVE', server['status'], server)
            self.assertIsNone(server.get('OS-EXT-STS:task_state'), server)
            hosts[server_id] = self.host_of(server)
        return hosts

    def build_end(self, server):
        """The status a build ends in, ACTIVE or ERROR."""
        deadline = time.time() + CONF.compute.build_timeout
        while True:
            shown = self.admin_servers_client.show_server(
                server['id'])['server']
            if shown['status'] in ('ACTIVE', 'ERROR'):
                return shown
            if time.time() > deadline:
                raise lib_exc.TimeoutException(
                    'server %s is still %s after %d s'
                    % (server['id'], shown['status'],
                       CONF.compute.build_timeout))
            time.sleep(CONF.compute.build_interval)

    def assert_one_move(self, plan, large, placed):
        """The plan's only move puts one small next to the other."""
        self.assertEqual(0, plan['slots_before'][large['name']], plan)
        self.assertEqual(1, plan['slots_after'][large['name']], plan)
        self.assertEqual(1, len(plan['moves']), plan['moves'])
        move = plan['moves'][0]
        self.assertIn(move['instance'], placed)
        self.assertEqual(placed[move['instance']], move['source'])
        self.assertEqual(set(placed.values()) - {move['source']},
                         {move['target']})
        return move

    # -- scenarios -----------------------------------------------------------

    @decorators.idempotent_id('f3f5febb-b926-4a9f-ad2a-5ea4b8700e2d')
    def test_applied_plan_makes_room_for_the_large_flavor(self):
        zone, small, large, placed = self.fragmented_zone()
        plan_file, plan = self.plan(zone, large)
        move = self.assert_one_move(plan, large, placed)

        output = self.defrag('apply', plan_file)

        self.assertIn('[1/1] %s %s -> %s: moved' % (
            move['instance'], move['source'], move['target']), output)
        expected = dict(placed, **{move['instance']: move['target']})
        self.assertEqual(expected, self.where(placed))
        # The target claimed its free cell for the moved small: it has
        # placement room for one more small, but no cell for it.
        third = self.build_end(self.boot(small, zone, wait_until=None,
                                         host=move['target']))
        self.assertEqual(
            'ERROR', third['status'],
            'a third small got a cell on %s: the migration claimed no cell '
            'there for the moved server' % move['target'])
        self.assert_no_valid_host(third)
        server = self.boot(large, zone)
        self.assertEqual(move['source'], self.host_of(server))

    @decorators.idempotent_id('3dc280cb-826f-492b-bf52-d206c5a21a0b')
    def test_move_whose_target_was_filled_is_skipped(self):
        zone, small, large, placed = self.fragmented_zone()
        plan_file, plan = self.plan(zone, large)
        move = self.assert_one_move(plan, large, placed)
        # Someone else takes the target's free cell after the plan.
        filler = self.boot(small, zone, host=move['target'])

        output = self.defrag('apply', plan_file)

        self.assertIn('[1/1] %s %s -> %s: skipped (' % (
            move['instance'], move['source'], move['target']), output)
        self.assertIn('1 move(s): 1 skipped.', output)
        self.assertEqual(dict(placed, **{filler['id']: move['target']}),
                         self.where(list(placed) + [filler['id']]))
        self.assert_no_valid_host(self.boot(large, zone, wait_until='ERROR'))
