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

"""The capacity count on the in-process cloud, checked boot by boot.

:func:`snapshot` is what ``nova-sched-ext-capacity`` would print for the
whole cloud: per flavor, how many more servers fit, NUMA-exact, and the
figure of placement's inventories alone (os-capacity's formula).

:func:`check_boot` proves the count on a request the scheduler really
placed. The count places instances one after another as Nova's fit does,
so a server that lands on a host takes exactly the first of the host's
counted slots: per host, the count of the booted flavor must drop by
exactly the servers that landed there, and not change elsewhere; a
request that ends in NoValidHost must have found fewer slots than it
asked for. Other flavors' counts are not checked: how much a boot of one
flavor costs another depends on the layout, which is what the count is
for.
"""

import collections
import dataclasses


def count(flavor_names, by='cloud', per_host=False):
    """The capacity report (a dict) of these flavors, as the API serves it.

    Runs in the process of the cloud: its databases and placement, with an
    admin context, as the capacity command does with ``nova.conf``.
    """
    from nova import context as nova_context

    from nova_sched_ext import capacity
    return capacity.compute(nova_context.get_admin_context(),
                            flavors=list(flavor_names), by=by,
                            per_host=per_host).to_dict()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The cloud's capacity per flavor at one moment."""

    #: {flavor name: more servers that fit, NUMA-exact}
    capacity: dict
    #: {flavor name: the same from placement's inventories alone}
    placement_only: dict

    def cell(self, flavor_name):
        """``"6 / 9"``: NUMA-exact, then placement only."""
        return '%s / %s' % (self.capacity.get(flavor_name, '-'),
                            self.placement_only.get(flavor_name, '-'))


def snapshot(flavor_names):
    report = count(flavor_names, by='cloud')
    (cloud,) = [s for s in report['scopes'] if s['scope'] == 'cloud']
    return Snapshot(capacity=dict(cloud['capacity']),
                    placement_only=dict(cloud['placement_only']))


def per_host(flavor_name):
    """{host: more servers of the flavor that fit}, NUMA-exact."""
    report = count([flavor_name], by='host')
    return {s['name']: s['capacity'][flavor_name] for s in report['scopes']}


@dataclasses.dataclass(frozen=True)
class BootCheck:
    """The count of a request's flavor per host before and after it."""

    #: the request (``Boot.server``)
    request: str
    flavor: str
    #: servers the request asked for
    servers: int
    before: dict
    after: dict
    #: {host: servers of the request that landed there}
    landed: dict
    #: servers of the request that ended in NoValidHost
    no_valid_host: int

    def problems(self):
        problems = []
        if self.no_valid_host:
            room = sum(self.before.values())
            if room >= self.servers:
                problems.append(
                    '%s: NoValidHost, but the count said %d more %s fit %s'
                    % (self.request, room, self.flavor,
                       _per_host_text(self.before)))
        for host in sorted(set(self.before) | set(self.after)):
            drop = self.before.get(host, 0) - self.after.get(host, 0)
            landed = self.landed.get(host, 0)
            if drop != landed:
                problems.append(
                    '%s: the count of %s on %s went from %d to %d, but %d '
                    'server(s) landed there' % (
                        self.request, self.flavor, host,
                        self.before.get(host, 0), self.after.get(host, 0),
                        landed))
        return problems


def _per_host_text(counts):
    return '(%s)' % ', '.join('%s %d' % (host, n)
                              for host, n in sorted(counts.items()) if n)


def check_boot(boot, before, after, results):
    """A :class:`BootCheck` of one request (``scenarios.Boot``).

    :param before: :func:`per_host` of the flavor before the request
    :param after: the same after it
    :param results: the request's ``cloud.BootResult`` list
    """
    landed = collections.Counter(r.host for r in results
                                 if r.host is not None)
    return BootCheck(request=boot.server, flavor=boot.flavor.name,
                     servers=boot.count, before=before, after=after,
                     landed=dict(landed),
                     no_valid_host=sum(1 for r in results
                                       if r.no_valid_host))


@dataclasses.dataclass
class CapacityRun:
    """The count around one run of a boot sequence."""

    #: the flavors counted before and after (the boots' flavors, in
    #: first-use order)
    flavors: list
    #: :class:`Snapshot` before the first boot and after the last
    before: Snapshot = None
    after: Snapshot = None
    #: a :class:`BootCheck` per request, in order
    checks: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.flavors = list(dict.fromkeys(self.flavors))

    def problems(self):
        return [problem for check in self.checks
                for problem in check.problems()]
