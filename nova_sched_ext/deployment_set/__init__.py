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

"""Deployment sets: Nova server groups spread strictly across failure domains.

A deployment set is a Nova server group with policy ``anti-affinity`` whose
members are booted with the scheduler hint ``deployment_set_strategy``
(see :mod:`.hints`).  Membership stays in Nova (quota, API, clean-up); this
package adds the placement rules:

``host``
    at most one member per compute host;
``domain``
    at most one member per failure domain, a host's domain being the value
    of the aggregate metadata key ``[nova_sched_ext]
    deployment_set_domain_key`` (a host without it is a domain of its own);
``partition``
    every member names a partition; members of different partitions never
    share a failure domain, members of one partition may, but share a host
    only up to the group's ``max_server_per_host`` rule (default 1);

and a size cap, ``[nova_sched_ext] deployment_set_max_size``, that the hint
``deployment_set_max_size`` may lower for one set.

The pieces:

- :mod:`.hints`: hint names, parsing and validation;
- :mod:`.members`: where the existing members are, from Nova's databases
  and placement (:class:`~.members.DatabaseMemberSource`) or from the caller
  (:class:`~.members.StaticMemberSource`, for the simulator);
- :mod:`.rules`: the per-request plan that decides which hosts a member
  may take;
- :mod:`.planning`: whether a request falls under a set's rules, and its
  plan or the reason it is refused, made once per request;
- :mod:`.lock`: the per-set lock that ``nova-sched-ext-scheduler`` holds
  around select-and-claim (the request wrapper ``deployment_set_lock``),
  so that concurrent requests see each other's claims;
- :class:`nova_sched_ext.filters.deployment_set.DeploymentSetFilter`: the
  filter that asks :mod:`.planning` for each request's plan.

Nothing here imports the filters: the filter, the lock and the simulator
all build on these modules.
"""
