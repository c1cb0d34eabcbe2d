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

"""Preemptible instances: on-demand requests evict them when a cloud is full.

- :mod:`.extra_specs`: the flavor extra spec that marks a flavor
  preemptible, and its validator for Nova's API.
- :mod:`.victims` and :mod:`.strategies`: which preemptible instances to
  evict so that a request fits (host and NUMA level).
- :mod:`.driver`: the scheduler manager that does it, before NoValidHost is
  returned (``[nova_sched_ext] scheduler_driver = preemption``).
"""
