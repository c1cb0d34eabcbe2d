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

"""A replay's end state, saved to JSON and read back.

A whole-trace replay takes about twenty minutes; the defragmentation
figures (``--defrag``) plan on its end state several times over, so the
state is saved once (``--save-state``) and read back (``--state``) rather
than replayed again.  What is kept is what the replay's cloud is made of:
the trace hosts (free capacity per NUMA cell and rack), and per live
instance its host, flavor, the host cells and amounts Nova's fit gave each
of its cells, and its group (strategy, id, partition).
"""

import json

from nova_sched_ext.defrag import model as defrag_model
from nova_sched_ext import exception as sched_ext_exception
from nova_sched_ext_tools.sim import trace

FORMAT = 'nova-sched-ext-sim-state/1'


class StateError(ValueError, sched_ext_exception.NovaSchedExtError):
    """A state file that cannot be used; the message says why."""


def flavor_dict(flavor):
    return {'vcpus': flavor.vcpus, 'memory_mb': flavor.memory_mb,
            'numa_nodes': flavor.numa_nodes,
            'extra_specs': [list(kv) for kv in flavor.extra_specs]}


def _instance_cells(topology):
    if topology is None:
        return []
    return [{'host_cell': cell.id, 'vcpus': len(cell.cpuset | cell.pcpuset),
             'memory_mb': cell.memory} for cell in topology.cells]


def from_simulator(simulator, trace_hosts, label):
    """The JSON-able end state of ``simulator`` (a finished replay)."""
    instances = []
    for uuid, (host, flavor, topology, group) in sorted(
            simulator.instances.items()):
        entry = {'uuid': uuid, 'host': host.host,
                 'flavor': flavor_dict(flavor),
                 'cells': _instance_cells(topology)}
        if group is not None:
            _host, _domain, partition = group.members[uuid]
            entry['group'] = {'strategy': group.strategy, 'id': group.id,
                              'partition': partition}
        instances.append(entry)
    return {
        'format': FORMAT, 'label': label, 'policy': simulator.policy,
        'hosts': [{'name': h.name, 'rack': h.rack,
                   'cells': [list(c) for c in h.cells]}
                  for h in trace_hosts],
        'instances': instances,
    }


def save(path, state):
    with open(path, 'w') as stream:
        json.dump(state, stream, sort_keys=True)
        stream.write('\n')


def load(path):
    """The state of :func:`save`, checked; raises :class:`StateError`."""
    return defrag_model.read_document(
        path, FORMAT, 'state file',
        'a state saved by nova-sched-ext-sim --save-state', StateError)


def trace_hosts(state):
    """The state's hosts as ``trace.TraceHost`` objects."""
    return [trace.TraceHost(name=h['name'], rack=h['rack'],
                            cells=tuple(tuple(c) for c in h['cells']))
            for h in state['hosts']]


def flavor_of(entry):
    """The ``trace.Flavor`` of an instance entry (or a flavor dict)."""
    flavor = entry.get('flavor', entry)
    return trace.Flavor(vcpus=flavor['vcpus'],
                        memory_mb=flavor['memory_mb'],
                        numa_nodes=flavor['numa_nodes'],
                        extra_specs=tuple(tuple(kv) for kv in
                                          flavor.get('extra_specs', ())))
