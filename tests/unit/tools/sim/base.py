"""Helpers for the simulator's tests: tiny clouds whose outcome is known."""

import io
import os
import shutil
import tempfile
from unittest import mock

import nova.conf
from nova import objects
from oslo_config import fixture as config_fixture

from nova_sched_ext_tools.sim import cli
from nova_sched_ext_tools.sim import policies
from nova_sched_ext_tools.sim import replay
from nova_sched_ext_tools.sim import trace
from tests import base

CONF = nova.conf.CONF
GB = 1024


def host(name, rack='0', *cells):
    """``host('h1', '0', (8, 16), (8, 16))``: cells of (vCPUs, GB)."""
    return trace.TraceHost(name=name, rack=rack,
                           cells=tuple((c, g * GB) for c, g in cells))


def request(seq, vcpus, gb, numa=1, strategy=trace.NONE, group='',
            domain=None, arrival=None, lifetime=None):
    return trace.Request(
        seq=seq, flavor=trace.Flavor(vcpus, gb * GB, numa),
        strategy=strategy, group=group, domain=domain,
        arrival=seq if arrival is None else arrival, lifetime=lifetime)


class SimTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()
        self.conf = self.useFixture(config_fixture.Config(CONF))
        policies.set_simulator_defaults(CONF)

    def preset(self, name):
        overrides = policies.Overrides(policies.PRESETS[name].settings())
        overrides.apply()
        self.addCleanup(overrides.clear)

    def replay(self, hosts, requests, **kwargs):
        """Run a replay; returns (result, {seq: host name or None})."""
        simulator = replay.Simulator(hosts, **kwargs)
        result = simulator.run(requests)
        placements = {r.seq: h for r, h in zip(requests, result.placements)}
        return result, placements, simulator


class CommandTestCase(SimTestCase):
    """The command run in-process, on trace files in a temporary directory."""

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, name, data):
        """Write ``data`` (text or bytes) to ``name`` in the directory."""
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def main(self, *argv):
        """Run the command in-process: (exit status, stdout, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        # main() configures the root logger; keep that out of other tests.
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err), \
                mock.patch.object(cli.logging, 'basicConfig'):
            try:
                code = cli.main(list(argv))
            except SystemExit as exc:
                code = exc.code
        return code, out.getvalue(), err.getvalue()
