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

"""Dependencies inside ``nova_sched_ext`` point one way only.

The rings of the design (``fit/`` at the core, the scheduler plugins around
it, then the scheduler manager and preemption, the offline tools outside)
may use what is inside them, never what is outside.  Every module under
``nova_sched_ext/`` and ``nova_sched_ext_tools/`` is parsed (nothing is
imported) and each of its imports is checked, the ones inside functions
too: top-level and lazy imports, ``from . import x`` and
``importlib.import_module('...')`` with a literal name.  Imports are not
the only way in: ``setup.cfg``'s entry points are read too (see below).

The rules, each with the reason a failure gives:

* ``fit/`` imports nothing of the package but ``fit/`` and ``conf``;
* ``conf/`` (the options, which ``fit/`` and the broker import) imports
  nothing of the package but ``conf/`` and the exception base, and no
  ``nova`` module;
* only :data:`C_HELPER_SEAM` imports the compiled helper
  (:data:`C_HELPER`);
* nothing under ``nova_sched_ext/`` imports the offline tools,
  ``nova_sched_ext_tools`` (the code a Nova service or an operator
  service loads never needs a tool), nor their deprecated old path
  ``nova_sched_ext.offline``, except the alias modules of
  :data:`TOOL_ALIASES`; the tools themselves use the new path only;
* ``filters/``, ``weighers/`` and ``deployment_set/`` import neither
  ``preemption/`` nor ``manager`` and its ``candidates`` (nor what sits
  outside those);
* ``broker/`` sits above Nova: it imports no ``nova`` module, and of the
  package only :data:`BROKER_MAY_IMPORT` (none of which imports Nova);
  nothing but the offline tools imports ``broker/``;
* ``defrag/``, an operator service beside ``capacity/``, imports neither
  the broker, nor the scheduler manager, nor the offline tools;
* the Watcher plugins (:data:`WATCHER_PLUGINS`) run in Watcher's decision
  engine, where Nova cannot be imported (both register ``host`` on
  oslo.config's global ``CONF``): they import no ``nova`` module and of
  the package only each other and :data:`WATCHER_PLUGINS_MAY_IMPORT`;
  nothing else in the package imports them, and only they and
  :data:`WATCHER_RUNNERS` import ``watcher``;
* nothing under ``nova_sched_ext/`` or ``nova_sched_ext_tools/`` imports
  ``tests``.

And the entry points of ``setup.cfg`` (:func:`entry_point_violations`),
by which Nova, oslo.config, Watcher, the OpenStack client, tempest and the
package's own registry load code without an import statement to see:

* every group is either ``console_scripts`` or a runtime group, one of
  :data:`RUNTIME_GROUPS` (a new group must be classified here);
* no entry point names the deprecated path ``nova_sched_ext.offline``;
* an entry point of a runtime group never points into
  ``nova_sched_ext_tools``, except in the groups of
  :data:`TOOL_PLUGIN_GROUPS`: plug-in points the runtime declares and the
  tools fill, loaded by name only when a command is asked for that input
  (``TestToolPluginGroups`` checks that importing their reader loads no
  tool);
* a console script points into ``nova_sched_ext_tools`` if and only if it
  is one of :data:`TOOL_SCRIPTS`.
"""

import ast
import configparser
import fnmatch
import importlib.util
import os
import subprocess
import sys

from tests import base

PACKAGE = 'nova_sched_ext'
#: The offline tools, outside the runtime package, and their old path.
TOOLS = 'nova_sched_ext_tools'
OLD_TOOLS = 'nova_sched_ext.offline'
#: The deprecated alias modules of the old path: the only modules of the
#: runtime package that may reach the tools (by the old names only).
TOOL_ALIASES = ('nova_sched_ext.offline',)
TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

#: The compiled C fit helper (cffi), and the one module that imports it.
C_HELPER = 'nova_sched_ext.fit._cfit'
C_HELPER_SEAM = 'nova_sched_ext.fit.lowlevel'

#: The package's exception base, which imports nothing: every ring may use it.
EXCEPTION = 'nova_sched_ext.exception'

#: What fit/ may import of the package besides itself (the compat seam
#: imports nothing of the package: it stands for Nova's private names).
FIT_MAY_IMPORT = ('nova_sched_ext.conf', 'nova_sched_ext.compat', EXCEPTION)

#: The options: one module per group, registered by the package itself.
CONF = 'nova_sched_ext.conf'

#: The scheduler's plugins, and what they must not reach.
PLUGINS = ('nova_sched_ext.filters', 'nova_sched_ext.weighers',
           'nova_sched_ext.deployment_set')
ABOVE_PLUGINS = ('nova_sched_ext.preemption', 'nova_sched_ext.manager',
                 'nova_sched_ext.host_state', 'nova_sched_ext.filter_handler',
                 'nova_sched_ext.candidates',
                 'nova_sched_ext.kept_candidates',
                 'nova_sched_ext.capacity', 'nova_sched_ext.cmd',
                 'nova_sched_ext.defrag')

#: The defragmentation service, and what it must not reach.
DEFRAG = 'nova_sched_ext.defrag'
DEFRAG_MAY_NOT_IMPORT = ('nova_sched_ext.broker', 'nova_sched_ext.manager')

#: Watcher's plugins of the package (setup.cfg's watcher_* entry points and
#: their options), what else they may import of it (no Nova in either), and
#: the simulator's module that runs Watcher's own strategy in a subprocess.
WATCHER_PLUGINS = ('nova_sched_ext.defrag.watcher_strategy',
                   'nova_sched_ext.defrag.watcher_goal',
                   'nova_sched_ext.defrag.watcher_planner',
                   'nova_sched_ext.defrag.watcher_engine',
                   'nova_sched_ext.defrag.watcher_conf')
WATCHER_PLUGINS_MAY_IMPORT = ('nova_sched_ext.defrag.model', EXCEPTION)
WATCHER_RUNNERS = ('nova_sched_ext_tools.sim.watcher_run',)

#: The broker, above Nova, and what it may import of the package: the
#: plugin registry, the capacity API's client, the options, the exception
#: base, the console scripts' toolkit (and the package ``__init__`` modules
#: on the way, which import no Nova either).
BROKER = 'nova_sched_ext.broker'
BROKER_MAY_IMPORT = ('nova_sched_ext.broker', 'nova_sched_ext.registry',
                     'nova_sched_ext.capacity.osc', CONF,
                     'nova_sched_ext.version', EXCEPTION,
                     'nova_sched_ext.cli')

#: Entry-point groups whose entry points the runtime loads (fnmatch
#: patterns): the package's own registries (nova_sched_ext.*), Nova's
#: (nova.*), oslo.config's option lists (the sample config), Watcher's
#: plugins, the OpenStack client's and tempest's.
RUNTIME_GROUPS = ('nova_sched_ext.*', 'nova.*', 'oslo.config.opts',
                  'watcher_*', 'openstack.*', 'tempest.*')

#: The console scripts of the offline tools.
TOOL_SCRIPTS = ('nova-sched-ext-bench', 'nova-sched-ext-demo',
                'nova-sched-ext-sim')

#: Runtime groups the tools may fill, and the command of the runtime that
#: loads them, only when asked for that input.
#:
#: nova_sched_ext.defrag.saved_states: ``nova-sched-ext-defrag plan --state
#: FILE`` reads a saved state with the reader its format names.  The only
#: format is the simulator's own (written by ``nova-sched-ext-sim
#: --save-state``): its reader rebuilds the simulator's cloud from the
#: trace's hosts and flavors (and, for an old state, the trace's files), so
#: it is tools' code; moving it into defrag/ would move the simulator's
#: trace and host model into the runtime.  The group is a plug-in point
#: defrag/ declares and the tools fill: the defrag command names no tool,
#: loads the reader by the file's format inside ``plan --state`` only, and
#: says "no saved-state format is installed" without one.
TOOL_PLUGIN_GROUPS = {
    'nova_sched_ext.defrag.saved_states': 'nova_sched_ext.defrag.cmd',
}


def within(name, prefixes):
    """Whether a dotted ``name`` is one of ``prefixes`` or inside one."""
    if isinstance(prefixes, str):
        prefixes = (prefixes,)
    return any(name == p or name.startswith(p + '.') for p in prefixes)


def imports_of(source, module, is_package=False, filename='<source>'):
    """``[(line, imported name)]`` of every import in a module's source.

    ``from a.b import c`` gives both ``a.b`` and ``a.b.c`` (``c`` may be a
    module); relative imports are resolved against ``module``.
    """
    tree = ast.parse(source, filename)
    package = module.split('.') if is_package else module.split('.')[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parent = package[:len(package) - node.level + 1]
                base = '.'.join(parent + ([base] if base else []))
            found.append((node.lineno, base))
            found.extend((node.lineno, '%s.%s' % (base, alias.name))
                         for alias in node.names if alias.name != '*')
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str) and \
                _called_name(node.func) in ('import_module', '__import__'):
            found.append((node.lineno, node.args[0].value))
    return found


def _called_name(func):
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def package_modules(top=TOP, packages=(PACKAGE, TOOLS)):
    """``{module name: (path, source, is_package)}`` under the packages."""
    modules = {}
    for package in packages:
        modules.update(_modules_under(top, package))
    return modules


def _modules_under(top, package):
    modules = {}
    root = os.path.join(top, package)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d != '__pycache__' and not d.startswith('.'))
        for filename in sorted(filenames):
            if not filename.endswith('.py'):
                continue
            path = os.path.join(dirpath, filename)
            parts = os.path.relpath(path[:-3], top).split(os.sep)
            is_package = parts[-1] == '__init__'
            if is_package:
                parts.pop()
            with open(path, encoding='utf-8') as f:
                modules['.'.join(parts)] = (path, f.read(), is_package)
    return modules


def violations(modules):
    """Every import that breaks a rule, as one line each."""
    problems = []
    for module, (path, source, is_package) in sorted(modules.items()):
        where = os.path.relpath(path, TOP) if os.path.isabs(path) else path
        # One line per statement and rule: ``from a import b`` breaks a
        # rule as ``a`` and as ``a.b``; the longer name is the one shown.
        broken = {}
        for line, name in imports_of(source, module, is_package, path):
            reason = _broken_rule(module, name)
            if reason:
                shown = broken.get((line, reason), '')
                broken[line, reason] = max(shown, name, key=len)
        problems.extend('%s:%d imports %s: %s' % (where, line, name, reason)
                        for (line, reason), name in sorted(broken.items()))
    return problems


def _broken_rule(module, name):
    if within(name, 'tests'):
        return 'the package never imports the tests'
    if within(name, OLD_TOOLS) and within(module, TOOLS):
        return ('%s is a deprecated alias: the tools import each other as '
                '%s' % (OLD_TOOLS, TOOLS))
    if within(name, (TOOLS, OLD_TOOLS)) and module not in TOOL_ALIASES \
            and not within(module, TOOLS):
        return ('offline tools live outside the runtime: nothing under %s '
                'imports %s (nor its deprecated alias %s)'
                % (PACKAGE, TOOLS, OLD_TOOLS))
    if within(name, C_HELPER) and module != C_HELPER_SEAM:
        return ('only %s imports the compiled C helper; use it'
                % C_HELPER_SEAM)
    if within(module, BROKER) and within(name, 'nova'):
        return ('broker/ sits above Nova: it reaches the clusters through '
                'openstacksdk and never imports nova')
    if within(module, CONF) and within(name, 'nova'):
        return ('conf/ never imports nova: the broker, above Nova, reads '
                'the capacity API\'s constants there')
    if within(module, WATCHER_PLUGINS) and within(name, 'nova'):
        return ("Watcher's plugins run in Watcher's decision engine, where "
                'Nova cannot be imported: they never import nova')
    if within(name, 'watcher') and \
            not within(module, WATCHER_PLUGINS + WATCHER_RUNNERS):
        return ('only the Watcher plugins import watcher: a process that '
                'has Nova cannot')
    if not within(name, PACKAGE) or name == PACKAGE:
        return None
    if within(module, WATCHER_PLUGINS) and name != DEFRAG and not within(
            name, WATCHER_PLUGINS + WATCHER_PLUGINS_MAY_IMPORT):
        return ("Watcher's plugins import of the package only each other "
                'and %s (the rest pulls in nova)'
                % ', '.join(WATCHER_PLUGINS_MAY_IMPORT))
    if within(name, WATCHER_PLUGINS) and not within(module, WATCHER_PLUGINS):
        return ("the Watcher plugins are Watcher's to load: nothing else "
                'in the package imports them')
    if within(module, BROKER) and not within(name, BROKER_MAY_IMPORT) \
            and name != 'nova_sched_ext.capacity':
        return ('broker/ imports of the package only %s (the rest pulls '
                'in nova)' % ', '.join(BROKER_MAY_IMPORT))
    if within(name, BROKER) and not within(module, (BROKER, TOOLS)):
        return ('broker/ is the outermost ring: only the offline tools '
                'import it')
    if within(module, 'nova_sched_ext.fit') and \
            not within(name, ('nova_sched_ext.fit',) + FIT_MAY_IMPORT):
        return ('fit/ is the core: it imports nothing of the package but '
                'fit/ and %s' % ', '.join(FIT_MAY_IMPORT))
    if within(module, CONF) and not within(name, (CONF, EXCEPTION)):
        return ('conf/ imports nothing of the package but conf/ and the '
                'exception base: fit/, the core, imports it')
    if within(module, PLUGINS) and within(name, ABOVE_PLUGINS):
        return ('filters, weighers and deployment sets are below the '
                'scheduler manager and preemption: they import neither')
    if within(module, DEFRAG) and within(name, DEFRAG_MAY_NOT_IMPORT):
        return ('defrag/ is an operator service beside capacity/: it uses '
                'fit/, the plugins and capacity/, never %s'
                % ', '.join(DEFRAG_MAY_NOT_IMPORT))
    return None


def setup_cfg_entry_points(path=os.path.join(TOP, 'setup.cfg')):
    """``{group: {name: 'module:attribute'}}`` of setup.cfg."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    with open(path, encoding='utf-8') as f:
        parser.read_file(f)
    return _entry_points(parser)


def _entry_points(parser):
    groups = {}
    for group, text in parser['entry_points'].items():
        entries = groups[group] = {}
        for line in text.splitlines():
            if '=' in line:
                name, target = line.split('=', 1)
                entries[name.strip()] = target.strip()
    return groups


def entry_points_of(text):
    """The entry points of a setup.cfg text (a synthetic one in a test)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read_string(text)
    return _entry_points(parser)


def entry_point_violations(groups):
    """Every entry point that breaks a rule, as one line each."""
    problems = []
    for group, entries in sorted(groups.items()):
        runtime = any(fnmatch.fnmatchcase(group, pattern)
                      for pattern in RUNTIME_GROUPS)
        if not runtime and group != 'console_scripts':
            problems.append(
                '[entry_points] %s: neither console_scripts nor a runtime '
                'group (RUNTIME_GROUPS): say in test_layering.py who loads '
                'it' % group)
            continue
        for name, target in sorted(entries.items()):
            module = target.split(':', 1)[0].strip()
            reason = _broken_entry_point(group, name, module, runtime)
            if reason:
                problems.append('[entry_points] %s: %s = %s: %s'
                                % (group, name, target, reason))
    return problems


def _broken_entry_point(group, name, module, runtime):
    if within(module, OLD_TOOLS):
        return ('%s is a deprecated alias: entry points name %s'
                % (OLD_TOOLS, TOOLS))
    in_tools = within(module, TOOLS)
    if runtime and in_tools and group not in TOOL_PLUGIN_GROUPS:
        return ('the runtime loads this group: its entry points never '
                'point into the offline tools (%s)' % TOOLS)
    if group == 'console_scripts' and in_tools != (name in TOOL_SCRIPTS):
        return ('a console script points into %s if and only if it is a '
                "tool's (TOOL_SCRIPTS: %s)" % (TOOLS, ', '.join(TOOL_SCRIPTS)))
    return None


class TestLayering(base.TestCase):

    def test_imports_point_inwards(self):
        modules = package_modules()
        # The walk found the package, not an empty directory.
        self.assertIn('nova_sched_ext.fit.engine', modules)
        self.assertIn('nova_sched_ext_tools.sim.replay', modules)
        self.assertIn('nova_sched_ext.broker.service', modules)
        self.assertIn('nova_sched_ext.defrag.planner', modules)
        for alias in TOOL_ALIASES:
            self.assertIn(alias, modules)
        problems = violations(modules)
        self.assertEqual([], problems, '\n'.join(problems))

    def test_entry_points_keep_to_the_rings(self):
        groups = setup_cfg_entry_points()
        # The reader found setup.cfg's entry points, not an empty section.
        self.assertIn('nova-sched-ext-sim', groups['console_scripts'])
        self.assertIn('nova_sched_ext.filters', groups)
        for group in TOOL_PLUGIN_GROUPS:
            self.assertIn(group, groups)
        problems = entry_point_violations(groups)
        self.assertEqual([], problems, '\n'.join(problems))

    def test_the_seam_is_the_importer(self):
        # If the seam moves, C_HELPER_SEAM must follow it.
        path, source, is_package = package_modules()[C_HELPER_SEAM]
        self.assertIn(C_HELPER, [name for _line, name in imports_of(
            source, C_HELPER_SEAM, is_package, path)])

    def test_the_aliases_name_the_tools(self):
        # An alias module that lost its target would alias nothing.
        from nova_sched_ext import offline
        self.assertEqual(TOOLS, offline.NEW_PACKAGE)
        self.assertEqual(TOOLS + '.sim.cli',
                         offline.new_name(OLD_TOOLS + '.sim.cli'))


class TestRules(base.TestCase):
    """The checker finds bad imports, lazy and relative ones too."""

    def check(self, module, source, is_package=False):
        return violations({module: ('%s.py' % module.replace('.', '/'),
                                    source, is_package)})

    def assertRefused(self, module, source, words, is_package=False):
        problems = self.check(module, source, is_package)
        self.assertEqual(1, len(problems), problems)
        self.assertIn(words, problems[0])

    def test_fit_imports_no_plugin(self):
        self.assertRefused(
            'nova_sched_ext.fit.engine',
            'def lazy():\n    from nova_sched_ext.filters import numa_fit\n',
            'fit/ is the core')
        self.assertRefused('nova_sched_ext.fit.pyfit',
                           'from .. import weighers\n', 'fit/ is the core')
        self.assertEqual([], self.check(
            'nova_sched_ext.fit.engine',
            'from nova_sched_ext import conf\nfrom . import model\n'))

    def test_the_options_import_only_options(self):
        self.assertRefused('nova_sched_ext.conf.evictor',
                           'from nova.conf import utils\n',
                           'conf/ never imports nova')
        self.assertRefused('nova_sched_ext.conf.capacity',
                           'def f():\n'
                           '    from nova_sched_ext.capacity import errors\n',
                           'conf/ imports nothing of the package but conf/')
        self.assertRefused('nova_sched_ext.conf',
                           'from nova_sched_ext.defrag import model\n',
                           'conf/ imports nothing of the package but conf/')
        self.assertEqual([], self.check(
            'nova_sched_ext.conf', 'from keystoneauth1 import loading\n'
            'from nova_sched_ext.conf import scheduler\n'
            'from . import types\n', is_package=True))

    def test_only_the_seam_imports_the_helper(self):
        self.assertRefused('nova_sched_ext.fit.slotcache',
                           'from . import _cfit\n', C_HELPER_SEAM)
        self.assertRefused(
            'nova_sched_ext.weighers.numa_slot',
            'import importlib\n'
            "h = importlib.import_module('nova_sched_ext.fit._cfit')\n",
            C_HELPER_SEAM)
        self.assertEqual([], self.check(
            C_HELPER_SEAM, 'def load():\n'
            '    from nova_sched_ext.fit import _cfit\n'))

    def test_nothing_loaded_by_nova_imports_the_tools(self):
        for module in ('nova_sched_ext.manager', 'nova_sched_ext.conf',
                       'nova_sched_ext.preemption.victims',
                       'nova_sched_ext.cmd.scheduler'):
            self.assertRefused(
                module, 'def f():\n'
                '    from nova_sched_ext.offline import hosts\n',
                'offline tools live outside the runtime')
            self.assertRefused(
                module, 'def f():\n'
                '    from nova_sched_ext_tools import hosts\n',
                'offline tools live outside the runtime')
            self.assertRefused(
                module, 'import importlib\n'
                "m = importlib.import_module('nova_sched_ext_tools.sim')\n",
                'offline tools live outside the runtime')
        self.assertEqual([], self.check(
            'nova_sched_ext_tools.sim.cloud',
            'from nova_sched_ext_tools import hosts\n'
            'from nova_sched_ext.filters import numa_fit\n'))

    def test_only_the_aliases_reach_the_tools(self):
        # The alias package may name the tools; a module beside it may not.
        self.assertEqual([], self.check(
            'nova_sched_ext.offline',
            'import importlib\n'
            "t = importlib.import_module('nova_sched_ext_tools')\n",
            is_package=True))
        self.assertRefused(
            'nova_sched_ext.offline.extra',
            'from nova_sched_ext_tools import hosts\n',
            'offline tools live outside the runtime')

    def test_the_tools_use_their_new_names(self):
        self.assertRefused('nova_sched_ext_tools.sim.cloud',
                           'from nova_sched_ext.offline import hosts\n',
                           'deprecated alias')
        self.assertRefused('nova_sched_ext_tools.bench.cli',
                           'import nova_sched_ext.offline.sim.cli\n',
                           'deprecated alias')

    def test_plugins_stay_below_the_manager(self):
        self.assertRefused('nova_sched_ext.filters.numa_fit',
                           'from nova_sched_ext.preemption import victims\n',
                           'below the scheduler manager')
        self.assertRefused('nova_sched_ext.deployment_set.lock',
                           'import nova_sched_ext.manager\n',
                           'below the scheduler manager')
        self.assertEqual([], self.check(
            'nova_sched_ext.preemption.driver',
            'from nova_sched_ext.filters import numa_fit\n'
            'from nova_sched_ext import manager\n'))

    def test_the_broker_never_imports_nova(self):
        self.assertRefused('nova_sched_ext.broker.clusters',
                           'def f():\n    from nova import objects\n',
                           'never imports nova')
        self.assertRefused('nova_sched_ext.broker.service',
                           'import nova.conf\n', 'never imports nova')
        self.assertRefused('nova_sched_ext.broker.planning',
                           'from nova_sched_ext.fit import engine\n',
                           'pulls in nova')
        self.assertRefused('nova_sched_ext.broker.cmd',
                           'from nova_sched_ext.capacity import service\n',
                           'pulls in nova')
        self.assertEqual([], self.check(
            'nova_sched_ext.broker.clusters',
            'import novaclient\n'
            'from nova_sched_ext.capacity import osc\n'
            'from nova_sched_ext import registry\n'
            'from . import planning\n'))

    def test_only_the_tools_import_the_broker(self):
        self.assertRefused('nova_sched_ext.capacity.api',
                           'from nova_sched_ext.broker import planning\n',
                           'outermost ring')
        self.assertEqual([], self.check(
            'nova_sched_ext_tools.sim.broker',
            'from nova_sched_ext.broker import planning\n'))

    def test_defrag_stays_an_operator_service(self):
        self.assertRefused('nova_sched_ext.defrag.planner',
                           'from nova_sched_ext_tools.sim import cloud\n',
                           'offline tools live outside the runtime')
        self.assertRefused('nova_sched_ext.defrag.executor',
                           'from nova_sched_ext import manager\n',
                           'operator service beside capacity/')
        # The broker's own rule (only the tools import it) says it first.
        self.assertRefused('nova_sched_ext.defrag.executor',
                           'from nova_sched_ext import broker\n',
                           'outermost ring')
        self.assertRefused('nova_sched_ext.weighers.numa_slot',
                           'from nova_sched_ext.defrag import planner\n',
                           'below the scheduler manager')
        self.assertEqual([], self.check(
            'nova_sched_ext.defrag.state',
            'from nova_sched_ext.capacity import count\n'
            'from nova_sched_ext.deployment_set import rules\n'
            'from nova_sched_ext.fit import engine\n'))

    def test_watcher_plugins_stay_out_of_nova(self):
        self.assertRefused('nova_sched_ext.defrag.watcher_strategy',
                           'def f():\n    from nova import objects\n',
                           'never import nova')
        self.assertRefused('nova_sched_ext.defrag.watcher_goal',
                           'from nova_sched_ext.defrag import planner\n',
                           'only each other')
        self.assertRefused('nova_sched_ext.defrag.executor',
                           'from . import watcher_strategy\n',
                           "Watcher's to load")
        self.assertRefused('nova_sched_ext.capacity.cmd',
                           'import watcher.conf\n', 'a process that has '
                           'Nova cannot')
        self.assertEqual([], self.check(
            'nova_sched_ext.defrag.watcher_strategy',
            'from watcher.common import exception\n'
            'from nova_sched_ext.defrag import model\n'
            'from nova_sched_ext.defrag import watcher_conf\n'
            'from . import watcher_planner\n'))

    def test_no_tests_in_the_package(self):
        self.assertRefused('nova_sched_ext_tools.harness.cloud',
                           'from tests.functional import base\n',
                           'never imports the tests')
        self.assertRefused('nova_sched_ext.manager',
                           'from tests import base\n',
                           'never imports the tests')

    def test_only_the_watcher_runners_of_the_tools_import_watcher(self):
        self.assertRefused('nova_sched_ext_tools.sim.defrag',
                           'import watcher.conf\n', 'a process that has '
                           'Nova cannot')
        self.assertEqual([], self.check(WATCHER_RUNNERS[0],
                                        'import watcher.conf\n'))


class TestEntryPointRules(base.TestCase):
    """The entry-point checker finds entry points into the tools."""

    def check(self, text):
        return entry_point_violations(entry_points_of(
            '[entry_points]\n' + text))

    def assertRefused(self, text, words):
        problems = self.check(text)
        self.assertEqual(1, len(problems), problems)
        self.assertIn(words, problems[0])

    def test_runtime_groups_never_point_into_the_tools(self):
        for group in ('nova_sched_ext.filters', 'nova.scheduler.driver',
                      'oslo.config.opts', 'watcher_strategies',
                      'openstack.cli.extension', 'tempest.test_plugins'):
            self.assertRefused(
                '%s =\n    x = nova_sched_ext_tools.sim.cli:main\n' % group,
                'never point into the offline tools')
        self.assertEqual([], self.check(
            'nova_sched_ext.filters =\n'
            '    F = nova_sched_ext.filters.numa_fit:NUMAFitFilter\n'
            # a name that only starts like the tools' package is not theirs
            'oslo.config.opts =\n    o = nova_sched_ext_toolsy.conf:f\n'))

    def test_the_deprecated_path_is_never_named(self):
        self.assertRefused(
            'nova_sched_ext.filters =\n'
            '    F = nova_sched_ext.offline.harness.weighers:W\n',
            'deprecated alias')
        self.assertRefused(
            'console_scripts =\n'
            '    nova-sched-ext-sim = nova_sched_ext.offline.sim.cli:main\n',
            'deprecated alias')

    def test_only_the_plug_in_groups_take_the_tools(self):
        self.assertEqual([], self.check(
            'nova_sched_ext.defrag.saved_states =\n'
            '    f/1 = nova_sched_ext_tools.sim.defrag_report:reader\n'))
        self.assertRefused(
            'nova_sched_ext.defrag.plans =\n'
            '    f/1 = nova_sched_ext_tools.sim.defrag_report:reader\n',
            'never point into the offline tools')

    def test_console_scripts_of_the_tools_and_of_the_runtime(self):
        self.assertRefused(
            'console_scripts =\n'
            '    nova-sched-ext-capacity = nova_sched_ext_tools.bench.cli:main'
            '\n', 'if and only if')
        self.assertRefused(
            'console_scripts =\n'
            '    nova-sched-ext-sim = nova_sched_ext.capacity.cmd:main\n',
            'if and only if')
        self.assertEqual([], self.check(
            'console_scripts =\n'
            '    nova-sched-ext-sim = nova_sched_ext_tools.sim.cli:main\n'
            '    nova-sched-ext-defrag = nova_sched_ext.defrag.cmd:main\n'))

    def test_a_new_group_must_be_classified(self):
        self.assertRefused('paste.app_factory =\n'
                           '    main = nova_sched_ext.capacity.api:app\n',
                           'neither console_scripts nor a runtime group')


class TestToolPluginGroups(base.TestCase):
    """The runtime loads a tools' plug-in group only when asked for it."""

    def test_importing_the_reader_loads_no_tool(self):
        readers = sorted(set(TOOL_PLUGIN_GROUPS.values()))
        code = ('import sys\n' + ''.join('import %s\n' % m for m in readers)
                + "print(sorted(m for m in sys.modules if m == %r or "
                  "m.startswith(%r)))\n" % (TOOLS, TOOLS + '.'))
        out = subprocess.run([sys.executable, '-c', code], cwd=TOP,
                             capture_output=True, text=True, check=True)
        self.assertEqual('[]', out.stdout.strip(), out.stderr)

    def test_the_reader_names_its_group(self):
        # The module said to load the group does load it.
        for group, reader in TOOL_PLUGIN_GROUPS.items():
            path, source, _is_package = package_modules()[reader]
            self.assertIn(repr(group), source, path)


class TestBrokerLoadsNoNova(base.TestCase):
    """What the rules check in the source, checked in a fresh interpreter."""

    def test_importing_the_broker_loads_no_nova(self):
        modules = sorted(name for name in package_modules()
                         if within(name, BROKER))
        code = ('import sys\n' + ''.join('import %s\n' % m for m in modules)
                + "print(sorted(m for m in sys.modules if m == 'nova' or "
                  "m.startswith('nova.')))\n")
        out = subprocess.run([sys.executable, '-c', code], cwd=TOP,
                             capture_output=True, text=True, check=True)
        self.assertEqual('[]', out.stdout.strip(), out.stderr)


class TestOptionsLoadNoNova(base.TestCase):
    """The options' rule, checked in a fresh interpreter."""

    def test_importing_the_options_loads_no_nova(self):
        modules = sorted(name for name in package_modules()
                         if within(name, CONF))
        self.assertIn('nova_sched_ext.conf.scheduler', modules)
        code = ('import sys\n' + ''.join('import %s\n' % m for m in modules)
                + "print(sorted(m for m in sys.modules if m == 'nova' or "
                  "m.startswith('nova.')))\n")
        out = subprocess.run([sys.executable, '-c', code], cwd=TOP,
                             capture_output=True, text=True, check=True)
        self.assertEqual('[]', out.stdout.strip(), out.stderr)


class TestWatcherPluginsLoadNoNova(base.TestCase):
    """The Watcher plugins' rule, checked in a fresh interpreter."""

    def loaded_nova(self, modules):
        code = ('import sys\n' + ''.join('import %s\n' % m for m in modules)
                + "print(sorted(m for m in sys.modules if m == 'nova' or "
                  "m.startswith('nova.')))\n")
        out = subprocess.run([sys.executable, '-c', code], cwd=TOP,
                             capture_output=True, text=True, check=True)
        return out.stdout.strip(), out.stderr

    def test_the_options_and_the_plan_format_load_no_nova(self):
        # What the plugins import of the package, Watcher or not.
        loaded, errors = self.loaded_nova(
            ('nova_sched_ext.defrag.watcher_conf',) +
            WATCHER_PLUGINS_MAY_IMPORT)
        self.assertEqual('[]', loaded, errors)

    def test_importing_the_plugins_loads_no_nova(self):
        if importlib.util.find_spec('watcher') is None:
            self.skipTest('python-watcher is not installed (the [watcher] '
                          'extra; tox -e watcher)')
        loaded, errors = self.loaded_nova(WATCHER_PLUGINS)
        self.assertEqual('[]', loaded, errors)


# --- The features never import one another ---------------------------------
#
# Each feature reads the cloud through the one reader (nova_sched_ext.cloud)
# and counts with the core (fit/); a rule two features share lives in the
# reader (cloud.set_rules, cloud.set_hints, cloud.preemptible), not in one
# of them.  Shared helpers (conf, opt_types, registry, version,
# coordination, wrappers) and the scheduler's plugins are no features.

#: The features, and the ring every one of them reads through.
FEATURES = ('nova_sched_ext.capacity', 'nova_sched_ext.defrag',
            'nova_sched_ext.preemption', 'nova_sched_ext.deployment_set',
            'nova_sched_ext.broker')
CLOUD = 'nova_sched_ext.cloud'

#: ``(importer, imported): why`` of the imports the rule allows for good.
FEATURE_IMPORTS_ALLOWED = {
    ('nova_sched_ext.broker.clusters', 'nova_sched_ext.capacity.osc'):
        "the broker reads each cluster's capacity API over HTTP, as it "
        "reads Nova's: capacity.osc is that public API's client (it "
        "imports no Nova), not the count's insides",
}

#: ``(importer, imported): what removes it`` of imports that other work
#: is about to remove (none today); each goes when that work is merged.
FEATURE_IMPORTS_PENDING = {}


def _excused(module, name, table):
    return any(within(module, importer) and within(name, imported)
               for importer, imported in table)


def feature_violations(modules):
    """Every import of one feature by another, or of a feature by cloud/.

    ``from a import b`` gives ``a`` and ``a.b`` (:func:`imports_of`); only
    the longer name of one statement is judged, so that an allowed
    ``from nova_sched_ext.capacity import osc`` is not refused as
    ``nova_sched_ext.capacity``.
    """
    problems = []
    excused = {**FEATURE_IMPORTS_ALLOWED, **FEATURE_IMPORTS_PENDING}
    for module, (path, source, is_package) in sorted(modules.items()):
        where = os.path.relpath(path, TOP) if os.path.isabs(path) else path
        by_line = {}
        for line, name in imports_of(source, module, is_package, path):
            by_line.setdefault(line, set()).add(name)
        for line, names in sorted(by_line.items()):
            for name in sorted(names):
                if any(other.startswith(name + '.') for other in names):
                    continue
                reason = _feature_rule(module, name)
                if reason and not _excused(module, name, excused):
                    problems.append('%s:%d imports %s: %s'
                                    % (where, line, name, reason))
    return problems


def _feature_rule(module, name):
    if within(module, CLOUD) and within(name, FEATURES):
        return ('cloud/ is the ring inside the features: it imports none '
                'of them')
    for feature in FEATURES:
        if within(module, feature):
            break
    else:
        return None
    for other in FEATURES:
        if other != feature and within(name, other):
            return ('features never import one another: %s reads the '
                    'cloud through nova_sched_ext.cloud and shares rules '
                    'there, not through %s' % (feature, other))
    return None


class TestFeaturesApart(base.TestCase):
    """Capacity, defragmentation, preemption, deployment sets, the broker."""

    def check(self, module, source, is_package=False):
        return feature_violations({module: (
            '%s.py' % module.replace('.', '/'), source, is_package)})

    def test_no_feature_imports_another(self):
        modules = package_modules()
        self.assertIn('nova_sched_ext.cloud.cells', modules)
        problems = feature_violations(modules)
        self.assertEqual([], problems, '\n'.join(problems))

    def test_a_feature_importing_another_is_refused(self):
        for module, source in (
                ('nova_sched_ext.defrag.live',
                 'from nova_sched_ext.capacity import sources\n'),
                ('nova_sched_ext.defrag.validity',
                 'def f():\n'
                 '    from nova_sched_ext.deployment_set import members\n'),
                ('nova_sched_ext.capacity.service',
                 'import nova_sched_ext.preemption.census\n'),
                ('nova_sched_ext.preemption.caps',
                 'from ..deployment_set import planning\n'),
                ('nova_sched_ext.deployment_set.members',
                 'from nova_sched_ext import defrag\n'),
                ('nova_sched_ext.broker.service',
                 'from nova_sched_ext.capacity import service\n')):
            problems = self.check(module, source)
            self.assertEqual(1, len(problems), (module, problems))
            self.assertIn('features never import one another', problems[0])

    def test_cloud_imports_no_feature(self):
        problems = self.check('nova_sched_ext.cloud.cells',
                              'from nova_sched_ext.preemption import census\n')
        self.assertEqual(1, len(problems), problems)
        self.assertIn('cloud/ is the ring inside the features', problems[0])

    def test_the_reader_and_shared_helpers_are_allowed(self):
        self.assertEqual([], self.check(
            'nova_sched_ext.defrag.live',
            'from nova_sched_ext.cloud import computes\n'
            'from nova_sched_ext.cloud import set_rules\n'
            'from nova_sched_ext import conf\n'
            'from nova_sched_ext.fit import engine\n'
            'from . import model\n'))
        self.assertEqual([], self.check(
            'nova_sched_ext.broker.clusters',
            'from nova_sched_ext.capacity import osc\n'))
        # Allowed for the broker's client only, not for any module.
        self.assertEqual(1, len(self.check(
            'nova_sched_ext.defrag.live',
            'from nova_sched_ext.capacity import osc\n')))

    def test_every_exception_is_still_needed(self):
        # An exception nothing uses any more is dropped, not kept.
        modules = package_modules()
        used = set()
        for module, (path, source, is_package) in modules.items():
            for _line, name in imports_of(source, module, is_package, path):
                for importer, imported in (list(FEATURE_IMPORTS_ALLOWED) +
                                           list(FEATURE_IMPORTS_PENDING)):
                    if within(module, importer) and within(name, imported):
                        used.add((importer, imported))
        unused = (set(FEATURE_IMPORTS_ALLOWED) |
                  set(FEATURE_IMPORTS_PENDING)) - used
        self.assertEqual(set(), unused)
