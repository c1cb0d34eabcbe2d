"""``nova-sched-ext-bench weigher`` runs and reports what it claims."""

import json
import math

from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext_tools.bench import cli as bench
from tests import base


def content(topology):
    """What the fit engine reads of a host topology."""
    return adapters.host_model(topology, None, 16.0, 1.5)


class TestWeigherBench(base.TestCase):

    def run_bench(self, *argv):
        return self.run_main(bench.main, *argv)

    def test_json_figures(self):
        rc, out = self.run_bench('--json', 'weigher', '--hosts', '1000',
                                 '--flavors', '2', '--repeats', '1')
        self.assertEqual(0, rc)
        result = json.loads(out)
        self.assertEqual(engine.backend_name(), result['backend'])
        self.assertEqual(2.0, result['target_ms'])
        # The target is set at 10,000 hosts: no verdict from 1,000.
        self.assertIsNone(result['target_met'])
        [row] = result['rows']
        self.assertEqual((1000, 2), (row['hosts'], row['flavors']))
        for key in ('weigh_objects_ms', 'ram_weigh_objects_ms',
                    'first_ms'):
            self.assertGreater(row[key], 0.0, key)
        for key in ('nova_floor_ms', 'added_over_floor_ms',
                    'ram_added_over_floor_ms'):
            self.assertTrue(math.isfinite(row[key]), key)

    def test_nova_refresh_replaces_objects_with_equal_ones(self):
        objects = bench._nova()
        import random

        from oslo_utils import timeutils
        hosts = bench._cloud(objects, 3, random.Random(1))
        for h in hosts:
            h.updated = timeutils.utcnow()
        pairs = [(h.numa_topology, h.numa_topology.obj_clone())
                 for h in hosts]
        before = [(h.numa_topology, h.updated) for h in hosts]
        bench._nova_refresh(hosts, pairs)
        for h, (topology, updated) in zip(hosts, before):
            self.assertIsNot(topology, h.numa_topology)
            self.assertEqual(content(topology), content(h.numa_topology))
            self.assertIsNot(updated, h.updated)
            self.assertEqual(updated, h.updated)
        bench._nova_refresh(hosts, pairs)
        self.assertEqual([b[0] for b in before],
                         [h.numa_topology for h in hosts])
