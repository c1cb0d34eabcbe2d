"""Both engines refuse the same out-of-bounds inputs, the same way.

The C helper answers NSE_ERR_BAD_HOST / NSE_ERR_BAD_REQUEST and the twin
raises ``model.InvalidInput`` for exactly the inputs ``model.host_problem``
and ``model.request_problem`` name; ``engine.prepare`` turns such a host into
an unsupported one, so that the scheduler sees UNKNOWN for that host alone.
Before issue 11 the C slot counter cast NaN to an integer (undefined
behaviour) where the twin raised, and a caller's candidate count of 805
million made one call run for a minute.
"""

import math
from unittest import mock

from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import lowlevel
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import packing
from nova_sched_ext.fit import pyfit
from tests import base


def cell(**changes):
    fields = dict(id=0, cpus=4, pcpus=4, free_pcpus=4, cpu_usage=0,
                  memory=4096, memory_usage=0, threads_per_core=2,
                  pcpus_are_cpus=False, free_sibling_sizes=(2, 2),
                  pages=(m.Page(4, 1048576, 0, 0),), pci_devices=0)
    fields.update(changes)
    return m.HostCell(**fields)


def host(cell_changes=None, **changes):
    fields = dict(cells=(cell(**(cell_changes or {})), cell(id=1)),
                  cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0,
                  total_vcpus=8, free_vcpus=8, total_memory_mb=8192,
                  free_memory_mb=8192)
    fields.update(changes)
    return m.Host(**fields)


def request(**changes):
    fields = dict(id=0, cpus=0, pcpus=2, memory=1024, pagesize=0,
                  cpu_policy=m.CPU_DEDICATED, thread_policy=m.THREAD_PREFER)
    fields.update(changes)
    return m.Request(cells=(m.RequestCell(**fields),))


SHAPE = m.Shape(vcpus=2, memory_mb=1024, numa=request())

BAD_HOSTS = {
    'NaN cpu ratio': host(cpu_allocation_ratio=math.nan),
    'infinite ram ratio': host(ram_allocation_ratio=math.inf),
    'absurd cpu ratio': host(cpu_allocation_ratio=1e308),
    'negative ratio': host(cpu_allocation_ratio=-1.0),
    'zero ratio': host(ram_allocation_ratio=0.0),
    'huge candidates': host(candidates=805306368),
    'negative candidates': host(candidates=-1),
    'huge memory': host({'memory': 1 << 40}),
    'negative memory usage': host({'memory_usage': -1}),
    'huge cpu usage': host({'cpu_usage': 1 << 21}),
    'huge page size': host({'pages': (m.Page(1 << 30, 1, 0, 0),)}),
    'huge page count': host({'pages': (m.Page(4, 1 << 40, 0, 0),)}),
    'sibling set larger than a core': host(
        {'free_sibling_sizes': (3, 2)}),
    'huge host vcpus': host(total_vcpus=1 << 40),
}

BAD_REQUESTS = {
    'huge memory': request(memory=1 << 40),
    'huge page size': request(pagesize=1 << 30),
    'unknown page size code': request(pagesize=-4),
    'huge cpu count': request(pcpus=1 << 21),
    'unknown policy': request(cpu_policy=7),
}


class TestBothEnginesRefuse(base.TestCase):

    def setUp(self):
        super().setUp()
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built')
        # the helper's own values (lib.NSE_*)
        self.c = lowlevel.helper_constants()

    @staticmethod
    def _c_fit(record, req):
        """(return code, answers) of nse_fit_hosts for one host record."""
        try:
            return 0, lowlevel.fit_hosts([record], req)
        except lowlevel.HelperError as exc:
            return exc.code, None

    @staticmethod
    def _c_runs(record, req, candidates=1):
        """The return code of nse_fit_runs for one host record."""
        try:
            lowlevel.fit_runs([record], [candidates], req)
        except lowlevel.HelperError as exc:
            return exc.code
        return 0

    @staticmethod
    def _c_slots(record, shape, weight=1.0):
        """The return code of nse_slots for one host record."""
        try:
            lowlevel.slots([record], lowlevel.packed_shapes([shape],
                                                            [weight]),
                           shape)
        except lowlevel.HelperError as exc:
            return exc.code
        return 0

    def test_a_good_host_is_accepted_by_both(self):
        good = host(cpu_allocation_ratio=float(m.MAX_ALLOCATION_RATIO),
                    candidates=m.MAX_CANDIDATES)
        self.assertIsNone(m.host_problem(good))
        rc, answers = self._c_fit(packing.pack_host(good), request())
        self.assertEqual(0, rc)
        self.assertEqual([pyfit.fits(good, request())], answers)
        self.assertEqual(
            ([m.YES], [pyfit.run_outcomes(good, request())]),
            lowlevel.fit_runs([packing.pack_host(good)],
                              [m.MAX_CANDIDATES], request()))
        self.assertEqual(0, self._c_slots(packing.pack_host(good), SHAPE))
        self.assertEqual(m.YES, engine.fits(good, request()))

    def test_bad_hosts_are_refused_by_both(self):
        for name, bad in BAD_HOSTS.items():
            self.assertIsNotNone(m.host_problem(bad), name)
            self.assertRaises(m.InvalidInput, pyfit.fits, bad, request())
            self.assertRaises(m.InvalidInput, pyfit.slots, bad, SHAPE)
            self.assertRaises(m.InvalidInput, pyfit.slot_weights, [bad],
                              [SHAPE], [1.0], SHAPE)
            self.assertRaises(m.InvalidInput, pyfit.run_outcomes, bad,
                              request())
            record = packing.pack_host(bad)
            rc, _answers = self._c_fit(record, request())
            self.assertEqual(self.c['NSE_ERR_BAD_HOST'], rc, name)
            self.assertEqual(self.c['NSE_ERR_BAD_HOST'],
                             self._c_runs(record, request()), name)
            self.assertEqual(self.c['NSE_ERR_BAD_HOST'],
                             self._c_slots(record, SHAPE), name)

    def test_a_bad_host_is_unknown_alone(self):
        good = engine.prepare(host())
        for name, bad in BAD_HOSTS.items():
            prepared = engine.prepare(bad)
            self.assertEqual(m.HOST_UNSUPPORTED, prepared.model.status, name)
            self.assertEqual([m.YES, m.UNKNOWN, m.YES],
                             engine.check_hosts([good, prepared, good],
                                                request()), name)

    def test_bad_requests_are_refused_by_both(self):
        record = packing.pack_host(host())
        for name, bad in BAD_REQUESTS.items():
            self.assertIsNotNone(m.request_problem(bad), name)
            self.assertRaises(m.InvalidInput, pyfit.fits, host(), bad)
            rc, _answers = self._c_fit(record, bad)
            self.assertEqual(self.c['NSE_ERR_BAD_REQUEST'], rc, name)
            self.assertRaises(m.InvalidInput, pyfit.run_outcomes, host(),
                              bad)
            self.assertEqual(self.c['NSE_ERR_BAD_REQUEST'],
                             self._c_runs(record, bad), name)
            shape = m.Shape(vcpus=1, memory_mb=1, numa=bad)
            self.assertRaises(m.InvalidInput, pyfit.slots, host(), shape)
            self.assertEqual(self.c['NSE_ERR_BAD_REQUEST'],
                             self._c_slots(record, shape), name)
            self.assertEqual([m.UNKNOWN],
                             engine.check_hosts([engine.prepare(host())],
                                                bad), name)

    def test_runs_need_the_records_counts_and_no_pci(self):
        # nse_fit_runs writes one byte per run of each record: a count
        # that is not the record's is refused, not written past.
        three = packing.pack_host(host(candidates=3))
        for count in (2, 4):
            self.assertEqual(self.c['NSE_ERR_TRUNCATED'],
                             self._c_runs(three, request(), count))
        self.assertEqual(0, self._c_runs(three, request(), 3))
        self.assertEqual(
            ([m.YES], [(True, True, True)]),
            lowlevel.fit_runs([three], [3], request()))
        for counts in ([m.MAX_CANDIDATES + 1], [-1], [3, 3]):
            self.assertRaises(ValueError, lowlevel.fit_runs, [three],
                              counts, request())
        with_pci = request()._replace(pci=m.PciRequest(
            count=1, policy=m.PCI_LEGACY))
        self.assertEqual(self.c['NSE_ERR_BAD_REQUEST'],
                         self._c_runs(three, with_pci, 3))
        self.assertRaises(ValueError, engine.run_outcomes,
                          [engine.prepare(host())], with_pci)

    def test_bad_slot_weights_are_refused_by_both(self):
        record = packing.pack_host(host())
        for weight in (math.nan, math.inf, -1.0):
            self.assertRaises(m.InvalidInput, pyfit.slot_weights, [host()],
                              [SHAPE], [weight], SHAPE)
            self.assertEqual(self.c['NSE_ERR_BAD_REQUEST'],
                             self._c_slots(record, SHAPE, weight))

    def test_floor_div_of_nan_and_inf(self):
        self.assertEqual(0, pyfit._floor_div(math.nan, 3))
        self.assertEqual(pyfit.SLOTS_MAX, pyfit._floor_div(math.inf, 3))
        self.assertEqual(3, pyfit._floor_div(10.5, 3))

    def test_bounds_are_the_headers(self):
        c = self.c
        self.assertEqual(c['NSE_MAX_CANDIDATES'], m.MAX_CANDIDATES)
        self.assertEqual(c['NSE_MAX_ALLOCATION_RATIO'],
                         m.MAX_ALLOCATION_RATIO)
        self.assertEqual(c['NSE_MAX_CPUS'], m.MAX_CPUS)
        self.assertEqual(c['NSE_MAX_AMOUNT'], m.MAX_AMOUNT)
        self.assertEqual(c['NSE_MAX_PAGE_SIZE_KB'], m.MAX_PAGE_SIZE_KB)


class TestCandidateBound(base.TestCase):
    """A host's allocation candidates bound no loop on their own."""

    def test_count_is_capped(self):
        self.assertEqual(3, adapters.candidate_count([{}] * 3))
        self.assertEqual(m.MAX_CANDIDATES,
                         adapters.candidate_count([{}] * 5000))

    def test_replay_stops_once_the_state_is_stable(self):
        # A request that fits no cell: every candidate run leaves the same
        # state, so the twin stops after the first run that changes nothing
        # instead of replaying all 1,000.
        calls = []
        real = pyfit._fit_once

        def counting(*args):
            calls.append(1)
            return real(*args)

        too_big = request(pcpus=64)
        busy = host(candidates=m.MAX_CANDIDATES)
        with mock.patch.object(pyfit, '_fit_once', counting):
            self.assertEqual(m.NO, pyfit.fits(busy, too_big))
        self.assertLessEqual(len(calls), 2)
        self.assertEqual(m.NO, engine.fits(busy, too_big))
