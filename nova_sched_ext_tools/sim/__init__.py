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

"""Trace-replay simulator: Nova's own filters and weighers, no services.

* :mod:`~nova_sched_ext_tools.sim.cli` is ``nova-sched-ext-sim``.
* :mod:`~nova_sched_ext_tools.sim.trace` reads the Huawei topology-aware
  trace (``hosts.csv``, ``requests_C*.csv``) and generates synthetic traces
  with arrivals and departures.
* :mod:`~nova_sched_ext_tools.sim.cloud` turns trace hosts into Nova
  ``HostState`` objects with NUMA topologies (built by
  :mod:`nova_sched_ext_tools.hosts`) and trace requests into
  ``RequestSpec`` objects, as Nova builds them.
* :mod:`~nova_sched_ext_tools.sim.replay` replays a trace through
  ``HostFilterHandler`` / ``HostWeightHandler`` with the filters and
  weighers named in ``nova.conf`` and consumes resources with
  ``HostState.consume_from_request``, as the scheduler does; the trace's
  ``fault_domain`` groups go through the package's DeploymentSetFilter.
* :mod:`~nova_sched_ext_tools.sim.slots` counts the large-flavor slots
  left.
* :mod:`~nova_sched_ext_tools.sim.policies` holds the named weigher
  presets of ``nova-sched-ext-sim --policy`` / ``--compare``.
* :mod:`~nova_sched_ext_tools.sim.report` prints tables, JSON and plots.

See ``doc/source/simulator.rst``.
"""
