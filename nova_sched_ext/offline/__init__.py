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

"""Deprecated: the offline tools moved to :mod:`nova_sched_ext_tools`.

``nova_sched_ext.offline`` and every module below it are aliases of the
same modules in ``nova_sched_ext_tools`` (``nova_sched_ext.offline.sim.cli``
is ``nova_sched_ext_tools.sim.cli``, the very module object, so patching a
name through either path patches both), each of which warns with a
``DeprecationWarning`` naming the new path when it is first imported
through the old one.  They keep working the scripts, entry points and
imports written before the move: console-script wrappers installed by an
older release (``nova_sched_ext.offline.sim.cli:main``), a saved-state
reader named ``nova_sched_ext.offline.sim.defrag_report:planner_input``,
tests importing ``nova_sched_ext.offline.harness``.

Importing this package imports nothing of the tools: it installs an import
hook that maps ``nova_sched_ext.offline.X`` to ``nova_sched_ext_tools.X``
when ``X`` is asked for.  Nothing in ``nova_sched_ext`` imports this
package (``tests/unit/test_layering.py``); it is the one module of the
runtime package allowed to reach the tools, and only by the old names.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: Where the tools live now.
NEW_PACKAGE = 'nova_sched_ext_tools'

_BOOTSTRAP = '<frozen importlib'


def new_name(old_name):
    """The tools' module that the old ``nova_sched_ext.offline...`` names."""
    return NEW_PACKAGE + old_name[len(__name__):]


def _warn(old_name):
    # Blame the first frame outside the import machinery and this module:
    # the code that wrote the old name (shown by Python's default filters
    # when that is __main__, a console script or a test).  warnings skips
    # the import machinery's frames when it counts the stack level.
    level, frame = 2, sys._getframe(1)
    while frame is not None and (
            frame.f_code.co_filename.startswith(_BOOTSTRAP) or
            frame.f_code.co_filename == __file__):
        if frame.f_code.co_filename == __file__:
            level += 1
        frame = frame.f_back
    warnings.warn('%s is deprecated: the offline tools moved out of the '
                  'runtime package, import %s instead'
                  % (old_name, new_name(old_name)),
                  DeprecationWarning, stacklevel=level)


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``nova_sched_ext.offline.X`` as ``nova_sched_ext_tools.X``.

    The module imported under the old name is the new module itself:
    :meth:`exec_module` puts it in ``sys.modules`` in place of the empty
    module the import system made, which the import system then returns
    (and binds on the parent package) instead.
    """

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(__name__ + '.'):
            return None
        if importlib.util.find_spec(new_name(fullname)) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        _warn(module.__name__)
        sys.modules[module.__name__] = importlib.import_module(
            new_name(module.__name__))


def _install():
    # First on the path: below an aliased package, whose __path__ is the
    # tools' directory, the path finder would load a second copy.
    # Once, even if this package is imported afresh (the class is then a
    # new one, its name the same).
    if not any(type(f).__qualname__ == _AliasFinder.__qualname__ and
               type(f).__module__ == __name__ for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


def __getattr__(name):
    """``nova_sched_ext.offline.sim`` as an attribute: the aliased module."""
    if name.startswith('__'):
        raise AttributeError(name)
    old_name = '%s.%s' % (__name__, name)
    try:
        # __import__ (no Python frame of its own) rather than
        # importlib.import_module: the warning blames the caller.
        __import__(old_name)
        return sys.modules[old_name]
    except ModuleNotFoundError as exc:
        if exc.name != old_name:
            raise
        raise AttributeError('module %r has no attribute %r'
                             % (__name__, name)) from None


_install()
_warn(__name__)
