"""The seam to the C helper: drift, loading, backend choice, fallback.

* Drift: every ``#define NSE_*`` of ``cfit.h`` (as written in the header
  and as the compiled helper exports it) has the Python side's value, and
  every struct has packing's size, fields and field offsets.
* ``fit_backend = c`` means the C helper or an error saying why; ``auto``
  falls back to the twin with one warning.
* One fallback rule: a refusal of the helper, in the fit path or the slot
  arena path, logs one error and is answered by the twin.
"""

from array import array
import os
import re
from unittest import mock

import fixtures
from oslo_config import fixture as config_fixture

from nova_sched_ext import conf
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import lowlevel
from nova_sched_ext.fit import model as m
from nova_sched_ext.fit import packing
from nova_sched_ext.fit import pyfit
from nova_sched_ext.fit import slotcache
from tests import base
from tests.unit.fit import test_refusals

HEADER = os.path.join(os.path.dirname(lowlevel.__file__), '_c', 'cfit.h')


def header_defines():
    """``{name: value}`` of the integer ``#define NSE_*`` of cfit.h."""
    with open(HEADER) as header:
        text = header.read()
    return {name: int(value) for name, value in re.findall(
        r'^#define\s+(NSE_\w+)\s+(-?\d+)\s*$', text, flags=re.M)}


def header_structs():
    """``{struct name: [field names]}`` of cfit.h, in the header's order."""
    with open(HEADER) as header:
        text = re.sub(r'/\*.*?\*/', '', header.read(), flags=re.S)
    structs = {}
    for name, body in re.findall(r'struct\s+(nse_\w+)\s*\{(.*?)\};', text,
                                 flags=re.S):
        structs[name] = re.findall(r'(\w+)\s*(?:\[[^\]]*\])?\s*;', body)
    return structs


# packing's description of each struct, plus the struct members it packs
# as a nested layout: (fields, {member: offset}).
LAYOUTS = {
    'host': (packing.HOST_FIELDS, {}),
    'host_cell': (packing.CELL_FIELDS, {}),
    'request': (packing.REQUEST_FIELDS, {'cells': packing.REQUEST_HEAD.size}),
    'request_cell': (packing.REQUEST_CELL_FIELDS, {}),
    'shape': (packing.SHAPE_FIELDS, {'numa': packing.SHAPE_HEAD.size}),
}


class TestHeaderAndPythonAgree(base.TestCase):
    """Without the helper: the header's text against the Python side."""

    def test_every_define_has_the_python_value(self):
        defines = header_defines()
        self.assertGreater(len(defines), 30)
        self.assertEqual(sorted(defines),
                         sorted(lowlevel.EXPECTED_CONSTANTS))
        for name, value in defines.items():
            self.assertEqual(value, lowlevel.EXPECTED_CONSTANTS[name], name)

    def test_every_struct_has_packings_fields(self):
        structs = header_structs()
        self.assertEqual(sorted(['nse_' + key for key in LAYOUTS] +
                                ['nse_layout']), sorted(structs))
        self.assertEqual(sorted(lowlevel.STRUCTS), sorted(LAYOUTS))
        for key, (fields, members) in LAYOUTS.items():
            self.assertEqual([name for name, _code in fields] +
                             sorted(members, key=members.get),
                             structs['nse_' + key], key)
        self.assertEqual(sorted(lowlevel.STRUCTS), structs['nse_layout'])

    def test_error_names(self):
        exc = lowlevel.HelperError('nse_slots', -3)
        self.assertEqual('NSE_ERR_BAD_REQUEST', exc.name)
        self.assertEqual(-3, exc.code)
        self.assertEqual('nse_slots', exc.entry_point)
        self.assertIn('nse_slots refused its input: NSE_ERR_BAD_REQUEST',
                      str(exc))


class TestHelperAndPythonAgree(base.TestCase):
    """The drift test proper: the compiled helper against the Python side."""

    def setUp(self):
        super().setUp()
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built: %s' %
                          lowlevel.unavailable_reason())
        self.ffi = lowlevel.require().ffi

    def test_every_constant_is_the_headers_and_pythons(self):
        exported = lowlevel.helper_constants()
        self.assertEqual(header_defines(), exported)
        self.assertEqual(lowlevel.EXPECTED_CONSTANTS, exported)

    def test_struct_sizes(self):
        reported = lowlevel.helper_layout()
        for key, struct_name in lowlevel.STRUCTS.items():
            self.assertEqual(packing.SIZES[key], reported[key], key)
            self.assertEqual(packing.SIZES[key],
                             self.ffi.sizeof(struct_name), key)

    def test_field_names_and_offsets(self):
        for key, (fields, members) in LAYOUTS.items():
            struct_name = lowlevel.STRUCTS[key]
            expected = dict(packing.offsets(fields), **members)
            names = [name for name, _field in
                     self.ffi.typeof(struct_name).fields]
            self.assertEqual(sorted(expected, key=expected.get), names,
                             struct_name)
            for name, offset in expected.items():
                self.assertEqual(offset, self.ffi.offsetof(struct_name, name),
                                 '%s.%s' % (struct_name, name))


class FakeLib(object):
    """A helper's ``lib`` as a stale build would show it."""

    def __init__(self, lib, **changes):
        self._lib = lib
        self._changes = changes

    def __getattr__(self, name):
        if name in self._changes:
            if self._changes[name] is None:
                raise AttributeError(name)
            return self._changes[name]
        return getattr(self._lib, name)


class TestAStaleHelperIsRefused(base.TestCase):

    def setUp(self):
        super().setUp()
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built')
        self.module = lowlevel.require()

    def disagreement(self, **changes):
        return lowlevel._disagreement(
            self.module.ffi, FakeLib(self.module.lib, **changes))

    def test_the_real_helper_agrees(self):
        self.assertIsNone(lowlevel._disagreement(self.module.ffi,
                                                 self.module.lib))

    def test_another_constant(self):
        self.assertEqual('NSE_MAX_CELLS is 8 there, 16 here',
                         self.disagreement(NSE_MAX_CELLS=8))

    def test_a_missing_constant(self):
        self.assertEqual('NSE_PCI_PREFERRED is missing there, 2 here',
                         self.disagreement(NSE_PCI_PREFERRED=None))

    def test_no_layout(self):
        self.assertEqual('it has no nse_layout',
                         self.disagreement(nse_layout=None))

    def test_another_struct_size(self):
        sizes = dict(packing.SIZES, host_cell=packing.SIZES['host_cell'] + 8)
        with mock.patch.object(packing, 'SIZES', sizes):
            self.assertEqual('struct nse_host_cell has 384 bytes there, 392 '
                             'here', lowlevel._disagreement(
                                 self.module.ffi, self.module.lib))


class UnavailableHelper(fixtures.Fixture):
    """The seam as it is where the helper cannot be used."""

    REASON = 'it could not be imported (No module named _cfit)'

    def _setUp(self):
        self.useFixture(fixtures.MockPatchObject(
            lowlevel, '_state', (None, self.REASON)))
        self.useFixture(fixtures.MockPatchObject(
            engine, '_warned_unavailable', False))


class TestBackendChoice(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.useFixture(fixtures.EnvironmentVariable(
            conf.scheduler.FIT_BACKEND_ENV))
        self.logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))

    def test_c_without_the_helper_fails_with_the_reason(self):
        self.useFixture(UnavailableHelper())
        self.conf.config(fit_backend='c', group='nova_sched_ext')
        self.assertFalse(lowlevel.available())
        exc = self.assertRaises(lowlevel.HelperUnavailable,
                                engine.backend_name)
        self.assertIn('fit_backend = c', str(exc))
        self.assertIn(UnavailableHelper.REASON, str(exc))
        self.assertIn('fit_backend = auto', str(exc))
        host = test_refusals.host()
        self.assertRaises(lowlevel.HelperUnavailable, engine.fits, host,
                          test_refusals.request())
        self.assertRaises(lowlevel.HelperUnavailable, engine.slot_weights,
                          [engine.prepare(host)], [test_refusals.SHAPE],
                          [1.0], test_refusals.SHAPE)

    def test_c_without_the_helper_stops_the_plugins_at_start(self):
        from nova_sched_ext.filters import numa_fit
        from nova_sched_ext.weighers import numa_slot
        self.useFixture(UnavailableHelper())
        self.conf.config(fit_backend='c', group='nova_sched_ext')
        self.assertRaises(lowlevel.HelperUnavailable, numa_fit.NUMAFitFilter)
        self.assertRaises(lowlevel.HelperUnavailable,
                          numa_slot.NUMASlotWeigher)
        self.conf.config(fit_backend='auto', group='nova_sched_ext')
        numa_fit.NUMAFitFilter()
        numa_slot.NUMASlotWeigher()

    def test_auto_without_the_helper_warns_once_and_uses_the_twin(self):
        self.useFixture(UnavailableHelper())
        self.conf.config(fit_backend='auto', group='nova_sched_ext')
        for _ in range(3):
            self.assertEqual('python', engine.backend_name())
        self.assertEqual(m.YES, engine.fits(test_refusals.host(),
                                            test_refusals.request()))
        self.assertEqual(1, len(self.logs.output.splitlines()))
        self.assertIn(UnavailableHelper.REASON, self.logs.output)

    def test_the_environment_forces_the_twin(self):
        self.useFixture(UnavailableHelper())
        self.conf.config(fit_backend='c', group='nova_sched_ext')
        self.useFixture(fixtures.EnvironmentVariable(
            conf.scheduler.FIT_BACKEND_ENV, 'python'))
        self.assertEqual('python', engine.backend_name())
        self.assertEqual('', self.logs.output)

    def test_c_with_the_helper(self):
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built')
        self.conf.config(fit_backend='c', group='nova_sched_ext')
        self.assertEqual('c', engine.check_backend())

    def test_require_says_why(self):
        self.useFixture(UnavailableHelper())
        exc = self.assertRaises(lowlevel.HelperUnavailable, lowlevel.require)
        self.assertIn(UnavailableHelper.REASON, str(exc))


class TestOneFallbackRule(base.TestCase):
    """A refusal, in any path, is one error and the twin's answer."""

    def setUp(self):
        super().setUp()
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built')
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.conf.config(fit_backend='c', group='nova_sched_ext')
        self.logs = self.useFixture(fixtures.FakeLogger(level='ERROR'))

    def refuse(self, entry_point, code):
        name = {'nse_fit_hosts': 'fit_hosts', 'nse_fit_runs': 'fit_runs',
                'nse_slots': 'slots',
                'nse_slot_weights_indexed': 'slot_weights_indexed'}
        return self.useFixture(fixtures.MockPatchObject(
            lowlevel, name[entry_point],
            side_effect=lowlevel.HelperError(entry_point, code))).mock

    def assertOneError(self, entry_point, name):
        lines = self.logs.output.splitlines()
        self.assertEqual(1, len(lines), self.logs.output)
        self.assertIn('refused its input in %s (%s' % (entry_point, name),
                      lines[0])

    def test_fit_path(self):
        full = test_refusals.cell(free_pcpus=0, free_sibling_sizes=(0, 0))
        good = test_refusals.host()
        busy = test_refusals.host(cells=(full, full._replace(id=1)))
        request = test_refusals.request(pcpus=4)
        hosts = [engine.prepare(good), engine.prepare(busy)]
        self.assertEqual([m.YES, m.NO], engine.check_hosts(hosts, request))
        refused = self.refuse('nse_fit_hosts', -2)
        self.assertEqual([m.YES, m.NO], engine.check_hosts(hosts, request))
        self.assertEqual(1, refused.call_count)
        self.assertOneError('nse_fit_hosts', 'NSE_ERR_BAD_HOST')

    def test_runs_path(self):
        # The runs of hosts with several candidates: the twin's, once the
        # helper refuses, and one error.
        full = test_refusals.cell(free_pcpus=0, free_sibling_sizes=(0, 0))
        hosts = [engine.prepare(test_refusals.host(candidates=2)),
                 engine.prepare(test_refusals.host(
                     cells=(full, full._replace(id=1)), candidates=3))]
        request = test_refusals.request(pcpus=4)
        expected = [(True, True), (False, False, False)]
        self.assertEqual(expected, engine.run_outcomes(hosts, request))
        refused = self.refuse('nse_fit_runs', -2)
        self.assertEqual(expected, engine.run_outcomes(hosts, request))
        self.assertEqual(1, refused.call_count)
        self.assertOneError('nse_fit_runs', 'NSE_ERR_BAD_HOST')

    def test_slot_counting_path(self):
        host = engine.prepare(test_refusals.host())
        shape = test_refusals.SHAPE
        for room_cap in (None, 0):
            expected = engine.slot_weights([host], [shape], [2.0], shape,
                                           room_cap=room_cap)
            with mock.patch.object(
                    lowlevel, 'slots',
                    side_effect=lowlevel.HelperError('nse_slots', -1)):
                got = engine.slot_weights([host], [shape], [2.0], shape,
                                          room_cap=room_cap)
            self.assertEqual(pyfit.slot_weights(
                [host.model], [shape], [2.0], shape, room_cap), got)
            self.assertEqual(expected[:2], got[:2])
            self.assertAlmostEqual(expected[2][0], got[2][0], places=9)
        self.assertEqual(2, len(self.logs.output.splitlines()))
        self.assertIn('nse_slots (NSE_ERR_TRUNCATED, -1)', self.logs.output)

    def test_slot_arena_path(self):
        # The weigher's fast path answers as the twin does, rather than
        # weighing every host the same.
        from tests.unit.fit import test_slotcache
        cloud = test_slotcache.TestSlotArena('test_no_hosts')
        small, big = cloud._shapes()
        hosts = cloud._cloud(6, seed=3)
        arena = slotcache.SlotArena([big, small], [16.0, 4.0])
        expected = arena.weights(hosts, small)
        self.assertGreater(len(set(expected)), 1)
        refused = self.refuse('nse_slot_weights_indexed', -1)
        got = arena.weights(hosts, small)
        self.assertEqual(1, refused.call_count)
        twin = test_slotcache.fresh(hosts, arena.shapes, arena.shape_weights,
                                    small, None)[1]
        self.assertEqual(twin, got)
        for mine, c in zip(got, expected):
            self.assertAlmostEqual(c, mine, places=9)
        self.assertOneError('nse_slot_weights_indexed', 'NSE_ERR_TRUNCATED')
        # The arena started over.
        self.assertEqual({}, arena._slot_by_host)


class TestMarshalledOnce(base.TestCase):

    def setUp(self):
        super().setUp()
        if not lowlevel.available():
            self.skipTest('the C fit helper is not built')

    def test_one_packed_list_per_reference_list(self):
        shape = test_refusals.SHAPE
        first = lowlevel.packed_shapes([shape], [2])
        self.assertIs(first, lowlevel.packed_shapes((shape,), (2.0,)))
        self.assertIsNot(first, lowlevel.packed_shapes([shape], [3.0]))
        self.assertEqual(1, len(first))
        self.assertEqual((2.0,), first.shape_weights)

    def test_short_arena_buffers_are_refused_before_the_call(self):
        shapes = lowlevel.packed_shapes([test_refusals.SHAPE], [1.0])
        record = packing.pack_host(test_refusals.host())
        self.assertRaises(ValueError, lowlevel.slot_weights_indexed,
                          record, len(record), array('q'), 1, [0], None,
                          shapes, test_refusals.SHAPE)
        self.assertRaises(ValueError, lowlevel.slot_weights_indexed,
                          record, len(record) + 8, array('q', [0]), 1, [0],
                          None, shapes, test_refusals.SHAPE)
        self.assertEqual(
            engine.slot_weights([engine.prepare(test_refusals.host())],
                                [test_refusals.SHAPE], [1.0],
                                test_refusals.SHAPE)[2],
            lowlevel.slot_weights_indexed(
                record, len(record), array('q', [0]), 1, [0], None, shapes,
                test_refusals.SHAPE))
