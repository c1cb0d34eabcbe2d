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

"""The figures of ``nova-sched-ext-sim --defrag``.

On one saved end state (:mod:`.state`), for each budget (a share of the
instances, as moves): the planner's plan (``drain``) and the greedy
baseline (single moves by slots per GiB), each replayed move by move with
Nova's fit and the rules (:func:`.defrag.check_plan`: ``valid``); the
offline repack bound (:func:`.defrag.repack`); Watcher's VM workload
consolidation (:mod:`.watcher_baseline`), all its moves and its first
moves up to each budget.  Slots are those of the trace's largest flavors,
counted as ``nova-sched-ext-capacity`` counts them.
"""

import json
import os
import time

from nova_sched_ext.defrag import model
from nova_sched_ext_tools.sim import capacity as sim_capacity
from nova_sched_ext_tools.sim import cloud as sim_cloud
from nova_sched_ext_tools.sim import defrag
from nova_sched_ext_tools.sim import state as sim_state
from nova_sched_ext_tools.sim import trace
from nova_sched_ext_tools.sim import watcher_baseline


def slot_shapes(saved, count=3):
    """The state's reference flavors: saved with it, else the trace's."""
    if saved.get('slot_flavors'):
        return [sim_state.flavor_of(f) for f in saved['slot_flavors']]
    data_dir = trace.default_data_dir()
    path = data_dir and os.path.join(data_dir,
                                     'requests_%s.csv' % saved['label'])
    if path and os.path.isfile(path):
        return trace.largest_flavors(trace.read_requests(path), count)
    return trace.largest_flavors(
        [trace.Request(seq=n, flavor=sim_state.flavor_of(e))
         for n, e in enumerate(saved['instances'])], count)


class Report(object):

    def __init__(self, label, policy, instances, before):
        self.label = label
        self.policy = policy
        self.instances = instances
        self.before = before
        self.rows = []

    def add(self, method, budget, moves, memory_mb, after, seconds,
            **extra):
        row = {'method': method, 'budget_pct': budget, 'moves': moves,
               'ram_moved_gb': round(memory_mb / 1024.0, 1),
               'slots_after': dict(after),
               'slots_recovered': {k: after[k] - self.before[k]
                                   for k in self.before},
               'seconds': round(seconds, 2)}
        row['recovered_total'] = sum(row['slots_recovered'].values())
        row.update(extra)
        self.rows.append(row)
        return row

    def add_bound(self, budget, moves, recovered, seconds):
        """A row of :meth:`~.planner.Planner.move_bound`: a total only."""
        row = {'method': 'move bound', 'budget_pct': budget, 'moves': moves,
               'recovered_total': recovered, 'seconds': round(seconds, 2)}
        self.rows.append(row)
        return row

    def to_dict(self):
        return {'label': self.label, 'policy': self.policy,
                'instances': self.instances, 'slots_before': self.before,
                'source': sim_capacity.TRACE_SOURCE, 'rows': self.rows}

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def table(self):
        names = list(self.before)
        head = ('%-22s %6s %6s %8s %9s  %s' % (
            'method', 'budget', 'moves', 'GiB', 'recovered',
            ' / '.join(names)))
        lines = ['%s (%s end state, %d instances): slots before %d (%s); '
                 'trace: %s' % (self.label, self.policy, self.instances,
                                sum(self.before.values()),
                                ' / '.join(str(self.before[n])
                                           for n in names),
                                sim_capacity.TRACE_SOURCE), head,
                 '-' * len(head)]
        for row in self.rows:
            budget = '-' if row['budget_pct'] is None else \
                '%g%%' % row['budget_pct']
            notes = []
            for key in ('valid', 'refused', 'unplaced', 'proposed'):
                if key in row:
                    notes.append('%s %s' % (key, row[key]))
            notes.append('%.1f s' % row['seconds'])
            if 'slots_recovered' not in row:
                # a bound counts a total, not a plan's RAM or flavors
                lines.append('%-22s %6s %6d %8s %9d  %s  (%s)' % (
                    row['method'], budget, row['moves'], '-',
                    row['recovered_total'], 'at most, any plan',
                    ', '.join(notes)))
                continue
            lines.append('%-22s %6s %6d %8.1f %9d  %s  (%s)' % (
                row['method'], budget, row['moves'], row['ram_moved_gb'],
                row['recovered_total'],
                ' / '.join(str(row['slots_recovered'][n]) for n in names),
                ', '.join(notes)))
        return '\n'.join(lines)


def planner_input(saved, factory=None):
    """``(cloud, reference flavors)`` of a saved end state, to plan on.

    The ``nova_sched_ext.defrag.saved_states`` entry point of the state
    format: ``nova-sched-ext-defrag plan --state FILE`` plans with it.
    """
    sim_cloud.register_objects()
    factory = factory or sim_cloud.RequestFactory()
    return (defrag.cloud_of(saved, factory),
            defrag.reference_flavors(slot_shapes(saved), factory))


def measure(saved, budgets, watcher=True, progress=None):
    progress = progress or (lambda text: None)
    sim_cloud.register_objects()
    factory = sim_cloud.RequestFactory()
    cloud, flavors = planner_input(saved, factory)
    bound_planner = defrag.planner.Planner(cloud, flavors)
    planner_state = bound_planner.state
    report = Report(saved['label'], saved.get('policy'),
                    len(saved['instances']), planner_state.total_slots())
    for budget in budgets:
        for search in ('greedy', 'drain'):
            progress('planning %s at %g%%' % (search, budget))
            plan = defrag.plan(saved, flavors,
                               model.Budget(max_share=budget / 100.0),
                               search=search, factory=factory)
            problems = defrag.check_plan(saved, flavors, plan, factory)
            report.add(search, budget, len(plan.moves),
                       plan.memory_moved_mb, plan.slots_after, plan.seconds,
                       valid='yes' if not problems else problems[0])
        started = time.monotonic()
        moves = model.Budget(max_share=budget / 100.0).moves_allowed(
            len(cloud.instances))
        report.add_bound(budget, moves, bound_planner.move_bound(moves),
                         time.monotonic() - started)
    progress('repacking from scratch')
    packed = defrag.repack(saved, flavors, factory)
    report.add('repack (bound)', None, len(saved['instances']),
               sum(e['flavor']['memory_mb'] for e in saved['instances']),
               packed.slots, packed.seconds, unplaced=packed.unplaced)
    if watcher:
        progress("running Watcher's vm_workload_consolidation")
        started = time.monotonic()
        try:
            moves = watcher_baseline.run_strategy(cloud)
        except watcher_baseline.WatcherUnavailable as exc:
            report.rows.append({'method': 'watcher', 'unavailable': str(exc)})
            return report
        seconds = time.monotonic() - started
        limits = [None] + [int(len(saved['instances']) * b / 100.0)
                           for b in budgets]
        for limit, budget in zip(limits, [None] + list(budgets)):
            after, applied, refused = watcher_baseline.apply_moves(
                defrag.cloud_of(saved, factory), flavors, moves, limit)
            memory = sum(cloud.instances[u].memory_mb
                         for u, _s, _d in moves[:limit])
            report.add('watcher vm_consolidation', budget, applied, memory,
                       after, seconds, refused=refused,
                       proposed=len(moves[:limit]))
    return report
