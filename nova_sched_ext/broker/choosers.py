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

"""Cluster choosers: in which order the broker tries the clusters.

For each variant, :func:`~nova_sched_ext.broker.planning.plan` hands the
chooser the clusters whose capacity covers the request and boots them in
the order it returns.  A chooser is a :class:`Chooser` subclass
registered in the entry-point namespace ``nova_sched_ext.broker_choosers``
and named by ``broker.chooser`` in the broker's configuration.  Shipped:

``most-capacity`` (:class:`MostCapacity`)
    the cluster that still takes the most instances of the variant first,
    so that the request lands where it leaves most room;
``round-robin`` (:class:`RoundRobin`)
    the clusters in turn, starting after the one that took the previous
    request, whatever their capacity: the baseline of the comparison;
``best-fit`` (:class:`BestFit`)
    the cluster with the least capacity that still covers the request
    first, so that the clusters with most room keep it for the requests
    only they can take, instead of every request herding onto them.
"""

from nova_sched_ext.broker import config as broker_config
from nova_sched_ext import registry


class Chooser:
    """The order in which the clusters eligible for a variant are tried.

    One instance serves a broker (or a simulated replay) for its life:
    a chooser may keep state between requests.
    """

    def __init__(self, conf):
        self.conf = conf

    def order(self, request, variant, candidates):
        """``candidates`` (:class:`~.planning.Candidate`), reordered."""
        raise NotImplementedError()

    def placed(self, candidate):
        """``candidate`` took the request (a boot succeeded)."""


class MostCapacity(Chooser):
    """The cluster with the most capacity for the variant first."""

    def order(self, request, variant, candidates):
        position = {name: i for i, name in enumerate(self.conf.clusters)}
        return sorted(candidates, key=lambda c: (-c.capacity,
                                                 position[c.cluster]))


class BestFit(Chooser):
    """The cluster with the least capacity covering the request first."""

    def order(self, request, variant, candidates):
        position = {name: i for i, name in enumerate(self.conf.clusters)}
        return sorted(candidates, key=lambda c: (c.capacity,
                                                 position[c.cluster]))


class RoundRobin(Chooser):
    """The clusters in turn, after the one that took the last request."""

    def __init__(self, conf):
        super().__init__(conf)
        self._names = list(conf.clusters)
        self._next = 0

    def order(self, request, variant, candidates):
        n = len(self._names)
        position = {name: i for i, name in enumerate(self._names)}
        return sorted(candidates, key=lambda c: (
            position[c.cluster] - self._next) % n)

    def placed(self, candidate):
        self._next = (self._names.index(candidate.cluster) + 1) % len(
            self._names)


def load(conf):
    """An instance of the chooser ``broker.chooser`` names.

    :raises nova_sched_ext.registry.PluginLoadError: unknown or broken
    """
    cls, = registry.load_named(broker_config.CHOOSER_NAMESPACE,
                               [conf.chooser], Chooser,
                               option='%s: broker.chooser' % conf.path)
    return cls(conf)
