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

"""``nova-sched-ext-bench scale --capacity-flavors N``: the kept capacity.

On the scale bench's cloud (its MariaDB, its placement over HTTP, the
requests it replays), the capacity service's kept state
(:class:`nova_sched_ext.capacity.kept.KeptCount`, as ``[nova_sched_ext_
capacity] kept_state`` runs it) next to the full count
(:func:`nova_sched_ext.capacity.compute`), for ``N`` flavors of the
capacity bench (:data:`nova_sched_ext_tools.bench.capacity.FLAVORS`: every
kind the count handles), written to the API database:

* **first read**: the kept state's first poll (every provider read), and
  its first report (every host counted), not part of the answers' figures;
* **answers**: after each replayed request is committed (its claim in
  placement, its compute node's record), one poll (timed on its own: the
  service polls in a thread of its own, not in the request), then the
  capacity API's default query (every flavor, by cloud), timed: what a
  ``GET /v1/capacity`` costs the service, with the hosts counted again;
* **checks**: at the start and at the end, the kept report (``per_host``:
  every host's figures) and a full count of the same cloud, which must be
  equal; a difference fails the run.  The full count is timed too (the
  capacity count's cost without the kept state).
"""

import time

from nova_sched_ext_tools.bench import capacity as capacity_bench

#: the flavors' names in the API database
PREFIX = 'cap.'


def _differences(full, kept):
    """What differs between two reports' dictionaries, in a few lines."""
    found = []
    for key in sorted(set(full) | set(kept)):
        if key in ('generated_at', 'scopes'):
            continue
        if full.get(key) != kept.get(key):
            found.append('%s: full %r, kept %r'
                         % (key, full.get(key), kept.get(key)))
    full_scopes = {(s['scope'], s['name']): s for s in full['scopes']}
    kept_scopes = {(s['scope'], s['name']): s for s in kept['scopes']}
    for key in sorted(set(full_scopes) | set(kept_scopes)):
        if full_scopes.get(key) != kept_scopes.get(key):
            found.append('scope %s %s: full %r, kept %r' % (
                key[0], key[1], full_scopes.get(key), kept_scopes.get(key)))
    return found


class CapacityRun(object):
    """The kept capacity on the bench's cloud (see the module).

    :param heartbeat: renews every compute service's heartbeat (the count
        leaves out the hosts whose service is down)
    """

    def __init__(self, ctx, objects, count, heartbeat):
        from nova_sched_ext.capacity import kept

        if not 1 <= count <= len(capacity_bench.FLAVORS):
            raise ValueError('--capacity-flavors must be 1 to %d'
                             % len(capacity_bench.FLAVORS))
        self._ctx = ctx
        self._heartbeat = heartbeat
        self.names = []
        for number, (name, vcpus, memory, specs) in enumerate(
                capacity_bench.FLAVORS[:count]):
            flavor = objects.Flavor(
                ctx, name=PREFIX + name, flavorid='cap-%d' % number,
                vcpus=vcpus, memory_mb=memory, root_gb=20, ephemeral_gb=0,
                swap=0, rxtx_factor=1.0, vcpu_weight=0, is_public=True,
                disabled=False, extra_specs=dict(specs))
            flavor.create()
            self.names.append(flavor.name)
        self.kept = kept.KeptCount(ctx)
        self.first_read_s = None
        self.first_report_s = None
        self.polls_ms = []
        self.answers_ms = []
        self.counted_again = []
        self.checks = []

    def _report(self, **kwargs):
        return self.kept.report(flavors=self.names, **kwargs).to_dict()

    def first_read(self):
        self._heartbeat()
        started = time.perf_counter()
        self.kept.poll()
        self.first_read_s = time.perf_counter() - started
        started = time.perf_counter()
        self._report()
        self.first_report_s = time.perf_counter() - started

    def after_request(self):
        """One poll, then the API's default query, timed apart."""
        self._heartbeat()
        started = time.perf_counter()
        self.kept.poll()
        self.polls_ms.append((time.perf_counter() - started) * 1e3)
        before = self.kept.counts['hosts_counted_again']
        started = time.perf_counter()
        self._report()
        self.answers_ms.append((time.perf_counter() - started) * 1e3)
        self.counted_again.append(self.kept.counts['hosts_counted_again'] -
                                  before)

    def check(self, label):
        """The kept report against a full count of the same cloud."""
        from nova_sched_ext import capacity

        self._heartbeat()
        self.kept.poll()
        kept = self._report(by='cloud', per_host=True)
        self._heartbeat()
        started = time.perf_counter()
        full = capacity.compute(self._ctx, flavors=self.names, by='cloud',
                                per_host=True).to_dict()
        full_s = time.perf_counter() - started
        self.checks.append({'at': label, 'full_count_s': full_s,
                            'hosts_counted': full['hosts_counted'],
                            'differences': _differences(full, kept)})

    def figures(self, summary):
        """The run's figures; ``summary`` makes p50/p95/p99 of a list."""
        return {
            'flavors': len(self.names),
            'first_read_s': self.first_read_s,
            'first_report_s': self.first_report_s,
            'poll_ms': summary(self.polls_ms),
            'answers': len(self.answers_ms),
            'answer_ms': summary(self.answers_ms),
            'hosts_counted_again': summary(self.counted_again),
            'checks': self.checks,
            'differences': [d for c in self.checks for d in c['differences']],
            'note': 'answer: the capacity API\'s default query (every '
                    'flavor, by cloud) from the kept state after each '
                    'request was committed and one poll; the poll is the '
                    'service\'s thread\'s, not timed with the answer',
        }
