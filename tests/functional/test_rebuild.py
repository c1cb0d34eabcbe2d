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

"""A rebuild with a new image through the package's scheduler.

Nova sends a rebuild that changes the image to the scheduler, on the
server's own host, with the scheduler hint ``_nova_check_type`` =
``['rebuild']``: the filters that do not run on rebuilds
(``RUN_ON_REBUILD = False``, ``ComputeFilter`` say) pass the host, the
others (``ImagePropertiesFilter``) judge it. The kept host manager runs
Nova's filters through its own handler and asks whether a request is a
rebuild once per filter (:mod:`nova_sched_ext.filter_handler`): a disabled
host must still take the rebuild, and an image the host cannot run must
still be refused, as in Nova's own ``test_rebuild_with_image_novalidhost``.
"""

import copy

from nova.compute import instance_actions
from oslo_utils import uuidutils

from nova_sched_ext import filter_handler
from nova_sched_ext_tools.harness import scenarios
from tests.functional import base


class RebuildThroughTheKeptHostManagerTest(base.KeptHostStateMixin,
                                           base.NUMAFitTestBase):

    HOSTS = (scenarios.NUMA2_4K,)

    def test_a_rebuild_is_judged_as_nova_judges_it(self):
        host_manager = self.scheduler.manager.host_manager
        self.assertIsInstance(host_manager.filter_handler,
                              filter_handler.QuietHostFilterHandler)
        compute_filter, = [f for f in host_manager.enabled_filters
                           if type(f).__name__ == 'ComputeFilter']
        # Nova's host loop, asking whether it is a rebuild once
        self.assertIn('filter_all', vars(compute_filter))

        (result,), (server,) = self.boot('rebuilt', scenarios.SHARED2)
        self.assertEqual('numa2-4k', result.host, result.fault)
        # ComputeFilter would turn the host down for a new server now
        service, = self.admin_api.get_services(binary='nova-compute',
                                               host='numa2-4k')
        self.admin_api.put_service(service['id'], {'status': 'disabled'})

        self.filter_trace.take()
        new_image = self.glance.auto_disk_config_enabled_image['id']
        self.assertNotEqual(self.image_id, new_image)
        self.api.post_server_action(server['id'],
                                    {'rebuild': {'imageRef': new_image}})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(new_image, server['image']['id'])
        self.assertEqual('numa2-4k', server['OS-EXT-SRV-ATTR:host'])

        # An image for another hypervisor: ImagePropertiesFilter runs on
        # rebuilds and refuses it.
        # (a new image: a rebuild to the server's own image is not
        # scheduled)
        xen_image = copy.deepcopy(self.glance.auto_disk_config_enabled_image)
        xen_image['id'] = uuidutils.generate_uuid()
        xen_image['properties'] = {'img_hv_type': 'xen'}
        self.glance.create(None, xen_image)
        self.api.api_post('/servers/%s/action' % server['id'],
                          {'rebuild': {'imageRef': xen_image['id']}},
                          check_response_status=[500])
        self._wait_for_action_fail_completion(
            server, instance_actions.REBUILD, 'rebuild_server')
        server = self._wait_for_state_change(server, 'ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        # the disabled host passed ComputeFilter, then the image failed it
        *_earlier, refused = self.filter_trace.take()
        self.assertEqual(1, refused.count('ComputeFilter'), refused.render())
        self.assertEqual(('ImagePropertiesFilter', 0), refused.kept[-1],
                         refused.render())
