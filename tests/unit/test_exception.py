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

"""Every exception class of the package has the one base and its own name.

Each module of ``nova_sched_ext`` is imported and every exception class
defined in it is checked: it derives from
:class:`nova_sched_ext.exception.NovaSchedExtError`, and no other class
has its name (an alias, such as a renamed class's old name, is the same
object and does not count).  A module that cannot be imported here (an
optional dependency such as python-watcher is missing) and the offline
tools (whose import is heavy and starts Nova's test fixtures) are read
instead: each class there whose base is an exception must name the
package base, or a class of its own module that does.
"""

import ast
import importlib
import importlib.util
import inspect
import os
import pkgutil
from unittest import mock
import warnings

import fixtures

import nova_sched_ext
from nova_sched_ext.broker import config as broker_config
from nova_sched_ext.capacity import errors as capacity_errors
from nova_sched_ext import cli
from nova_sched_ext import coordination
from nova_sched_ext import exception
from tests import base

PACKAGE = 'nova_sched_ext'
#: read, not imported
NOT_IMPORTED = ('nova_sched_ext.offline',)
#: how the package base is imported where it is used
BASE_MODULE_NAMES = ('sched_ext_exception', 'exception')


def within(name, prefixes):
    return any(name == p or name.startswith(p + '.') for p in prefixes)


def module_names():
    return sorted(info.name for info in pkgutil.walk_packages(
        nova_sched_ext.__path__, PACKAGE + '.'))


def exception_classes(module):
    """The exception classes ``module`` defines (not the ones it imports)."""
    return [value for value in vars(module).values()
            if inspect.isclass(value) and issubclass(value, BaseException)
            and value.__module__ == module.__name__]


def _looks_like_exception(base_name, local):
    last = base_name.rsplit('.', 1)[-1]
    return (last in local or last in ('Exception', 'BaseException') or
            last.endswith(('Error', 'Exception', 'Unavailable')))


def read_exception_classes(path):
    """``[(name, line, has the package base)]`` of a module's source."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    found = {}
    classes = [node for node in ast.walk(tree)
               if isinstance(node, ast.ClassDef)]
    changed = True
    while changed:
        changed = False
        for node in classes:
            if node.name in found:
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if not any(_looks_like_exception(b, found) for b in bases):
                continue
            based = any(
                b.split('.')[0] in BASE_MODULE_NAMES and
                b.rsplit('.', 1)[-1] in vars(exception) or
                found.get(b, (None, False))[1] for b in bases)
            found[node.name] = (node.lineno, based)
            changed = True
    return [(name, line, based) for name, (line, based) in found.items()]


def module_path(name):
    spec = importlib.util.find_spec(name)
    return spec.origin


class TestOneBase(base.TestCase):

    def walk(self):
        """``([(qualified name, class)], [(qualified name, read)])``."""
        imported, read = [], []
        for name in module_names():
            module = None
            if not within(name, NOT_IMPORTED):
                try:
                    # The console scripts choose Nova's concurrency mode
                    # on import, and so do the nova.cmd modules they
                    # import (nova.cmd.compute: native threads, refused
                    # once eventlet is loaded); the test run has chosen
                    # it already.
                    with mock.patch(
                            'nova_sched_ext.compat.release.monkey_patch'), \
                            mock.patch('nova.monkey_patch.patch',
                                       create=True), \
                            warnings.catch_warnings():
                        warnings.simplefilter('ignore', DeprecationWarning)
                        module = importlib.import_module(name)
                except ImportError:
                    # An optional dependency (watcher, tempest) missing.
                    module = None
            if module is not None:
                imported += [('%s.%s' % (name, cls.__name__), cls)
                             for cls in exception_classes(module)]
            else:
                read += [('%s.%s:%d' % (name, cls, line), (cls, based))
                         for cls, line, based in read_exception_classes(
                             module_path(name))]
        return imported, read

    def test_every_exception_has_the_base_and_its_own_name(self):
        imported, read = self.walk()
        # the walk found them all: the package has some 50
        self.assertGreater(len(imported) + len(read), 40)
        self.assertEqual(
            [], [where for where, cls in imported
                 if not issubclass(cls, exception.NovaSchedExtError)])
        self.assertEqual([], [where for where, (_n, based) in read
                              if not based])
        by_name = {}
        for where, cls in imported:
            by_name.setdefault(cls.__name__, {})[id(cls)] = where
        for where, (name, _based) in read:
            by_name.setdefault(name, {})[where] = where
        self.assertEqual({}, {name: sorted(places.values())
                              for name, places in by_name.items()
                              if len(places) > 1})

    def test_the_walk_sees_a_class_without_the_base(self):
        source = ('from nova_sched_ext import exception as '
                  'sched_ext_exception\n'
                  'class Good(ValueError, sched_ext_exception.'
                  'UserFacingError):\n    pass\n'
                  'class AlsoGood(Good):\n    pass\n'
                  'class Bad(ValueError):\n    pass\n'
                  'class NotAnError(object):\n    pass\n')
        path = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(path, 'module.py')
        with open(path, 'w') as f:
            f.write(source)
        self.assertEqual(
            [('AlsoGood', 4, True), ('Bad', 6, False), ('Good', 2, True)],
            sorted(read_exception_classes(path)))

    def test_the_old_names_are_the_renamed_classes(self):
        self.assertIs(coordination.CoordinationBackendUnavailable,
                      coordination.BackendUnavailable)
        self.assertIs(broker_config.BrokerConfigError,
                      broker_config.ConfigError)
        self.assertIsNot(coordination.BackendUnavailable,
                         capacity_errors.BackendUnavailable)

    def test_the_kinds_keep_their_standard_bases(self):
        # Existing except clauses still catch them.
        self.assertTrue(issubclass(broker_config.BrokerConfigError,
                                   ValueError))
        self.assertTrue(issubclass(
            coordination.CoordinationBackendUnavailable,
            coordination.LockUnavailable))
        self.assertTrue(issubclass(
            coordination.CoordinationBackendUnavailable,
            exception.UpstreamUnavailable))

    def test_user_facing_errors_keep_their_exit_codes(self):
        self.assertEqual(2, cli.UsageError('x').exit_code)
        self.assertEqual(2, capacity_errors.UnknownFlavor('x').exit_code)
        self.assertEqual(1, capacity_errors.BackendUnavailable(
            'x').exit_code)
        self.assertTrue(issubclass(capacity_errors.CapacityError,
                                   exception.UserFacingError))
