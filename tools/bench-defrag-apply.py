"""Apply 200 moves on a fake cloud of N hosts: reads and seconds.

    python tools/bench-defrag-apply.py HOSTS

One instance moves back and forth between h1 and h2 of a replayed cloud
of HOSTS hosts (two cells each, two 4c8g instances per host), through
the executor, a fake Compute API and a fake reader that builds its cloud
from the hosts asked for alone.  Prints one JSON line: whole reads,
hosts read, seconds.  It runs against whichever nova_sched_ext is first
on sys.path (PYTHONPATH=an older tree, to compare side by side).
"""
import json
import sys
import time
import types

import nova.conf
from nova import objects

from nova_sched_ext.defrag import executor
from nova_sched_ext.defrag import model
from nova_sched_ext.defrag import planner
from nova_sched_ext.defrag import state as planning_state
from nova_sched_ext_tools.sim import defrag
from nova_sched_ext_tools.sim import policies
from nova_sched_ext_tools.sim import replay
from nova_sched_ext_tools.sim import state as sim_state
from nova_sched_ext_tools.sim import trace

GB = 1024
HOSTS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
MOVES = 200

objects.register_all()
policies.set_simulator_defaults(nova.conf.CONF)
overrides = policies.Overrides(policies.PRESETS['nova-default'].settings())
overrides.apply()
hosts = [trace.TraceHost(name='h%d' % i, rack='0',
                         cells=((8, 16 * GB), (8, 16 * GB)))
         for i in range(1, HOSTS + 1)]
requests = [trace.Request(seq=i, flavor=trace.Flavor(4, 8 * GB, 1),
                          strategy=trace.NONE, group='', domain=None,
                          arrival=i, lifetime=None)
            for i in range(2 * HOSTS)]
simulator = replay.Simulator(hosts)
simulator.run(requests)
saved = sim_state.from_simulator(simulator, hosts, 'bench')
first = next(e for e in saved['instances'] if e['host'] == 'h1')
there = {'instance': first['uuid'], 'source': 'h1', 'target': 'h2'}
back = {'instance': first['uuid'], 'source': 'h2', 'target': 'h1'}
moves = [there, back] * (MOVES // 2)


class Reader(object):
    def __init__(self):
        self.whole = 0
        self.hosts_read = 0
        self.seconds = 0.0

    def __call__(self, hosts=None):
        started = time.perf_counter()
        if hosts is None:
            self.whole += 1
            cloud = defrag.cloud_of(saved)
        else:
            wanted = set(hosts)
            part = dict(saved, hosts=[h for h in saved['hosts']
                                      if h['name'] in wanted],
                        instances=[e for e in saved['instances']
                                   if e['host'] in wanted])
            cloud = model.part_of(defrag.cloud_of(part), wanted)
        self.hosts_read += len(cloud.hosts)
        self.seconds += time.perf_counter() - started
        return cloud


class Compute(object):
    calls = 0

    def live_migrate_server(self, uuid, host=None, block_migration=None):
        Compute.calls += 1
        # the fake Nova fits on the two hosts alone, so that its cost does
        # not grow with the cloud
        entry = next(e for e in saved['instances'] if e['uuid'] == uuid)
        pair = {entry['host'], host}
        part = dict(saved, hosts=[h for h in saved['hosts']
                                  if h['name'] in pair],
                    instances=[e for e in saved['instances']
                               if e['host'] in pair])
        state = planning_state.PlanningState(defrag.cloud_of(part), ())
        fits, fitted = state.nova_fit(uuid, host)
        assert fits
        entry = next(e for e in saved['instances'] if e['uuid'] == uuid)
        entry['host'] = host
        entry['cells'] = [{'host_cell': c['host_cell'], 'vcpus': c['vcpus'],
                           'memory_mb': c['memory_mb']}
                          for c in planner.fitted_cells(fitted)]

    def get_server(self, uuid):
        entry = next(e for e in saved['instances'] if e['uuid'] == uuid)
        return types.SimpleNamespace(status='ACTIVE', task_state=None,
                                     compute_host=entry['host'])

    def migrations(self, **query):
        return []


compute = Compute()
reader = Reader()
runner = executor.Executor(compute, reader, sleep=lambda s: None)
started = time.perf_counter()
outcome = runner.apply(moves)
seconds = time.perf_counter() - started
print(json.dumps({'hosts': HOSTS, 'moves': len(moves),
                  'moved': outcome.moved, 'whole_reads': reader.whole,
                  'host_reads': reader.hosts_read,
                  'read_seconds': round(reader.seconds, 2),
                  'apply_seconds': round(seconds, 2)}))
