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

"""Helpers to run a real Nova in one process on fake NUMA hosts.

Shared by the functional tests (``tests/functional``) and the demo
(``nova-sched-ext-demo``).  They build on Nova's own test fixtures
(``nova.tests``), so they need Nova's test dependencies
(``openstack-placement``, ``wsgi-intercept``, ``oslotest``) and are never
imported by the scheduler plugins themselves.

- :mod:`~nova_sched_ext_tools.harness.fake_hosts`: host layouts (NUMA
  cells, huge pages, PCI devices) and flavor shapes, as plain data.
- :mod:`~nova_sched_ext_tools.harness.scenarios`: boot sequences with the
  outcome each boot must have.
- :mod:`~nova_sched_ext_tools.harness.filter_trace`: records how many hosts
  each scheduler filter kept, from Nova's own ``nova.filters`` log.
- :mod:`~nova_sched_ext_tools.harness.weighers`: a tie-breaking weigher
  that makes the scheduler's choice among equal hosts deterministic.
- :mod:`~nova_sched_ext_tools.harness.cloud`: the test base class that
  starts the services, boots servers and compares runs.
- :mod:`~nova_sched_ext_tools.harness.runner`: runs a scenario outside a test
  runner (the demo).
"""

# Nova decides between eventlet and native threads when its test package is
# first imported, and that must happen before anything imports futurist or
# oslo.service.  Do it first, as Nova's own test packages do; the switch is
# Nova's OS_NOVA_DISABLE_EVENTLET_PATCHING environment variable.  Through
# the compat seam: Nova 31 patches on import and has no patch().
from nova_sched_ext.compat import release

release.monkey_patch('eventlet')
