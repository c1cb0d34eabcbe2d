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


"""devstack/settings and devstack-lite's ini helpers, run through bash.

The plugin phases themselves run for real in devstack-lite
(``tools/devstack-lite/run.sh``); these tests pin the parts whose rules are
easy to get subtly wrong: where the filters go, and how the ini helpers
treat multi-valued options.
"""

import os
import subprocess
import sys

import fixtures
import testtools

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SETTINGS = os.path.join(REPO, 'devstack', 'settings')
LITE = os.path.join(REPO, 'tools', 'devstack-lite')


def _bash(script, **env):
    return subprocess.run(
        ['bash', '-c', script], env=dict(os.environ, **env),
        capture_output=True, text=True, check=True, timeout=60).stdout


class SettingsTest(testtools.TestCase):
    """devstack/settings extends NOVA_FILTERS, idempotently."""

    def _filters(self, nova_filters, ours=None):
        env = {'NOVA_FILTERS': nova_filters}
        if ours is not None:
            env['NOVA_SCHED_EXT_FILTERS'] = ours
        script = ('trueorfalse() { local v=${!2:-$1}; echo $v; }\n'
                  'source "%s"; source "%s"; echo "$NOVA_FILTERS"'
                  % (SETTINGS, SETTINGS))
        return _bash(script, **env).strip()

    def test_numa_filter_goes_before_numa_topology_filter(self):
        self.assertEqual(
            'ComputeFilter,NUMAFitFilter,NUMATopologyFilter,PciFilter',
            self._filters('ComputeFilter,NUMATopologyFilter,PciFilter'))

    def test_numa_topology_filter_is_added_when_missing(self):
        self.assertEqual(
            'ComputeFilter,NUMAFitFilter,NUMATopologyFilter',
            self._filters('ComputeFilter'))
        self.assertEqual('NUMAFitFilter,NUMATopologyFilter',
                         self._filters(''))

    def test_other_filters_go_last(self):
        self.assertEqual(
            'A,NUMAFitFilter,NUMATopologyFilter,B,DeploymentSetFilter',
            self._filters('A,NUMATopologyFilter,B',
                          'NUMAFitFilter,DeploymentSetFilter'))

    def test_nothing_to_add(self):
        self.assertEqual('A,NUMAFitFilter,NUMATopologyFilter',
                         self._filters('A,NUMAFitFilter,NUMATopologyFilter'))
        self.assertEqual('A,B', self._filters('A,B', ''))


class LiteIniTest(testtools.TestCase):
    """devstack-lite's iniset/iniadd/iniget behave like devstack's."""

    def _run(self, commands):
        conf = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        script = ('LITE_DIR=%s VENV=/nonexistent LOGDIR=/tmp PIDDIR=/tmp\n'
                  'source %s/functions.sh\n%s\ncat "%s"'
                  % (LITE, LITE, commands.replace('CONF', conf), conf))
        return _bash(script)

    def test_iniadd_keeps_the_existing_values(self):
        out = self._run(
            'iniadd CONF filter_scheduler available_filters nova.a\n'
            'iniadd CONF filter_scheduler available_filters ext.b\n'
            'iniset CONF DEFAULT debug True\n'
            'echo "got: $(iniget_multiline CONF filter_scheduler '
            'available_filters)"\n')
        self.assertIn('got: nova.a ext.b', out)
        self.assertIn('available_filters = nova.a\n'
                      'available_filters = ext.b\n', out)

    def test_iniset_replaces_and_inidelete_removes(self):
        out = self._run(
            'iniset CONF DEFAULT host one\n'
            'iniset CONF DEFAULT host two\n'
            'iniset CONF DEFAULT state_path /x\n'
            'inidelete CONF DEFAULT state_path\n'
            'echo "host: $(iniget CONF DEFAULT host)"\n')
        self.assertIn('host: two', out)
        self.assertNotIn('state_path', out)
        self.assertEqual(1, out.count('host = '))


class PreemptionPluginTest(testtools.TestCase):
    """NOVA_SCHED_EXT_PREEMPTION=True: the driver and its credentials."""

    SERVICE_USER = (
        '[service_user]\nsend_service_user_token = True\n'
        'auth_type = password\nauth_url = http://keystone/identity\n'
        'username = nova\npassword = secret\nproject_name = service\n'
        'user_domain_name = Default\nproject_domain_name = Default\n'
        '[placement]\nregion_name = RegionTwo\n')

    def _conf(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def _plugin(self, conf, commands, **env):
        script = ('LITE_DIR=%s VENV=/nonexistent LOGDIR=/tmp PIDDIR=/tmp\n'
                  'source %s/functions.sh\n'
                  'NOVA_SCHED_EXT_DIR=%s NOVA_CONF=%s NOVA_BIN_DIR=%s\n'
                  'NOVA_FAKE_CONF=/nonexistent\n'
                  'source %s/devstack/plugin.sh\n%s\ncat %s'
                  % (LITE, LITE, REPO, conf,
                     os.path.dirname(sys.executable), REPO, commands, conf))
        return _bash(script, **env)

    def test_the_driver_gets_nova_service_user_credentials(self):
        conf = self._conf(self.SERVICE_USER)
        out = self._plugin(conf, 'configure_nova_sched_ext_preemption')
        self.assertIn('[nova_sched_ext]\nscheduler_driver = preemption', out)
        evictor = out.split('[nova_sched_ext_evictor]\n', 1)[1]
        for line in ('auth_type = password',
                     'auth_url = http://keystone/identity',
                     'username = nova', 'password = secret',
                     'project_name = service', 'user_domain_name = Default',
                     'project_domain_name = Default',
                     'region_name = RegionTwo'):
            self.assertIn(line + '\n', evictor)
        self.assertNotIn('send_service_user_token', evictor)

    def test_an_explicit_driver_is_kept(self):
        conf = self._conf(self.SERVICE_USER)
        out = self._plugin(conf, 'configure_nova_sched_ext_preemption',
                           NOVA_SCHED_EXT_SCHEDULER_DRIVER='default')
        self.assertNotIn('scheduler_driver', out)

    def test_unstack_takes_the_credentials_out(self):
        conf = self._conf(self.SERVICE_USER)
        out = self._plugin(conf, 'configure_nova_sched_ext_preemption\n'
                                 'unconfigure_nova_sched_ext')
        self.assertNotIn('scheduler_driver', out)
        self.assertNotIn('username = nova\npassword = secret\n'
                         'project_name = service\nuser_domain_name = '
                         'Default\nproject_domain_name = Default\n'
                         'region_name', out)
        self.assertIn('[service_user]', out)


class CheckConfigDriverTest(testtools.TestCase):
    """check_config.py stops a preemption driver that could not work."""

    def _check(self, text, *args):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write(text)
        return subprocess.run(
            [sys.executable, os.path.join(REPO, 'devstack', 'tools',
                                          'check_config.py'),
             'check', '--config-file', path] + list(args),
            capture_output=True, text=True, timeout=120)

    def test_preemption_without_credentials_is_refused(self):
        result = self._check('[nova_sched_ext]\nscheduler_driver = '
                             'preemption\n', '--scheduler-command', 'bash')
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn('[nova_sched_ext_evictor] has no credentials',
                      result.stderr)

    def test_preemption_with_credentials_is_valid(self):
        result = self._check(
            '[nova_sched_ext]\nscheduler_driver = preemption\n'
            '[nova_sched_ext_evictor]\nauth_type = password\n'
            'auth_url = http://keystone\n', '--scheduler-command', 'bash')
        self.assertEqual(0, result.returncode, result.stderr)

    def test_a_driver_under_nova_scheduler_is_refused(self):
        result = self._check(
            '[nova_sched_ext]\nscheduler_driver = preemption\n'
            '[nova_sched_ext_evictor]\nauth_type = password\n')
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn('only works under nova-sched-ext-scheduler',
                      result.stderr)

    def test_an_unknown_driver_or_action_is_refused(self):
        result = self._check('[nova_sched_ext]\nscheduler_driver = nope\n'
                             'preemption_action = stop\n')
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn("scheduler_driver = 'nope' is not a scheduler driver",
                      result.stderr)
        self.assertIn('[nova_sched_ext] preemption_action', result.stderr)
