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


"""Preemption: an on-demand boot evicts a preemptible server on a full cloud.

The place for the preemption scenarios. They run when tempest.conf says the
cloud has the preemptible evictor (``[nova_sched_ext] preemption = True``,
written by the devstack plugin from NOVA_SCHED_EXT_PREEMPTION); until their
bodies are written they skip with that reason.
"""

from tempest import config
from tempest.lib import decorators

from nova_sched_ext.tempest_plugin.tests import base

CONF = config.CONF


class PreemptionTest(base.NUMASchedulingTest):
    """On-demand requests evict preemptible servers, never the reverse."""

    @classmethod
    def skip_checks(cls):
        if not CONF.nova_sched_ext.preemption:
            raise cls.skipException(
                'preemption is not enabled in this cloud '
                '([nova_sched_ext] preemption = False)')
        super().skip_checks()

    def _not_written_yet(self):
        raise self.skipException('the preemption scenarios are not written '
                                 'yet')

    @decorators.idempotent_id('7fb72380-06d4-4e64-b1d5-3c32beb02342')
    def test_on_demand_boot_evicts_a_preemptible_server(self):
        """Fill the zone with preemptible servers; an on-demand one fits."""
        self._not_written_yet()

    @decorators.idempotent_id('1990d1cf-2bbc-46b9-bba9-ca4012451819')
    def test_preemptible_boot_on_a_full_cloud_gets_no_valid_host(self):
        """A preemptible request never evicts anything."""
        self._not_written_yet()
