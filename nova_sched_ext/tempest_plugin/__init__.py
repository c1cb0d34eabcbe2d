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


"""Tempest plugin of nova-sched-ext.

Registered with tempest through the ``tempest.test_plugins`` entry point
(``nova-sched-ext``); ``tempest list-plugins`` shows it. Its options are in
tempest.conf's ``[nova_sched_ext]`` group (:mod:`.config`), which the
devstack plugin's ``test-config`` phase writes. Run its tests with::

    tempest run --serial --regex '^nova_sched_ext\\.tempest_plugin\\.'

They create host aggregates, availability zones and flavors, so they need
admin credentials, and they expect to run one at a time (``--serial``): a
scenario reasons about which hosts are empty.
"""
