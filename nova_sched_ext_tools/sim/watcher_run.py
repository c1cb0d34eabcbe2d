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

"""Run Watcher's VM workload consolidation on a cloud read from stdin.

``python -m nova_sched_ext_tools.sim.watcher_run < cloud.json`` prints
``{"moves": [[instance, source, destination], ...]}``: the ``migrate``
actions of ``VMWorkloadConsolidation.execute()`` on a Watcher ``ModelRoot``
of the cloud :func:`.watcher_baseline.cloud_description` describes.  It
imports Watcher and nothing of Nova (they cannot share a process: both
register ``host`` on oslo.config's global ``CONF``).

The datasource reports what the simulator knows: every instance uses all
of its vCPUs and RAM (the trace has no utilization), a host the sum of its
instances.
"""

import json
import sys


class _Datasource(object):
    NAME = 'nova-sched-ext-sim'

    def __init__(self, model):
        self.model = model

    def get_instance_cpu_usage(self, resource, **kwargs):
        return 100.0

    def get_instance_ram_usage(self, resource, **kwargs):
        return resource.memory

    def get_instance_ram_allocated(self, resource, **kwargs):
        return resource.memory

    def get_instance_root_disk_size(self, resource, **kwargs):
        return resource.disk

    def get_host_cpu_usage(self, resource, period, aggregate, granularity):
        node = self.model.get_node_by_name(resource.hostname)
        used = self.model.get_node_used_resources(node)['vcpu']
        return 100.0 * used / max(node.vcpus, 1)

    def get_host_ram_usage(self, resource, period, aggregate, granularity):
        # Watcher's datasources report host RAM in KB
        node = self.model.get_node_by_name(resource.hostname)
        return self.model.get_node_used_resources(node)['memory'] * 1024.0


def watcher_model(description):
    from watcher.decision_engine.model import element
    from watcher.decision_engine.model import model_root
    root = model_root.ModelRoot()
    nodes = {}
    for host in description['hosts']:
        node = element.ComputeNode(
            uuid=host['uuid'], hostname=host['name'], state='up',
            status='enabled', disabled_reason=None,
            memory=host['memory_mb'], memory_mb_reserved=0, disk=1000,
            disk_gb_reserved=0, vcpus=host['vcpus'], vcpu_reserved=0,
            memory_ratio=host['memory_ratio'],
            vcpu_ratio=host['vcpu_ratio'], disk_ratio=1.0)
        root.add_node(node)
        nodes[host['name']] = node
    for entry in description['instances']:
        instance = element.Instance(
            uuid=entry['uuid'], name=entry['uuid'], state='active',
            memory=entry['memory_mb'], disk=0, vcpus=entry['vcpus'],
            metadata={}, project_id='00000000-0000-0000-0000-000000000001',
            host=entry['host'], hypervisor_hostname=entry['host'])
        root.add_instance(instance)
        root.map_instance(instance, nodes[entry['host']])
    return root


def main():
    from watcher.decision_engine.strategy.strategies import \
        vm_workload_consolidation
    root = watcher_model(json.load(sys.stdin))

    class Config(object):
        datasources = None

    strategy = vm_workload_consolidation.VMWorkloadConsolidation(
        config=Config())
    # What Watcher's decision engine gives a strategy: the model of the
    # audit's scope and a datasource backend.
    strategy._compute_model = root
    strategy._datasource_backend = _Datasource(root)
    strategy.input_parameters = {'period': 3600, 'granularity': 300}
    solution = strategy.execute()
    moves = [[a['input_parameters']['resource_id'],
              a['input_parameters']['source_node'],
              a['input_parameters']['destination_node']]
             for a in solution.actions if a['action_type'] == 'migrate']
    json.dump({'moves': moves}, sys.stdout)


if __name__ == '__main__':
    main()
