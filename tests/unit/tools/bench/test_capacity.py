"""``nova-sched-ext-bench capacity`` runs and reports what it claims."""

import json

from nova_sched_ext.fit import engine
from nova_sched_ext_tools.bench import capacity as capacity_bench
from nova_sched_ext_tools.bench import cli as bench
from tests import base


class TestCapacityBench(base.TestCase):

    def run_bench(self, *argv):
        return self.run_main(bench.main, *argv)

    def test_json_figures(self):
        rc, out = self.run_bench('capacity', '--json', '--hosts', '12',
                                 '--flavors', '20', '--nova-hosts', '4',
                                 '--repeats', '1')
        self.assertEqual(0, rc)
        result = json.loads(out)
        self.assertEqual(engine.backend_name(), result['backend'])
        self.assertEqual((12, 20), (result['hosts'], result['flavors']))
        self.assertEqual(4 * 20, result['compared_with_nova'])
        self.assertEqual(0, result['disagreements'])
        self.assertGreater(result['instances_counted'], 0)
        self.assertGreater(result['engine_pairs'], 0)
        for key in ('engine_pass_s', 'count_pass_s',
                    'nova_pass_s_extrapolated'):
            self.assertGreater(result[key], 0.0, key)

    def test_too_many_flavors_is_one_line(self):
        error = self.assertRaises(SystemExit, self.run_bench, 'capacity',
                                  '--flavors', '21')
        self.assertIn('--flavors must be 1 to 20', str(error))

    def test_the_cloud_has_four_cell_hosts_and_is_partly_used(self):
        hosts, _source = capacity_bench.build_cloud(6)
        self.assertTrue(any(len(h.topology.cells) == 4 for h in hosts))
        self.assertTrue(all(c.pinned_cpus or c.cpu_usage
                            for h in hosts for c in h.topology.cells))
