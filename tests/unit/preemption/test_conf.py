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

"""The options of the driver and of the evictor's credentials."""

from nova import test

from nova_sched_ext import conf


class TestOptions(test.NoDBTestCase):

    def test_defaults(self):
        opts = conf.CONF.nova_sched_ext
        self.assertEqual('default', opts.scheduler_driver)
        self.assertEqual('minimal', opts.preemption_victim_strategy)
        self.assertEqual('delete', opts.preemption_action)
        self.assertEqual(-1, opts.preemptible_max_per_az)
        self.assertEqual(-1, opts.preemptible_max_per_host)
        self.assertGreater(opts.preemption_wait_timeout, 0)
        evictor = conf.CONF.nova_sched_ext_evictor
        self.assertEqual('compute', evictor.service_type)
        self.assertEqual(['internal', 'public'], evictor.valid_interfaces)

    def test_only_actions_that_free_the_host_are_offered(self):
        self.assertRaises(ValueError, self.flags, preemption_action='stop',
                          group='nova_sched_ext')
        self.flags(preemption_action='shelve_offload', group='nova_sched_ext')

    def test_caps_below_minus_one_are_refused(self):
        self.assertRaises(ValueError, self.flags, preemptible_max_per_az=-2,
                          group='nova_sched_ext')

    def test_list_opts_gives_the_sample_config_both_groups(self):
        groups = {group.name: [o.dest for o in opts]
                  for group, opts in conf.opts.list_preemption_opts()}
        self.assertEqual({'nova_sched_ext', 'nova_sched_ext_evictor'},
                         set(groups))
        self.assertIn('preemption_action', groups['nova_sched_ext'])
        self.assertNotIn('fit_backend', groups['nova_sched_ext'])
        for option in ('auth_type', 'auth_url', 'username', 'password',
                       'cafile', 'timeout', 'region_name',
                       'endpoint_override', 'valid_interfaces'):
            self.assertIn(option, groups['nova_sched_ext_evictor'])
