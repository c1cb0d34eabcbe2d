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

"""The fit engine follows the installed Nova's NUMA fit: it is the same.

The engine (C helper and Python twin) has no version switch: Nova 31,
32, 33 and 34 fit an instance onto a host with the same code.  These
tests hold that claim to the installed Nova and to the table of
fingerprints read from each release (:mod:`tests.unit.fit.fingerprint`),
so that a release whose NUMA fit differs fails here, naming the
functions, before the differential tests would show it at random.
"""

import importlib
import inspect
import json
from unittest import mock

from nova_sched_ext.compat import release
from tests import base
from tests.unit.fit import fingerprint

#: Functions of the table that differ between releases and why none of
#: them changes a fit.  ``numa_get_constraints`` calls
#: ``get_locked_memory_constraint``, which from Nova 34 checks memory
#: encryption (``get_mem_encryption_constraint``) and may raise for a
#: flavor 31 to 33 accept (``compat.nova.CONSTRAINT_REFUSALS``); the
#: topology it builds is the same.  ``get_by_instance_uuid`` reads the
#: database.
DIFFER_WITHOUT_CHANGING_A_FIT = {
    'nova/virt/hardware.py': {
        'get_locked_memory_constraint', 'get_mem_encryption_constraint',
        '_check_for_mem_encryption_model_conflicts'},
    'nova/objects/instance_numa.py': {
        'InstanceNUMATopology.get_by_instance_uuid'},
}


def load_table():
    with open(fingerprint.TABLE) as f:
        return json.load(f)


def installed_fingerprints(module):
    """The fingerprints of the installed Nova's ``nova/x/y.py``."""
    name = module[:-len('.py')].replace('/', '.')
    with open(inspect.getsourcefile(importlib.import_module(name))) as f:
        return fingerprint.fingerprints(f.read())


def mismatches(table, major):
    """``[module:function]`` where the installed Nova is not ``major``'s."""
    found = []
    for module, names in sorted(table.items()):
        prints = installed_fingerprints(module)
        for name, by_release in sorted(names.items()):
            if prints.get(name) != by_release[str(major)]:
                found.append('%s:%s' % (module, name))
    return found


class TestNovaReleases(base.TestCase):

    def setUp(self):
        super().setUp()
        self.table = load_table()

    def test_the_installed_release_is_supported(self):
        self.assertIn(release.release(), release.SUPPORTED)
        for names in self.table.values():
            for by_release in names.values():
                self.assertEqual(
                    sorted(str(r) for r in release.SUPPORTED),
                    sorted(by_release))

    def test_the_installed_nova_fits_as_the_table_says(self):
        # The switch: the row of the release the seam follows.
        self.assertEqual([], mismatches(self.table, release.release()))

    def test_the_row_of_another_release_fails_where_they_differ(self):
        # The proof that the check above can fail: force another
        # release's row on the installed Nova.  Where the releases' code
        # differs, it fails; where it is the same, it passes.
        installed = str(release.installed())
        for other in release.SUPPORTED:
            differ = sorted(
                '%s:%s' % (module, name)
                for module, names in self.table.items()
                for name, by_release in names.items()
                if by_release[str(other)] != by_release[installed])
            with mock.patch.object(release, 'release', return_value=other):
                self.assertEqual(differ, mismatches(self.table,
                                                    release.release()),
                                 other)
        if release.installed() < 34:
            # The newest release's row on an older Nova: the memory
            # encryption check numa_get_constraints gained in 34.
            self.assertIn('nova/virt/hardware.py:'
                          'get_locked_memory_constraint',
                          mismatches(self.table, 34))

    def test_the_code_that_decides_a_fit_is_the_same_in_every_release(self):
        # _numa_fit_instance_cell, _pack_instance_onto_cores, the
        # mempages and PCI checks, NUMATopologyFilter, PciDeviceStats,
        # the NUMA objects: one fingerprint in all four releases.  A
        # release that changes one must bring a switch behind the compat
        # seam for the C helper and the Python twin, and this set grows.
        differ = {
            module: {name for name, by_release in names.items()
                     if len(set(by_release.values())) > 1}
            for module, names in self.table.items()}
        self.assertEqual(DIFFER_WITHOUT_CHANGING_A_FIT,
                         {m: n for m, n in differ.items() if n})
        same = {name for name, by_release in
                self.table['nova/virt/hardware.py'].items()
                if len(set(by_release.values())) == 1}
        self.assertLessEqual(
            {'numa_fit_instance_to_host', '_numa_fit_instance_cell',
             '_pack_instance_onto_cores', '_numa_cell_supports_pagesize_'
             'request', '_numa_pagesize_usage_from_cell',
             '_numa_cells_support_network_metadata', 'numa_get_constraints',
             'numa_usage_from_instance_numa'}, same)
        self.assertEqual(
            ['NUMATopologyFilter._satisfies_cpu_policy',
             'NUMATopologyFilter.host_passes'],
            sorted(self.table['nova/scheduler/filters/'
                              'numa_topology_filter.py']))


class TestFingerprint(base.TestCase):

    def test_docstrings_comments_and_annotations_do_not_count(self):
        a = fingerprint.fingerprints(
            'def f(a: int, b: "ty.Optional[str]" = None) -> bool:\n'
            '    """Doc."""\n'
            '    x: ty.List[int] = [a]  # note\n'
            '    return bool(x) and b\n')
        b = fingerprint.fingerprints(
            'def f(a, b: "str | None" = None):\n'
            '    x: list[int] = [a]\n'
            '    return bool(x) and b\n')
        self.assertEqual(a, b)

    def test_a_change_of_code_counts(self):
        a = fingerprint.fingerprints('def f(a):\n    return a < 1\n')
        b = fingerprint.fingerprints('def f(a):\n    return a <= 1\n')
        self.assertNotEqual(a['f'], b['f'])

    def test_methods_and_the_closure(self):
        source = ('def a():\n    return b()\n'
                  'def b():\n    return 1\n'
                  'def c():\n    return 2\n'
                  'class K:\n    def m(self):\n        return a()\n')
        self.assertEqual({'a', 'b', 'c', 'K.m'},
                         set(fingerprint.fingerprints(source)))
        self.assertEqual({'a', 'b'}, fingerprint.closure(source, ['a']))
