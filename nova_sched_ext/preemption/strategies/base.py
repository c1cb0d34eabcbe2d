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

"""The base class of victim-selection strategies.

A strategy places one instance at a time (:meth:`VictimStrategy.place_one`);
:meth:`VictimStrategy.choose` runs it for every instance of a request
through :func:`~nova_sched_ext.preemption.victims.plan_eviction`, all or
nothing.  Strategies are shared by concurrent requests: they keep no
per-request state on ``self``.
"""

from nova_sched_ext.preemption import victims as victims_mod


class VictimStrategy:
    """Base class of victim-selection strategies."""

    #: The entry-point name.
    name = None

    def place_one(self, hosts, request):
        """Choose where one instance goes and whom it evicts there.

        :param hosts: :class:`~.victims.CandidateHost` objects, reflecting
            the instances of the request already placed
        :param request: the :class:`~.victims.Request`
        :returns: a :class:`~.victims.Placement` naming one of ``hosts``, or
            None when no host can take the instance
        """
        raise NotImplementedError()

    def choose(self, hosts, request):
        """A :class:`~.victims.Plan` for every instance, or None."""
        return victims_mod.plan_eviction(hosts, request, self)
