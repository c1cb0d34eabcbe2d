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


"""Virt drivers for test clouds.

:mod:`~nova_sched_ext.virt.fake_numa` is a fake hypervisor whose host reports
a NUMA topology, so that a devstack or devstack-lite cloud without real
hardware exercises NUMA scheduling. :mod:`~nova_sched_ext.virt.layout` is
the small, Nova-free description of that topology, shared with the tempest
plugin. Nothing here is meant for production computes.
"""
