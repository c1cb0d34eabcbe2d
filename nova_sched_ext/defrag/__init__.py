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

"""Defragmentation: a NUMA-aware plan of live migrations, and its executor.

An operator service beside :mod:`nova_sched_ext.capacity` (it counts slots
the same way): :mod:`.model` is the cloud as the planner sees it,
:mod:`.validity` says whether one move is allowed, :mod:`.state` plays
moves on a copy of the cloud and counts slots, :mod:`.planner` searches
the moves.  It may use ``fit/``, the scheduler plugins' modules and
``capacity/``; the offline tools may use it.
"""
