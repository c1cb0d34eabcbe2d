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

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
import textwrap
import warnings

import fixtures

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SETTINGS = os.path.join(REPO, 'devstack', 'settings')
LITE = os.path.join(REPO, 'tools', 'devstack-lite')
# A guard against a shell that hangs, not a speed check: the plugin's
# stack phases run Python (config checks), which took over 60 s on a
# machine at load 19.
SHELL_TIMEOUT = 600


def _bash(script, **env):
    return subprocess.run(
        ['bash', '-c', script], env=dict(os.environ, **env),
        capture_output=True, text=True, check=True,
        timeout=SHELL_TIMEOUT).stdout


class SettingsTest(base.TestCase):
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

    def test_fast_numa_filter_replaces_numa_topology_filter(self):
        fast = 'FastNUMATopologyFilter'
        self.assertEqual('ComputeFilter,%s,PciFilter' % fast,
                         self._filters('ComputeFilter,NUMATopologyFilter,'
                                       'PciFilter', fast))
        self.assertEqual('A,%s,DeploymentSetFilter' % fast,
                         self._filters('A', 'NUMAFitFilter,%s,'
                                            'DeploymentSetFilter' % fast))
        self.assertEqual('A,%s,B' % fast, self._filters(
            'A,NUMAFitFilter,NUMATopologyFilter,B', fast))

    def test_nothing_to_add(self):
        self.assertEqual('A,NUMAFitFilter,NUMATopologyFilter',
                         self._filters('A,NUMAFitFilter,NUMATopologyFilter'))
        self.assertEqual('A,B', self._filters('A,B', ''))


class LiteIniTest(base.TestCase):
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

    def test_values_are_kept_as_given_and_comments_stay(self):
        out = self._run(
            'printf "# top\\n[a]\\nx = 1\\n\\n[b]\\n  x = indented\\n"'
            ' > CONF\n'
            'iniset CONF b x "k=v \\\\n"\n'
            'iniset CONF new y -n\n'
            'echo "a.x: $(iniget CONF a x) b.x: $(iniget CONF b x)"\n')
        echoed, text = out.split('\n', 1)
        self.assertEqual('a.x: 1 b.x: k=v \\n', echoed)
        self.assertEqual('# top\n[a]\nx = 1\n\n[b]\n  x = indented\n'
                         'x = k=v \\n\n\n[new]\ny = -n\n', text)

    def test_reading_or_deleting_never_creates_the_file(self):
        out = self._run(
            'iniget CONF a x; ini_has_option CONF a x; echo "has: $?"\n'
            'inidelete CONF a x; [[ -e CONF ]] || echo absent\n'
            'touch CONF\n')
        self.assertIn('has: 1\nabsent\n', out)


class ServiceUserPluginTest(base.TestCase):
    """A nova.conf with Nova's [service_user], and the plugin run on it."""

    SERVICE_USER = (
        '[service_user]\nsend_service_user_token = True\n'
        'auth_type = password\nauth_url = http://keystone/identity\n'
        'username = nova\npassword = secret\nproject_name = service\n'
        'user_domain_name = Default\nproject_domain_name = Default\n'
        '[placement]\nregion_name = RegionTwo\n')
    #: what the plugin copies of SERVICE_USER into a credentials section
    COPIED = ('auth_type = password', 'auth_url = http://keystone/identity',
              'username = nova', 'password = secret',
              'project_name = service', 'user_domain_name = Default',
              'project_domain_name = Default', 'region_name = RegionTwo')

    def assertServiceUserCopied(self, out, section):
        text = out.split('[%s]\n' % section, 1)[1].split('\n[', 1)[0]
        for line in self.COPIED:
            self.assertIn(line + '\n', text + '\n')
        self.assertNotIn('send_service_user_token', text)

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


class PreemptionPluginTest(ServiceUserPluginTest):
    """NOVA_SCHED_EXT_PREEMPTION=True: the driver and its credentials."""

    def test_the_driver_gets_nova_service_user_credentials(self):
        conf = self._conf(self.SERVICE_USER)
        out = self._plugin(conf, 'configure_nova_sched_ext_preemption')
        self.assertIn('[nova_sched_ext]\nscheduler_driver = preemption', out)
        self.assertServiceUserCopied(out, 'nova_sched_ext_evictor')

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


class DefragPluginTest(ServiceUserPluginTest):
    """NOVA_SCHED_EXT_DEFRAG=True: the executor's credentials."""

    def test_apply_gets_nova_service_user_credentials(self):
        conf = self._conf(self.SERVICE_USER)
        out = self._plugin(conf, 'configure_nova_sched_ext_defrag')
        self.assertServiceUserCopied(out, 'nova_sched_ext_defrag')
        # The defragmentation user is not the preemption driver.
        self.assertNotIn('scheduler_driver', out)

    def test_twice_is_the_same_as_once(self):
        once = self._plugin(self._conf(self.SERVICE_USER),
                            'configure_nova_sched_ext_defrag')
        twice = self._plugin(self._conf(self.SERVICE_USER),
                             'configure_nova_sched_ext_defrag\n'
                             'configure_nova_sched_ext_defrag')
        self.assertEqual(once, twice)

    def test_unstack_takes_the_credentials_out(self):
        conf = self._conf(self.SERVICE_USER)
        out = self._plugin(conf, 'configure_nova_sched_ext_defrag\n'
                                 'configure_nova_sched_ext_preemption\n'
                                 'unconfigure_nova_sched_ext')
        for section in ('nova_sched_ext_defrag', 'nova_sched_ext_evictor'):
            if '[%s]\n' % section in out:
                self.assertEqual('', out.split(
                    '[%s]\n' % section, 1)[1].split('[', 1)[0].strip())
        self.assertIn('username = nova', out.split('[placement]')[0])


class RenamedOptionPluginTest(ServiceUserPluginTest):
    """A variable of an option's old name still sets the option."""

    URL = 'redis://192.0.2.1:6379'

    def test_the_old_variable_sets_the_new_option(self):
        conf = self._conf('[nova_sched_ext]\n'
                          'deployment_set_lock_url = redis://stale:6379\n')
        out = self._plugin(conf, 'configure_nova_sched_ext 2>&1',
                           NOVA_SCHED_EXT_DEPLOYMENT_SET_LOCK_URL=self.URL)
        self.assertIn('NOVA_SCHED_EXT_DEPLOYMENT_SET_LOCK_URL is deprecated',
                      out)
        self.assertIn('coordination_url = %s\n' % self.URL, out)
        self.assertNotIn('deployment_set_lock_url =', out)

    def test_the_new_variable_wins(self):
        out = self._plugin(self._conf(''), 'configure_nova_sched_ext 2>&1',
                           NOVA_SCHED_EXT_DEPLOYMENT_SET_LOCK_URL='redis://x',
                           NOVA_SCHED_EXT_COORDINATION_URL=self.URL)
        self.assertIn('NOVA_SCHED_EXT_DEPLOYMENT_SET_LOCK_URL is ignored',
                      out)
        self.assertIn('coordination_url = %s\n' % self.URL, out)
        self.assertNotIn('redis://x', out.split('is ignored')[1])

    def test_unstack_takes_both_names_out(self):
        conf = self._conf('[nova_sched_ext]\n'
                          'deployment_set_lock_url = redis://old:6379\n'
                          'coordination_url = redis://new:6379\n')
        out = self._plugin(conf, 'unconfigure_nova_sched_ext')
        self.assertNotIn('redis://', out)


class CheckConfigDriverTest(base.TestCase):
    """check_config.py stops a preemption driver that could not work.

    One case runs it as devstack does, in a fresh interpreter; the others
    call its main() in this one (each fresh interpreter imports Nova
    again), reading the file into oslo.config's global CONF, cleared after.
    """

    SCRIPT = os.path.join(REPO, 'devstack', 'tools', 'check_config.py')

    def _write(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def _check_process(self, text, *args):
        return subprocess.run(
            [sys.executable, self.SCRIPT, 'check', '--config-file',
             self._write(text)] + list(args),
            capture_output=True, text=True, timeout=120)

    def _check(self, text, *args):
        spec = importlib.util.spec_from_file_location(
            'nse_devstack_check_config', self.SCRIPT)
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        from nova_sched_ext import conf
        self.addCleanup(conf.CONF.clear)
        stdout, stderr = io.StringIO(), io.StringIO()
        with warnings.catch_warnings(), \
                contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            code = script.main(['check', '--config-file', self._write(text)]
                               + list(args))
        return subprocess.CompletedProcess(
            ['check_config.py'], code, stdout.getvalue(), stderr.getvalue())

    def test_preemption_without_credentials_is_refused(self):
        result = self._check('[nova_sched_ext]\nscheduler_driver = '
                             'preemption\n', '--scheduler-command', 'bash')
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn('[nova_sched_ext_evictor] has no credentials',
                      result.stderr)

    def test_preemption_with_credentials_is_valid(self):
        # As devstack runs it.
        result = self._check_process(
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


class RecordedPluginTest(base.TestCase):
    """The plugin's phases with devstack's service functions recorded."""

    # devstack's functions that devstack-lite does not provide, recorded.
    STUBS = textwrap.dedent('''
        function _record { echo "$*" >> "$CALLS"; }
        function write_uwsgi_config {
            _record write_uwsgi_config "$@"
            iniset "$1" uwsgi module "$2"
        }
        function remove_uwsgi_config { _record remove_uwsgi_config "$@"; }
        function get_or_create_service {
            _record get_or_create_service "$@"
        }
        function get_or_create_endpoint {
            _record get_or_create_endpoint "$@"
        }
        function run_process { _record run_process "$@"; }
        function stop_process { _record stop_process "$@"; }
        function wait_for_service { _record wait_for_service "$@"; }
        function which { echo "/usr/bin/$1"; }
    ''')

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.nova_conf = os.path.join(self.dir, 'nova.conf')
        self.capacity_conf = os.path.join(self.dir,
                                          'nova-sched-ext-capacity.conf')
        self.uwsgi_conf = os.path.join(self.dir,
                                       'nova-sched-ext-capacity-uwsgi.ini')
        self.tempest_conf = os.path.join(self.dir, 'tempest.conf')
        self.calls = os.path.join(self.dir, 'calls')
        open(self.nova_conf, 'w').close()
        open(self.calls, 'w').close()

    def _script(self, commands, services):
        return ('LITE_DIR=%s VENV=/nonexistent LOGDIR=/tmp PIDDIR=/tmp\n'
                'source %s/functions.sh\n%s\n'
                'ENABLED_SERVICES=%s\n'
                'NOVA_SCHED_EXT_DIR=%s NOVA_CONF=%s NOVA_BIN_DIR=/venv/bin\n'
                'NOVA_FAKE_CONF=/nonexistent TEMPEST_CONFIG=%s\n'
                'SERVICE_PROTOCOL=http SERVICE_HOST=192.0.2.10\n'
                'REGION_NAME=RegionOne NOVA_FILTERS=ComputeFilter\n'
                'source %s/devstack/settings\n%s\n'
                % (LITE, LITE, self.STUBS, services, REPO, self.nova_conf,
                   self.tempest_conf, REPO, commands))

    def _plugin(self, commands, services='nse-capacity-api,'
                'nse-capacity-exporter', **env):
        _bash(self._script(commands, services), CALLS=self.calls, **env)
        with open(self.calls) as f:
            return f.read().splitlines()

    @staticmethod
    def _read(path):
        with open(path) as f:
            return f.read()


class SchedulersPluginTest(RecordedPluginTest):
    """NOVA_SCHED_EXT_SCHEDULERS: n-sch, n-sch-2, ... on one command."""

    COMMAND = '/venv/bin/nova-sched-ext-scheduler --config-file %s'

    def _schedulers(self, phase, **env):
        env.setdefault('NOVA_SCHED_EXT_DEPLOYMENT_SET_LOCKING', 'True')
        return [call for call in self._plugin(
            'source %s/devstack/plugin.sh %s' % (REPO, phase),
            services='n-sch', **env) if ' n-sch' in call]

    def test_stack_extra_runs_each_scheduler(self):
        calls = self._schedulers('stack extra', NOVA_SCHED_EXT_SCHEDULERS='3')
        command = self.COMMAND % self.nova_conf
        self.assertEqual(['stop_process n-sch',
                          'run_process n-sch %s' % command,
                          'run_process n-sch-2 %s' % command,
                          'run_process n-sch-3 %s' % command], calls)

    def test_one_scheduler_by_default(self):
        calls = self._schedulers('stack extra')
        self.assertEqual(['stop_process n-sch', 'run_process n-sch %s'
                          % (self.COMMAND % self.nova_conf)], calls)

    def test_the_launcher_goes_before_the_command(self):
        calls = self._schedulers(
            'stack extra', NOVA_SCHED_EXT_SCHEDULERS='2',
            NOVA_SCHED_EXT_SCHEDULER_LAUNCHER='/lite/launch --faults /f --')
        self.assertEqual('run_process n-sch-2 /lite/launch --faults /f -- %s'
                         % (self.COMMAND % self.nova_conf), calls[-1])

    def test_unstack_stops_the_extra_schedulers(self):
        calls = self._schedulers('unstack', NOVA_SCHED_EXT_SCHEDULERS='3')
        # lib/nova stops n-sch itself.
        self.assertEqual(['stop_process n-sch-2', 'stop_process n-sch-3'],
                         calls)

    def _refused(self, **env):
        result = subprocess.run(
            ['bash', '-c', self._script(
                'source %s/devstack/plugin.sh\n'
                '_nova_sched_ext_check_schedulers' % REPO, 'n-sch')],
            env=dict(os.environ, CALLS=self.calls, **env),
            capture_output=True, text=True, timeout=SHELL_TIMEOUT)
        self.assertEqual(1, result.returncode)
        return result.stderr

    def test_a_count_that_is_not_a_number_is_refused(self):
        for value in ('three', '0', '-1', '2.5'):
            self.assertIn(
                'NOVA_SCHED_EXT_SCHEDULERS must be a whole number of 1 or '
                'more, not \'%s\'' % value,
                self._refused(NOVA_SCHED_EXT_SCHEDULERS=value))

    def test_several_nova_schedulers_are_refused(self):
        self.assertIn('n-sch runs nova-scheduler here',
                      self._refused(NOVA_SCHED_EXT_SCHEDULERS='2'))


class PlacementConflictRetriesPluginTest(RecordedPluginTest):
    """placement.conf: one attempt per claim request, where placement runs.

    Placement's own retries of a generation conflict inside the claim's
    transaction let a claim exceed the provider's capacity
    (tests/functional/test_placement_claims.py); with one, the conflict
    goes back to Nova's report client.
    """

    def setUp(self):
        super().setUp()
        self.placement_conf = os.path.join(self.dir, 'placement.conf')
        with open(self.placement_conf, 'w') as f:
            f.write('[placement_database]\nconnection = mysql://p\n')

    def _run(self, commands, services='placement-api', **env):
        return subprocess.run(
            ['bash', '-c', self._script(
                'PLACEMENT_CONF=%s\nsource %s/devstack/plugin.sh\n%s'
                % (self.placement_conf, REPO, commands), services)],
            env=dict(os.environ, CALLS=self.calls, **env),
            capture_output=True, text=True, timeout=SHELL_TIMEOUT)

    def _configured(self, services='placement-api', **env):
        result = self._run('configure_nova_sched_ext_placement', services,
                           **env)
        self.assertEqual(0, result.returncode, result.stderr)
        return self._read(self.placement_conf)

    def test_one_attempt_by_default(self):
        conf = self._configured()
        self.assertIn('[placement]\nallocation_conflict_retry_count = 1\n',
                      conf)
        self.assertIn('connection = mysql://p\n', conf)

    def test_the_variable_sets_the_count(self):
        self.assertIn('allocation_conflict_retry_count = 3\n',
                      self._configured(
                          NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES='3'))

    def test_empty_or_no_placement_here_leaves_the_file(self):
        before = self._read(self.placement_conf)
        self.assertEqual(before, self._configured(
            NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES=''))
        self.assertEqual(before, self._configured(services='n-sch'))

    def test_a_count_that_is_not_a_number_is_refused(self):
        for value in ('one', '0', '-1', '1.5'):
            result = self._run(
                'configure_nova_sched_ext_placement',
                NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES=value)
            self.assertEqual(1, result.returncode)
            self.assertIn('NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES must '
                          'be a whole number of at least 1 (or empty), not '
                          '\'%s\'' % value, result.stderr)
            self.assertNotIn('allocation_conflict_retry_count',
                             self._read(self.placement_conf))

    def test_placement_here_without_its_file_is_refused(self):
        result = subprocess.run(
            ['bash', '-c', self._script(
                'PLACEMENT_CONF=\nsource %s/devstack/plugin.sh\n'
                'configure_nova_sched_ext_placement' % REPO,
                'placement-api')],
            env=dict(os.environ, CALLS=self.calls), capture_output=True,
            text=True, timeout=SHELL_TIMEOUT)
        self.assertEqual(1, result.returncode)
        self.assertIn('placement-api runs here but PLACEMENT_CONF '
                      '(lib/placement\'s placement.conf) is not set',
                      result.stderr)

    def test_post_config_writes_it_and_unstack_takes_it_out(self):
        result = self._run('source %s/devstack/plugin.sh stack post-config'
                           % REPO, services='placement-api,n-sch')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('allocation_conflict_retry_count = 1\n',
                      self._read(self.placement_conf))
        result = self._run('source %s/devstack/plugin.sh unstack' % REPO)
        self.assertEqual(0, result.returncode, result.stderr)
        conf = self._read(self.placement_conf)
        self.assertNotIn('allocation_conflict_retry_count', conf)
        self.assertIn('connection = mysql://p\n', conf)


class CapacityServicesPluginTest(RecordedPluginTest):
    """nse-capacity-api and nse-capacity-exporter: files, keystone, runs."""

    def test_the_capacity_file_and_the_uwsgi_file(self):
        calls = self._plugin(
            'source %s/devstack/plugin.sh\n'
            'configure_nova_sched_ext_capacity' % REPO,
            NOVA_SCHED_EXT_CAPACITY_ALLOWED_ROLES='admin,capacity_reader',
            NOVA_SCHED_EXT_CAPACITY_EXPORT_PER_HOST='yes',
            NOVA_SCHED_EXT_CAPACITY_KEPT_STATE='yes',
            NOVA_SCHED_EXT_CAPACITY_KEPT_STATE_POLL_INTERVAL='0.5')
        self.assertEqual(
            '[nova_sched_ext_capacity]\nauth_strategy = keystone\n'
            'allowed_roles = admin,capacity_reader\n'
            'refresh_interval = 60\nexporter_port = 9736\n'
            'export_per_host = True\nkept_state = True\n'
            'kept_state_poll_interval = 0.5\n',
            self._read(self.capacity_conf))
        self.assertEqual(
            ['write_uwsgi_config %s nova_sched_ext.capacity.wsgi:application '
             '/numa-capacity  nse-capacity-api' % self.uwsgi_conf], calls)
        uwsgi = self._read(self.uwsgi_conf)
        self.assertIn('env = NOVA_SCHED_EXT_CAPACITY_CONFIG_DIR=%s\n'
                      % self.dir, uwsgi)
        # nova.conf itself is left alone.
        self.assertEqual('', self._read(self.nova_conf))

    def test_the_exporter_alone_needs_no_uwsgi(self):
        calls = self._plugin(
            'source %s/devstack/plugin.sh\n'
            'configure_nova_sched_ext_capacity' % REPO,
            services='nse-capacity-exporter')
        self.assertEqual([], calls)
        self.assertIn('exporter_port = 9736',
                      self._read(self.capacity_conf))

    def test_the_api_is_in_the_catalog(self):
        calls = self._plugin('source %s/devstack/plugin.sh\n'
                             'create_nova_sched_ext_capacity_accounts'
                             % REPO)
        self.assertEqual(
            ['get_or_create_service nova-sched-ext-capacity numa-capacity '
             'NUMA-exact capacity of the flavors (nova-sched-ext)',
             'get_or_create_endpoint numa-capacity RegionOne '
             'http://192.0.2.10/numa-capacity'], calls)

    def test_the_catalog_ids_are_labelled(self):
        # devstack's helpers print the new IDs; the log says what they are
        out = _bash(self._script(
            'function get_or_create_service { echo 5e7c1d; }\n'
            'function get_or_create_endpoint { echo e1d2b3; }\n'
            'source %s/devstack/plugin.sh\n'
            'create_nova_sched_ext_capacity_accounts' % REPO,
            'nse-capacity-api'), CALLS=self.calls)
        self.assertEqual(
            ['nova-sched-ext capacity API in the catalog: service '
             'numa-capacity (5e7c1d), endpoint '
             'http://192.0.2.10/numa-capacity (e1d2b3)'],
            out.splitlines())

    def test_stack_extra_starts_both_services(self):
        calls = self._plugin('source %s/devstack/plugin.sh stack extra'
                             % REPO)
        self.assertEqual(
            ['run_process nse-capacity-api /usr/bin/uwsgi --procname-prefix '
             'nse-capacity-api --ini %s' % self.uwsgi_conf,
             'wait_for_service 60 http://192.0.2.10/numa-capacity',
             'run_process nse-capacity-exporter '
             '/venv/bin/nova-sched-ext-capacity-exporter --config-file %s '
             '--config-file %s' % (self.nova_conf, self.capacity_conf)],
            calls)

    def test_disabled_services_start_nothing(self):
        calls = self._plugin('source %s/devstack/plugin.sh stack extra'
                             % REPO, services='key,n-api')
        self.assertEqual([], calls)

    def test_tempest_knows_whether_the_api_runs(self):
        for services, expected in (('nse-capacity-api', 'True'),
                                   ('nse-capacity-exporter', 'False')):
            self._plugin('source %s/devstack/plugin.sh\n'
                         'configure_tempest_for_nova_sched_ext' % REPO,
                         services=services)
            self.assertIn('capacity_api = %s\n' % expected,
                          self._read(self.tempest_conf))

    def test_unstack_stops_the_services_and_removes_their_files(self):
        calls = self._plugin(
            'source %s/devstack/plugin.sh\n'
            'configure_nova_sched_ext_capacity\n'
            'configure_tempest_for_nova_sched_ext\n'
            'source %s/devstack/plugin.sh unstack' % (REPO, REPO))
        self.assertEqual(
            ['stop_process nse-capacity-api',
             'stop_process nse-capacity-exporter',
             'remove_uwsgi_config %s nse-capacity-api' % self.uwsgi_conf],
            calls[1:])
        self.assertFalse(os.path.exists(self.capacity_conf))
        self.assertNotIn('capacity_api', self._read(self.tempest_conf))


class DefragTempestConfigTest(RecordedPluginTest):
    """test-config tells tempest whether to run the defrag scenario."""

    def _tempest(self, commands='', **env):
        self._plugin('source %s/devstack/plugin.sh\n'
                     'configure_tempest_for_nova_sched_ext\n%s'
                     % (REPO, commands), services='tempest', **env)
        return self._read(self.tempest_conf)

    def test_enabled(self):
        conf = self._tempest(NOVA_SCHED_EXT_DEFRAG='True')
        self.assertIn('defrag = True\n', conf)
        self.assertIn('defrag_nova_conf = %s\n' % self.nova_conf, conf)

    def test_off_by_default(self):
        self.assertIn('defrag = False\n', self._tempest())

    def test_unstack_takes_them_out(self):
        conf = self._tempest('unconfigure_nova_sched_ext',
                             NOVA_SCHED_EXT_DEFRAG='True')
        self.assertNotIn('defrag', conf)


class FakeComputeIdentityPluginTest(RecordedPluginTest):
    """Each fake compute keeps its node UUID across the restart.

    devstack's stable/2025.1 and stable/2025.2 start the fake computes on
    fake.FakeDriver, all in nova.conf's state_path; master gives each a
    state_path and compute_id of its own. The plugin's post-config gives
    them what master does before lib/nova starts them.
    """

    def _fake_virt(self, preset='', then=''):
        state = os.path.join(self.dir, 'state')
        self.fake_conf = os.path.join(self.dir, 'nova-fake.conf')
        self._plugin(
            'NOVA_FAKE_CONF=%s NOVA_STATE_PATH=%s HOSTNAME=cpu\n'
            'source %s/devstack/plugin.sh\n%s\n'
            'configure_nova_sched_ext_fake_virt\n%s'
            % (self.fake_conf, state, REPO, preset, then), services='n-cpu',
            VIRT_DRIVER='fake', NOVA_SCHED_EXT_FAKE_VIRT='True',
            NUMBER_FAKE_NOVA_COMPUTE='2')
        return state

    def _compute_id(self, state_path):
        return self._read(os.path.join(state_path, 'compute_id')).strip()

    def test_stable_2025_1_computes_get_what_master_gives_them(self):
        state = self._fake_virt()
        ids = []
        for i in (1, 2):
            conf = self._read('%s-%d' % (self.fake_conf, i))
            path = os.path.join(state, 'cpu%d' % i)
            self.assertIn('state_path = %s\n' % path, conf)
            self.assertIn(
                'compute_driver = fake.FakeDriverWithoutFakeNodes\n', conf)
            ids.append(self._compute_id(path))
        self.assertNotEqual(ids[0], ids[1])
        for node_uuid in ids:
            self.assertEqual(36, len(node_uuid))

    def test_a_state_path_and_compute_id_of_its_own_are_kept(self):
        mine = os.path.join(self.dir, 'mine')
        os.makedirs(mine)
        with open(os.path.join(mine, 'compute_id'), 'w') as f:
            f.write('00000000-0000-4000-8000-000000000001\n')
        self._fake_virt('iniset "$NOVA_FAKE_CONF-1" DEFAULT state_path %s'
                        % mine)
        conf = self._read(self.fake_conf + '-1')
        self.assertIn('state_path = %s\n' % mine, conf)
        self.assertEqual(1, conf.count('state_path'))
        self.assertEqual('00000000-0000-4000-8000-000000000001',
                         self._compute_id(mine))

    def test_twice_keeps_the_node_uuids(self):
        state = self._fake_virt()
        first = self._compute_id(os.path.join(state, 'cpu2'))
        self._fake_virt()
        self.assertEqual(first, self._compute_id(os.path.join(state, 'cpu2')))

    def test_the_fake_numa_driver_is_not_replaced(self):
        self._fake_virt('iniset "$NOVA_FAKE_CONF-1" DEFAULT compute_driver '
                        '"$NOVA_SCHED_EXT_FAKE_DRIVER"')
        self.assertIn('compute_driver = nova_sched_ext_fake_numa.'
                      'FakeNUMADriver\n', self._read(self.fake_conf + '-1'))

    def test_unstack_takes_the_driver_out(self):
        self._fake_virt(then='unconfigure_nova_sched_ext')
        for i in (1, 2):
            conf = self._read('%s-%d' % (self.fake_conf, i))
            self.assertNotIn('compute_driver', conf)
            self.assertNotIn('numa_topology', conf)
