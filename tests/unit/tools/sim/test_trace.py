"""The trace reader and the synthetic generator."""

import os
import tempfile

from nova_sched_ext_tools.sim import trace
from tests import base


class TestReaders(base.TestCase):

    def write(self, text):
        handle, path = tempfile.mkstemp(suffix='.csv')
        with os.fdopen(handle, 'w') as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def test_real_trace_header_and_shape(self):
        data = trace.default_data_dir()
        if data is None:
            self.skipTest('../shared/data/huawei-topo-vm is not here')
        hosts = trace.read_hosts(os.path.join(data, 'hosts.csv'))
        self.assertEqual(1710, len(hosts))
        # The README: 118 single-cell hosts list 0/0 for cell 1.
        self.assertEqual(118, sum(1 for h in hosts if len(h.cells) == 1))
        self.assertEqual(('host-0', '0', ((16, 32 * 1024), (32, 64 * 1024))),
                         (hosts[0].name, hosts[0].rack, hosts[0].cells))
        for name in ('requests_C1.csv', 'requests_C2.csv',
                     'requests_C3.csv'):
            requests = trace.read_requests(os.path.join(data, name))
            self.assertEqual(4998, len(requests))
            self.assertEqual(list(range(4998)), [r.seq for r in requests])
            self.assertEqual(set(trace.STRATEGIES),
                             {r.strategy for r in requests})
            self.assertTrue(all(r.domain is not None for r in requests
                                if r.strategy == trace.FAULT_DOMAIN))
        first = trace.read_requests(os.path.join(data, 'requests_C1.csv'))[0]
        self.assertEqual((8, 16 * 1024, 1, trace.FAULT_DOMAIN, '0', 1),
                         (first.flavor.vcpus, first.flavor.memory_mb,
                          first.flavor.numa_nodes, first.strategy,
                          first.group, first.domain))

    def test_requests_parsed(self):
        path = self.write(
            'seq,flavor_vcpus,flavor_ram,numa,strategy,group,domain\n'
            '1,32,64,2,anti-affinity,7,\n'
            '0,2,4,1,,,\n')
        requests = trace.read_requests(path)
        self.assertEqual([0, 1], [r.seq for r in requests])
        self.assertEqual(trace.NONE, requests[0].strategy)
        self.assertIsNone(requests[0].group_key)
        self.assertEqual(trace.Flavor(32, 65536, 2), requests[1].flavor)
        self.assertEqual(('anti-affinity', '7'), requests[1].group_key)

    def test_bad_header_names_the_missing_column(self):
        path = self.write('seq,flavor_vcpus,flavor_ram,strategy,group\n')
        exc = self.assertRaises(trace.TraceError, trace.read_requests, path)
        self.assertIn('numa', str(exc))
        self.assertIn(path, str(exc))

    def test_bad_values_name_the_line(self):
        path = self.write(
            'seq,flavor_vcpus,flavor_ram,numa,strategy,group,domain\n'
            '0,2,4,3,,,\n')
        exc = self.assertRaises(trace.TraceError, trace.read_requests, path)
        self.assertIn('line 2', str(exc))
        path = self.write(
            'seq,flavor_vcpus,flavor_ram,numa,strategy,group,domain\n'
            '0,2,4,1,spread,1,\n')
        self.assertRaises(trace.TraceError, trace.read_requests, path)
        path = self.write(
            'host_id,rack_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,'
            'numa1_ram_gb\nh,0,x,1,0,0\n')
        self.assertRaises(trace.TraceError, trace.read_hosts, path)

    def test_single_cell_host(self):
        path = self.write(
            'host_id,rack_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,'
            'numa1_ram_gb\nh1,3,8,16,0,0\n')
        [host] = trace.read_hosts(path)
        self.assertEqual(((8, 16384),), host.cells)
        self.assertEqual('3', host.rack)

    def test_largest_flavors(self):
        requests = [trace.Request(i, trace.Flavor(v, m, n))
                    for i, (v, m, n) in enumerate(
                        [(2, 4096, 1), (64, 131072, 2), (32, 131072, 2),
                         (32, 65536, 2), (64, 131072, 2)])]
        self.assertEqual(
            [trace.Flavor(64, 131072, 2), trace.Flavor(32, 131072, 2)],
            trace.largest_flavors(requests, 2))


HOSTS_HEADER = ('host_id,rack_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,'
                'numa1_ram_gb\n')
REQUESTS_HEADER = 'seq,flavor_vcpus,flavor_ram,numa,strategy,group,domain\n'


class TestBadFiles(base.TestCase):
    """Each bad file gives one TraceError naming the file, line and field.

    None of them may escape as another exception: the command turns
    TraceError, and only TraceError, into a message and exit status 2.
    """

    def write(self, data):
        handle, path = tempfile.mkstemp(suffix='.csv')
        with os.fdopen(handle, 'wb') as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        self.addCleanup(os.unlink, path)
        return path

    def error(self, reader, data, *words):
        path = self.write(data)
        exc = self.assertRaises(trace.TraceError, reader, path)
        message = str(exc)
        self.assertIn(path, message)
        for word in words:
            self.assertIn(word, message)
        self.assertLess(len(message), 400 + len(path), message)
        return message

    def test_short_row_missing_rack_id(self):
        self.error(trace.read_hosts,
                   'host_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,'
                   'numa1_ram_gb,rack_id\nh1,8,16,0,0\n',
                   'line 2', 'has 5 fields, the header 6', 'rack_id')

    def test_short_row_missing_host_id(self):
        self.error(trace.read_hosts,
                   'rack_id,host_id,numa0_vcpus,numa0_ram_gb,numa1_vcpus,'
                   'numa1_ram_gb\n0\n',
                   'line 2', 'has 1 field, the header 6', 'host_id')

    def test_short_request_row(self):
        self.error(trace.read_requests, REQUESTS_HEADER + '0,2,4,1\n',
                   'line 2', 'has 4 fields, the header 7',
                   'strategy, group, domain')

    def test_long_row(self):
        self.error(trace.read_hosts, HOSTS_HEADER + 'h1,0,8,16,0,0,7\n',
                   'line 2', 'has 7 fields, the header 6')

    def test_not_utf8(self):
        self.error(trace.read_hosts,
                   HOSTS_HEADER.encode() + b'h1,0,8,16,0,0\n'
                   b'h\xff2,0,8,16,0,0\n',
                   'line 3', 'not UTF-8', '0xff')
        self.error(trace.read_hosts, b'host_\xc3(id\n', 'line 1',
                   'not UTF-8')

    def test_field_over_the_csv_limit(self):
        self.error(trace.read_hosts,
                   HOSTS_HEADER + 'h' + 'x' * 140000 + ',0,8,16,0,0\n',
                   'line 2', 'longer than 131072 characters')

    def test_byte_order_mark_is_accepted(self):
        path = self.write(b'\xef\xbb\xbf' + HOSTS_HEADER.encode() +
                          b'h1,3,8,16,0,0\n')
        [host] = trace.read_hosts(path)
        self.assertEqual(('h1', '3', ((8, 16384),)),
                         (host.name, host.rack, host.cells))
        path = self.write(b'\xef\xbb\xbf' + REQUESTS_HEADER.encode() +
                          b'0,2,4,1,,,\n')
        self.assertEqual(1, len(trace.read_requests(path)))

    def test_host_sizes_are_bounded(self):
        self.error(trace.read_hosts, HOSTS_HEADER + 'h1,0,10000000,16,0,0\n',
                   'line 2', 'numa0_vcpus', '10000000', 'at most 1024')
        self.error(trace.read_hosts, HOSTS_HEADER + 'h1,0,8,16,1025,1\n',
                   'line 2', 'numa1_vcpus', 'at most 1024')
        self.error(trace.read_hosts, HOSTS_HEADER + 'h1,0,8,16385,0,0\n',
                   'line 2', 'numa0_ram_gb', 'at most 16384')
        # Would overflow converting to MiB.
        self.error(trace.read_hosts, HOSTS_HEADER + 'h1,0,8,1e308,0,0\n',
                   'line 2', 'numa0_ram_gb', 'at most 16384')
        # The largest host allowed is read.
        path = self.write(HOSTS_HEADER + 'h1,0,1024,16384,1024,16384\n')
        [host] = trace.read_hosts(path)
        self.assertEqual(((1024, 16384 * 1024),) * 2, host.cells)

    def test_request_sizes_are_bounded(self):
        self.error(trace.read_requests,
                   REQUESTS_HEADER + '0,10000000,4,1,,,\n',
                   'line 2', 'flavor_vcpus', 'at most 2048')
        self.error(trace.read_requests,
                   REQUESTS_HEADER + '0,2,1e300,1,,,\n',
                   'line 2', 'flavor_ram', 'at most 32768')
        self.error(trace.read_requests,
                   REQUESTS_HEADER + '%s,2,4,1,,,\n' % ('9' * 5000),
                   'line 2', 'seq', '(5000 characters)')
        self.error(trace.read_requests,
                   REQUESTS_HEADER + '0,2,4,1,fault_domain,1,%d\n'
                   % 2 ** 31, 'line 2', 'domain', 'at most 2147483647')

    def test_numbers_are_ascii(self):
        for text in ('1_6', '\uff11\uff16', '\u0661\u0666', '0x10'):
            self.error(trace.read_hosts,
                       HOSTS_HEADER + 'h1,0,%s,16,0,0\n' % text,
                       'line 2', 'numa0_vcpus', 'expected a number')
            self.error(trace.read_hosts,
                       HOSTS_HEADER + 'h1,0,16,%s,0,0\n' % text,
                       'line 2', 'numa0_ram_gb', 'expected a number')
        path = self.write(HOSTS_HEADER + ' h1 , 0 , 16 , 1.5e1 ,0,.5\n')
        [host] = trace.read_hosts(path)
        self.assertEqual(((16, 15360), (0, 512)), host.cells)

    def test_long_value_is_cut(self):
        message = self.error(trace.read_hosts,
                             HOSTS_HEADER + 'h1,0,%s,16,0,0\n' % ('x' * 9000),
                             'line 2', 'numa0_vcpus', '(9000 characters)')
        self.assertNotIn('x' * 65, message)


class TestSynthetic(base.TestCase):

    def test_seeded_and_shaped(self):
        hosts = trace.synthetic_hosts(10)
        spec = trace.SyntheticSpec(count=400, seed=3)
        one = trace.synthetic_requests(spec, hosts)
        self.assertEqual(one, trace.synthetic_requests(spec, hosts))
        self.assertNotEqual(one, trace.synthetic_requests(
            trace.SyntheticSpec(count=400, seed=4), hosts))
        self.assertEqual(400, len(one))
        arrivals = [r.arrival for r in one]
        self.assertEqual(sorted(arrivals), arrivals)
        self.assertTrue(all(r.lifetime > 0 for r in one))
        ratios = {r.flavor.memory_mb // 1024 // r.flavor.vcpus for r in one}
        self.assertEqual({2, 4, 8}, ratios)
        for r in one:
            if r.flavor.extra_specs:
                self.assertEqual(1, r.flavor.numa_nodes)   # DPDK variant
            elif r.flavor.vcpus >= trace.DUAL_NUMA_FROM:
                self.assertEqual(2, r.flavor.numa_nodes)
        self.assertIn(trace.FAULT_DOMAIN, {r.strategy for r in one})
        # Little's law: the mean lifetime follows from the load.
        capacity = sum(h.vcpus for h in hosts)
        mean = sum(r.lifetime for r in one) / len(one)
        expected = 0.9 * capacity / trace._mean_vcpus(spec)
        self.assertLess(abs(mean - expected) / expected, 0.25)
