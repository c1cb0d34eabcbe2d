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

"""Offline tools: the simulator, the benchmarks, the demo, the test cloud.

Nothing a Nova service loads imports this package: the code a scheduler
loads (``fit``, ``filters``, ``weighers``, ``deployment_set``,
``preemption``, ``manager``, ...) lives beside it and never reaches in here
(``tests/unit/test_layering.py`` checks the direction).  The tools use those
packages the way a scheduler does.

- :mod:`~nova_sched_ext.offline.sim`: ``nova-sched-ext-sim``, the
  trace-replay simulator (its command line is
  :mod:`~nova_sched_ext.offline.sim.cli`).
- :mod:`~nova_sched_ext.offline.bench`: the benchmarks of
  ``nova-sched-ext-bench`` (:mod:`~nova_sched_ext.offline.bench.victims`:
  victim selection).
- :mod:`~nova_sched_ext.offline.demo`: ``nova-sched-ext-demo``.
- :mod:`~nova_sched_ext.offline.harness`: a real Nova in one process on fake
  libvirt hosts, for the functional tests and the demo (needs Nova's test
  dependencies: the ``[demo]`` extra).
- :mod:`~nova_sched_ext.offline.hosts`: the one factory of host NUMA
  topologies the tools share.
- :mod:`~nova_sched_ext.offline.loader`: the one way the tools load Nova.

Importing this package imports nothing else; each tool imports Nova when it
runs.
"""
