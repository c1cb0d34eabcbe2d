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

"""The benchmarks of ``nova-sched-ext-bench``.

* :mod:`~nova_sched_ext_tools.bench.cli`: the command line, and the
  ``fit``, ``filter`` and ``weigher`` benchmarks.
* :mod:`~nova_sched_ext_tools.bench.victims`: ``nova-sched-ext-bench
  victims``, quality and cost of victim selection.
* :mod:`~nova_sched_ext_tools.bench.capacity`: ``nova-sched-ext-bench
  capacity``, one full pass of the NUMA-exact capacity count.
* :mod:`~nova_sched_ext_tools.bench.scale`: ``nova-sched-ext-bench
  scale``, the whole ``select_destinations`` of stock Nova and of the
  package's scheduler on real placement and databases.
"""
