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

"""A stand-in for the capacity core, for the tests of its interfaces.

The API, the exporter and the OSC plugin only rely on
``capacity.compute(...)`` returning an object with ``to_dict()`` and on
``capacity.CapacityError``; :class:`FakeCapacity` replaces ``compute``
and, if the core does not define it, ``CapacityError``.
"""

import copy
import threading

import fixtures
from oslo_config import cfg

from nova_sched_ext.conf import capacity as capacity_conf


class FakeCapacityError(Exception):
    """CapacityError, when the core does not define it."""


def report(by='az', scopes=None, hosts_skipped=None, engine_fallbacks=0):
    """A report dictionary with the layout of Report.to_dict()."""
    if scopes is None:
        scopes = [
            scope(by, 'nova', {'m1.small': 40, 'm1.large': 6},
                  {'m1.small': 48, 'm1.large': 9}, 'm1.large', 3, 1024, 3),
            scope(by, 'zone2', {'m1.small': 4, 'm1.large': 0},
                  {'m1.small': 4, 'm1.large': 1}, 'm1.small', 0, 0, 1),
        ]
    return {
        'by': by,
        'generated_at': '2026-01-01T00:00:00Z',
        'flavors': [
            {'id': '1', 'name': 'm1.small', 'vcpus': 1, 'ram': 512,
             'disk': 1},
            {'id': '2', 'name': 'm1.large', 'vcpus': 4, 'ram': 8192,
             'disk': 10},
        ],
        'scopes': scopes,
        'hosts_counted': sum(s['hosts'] for s in scopes),
        'hosts_skipped': ({'no_numa_topology': 1} if hosts_skipped is None
                          else hosts_skipped),
        'engine_fallbacks': engine_fallbacks,
    }


def scope(kind, name, capacity, placement_only, largest, frag_vcpus,
          frag_memory_mb, hosts):
    return {'scope': kind, 'name': name, 'capacity': capacity,
            'placement_only': placement_only, 'largest_flavor': largest,
            'fragmentation': {'vcpus': frag_vcpus,
                              'memory_mb': frag_memory_mb},
            'hosts': hosts}


class FakeReport:

    def __init__(self, data):
        self._data = data

    def to_dict(self):
        return copy.deepcopy(self._data)


class FakeCapacity(fixtures.Fixture):
    """Replaces ``nova_sched_ext.capacity.compute``.

    ``calls`` records the keyword arguments of each call (and the
    context as ``context``). ``error`` is raised instead of answering
    when set; ``gate``, when set, is an Event each call waits for.
    ``reports`` maps ``by`` to a report dictionary (default
    :func:`report`).
    """

    def __init__(self):
        super().__init__()
        self.calls = []
        self.error = None
        self.gate = None
        self.reports = {}
        self.started = threading.Event()
        self._lock = threading.Lock()

    def _setUp(self):
        from nova_sched_ext import capacity
        self.module = capacity
        if getattr(capacity, 'CapacityError', None) is None:
            self.useFixture(fixtures.MockPatchObject(
                capacity, 'CapacityError', FakeCapacityError, create=True))
        self.CapacityError = capacity.CapacityError
        self.useFixture(fixtures.MockPatchObject(
            capacity, 'compute', self.compute, create=True))

    def compute(self, context, flavors=None, by='cloud', az=None,
                aggregate=None, per_host=False):
        with self._lock:
            self.calls.append({'context': context, 'flavors': flavors,
                               'by': by, 'az': az, 'aggregate': aggregate,
                               'per_host': per_host})
        self.started.set()
        if self.gate is not None:
            self.gate.wait(10)
        if self.error is not None:
            raise self.error
        data = self.reports.get(by)
        if data is None:
            data = report(by)
        if per_host:
            data = copy.deepcopy(data)
            data['scopes'].append(scope('host', 'cpu1', {'m1.small': 8},
                                        {'m1.small': 9}, 'm1.small', 1, 0,
                                        1))
        return FakeReport(data)


class FakeClock:
    """A clock the test moves by hand: ``clock.now += 30``."""

    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def make_conf(**overrides):
    """A ConfigOpts with the capacity service's options, overridden."""
    conf = cfg.ConfigOpts()
    # A group of its own: ConfigOpts objects that register one OptGroup
    # share its overrides.
    conf.register_group(cfg.OptGroup(capacity_conf.GROUP_NAME))
    conf.register_opts(capacity_conf.api_opts + capacity_conf.exporter_opts +
                       capacity_conf.kept_state_opts,
                       group=capacity_conf.GROUP_NAME)
    conf([], default_config_files=[])
    for name, value in overrides.items():
        conf.set_override(name, value, group=capacity_conf.GROUP_NAME)
    return conf


class FakeKept:
    """A stand-in for :class:`nova_sched_ext.capacity.kept.KeptCount`.

    ``why`` is what ``unusable()`` returns (None: usable); ``reports``
    maps ``by`` to a report dictionary; ``error`` is raised by
    ``report()`` when set; ``calls`` records its keyword arguments.
    """

    def __init__(self, why=None, age=3.7):
        import collections
        self.why = why
        self._age = age
        self.error = None
        self.reports = {}
        self.calls = []
        self.counts = collections.Counter()
        self.started = 0

    def start(self):
        self.started += 1

    def unusable(self):
        return self.why

    def age(self):
        return self._age

    def report(self, flavors=None, by='cloud', az=None, aggregate=None,
               per_host=False):
        self.calls.append({'flavors': flavors, 'by': by, 'az': az,
                           'aggregate': aggregate, 'per_host': per_host})
        if self.error is not None:
            raise self.error
        data = copy.deepcopy(self.reports.get(by) or report(by))
        data['generated_at'] = 'kept'
        return FakeReport(data)
