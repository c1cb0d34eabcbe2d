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

import io
import json
import os

import logging

import fixtures
import yaml

from nova_sched_ext.broker import cmd
from nova_sched_ext.broker import config as broker_config

from tests import base
from tests.unit.broker import helpers as h
from tests.unit.broker import test_config


class TestCommand(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(tmp, 'broker.yaml')
        with open(self.path, 'w', encoding='utf-8') as f:
            yaml.safe_dump(h.config_dict(), f)
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))
        keystoneauth = logging.getLogger('keystoneauth')
        self.addCleanup(keystoneauth.setLevel, keystoneauth.level)
        self.clouds = None
        self.capacity_down = True

    def factory(self, conf):
        if self.clouds is None:
            self.clouds = h.make_clouds(conf, {
                'east-1': {h.NORMAL_SINGLE: 4},
                'east-2': {h.NORMAL_SINGLE: 7},
                'west-1': {h.NORMAL_DUAL: 9}})
            if self.capacity_down:
                self.clouds['west-1'].capacity_status = 503
        return h.make_broker(conf, self.clouds)

    def run_cmd(self, *argv):
        return self.run_main(
            lambda a: cmd.main(a, broker_factory=self.factory),
            '--config', self.path, *argv)

    ARGS = ('--family', 'v.c3.large', '--image', 'cirros', '--network',
            'private', '--count', '3')

    def test_plan_table(self):
        rc, out = self.run_cmd('plan', *self.ARGS)
        self.assertEqual(0, rc, self.stderr.getvalue())
        self.assertIn('3 x v.c3.large for role pay-as-you-go: variants '
                      'v.c3.large.numa.dpdk, v.c3.large.dpdk, '
                      'v.c3.large.numa, v.c3.large', out)
        candidates = out.split('Candidates, in boot order:')[1].split(
            'Clusters and variants:')[0]
        rows = [line for line in candidates.splitlines()
                if line.startswith('| ') and '#' not in line]
        # west-1's capacity API is down: its four variants come last
        self.assertEqual(['east-2', 'east-1'] + ['west-1'] * 4,
                         [r.split('|')[2].strip() for r in rows])
        self.assertEqual(['unknown'] * 4,
                         [r.split('|')[6].strip() for r in rows[2:]])
        self.assertIn('capacity unknown (The capacity API refused the '
                      'request (HTTP 503)', out)
        self.assertEqual({}, self.clouds['east-2'].servers)

    def test_plan_json_and_boot(self):
        rc, out = self.run_cmd('plan', '--json', *self.ARGS)
        self.assertEqual(0, rc)
        plan = json.loads(out)
        self.assertEqual('east-2', plan['candidates'][0]['cluster'])
        self.assertEqual(7, plan['candidates'][0]['capacity'])
        rc, out = self.run_cmd('boot', '--json', *self.ARGS)
        self.assertEqual(0, rc, out)
        result = json.loads(out)
        self.assertEqual(('east-2', h.NORMAL_SINGLE),
                         (result['cluster'], result['flavor']))
        self.assertEqual(self.clouds['east-2'].active(), result['servers'])
        rc, out = self.run_cmd('boot', *self.ARGS)
        self.assertEqual(0, rc)
        self.assertIn('Placed 3 x v.c3.large.numa in cluster east-1', out)

    def write_uneven(self):
        data = h.config_dict()
        family = data['flavor_families']['v.c3.large']['variants']
        family[3]['uneven'] = {'vcpus': 16, 'ram': 32768,
                               'splits': ['3:1'], 'extra_specs': {
                                   'hw:cpu_policy': 'dedicated'}}
        with open(self.path, 'w', encoding='utf-8') as f:
            yaml.safe_dump(data, f)

    def test_flavors_lists_the_uneven_flavors_to_create(self):
        rc, out = self.run_cmd('flavors')
        self.assertEqual(0, rc, self.stderr.getvalue())
        self.assertEqual('No flavor family declares uneven splits.\n', out)
        self.write_uneven()
        rc, out = self.run_cmd('flavors', '--json')
        self.assertEqual(0, rc, self.stderr.getvalue())
        self.assertEqual([{
            'family': 'v.c3.large', 'flavor': 'v.c3.large.u12-4',
            'base': h.NORMAL_DUAL, 'pool': 'normal', 'vcpus': 16,
            'ram': 32768, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2',
                'hw:numa_cpus.0': '0-11', 'hw:numa_cpus.1': '12-15',
                'hw:numa_mem.0': '24576', 'hw:numa_mem.1': '8192'}}],
            json.loads(out))
        rc, out = self.run_cmd('flavors', '--family', 'v.c3.large')
        self.assertIn('| v.c3.large | v.c3.large.u12-4 | v.c3.large | 16    '
                      '| 32768   | hw:cpu_policy=dedicated |', out)
        self.assertIn('|            |                  |            |       '
                      '|         | hw:numa_cpus.1=12-15    |', out)
        rc, _out = self.run_cmd('flavors', '--family', 'v.c9')
        self.assertEqual(2, rc)
        self.assertIn("unknown flavor family 'v.c9'", self.stderr.getvalue())

    def test_boot_takes_the_uneven_variant_where_no_even_split_fits(self):
        self.write_uneven()
        self.clouds = h.make_clouds(
            broker_config.load(self.path),
            {'east-1': {'v.c3.large.u12-4': 3}, 'east-2': {}, 'west-1': {}})
        rc, out = self.run_cmd('boot', '--role', 'preemptible',
                               *self.ARGS)
        self.assertEqual(0, rc, out + self.stderr.getvalue())
        self.assertIn('Placed 3 x v.c3.large.u12-4 in cluster east-1', out)

    def test_nothing_fits(self):
        self.capacity_down = False
        rc, out = self.run_cmd('boot', *self.ARGS[:-1], '50')
        self.assertEqual(1, rc)
        self.assertIn('Not placed: no cluster can take 50 x v.c3.large', out)
        self.assertEqual(0, sum(c.creates for c in self.clouds.values()))

    def test_bad_request_and_bad_configuration(self):
        rc, _out = self.run_cmd('plan', '--family', 'v.c9', '--image', 'x',
                                '--network', 'y')
        self.assertEqual(2, rc)
        self.assertEqual("nova-sched-ext-broker: unknown flavor family "
                         "'v.c9'; known: v.c3.large, v.c3.large.spot\n",
                         self.stderr.getvalue())
        with open(self.path, 'w', encoding='utf-8') as f:
            f.write('clusters: {}\nflavor_families: {}\n')
        self.stderr.truncate(0)
        self.stderr.seek(0)
        rc, _out = self.run_cmd('plan', *self.ARGS)
        self.assertEqual(2, rc)
        self.assertEqual('nova-sched-ext-broker: %s: clusters: no cluster '
                         'is configured\n' % self.path,
                         self.stderr.getvalue())
        self.assertEqual(0, sum(c.creates for c in self.clouds.values()))

    def test_hostile_configurations_get_one_line_and_exit_2(self):
        for text, words in (
                (test_config.alias_bomb(9), 'holds more than 100000 values'),
                (test_config.VALID.replace('clusters:\n', 'clusters:\n  '
                 'east-1: {region: R, datacenter: d, pools: [n]}\n'),
                 "the key 'east-1' is repeated"),
                ('broker: {max_attempts: 4, max_attempts: 100}\n' +
                 test_config.VALID, "the key 'max_attempts' is repeated"),
                ('broker: []\n' + test_config.VALID,
                 'broker: expected a mapping, got a list'),
                ('roles: ""\n' + test_config.VALID,
                 'roles: expected a mapping, got a string'),
                (test_config.VALID + '#' * broker_config.MAX_CONFIG_BYTES,
                 'is larger than 1024 KiB')):
            with open(self.path, 'w', encoding='utf-8') as f:
                f.write(text)
            self.stderr.seek(0)
            self.stderr.truncate(0)
            rc, out = self.run_cmd('plan', *self.ARGS)
            self.assertEqual((2, ''), (rc, out))
            lines = self.stderr.getvalue().splitlines()
            self.assertEqual(1, len(lines), lines)
            self.assertTrue(lines[0].startswith(
                'nova-sched-ext-broker: %s: ' % self.path), lines[0])
            self.assertIn(words, lines[0])
            self.assertLess(len(lines[0]), 300)
        self.assertIsNone(self.clouds)

    def test_keystoneauth_does_not_repeat_a_clusters_warning(self):
        self.run_cmd('plan', *self.ARGS)
        self.assertEqual(logging.ERROR,
                         logging.getLogger('keystoneauth').level)
        self.run_cmd('--debug', 'plan', *self.ARGS)
        self.assertEqual(logging.NOTSET,
                         logging.getLogger('keystoneauth').level)
