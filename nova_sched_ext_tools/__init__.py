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

A top-level package of their own, in the same distribution as the runtime
package ``nova_sched_ext`` but outside it: nothing a Nova service, the
operator services or the broker load imports this package or names it in
an entry point (``tests/unit/test_layering.py`` checks both directions:
the imports, and the targets of ``setup.cfg``'s entry points).  The tools
use the runtime packages the way a scheduler does.  The old path,
``nova_sched_ext.offline``, is a deprecated alias of this package.

- :mod:`~nova_sched_ext_tools.sim`: ``nova-sched-ext-sim``, the
  trace-replay simulator (its command line is
  :mod:`~nova_sched_ext_tools.sim.cli`).
- :mod:`~nova_sched_ext_tools.bench`: the benchmarks of
  ``nova-sched-ext-bench`` (:mod:`~nova_sched_ext_tools.bench.victims`:
  victim selection).
- :mod:`~nova_sched_ext_tools.demo`: ``nova-sched-ext-demo``.
- :mod:`~nova_sched_ext_tools.harness`: a real Nova in one process on fake
  libvirt hosts, for the functional tests and the demo (needs Nova's test
  dependencies: the ``[demo]`` extra).
- :mod:`~nova_sched_ext_tools.hosts`: the one factory of host NUMA
  topologies the tools share.
- :mod:`~nova_sched_ext_tools.loader`: the one way the tools load Nova.

Importing this package imports nothing else; each tool imports Nova when it
runs.
"""
