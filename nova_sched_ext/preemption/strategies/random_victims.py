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

"""The ``random`` victim strategy: Aardvark-like, for comparison.

A random host among those where the request fits once all its victims are
gone, then random victims one at a time until it fits.  It is valid (its
plans always fit) but usually evicts more than ``minimal``; the benchmark
(``nova-sched-ext-bench victims``) compares the two.  The strategy's
generator is shared by concurrent requests, so with a seed its sequence
depends on the order of those requests.
"""

import random

from nova_sched_ext.preemption.strategies import base
from nova_sched_ext.preemption import victims as victims_mod


class RandomVictims(base.VictimStrategy):
    """Aardvark-like random choice, for comparison.

    A random host among those where the request fits once every victim on
    it is gone; then random victims there, one at a time, until it fits.

    :param seed: seed of the strategy's own ``random.Random``
    """

    name = 'random'

    def __init__(self, seed=None):
        self.rng = random.Random(seed)

    def place_one(self, hosts, request):
        # The first host of a random order that fits once all its victims
        # are gone is a uniform choice among those hosts; the costly NUMA
        # check runs only until one is found.
        order = [h for h in hosts
                 if victims_mod.host_level_fits(h, request.resources,
                                                h.victims)]
        self.rng.shuffle(order)
        host = next((h for h in order
                     if victims_mod.numa_fits(h, request, h.victims) is True),
                    None)
        if host is None:
            return None
        order = list(host.victims)
        self.rng.shuffle(order)
        for count in range(len(order) + 1):
            chosen = tuple(order[:count])
            if victims_mod.host_fits(host, request, chosen) is True:
                return victims_mod.Placement(host, chosen)
        # Unreachable: the host fits with all of them.
        return None
