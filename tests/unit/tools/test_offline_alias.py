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

"""The deprecated path ``nova_sched_ext.offline``: the tools, with a warning.

Each test imports the old names afresh: the alias package, the modules
imported through it and its import hook are removed before and after.
"""

import importlib
import importlib.metadata
import sys
import warnings

from nova_sched_ext_tools.bench import cli as bench_cli
from nova_sched_ext_tools import demo
from nova_sched_ext_tools.harness import scenarios
from nova_sched_ext_tools import hosts
from nova_sched_ext_tools.sim import cli as sim_cli
from nova_sched_ext_tools.sim import defrag_report
from tests import base

OLD = 'nova_sched_ext.offline'


class TestOfflineAlias(base.TestCase):

    def setUp(self):
        super().setUp()
        self._forget()
        meta_path = list(sys.meta_path)

        def restore():
            self._forget()
            sys.meta_path[:] = meta_path
        self.addCleanup(restore)

    @staticmethod
    def _forget():
        for name in [n for n in sys.modules
                     if n == OLD or n.startswith(OLD + '.')]:
            del sys.modules[name]
        parent = sys.modules.get('nova_sched_ext')
        if parent is not None and 'offline' in vars(parent):
            delattr(parent, 'offline')

    def _import(self, name):
        """The module imported as ``name``, and the warnings on the way."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            module = importlib.import_module(name)
        return module, [str(w.message) for w in caught
                        if issubclass(w.category, DeprecationWarning)]

    def test_an_old_module_is_the_new_module(self):
        module, warned = self._import(OLD + '.sim.cli')
        self.assertIs(sim_cli, module)
        self.assertIs(sim_cli, sys.modules[OLD + '.sim.cli'])
        self.assertEqual([
            '%s is deprecated: the offline tools moved out of the runtime '
            'package, import %s instead' % (old, new)
            for old, new in ((OLD, 'nova_sched_ext_tools'),
                             (OLD + '.sim', 'nova_sched_ext_tools.sim'),
                             (OLD + '.sim.cli',
                              'nova_sched_ext_tools.sim.cli'))], warned)
        # The new module keeps its own name and spec.
        self.assertEqual('nova_sched_ext_tools.sim.cli', module.__name__)
        self.assertEqual('nova_sched_ext_tools.sim.cli',
                         module.__spec__.name)

    def test_a_name_patched_through_either_path_is_patched_in_both(self):
        old, _warned = self._import(OLD + '.hosts')
        self.patch(old, 'PAGE_2M', 4096)
        self.assertEqual(4096, hosts.PAGE_2M)

    def test_from_the_package_import_a_module(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            from nova_sched_ext.offline import hosts as old_hosts
        self.assertIs(hosts, old_hosts)
        warned = [w for w in caught if 'offline.hosts' in str(w.message)]
        self.assertEqual(1, len(warned), [str(w.message) for w in caught])
        # Blamed on the line that wrote the old name, not on importlib.
        self.assertEqual(__file__, warned[0].filename)

    def test_the_harness_used_by_tests(self):
        module, warned = self._import(OLD + '.harness.scenarios')
        self.assertIs(scenarios, module)
        self.assertIn('import nova_sched_ext_tools.harness.scenarios '
                      'instead', warned[-1])

    def test_old_entry_point_targets_load(self):
        # What console-script wrappers installed by an older release, or a
        # plug-in written against it, name.
        for target, new in (
                (OLD + '.bench.cli:main', bench_cli.main),
                (OLD + '.demo:main', demo.main),
                (OLD + '.sim.cli:main', sim_cli.main),
                (OLD + '.sim.defrag_report:planner_input',
                 defrag_report.planner_input)):
            self._forget()
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', DeprecationWarning)
                loaded = importlib.metadata.EntryPoint(
                    name='old', value=target, group='old').load()
            self.assertIs(new, loaded, target)

    def test_an_unknown_old_name_is_not_found(self):
        self.assertRaises(ModuleNotFoundError, self._import,
                          OLD + '.no_such_tool')
        old, _warned = self._import(OLD)
        self.assertRaises(AttributeError, getattr, old, 'no_such_tool')
        self.assertFalse(hasattr(old, 'no_such_tool'))

    def test_the_alias_package_imports_no_tool(self):
        # Unload one tool module (put back, with its binding on the
        # package, afterwards) to see who imports it.
        import nova_sched_ext_tools
        name = 'nova_sched_ext_tools.loader'
        module = sys.modules.pop(name, None)
        bound = vars(nova_sched_ext_tools).pop('loader', None)

        def put_back():
            sys.modules.pop(name, None)
            if module is not None:
                sys.modules[name] = module
            vars(nova_sched_ext_tools).pop('loader', None)
            if bound is not None:
                nova_sched_ext_tools.loader = bound
        self.addCleanup(put_back)

        self._import(OLD)
        self.assertNotIn(name, sys.modules)
        # ... until it is asked for by its old name.
        self._import(OLD + '.loader')
        self.assertIn(name, sys.modules)

    def test_the_hook_is_installed_once(self):
        self._import(OLD)
        self._forget()
        self._import(OLD + '.hosts')
        hooks = [f for f in sys.meta_path
                 if type(f).__module__ == OLD and
                 type(f).__name__ == '_AliasFinder']
        self.assertEqual(1, len(hooks))
