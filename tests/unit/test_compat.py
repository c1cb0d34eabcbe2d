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

"""The compat seam: each entry against the installed upstream, and no
private upstream name anywhere else.

:mod:`nova_sched_ext.compat` holds every use of a Nova, placement or tooz
name that starts with ``_`` or is no API.  The first test cases check each
entry against the installed release (the name exists, with the parameters
the seam passes, and does what the seam says where that is cheap to
show): an upgrade that changes one fails here, naming it.

:class:`TestNothingPrivateOutsideTheSeam` parses every module under
``nova_sched_ext/`` (nothing of the package is imported) and fails when a
module other than the seam:

* imports a private upstream name (``from nova.x import _y``) or a module
  of :data:`UNDOCUMENTED` (the databases' models and engines, Nova's own
  tests, tooz's drivers);
* reads a private attribute of an upstream name it imported
  (``objects.Service._from_db_object``);
* reads, writes or ``getattr``'s an attribute whose name the seam stands
  for (:func:`seam_names`), whatever the object (``stats._filter_pools_x``
  on a ``PciDeviceStats`` the code was given);
* in a subclass of an upstream class, calls a private method it does not
  define itself (it is the upstream class's), or overrides a private
  method of the upstream class that ``OVERRIDDEN_HOOKS`` does not list
  (the upstream classes are imported to tell).

Dunder names (``__table__``, ``__init__``) are not private names.
"""

import ast
import importlib
import importlib.metadata
import inspect
import json
import logging
import os
import sys
from unittest import mock

from nova import context as nova_context
from nova import objects
from nova.pci import stats as pci_stats
from nova.scheduler.filters import num_instances_filter
from nova.scheduler.filters import numa_topology_filter
from nova.scheduler import host_manager
from nova.scheduler import manager as nova_manager
from nova.scheduler import utils as scheduler_utils
from nova.virt import driver as virt_driver
from oslo_utils import netutils
import redis
from tooz import coordination as tooz_coordination
from tooz.drivers import redis as tooz_redis

from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext.compat import release
from nova_sched_ext.compat import tooz as tooz_compat
from tests import base

PACKAGE = 'nova_sched_ext'
TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

#: The seam.
SEAM = 'nova_sched_ext.compat'

#: Top-level packages whose private names go through the seam.
UPSTREAM = ('nova', 'placement', 'tooz')

#: Upstream modules that are no API: only the seam imports them.
UNDOCUMENTED = ('nova.db', 'nova.tests', 'placement.db', 'placement.db_api',
                'placement.objects', 'tooz.drivers', 'tooz.utils')

#: Left out of the check: the offline tools (simulator, benches, the
#: in-process cloud harness) build clouds on Nova's test fixtures and write
#: the databases' tables in bulk; no Nova service loads them, and they
#: leave the runtime package for a package of their own (issue 26, item
#: 8).
NOT_CHECKED = ('nova_sched_ext.offline',)


def within(name, prefixes):
    """Whether a dotted ``name`` is one of ``prefixes`` or inside one."""
    return any(name == p or name.startswith(p + '.') for p in prefixes)


def private(name):
    """Whether ``name`` is private: a leading ``_``, not a dunder."""
    return name.startswith('_') and not (
        name.startswith('__') and name.endswith('__'))


def seam_names(top=TOP):
    """The private upstream names the seam stands for.

    Every private attribute the seam's modules read or write and every
    private identifier they name in a string (``getattr``, tables of
    names), less what the seam defines itself.
    """
    used, defined = set(), set()
    directory = os.path.join(top, *SEAM.split('.'))
    for name in sorted(os.listdir(directory)):
        if not name.endswith('.py'):
            continue
        with open(os.path.join(directory, name)) as f:
            tree = ast.parse(f.read(), name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.Constant) and \
                    isinstance(node.value, str):
                used.update(part for part in node.value.split('.')
                            if part.isidentifier())
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Name) and \
                    isinstance(node.ctx, ast.Store):
                defined.add(node.id)
    return frozenset(n for n in used - defined if private(n))


def resolve(dotted):
    """The upstream object of a dotted path, or None if it cannot import."""
    parts = dotted.split('.')
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module('.'.join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                found = getattr(found, part)
        except AttributeError:
            return None
        return found
    return None


def _upstream_imports(tree):
    """``{local name: dotted upstream path}`` of the module's imports."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if within(alias.name, UPSTREAM):
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        top = alias.name.split('.')[0]
                        names[top] = top
        elif isinstance(node, ast.ImportFrom) and not node.level and \
                node.module and within(node.module, UPSTREAM):
            for alias in node.names:
                names[alias.asname or alias.name] = '%s.%s' % (
                    node.module, alias.name)
    return names


def _dotted(node, names):
    """The upstream path of ``a.b.c`` whose ``a`` is an upstream import."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in names:
        return '.'.join([names[node.id]] + parts[::-1])
    return None


def _is_self_or_super(node):
    return (isinstance(node, ast.Name) and node.id in ('self', 'cls')) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
        node.func.id == 'super')


def _defined_names(tree):
    """Every name the module defines: functions, classes, assignments."""
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and \
                isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Call) and \
                isinstance(node.func, ast.Name) and \
                node.func.id == 'setattr' and len(node.args) > 1 and \
                isinstance(node.args[1], ast.Constant):
            defined.add(node.args[1].value)
    return defined


def _overridden_hook(base, name, hooks):
    """Whether ``base.name`` is a private upstream method, and if listed.

    :returns: None if ``base`` (an upstream class) has no ``name``; else
        whether ``hooks`` lists the class of its MRO that defines it
    """
    if not inspect.isclass(base) or not hasattr(base, name):
        return None
    for klass in base.__mro__:
        if name in vars(klass):
            return '%s.%s.%s' % (klass.__module__, klass.__qualname__,
                                 name) in hooks
    return False


def private_uses(source, filename='<source>', known=None, hooks=None):
    """``[(line, what)]``: each private upstream name the source touches.

    :param known: the names the seam stands for (:func:`seam_names`)
    :param hooks: the overrides the seam lists
        (``nova_compat.OVERRIDDEN_HOOKS``)
    """
    known = seam_names() if known is None else known
    hooks = nova_compat.OVERRIDDEN_HOOKS if hooks is None else hooks
    tree = ast.parse(source, filename)
    names = _upstream_imports(tree)
    defined = _defined_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom):
                if node.level or not node.module or \
                        not within(node.module, UPSTREAM):
                    continue
                paths = ['%s.%s' % (node.module, alias.name)
                         for alias in node.names]
            else:
                paths = [alias.name for alias in node.names
                         if within(alias.name, UPSTREAM)]
            for path in paths:
                if any(private(part) for part in path.split('.')):
                    found.append((node.lineno, 'imports the private '
                                  'upstream name %s' % path))
                elif within(path, UNDOCUMENTED):
                    found.append((node.lineno, 'imports %s, an upstream '
                                  'module that is no API' % path))
        elif isinstance(node, ast.Attribute) and private(node.attr):
            path = _dotted(node.value, names)
            if path is not None:
                found.append((node.lineno, 'touches the private upstream '
                              'name %s.%s' % (path, node.attr)))
            elif node.attr in known:
                found.append((node.lineno, 'touches %s, a private upstream '
                              'name the seam stands for' % node.attr))
        elif isinstance(node, ast.Call) and \
                isinstance(node.func, ast.Name) and \
                node.func.id in ('getattr', 'setattr', 'hasattr',
                                 'delattr') and len(node.args) > 1 and \
                isinstance(node.args[1], ast.Constant) and \
                node.args[1].value in known:
            found.append((node.lineno, '%ss %s, a private upstream name the '
                          'seam stands for' % (node.func.id,
                                               node.args[1].value)))
        elif isinstance(node, ast.ClassDef):
            found.extend(_subclass_uses(node, names, defined, hooks))
    return sorted(set(found))


def _subclass_uses(klass, names, defined, hooks):
    """What a subclass of an upstream class uses of its private methods."""
    bases = [path for path in (_dotted(b, names) for b in klass.bases)
             if path is not None]
    if not bases:
        return []
    upstream = [resolve(path) for path in bases]
    found = []
    for node in ast.walk(klass):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                private(node.name):
            for parent in upstream:
                listed = _overridden_hook(parent, node.name, hooks)
                if listed is False:
                    found.append((node.lineno, 'overrides the private '
                                  'upstream method %s.%s, which the seam '
                                  'does not list' % (klass.name, node.name)))
        elif isinstance(node, ast.Attribute) and private(node.attr) and \
                isinstance(node.ctx, ast.Load) and \
                _is_self_or_super(node.value) and node.attr not in defined:
            found.append((node.lineno, 'calls %s, which %s inherits from '
                          '%s' % (node.attr, klass.name, ', '.join(bases))))
    return found


def checked_modules(top=TOP):
    """``[(module, path)]`` of every module the check reads."""
    found = []
    for directory, dirs, files in os.walk(os.path.join(top, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(directory, name)
            module = os.path.relpath(path, top)[:-len('.py')].replace(
                os.sep, '.')
            if module.endswith('.__init__'):
                module = module[:-len('.__init__')]
            if not within(module, (SEAM,) + NOT_CHECKED):
                found.append((module, path))
    return found


class TestNothingPrivateOutsideTheSeam(base.TestCase):

    def test_no_module_but_the_seam_touches_a_private_upstream_name(self):
        known = seam_names()
        failures = []
        for module, path in checked_modules():
            with open(path) as f:
                source = f.read()
            failures.extend('%s:%d %s' % (os.path.relpath(path, TOP), line,
                                          what)
                            for line, what in private_uses(source, path,
                                                           known))
        self.assertEqual([], failures, 'Go through nova_sched_ext.compat '
                         '(add an entry and its test there).')

    def test_the_check_reads_the_modules_that_used_private_names(self):
        checked = {module for module, _path in checked_modules()}
        for module in ('nova_sched_ext.host_state', 'nova_sched_ext.manager',
                       'nova_sched_ext.fit.adapters',
                       'nova_sched_ext.coordination.records',
                       'nova_sched_ext.coordination.locks'):
            self.assertIn(module, checked)
        self.assertNotIn('nova_sched_ext.compat.nova', checked)

    def test_the_seam_names_what_it_stands_for(self):
        known = seam_names()
        for name in ('_filter_pools_for_spec', '_rg_by_id', '_limit',
                     '_make_client', '_from_db_object',
                     '_filter_pools_for_live_migratable_devices'):
            self.assertIn(name, known)
        # What the seam defines is not an upstream name.
        self.assertNotIn('pci_pools', known)

    def assertFlags(self, source, *words):
        found = private_uses(source, known=seam_names())
        self.assertEqual(1, len(found), found)
        for word in words:
            self.assertIn(word, found[0][1])

    def test_a_private_import_fails(self):
        self.assertFlags('from nova.scheduler.utils import _get_traits\n',
                         'private', 'nova.scheduler.utils._get_traits')

    def test_an_undocumented_module_fails(self):
        self.assertFlags('from nova.db.main import models\n',
                         'no API', 'nova.db.main.models')
        self.assertFlags('import nova.db.main.api\n', 'nova.db.main.api')
        self.assertFlags('from tooz.drivers import redis\n', 'tooz.drivers')

    def test_a_private_attribute_of_an_upstream_name_fails(self):
        self.assertFlags(
            'from nova import objects\n'
            'x = objects.Service._from_db_object\n',
            'nova.objects.Service._from_db_object')
        self.assertFlags(
            'from nova.scheduler import manager as m\n'
            'x = m.SchedulerManager._sentinel\n',
            'nova.scheduler.manager.SchedulerManager._sentinel')

    def test_a_name_the_seam_stands_for_fails_on_any_object(self):
        self.assertFlags('def f(stats, p, r):\n'
                         '    return stats._filter_pools_for_spec(p, r)\n',
                         '_filter_pools_for_spec')
        self.assertFlags('def f(request):\n'
                         '    request._limit = 3\n', '_limit')
        self.assertFlags("def f(request):\n"
                         "    return getattr(request, '_root_required')\n",
                         'getattrs', '_root_required')

    def test_an_inherited_private_method_fails(self):
        self.assertFlags(
            'from nova.scheduler import host_manager\n'
            'class M(host_manager.HostManager):\n'
            '    def f(self, aggregate):\n'
            '        return self._update_aggregate(aggregate)\n',
            'calls _update_aggregate',
            'nova.scheduler.host_manager.HostManager')

    def test_an_override_the_seam_does_not_list_fails(self):
        source = ('from nova.scheduler import host_manager\n'
                  'class M(host_manager.HostManager):\n'
                  '    def _get_computes_for_cells(self, c, cells, u):\n'
                  '        pass\n')
        self.assertEqual([], private_uses(source, known=frozenset()))
        found = private_uses(source, known=frozenset(), hooks={})
        self.assertEqual(1, len(found), found)
        self.assertIn('overrides the private upstream method '
                      'M._get_computes_for_cells', found[0][1])

    def test_what_is_not_upstream_or_not_private_passes(self):
        source = (
            'import collections\n'
            'from nova import objects\n'
            'from nova.scheduler import host_manager\n'
            'from nova_sched_ext.compat import nova as nova_compat\n'
            'TABLE = objects.Service.__table__\n'
            'class M(host_manager.HostManager):\n'
            '    def __init__(self):\n'
            '        super().__init__()\n'
            '        self._mine = collections.deque()\n'
            '    def _helper(self):\n'
            '        return self._mine\n'
            'def f(thing, manager, host):\n'
            '    thing._private_of_ours = 1\n'
            '    return nova_compat.host_aggregates(manager, host)\n')
        self.assertEqual([], private_uses(source, known=seam_names()))


class TestNovaSeam(base.TestCase):
    """Each entry of :mod:`nova_sched_ext.compat.nova`, against Nova."""

    def assertParameters(self, expected, function):
        self.assertEqual(
            list(expected), list(inspect.signature(function).parameters),
            '%s changed its parameters' % function.__qualname__)

    def test_the_hooks_kept_host_state_overrides(self):
        for path, parameters in nova_compat.OVERRIDDEN_HOOKS.items():
            method = resolve(path)
            self.assertIsNotNone(method, path)
            self.assertParameters(parameters, method)
        # Nova still calls them, the second with the first's answer.
        source = inspect.getsource(
            host_manager.HostManager.get_host_states_by_uuids)
        self.assertIn('compute_nodes, services = '
                      'self._get_computes_for_cells(', source)
        self.assertIn('self._get_host_states(context, compute_nodes, '
                      'services)', source)

    def test_the_tables_have_the_columns_read(self):
        nodes = nova_compat.compute_nodes_table()
        services = nova_compat.services_table()
        self.assertEqual('compute_nodes', nodes.name)
        self.assertEqual('services', services.name)
        self.assertLessEqual({'uuid', 'created_at', 'updated_at', 'deleted',
                              'host', 'hypervisor_hostname'},
                             set(nodes.c.keys()))
        # Service._from_db_object reads every field of the object but the
        # two it computes.
        self.assertLessEqual(
            set(objects.Service.fields) - {'compute_node',
                                           'availability_zone'},
            set(services.c.keys()))

    def test_cell_engine(self):
        self.assertParameters(('use_slave', 'context'),
                              nova_compat.main_db_api.get_engine)
        with mock.patch.object(nova_compat.main_db_api,
                               'get_engine') as get_engine:
            self.assertIs(get_engine.return_value,
                          nova_compat.cell_engine('cctxt'))
        get_engine.assert_called_once_with(context='cctxt')

    def test_configure_databases(self):
        from nova.db.api import api as api_db_api
        self.assertParameters(('conf',), nova_compat.main_db_api.configure)
        self.assertParameters(('conf',), api_db_api.configure)

    def test_service_from_row(self):
        self.assertParameters(('context', 'service', 'db_service'),
                              objects.Service._from_db_object)
        row = {'id': 1, 'uuid': '1b0f8b2c-38e4-4d7e-9a1d-6b1a8d2b0c11',
               'host': 'h1', 'binary': 'nova-compute', 'topic': 'compute',
               'report_count': 3, 'disabled': False, 'disabled_reason': None,
               'last_seen_up': None, 'forced_down': False, 'version': 70,
               'created_at': None, 'updated_at': None, 'deleted_at': None,
               'deleted': 0}
        service = nova_compat.service_from_row(
            nova_context.get_admin_context(), row)
        self.assertIsInstance(service, objects.Service)
        self.assertEqual(('h1', 'nova-compute', 3),
                         (service.host, service.binary, service.report_count))
        self.assertEqual(set(), service.obj_what_changed())

    def test_request_spec_sentinel(self):
        sentinel = nova_compat.request_spec_sentinel()
        self.assertIs(object, type(sentinel))
        # select_destinations is wrapped by oslo.messaging's decorator,
        # which hides its signature: its source says the default.
        source = inspect.getsource(nova_manager.SchedulerManager)
        self.assertIn('spec_obj=_sentinel', source)

    def test_host_manager_helpers(self):
        self.assertParameters(('self', 'host'),
                              host_manager.HostManager._get_aggregates_info)
        self.assertParameters(('self', 'context', 'compute'),
                              host_manager.HostManager._get_instance_info)
        manager = mock.Mock(spec=host_manager.HostManager)
        nova_compat.host_aggregates(manager, 'h1')
        manager._get_aggregates_info.assert_called_once_with('h1')
        nova_compat.host_instances(manager, 'ctxt', 'compute')
        manager._get_instance_info.assert_called_once_with('ctxt', 'compute')

    def test_satisfies_cpu_policy(self):
        self.assertParameters(
            ('self', 'host_state', 'extra_specs', 'image_props'),
            numa_topology_filter.NUMATopologyFilter._satisfies_cpu_policy)

    def test_max_instances_per_host(self):
        for klass in (num_instances_filter.NumInstancesFilter,
                      num_instances_filter.AggregateNumInstancesFilter):
            self.assertParameters(('self', 'host_state', 'spec_obj'),
                                  klass._get_max_instances_per_host)
        self.flags(max_instances_per_host=7)
        self.assertEqual(7, nova_compat.max_instances_per_host(
            num_instances_filter.NumInstancesFilter(), None, None))

    def flags(self, **kwargs):
        import nova.conf
        conf = nova.conf.CONF
        for name, value in kwargs.items():
            conf.set_override(name, value, group='filter_scheduler')
            self.addCleanup(conf.clear_override, name,
                            group='filter_scheduler')

    def _resource_request(self):
        flavor = objects.Flavor(
            vcpus=2, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={'trait:HW_CPU_X86_AVX': 'required',
                         'trait:CUSTOM_X': 'forbidden'})
        spec = objects.RequestSpec(
            flavor=flavor, is_bfv=False, requested_resources=[],
            image=objects.ImageMeta(properties=objects.ImageMetaProps()))
        spec.root_required.add('COMPUTE_A')
        spec.root_forbidden.add('COMPUTE_B')
        return scheduler_utils.ResourceRequest.from_request_spec(spec)

    def test_the_placement_request_of_a_spec(self):
        self.assertLessEqual(
            {'_rg_by_id', '_limit', '_root_required', '_root_forbidden'},
            set(vars(scheduler_utils.ResourceRequest())))
        request = self._resource_request()
        groups = nova_compat.request_groups(request)
        self.assertEqual(1, len(groups))
        self.assertEqual({'VCPU': 2, 'MEMORY_MB': 512, 'DISK_GB': 1},
                         groups[0].resources)
        self.assertEqual({'HW_CPU_X86_AVX'}, groups[0].required_traits)
        self.assertEqual({'COMPUTE_A'}, nova_compat.root_required(request))
        self.assertEqual({'COMPUTE_B'}, nova_compat.root_forbidden(request))

    def test_the_query_limit(self):
        request = self._resource_request()
        self.assertIsInstance(nova_compat.query_limit(request), int)
        nova_compat.set_query_limit(request, 7)
        self.assertEqual(7, nova_compat.query_limit(request))
        self.assertIn('limit=7', request.to_querystring())
        nova_compat.set_query_limit(request, None)
        self.assertIsNone(nova_compat.query_limit(request))
        self.assertNotIn('limit=', request.to_querystring())

    def test_pci_pools(self):
        for name in ('_filter_pools_for_spec',) + nova_compat.PCI_POOL_FILTERS:
            self.assertParameters(('self', 'pools', 'request'),
                                  getattr(pci_stats.PciDeviceStats, name))
        # Nova's own order: _filter_pools applies them in this one.
        source = inspect.getsource(pci_stats.PciDeviceStats._filter_pools)
        at = [source.index(name + '(') for name in
              ('_filter_pools_for_spec',) + nova_compat.PCI_POOL_FILTERS]
        self.assertEqual(sorted(at), at)
        stats = pci_stats.PciDeviceStats(objects.NUMATopology(cells=[]))
        pools = [
            {'vendor_id': '8086', 'product_id': '1520', 'numa_node': 0,
             'count': 2, 'dev_type': 'type-VF', 'devices': []},
            {'vendor_id': '8086', 'product_id': '1521', 'numa_node': 0,
             'count': 1, 'dev_type': 'type-PF', 'devices': []},
            {'vendor_id': '8086', 'product_id': '1522', 'numa_node': 1,
             'count': 1, 'dev_type': 'vdpa', 'devices': []},
            {'vendor_id': '15b3', 'product_id': '1523', 'numa_node': 1,
             'count': 1, 'dev_type': 'type-VF', 'devices': []}]
        request = objects.InstancePCIRequest(
            count=1, spec=[{'vendor_id': '8086'}])
        matching, eligible = nova_compat.pci_pools(stats, pools, request)
        # The spec matches three; a request for no PF and no vdpa device
        # may take the VFs only.
        self.assertEqual(['1520', '1521', '1522'],
                         [p['product_id'] for p in matching])
        self.assertEqual(['1520'], [p['product_id'] for p in eligible])

    def test_numa_topology_json(self):
        self.assertParameters(('self',), objects.NUMATopology._to_json)
        topology = objects.NUMATopology(cells=[objects.NUMACell(
            id=0, cpuset={1, 2}, pcpuset=set(), memory=512, cpu_usage=0,
            memory_usage=0, siblings=[], mempages=[], pinned_cpus=set(),
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False),
            socket=0)])
        text = nova_compat.numa_topology_json(topology)
        json.loads(text)
        back = objects.NUMATopology.obj_from_db_obj(text)
        self.assertEqual(({1, 2}, 512),
                         (back.cells[0].cpuset, back.cells[0].memory))

    def test_the_driver_helpers(self):
        self.assertParameters(('inventory',),
                              virt_driver.ComputeDriver._get_allocation_ratios)
        self.assertParameters(
            (), virt_driver.ComputeDriver.
            _get_reserved_host_disk_gb_from_config)
        ratios = nova_compat.allocation_ratios(virt_driver.ComputeDriver, {})
        self.assertEqual({'VCPU', 'MEMORY_MB', 'DISK_GB'}, set(ratios))
        self.assertIsInstance(
            nova_compat.reserved_host_disk_gb(virt_driver.ComputeDriver), int)


class TestToozSeam(base.TestCase):
    """Each entry of :mod:`nova_sched_ext.compat.tooz`, against tooz."""

    URL = 'redis://127.0.0.1:1?ssl=false&timeout=5&db=3'

    def test_redis_client(self):
        driver = tooz_redis.RedisDriver
        self.assertEqual(
            ['parsed_url', 'options', 'default_socket_timeout'],
            list(inspect.signature(driver._make_client).parameters))
        self.assertIsInstance(driver.EXCLUDE_OPTIONS, (tuple, list,
                                                       frozenset, set))
        self.assertIsInstance(driver.CLIENT_DEFAULT_SOCKET_TO, int)
        # Made, not connected: nothing listens on port 1.
        client = tooz_compat.redis_client(self.URL,
                                          {'socket_connect_timeout': 2.0})
        self.addCleanup(client.close)
        self.assertIsInstance(client, redis.Redis)
        kwargs = client.connection_pool.connection_kwargs
        self.assertEqual(('127.0.0.1', 1, 3, 5, 2.0),
                         (kwargs['host'], kwargs['port'], kwargs['db'],
                          kwargs['socket_timeout'],
                          kwargs['socket_connect_timeout']))

    def test_the_factory_start_calls_is_wrapped(self):
        coordinator = tooz_coordination.get_coordinator(self.URL, b'member')
        made = []

        class Made(Exception):
            pass

        def wrap(client):
            made.append(client)
            raise Made()

        self.assertTrue(tooz_compat.wrap_client_factory(coordinator, wrap))
        # start() makes its client through the factory (then raises
        # before it connects).
        self.assertRaises(Made, coordinator.start, start_heart=False)
        self.assertEqual(1, len(made))
        self.assertIsInstance(made[0], redis.Redis)
        self.assertEqual(netutils.urlsplit(self.URL).port,
                         made[0].connection_pool.connection_kwargs['port'])

    def test_a_driver_without_the_factory_is_left_alone(self):
        coordinator = mock.Mock(spec=['start'])
        self.assertFalse(tooz_compat.wrap_client_factory(coordinator,
                                                         lambda c: c))


class TestReleaseSwitches(base.TestCase):
    """Each switch of the seam against the installed Nova, and the wrong one.

    A switch follows :func:`release.release`; each test runs the switch
    of every supported release against the installed Nova (forcing
    ``release()``) and checks that the installed release's passes and
    that a release that does it differently fails: the check can fail,
    and does for the newest release's behaviour forced on an older Nova.
    """

    def forced(self, major):
        return mock.patch.object(release, 'release', return_value=major)

    def assertOnlyLike(self, same, works):
        """``works(major)`` is True exactly for the releases in ``same``."""
        installed = release.installed()
        self.assertIn(installed, same)
        for major in release.SUPPORTED:
            with self.forced(major):
                self.assertEqual(major in same, works(major),
                                 'Nova %d, switch of %d' % (installed, major))

    def family(self, *groups):
        """The group of releases that includes the installed one."""
        for group in groups:
            if release.installed() in group:
                return group
        self.fail('Nova %d is in no group' % release.installed())

    def test_installed(self):
        self.assertEqual(int(importlib.metadata.version('nova').split(
            '.')[0]), release.installed())
        self.assertIn(release.installed(), release.SUPPORTED)
        self.assertIn('(Nova %d)' % release.installed(), release.name())

    def test_parse_args(self):
        from nova import config

        def works(major):
            with mock.patch.object(config, 'parse_args',
                                   autospec=True) as parse:
                try:
                    nova_compat.parse_args(['x'], prog='p', init_rpc=False)
                except TypeError:
                    return False
            kwargs = parse.call_args.kwargs
            # The prog is passed wherever Nova takes it.
            return kwargs.get('prog') == ('p' if release.installed() >= 33
                                          else None)
        self.assertOnlyLike(self.family((31, 32), (33, 34)), works)

    def test_reset_executors(self):
        from nova import utils
        if release.installed() >= 34:
            from nova import thread_pool_factory
            targets = [(thread_pool_factory, 'reset_all_executors')]
        elif release.installed() >= 32:
            targets = [(utils, 'destroy_scatter_gather_executor'),
                       (utils, 'destroy_default_executor')]
        else:
            targets = []

        def works(major):
            patches = [mock.patch.object(module, name, autospec=True)
                       for module, name in targets]
            mocks = [p.start() for p in patches]
            try:
                nova_compat.reset_executors()
            except (ImportError, AttributeError):
                return False
            finally:
                for p in patches:
                    p.stop()
            return all(m.call_count == 1 for m in mocks)
        self.assertOnlyLike(self.family((31,), (32, 33), (34,)), works)

    def test_manager_graceful_shutdown(self):
        manager = nova_manager.SchedulerManager
        has_hook = hasattr(manager, 'graceful_shutdown')
        self.assertEqual(release.installed() >= 33, has_hook)
        # The service calls it as the switch does, or not at all.
        source = inspect.getsource(importlib.import_module('nova.service'))
        self.assertEqual(release.installed() >= 34,
                         'manager.graceful_shutdown(timeout)' in source)
        self.assertEqual(release.installed() == 33,
                         'manager.graceful_shutdown()' in source)

        def works(major):
            parent = mock.create_autospec(manager, instance=True)
            try:
                nova_compat.manager_graceful_shutdown(parent, 30)
            except (TypeError, AttributeError):
                return False
            return parent.graceful_shutdown.called if has_hook else True
        self.assertOnlyLike(self.family((31, 32), (33,), (34,)), works)

    def test_monkey_patch(self):
        from nova import monkey_patch as nova_monkey_patch
        has_patch = hasattr(nova_monkey_patch, 'patch')
        self.assertEqual(release.installed() >= 32, has_patch)
        if has_patch:
            self.assertEqual(
                release.installed() >= 33, 'backend' in inspect.signature(
                    nova_monkey_patch.patch).parameters)

        def works(major):
            if not has_patch:
                try:
                    release.monkey_patch('threading')
                except AttributeError:
                    return False
                return True
            with mock.patch.object(nova_monkey_patch, 'patch',
                                   autospec=True) as patch:
                try:
                    release.monkey_patch('threading')
                except TypeError:
                    return False
            if release.installed() >= 33:
                # 33 and 34 services default to native threads.
                return patch.call_args == mock.call(backend='threading')
            return patch.call_args == mock.call()
        self.assertOnlyLike(self.family((31,), (32,), (33, 34)), works)
        self.assertRaises(ValueError, release.monkey_patch, 'asyncio')

    def test_monkey_patched(self):
        from eventlet import patcher
        expected = bool('eventlet' in sys.modules and
                        patcher.is_monkey_patched('thread'))
        self.assertEqual(expected, release.monkey_patched())
        if release.installed() == 31:
            # No is_patched in 31: the switch of 32 fails there.
            with self.forced(32):
                self.assertRaises(AttributeError, release.monkey_patched)

    def test_oslo_service_threading(self):
        version = tuple(int(part) for part in importlib.metadata.version(
            'oslo.service').split('.')[:2])
        self.assertEqual(version >= (4, 2), release.oslo_service_threading())
        if release.oslo_service_threading():
            from oslo_service import backend
            self.assertIn('THREADING', backend.BackendType.__members__)

    def test_keep_eventlet_out(self):
        with mock.patch.dict(os.environ, clear=False) as env:
            env.pop(release.DISABLE_EVENTLET, None)
            release.keep_eventlet_out()
            self.assertEqual(release.installed() <= 31,
                             release.eventlet_disabled())

    def test_quiet_until_logging(self):
        # Nova 33's warning at patch time must not be a bare stderr line
        # before a command's output, while logging is not set up ...
        logger = logging.getLogger('nse.test.monkey_patch')
        root = logging.getLogger()
        last_resort = mock.Mock(level=logging.WARNING)
        with mock.patch.object(root, 'handlers', []), \
                mock.patch.object(logging, 'lastResort', last_resort):
            with release.quiet_until_logging(logger.name):
                logger.warning('Service is starting with native threading')
            self.assertFalse(last_resort.handle.called)
            self.assertEqual([], logger.handlers)
            # ... and is printed as before outside the block
            logger.warning('outside')
            self.assertTrue(last_resort.handle.called)
        # once logging is set up, it goes where the logs go
        handler = logging.Handler()
        handler.emit = mock.Mock()
        with mock.patch.object(root, 'handlers', [handler]):
            with release.quiet_until_logging(logger.name):
                logger.warning('Service is starting with native threading')
        self.assertTrue(handler.emit.called)

    def test_native_threads(self):
        # 31 and 32 patch only with eventlet: the switch keeps it out
        # before their monkey_patch runs; 33 and 34 take the backend.
        for major, switched in ((31, True), (32, True), (33, False),
                                (34, False)):
            with mock.patch.dict(os.environ, clear=False) as env, \
                    self.forced(major), \
                    mock.patch.object(release, 'monkey_patch',
                                      autospec=True) as patch, \
                    mock.patch.object(release, 'monkey_patched',
                                      return_value=False):
                env.pop(release.DISABLE_EVENTLET, None)
                self.assertTrue(release.native_threads())
                self.assertEqual(switched, release.eventlet_disabled(),
                                 major)
                patch.assert_called_once_with('threading')
        # eventlet patched already: nothing undoes it
        with mock.patch.dict(os.environ, clear=False), \
                mock.patch.object(release, 'monkey_patch', autospec=True), \
                mock.patch.object(release, 'monkey_patched',
                                  return_value=True):
            self.assertFalse(release.native_threads())

    def _numa_constraints(self, extra_specs):
        from nova.virt import hardware
        flavor = objects.Flavor(vcpus=2, memory_mb=1024, name='f',
                                extra_specs=extra_specs)
        return hardware.numa_get_constraints(
            flavor, objects.ImageMeta(properties=objects.ImageMetaProps()))

    def test_constraint_refusals(self):
        from nova import exception as nova_exception
        # Locked memory without a page size: refused by every release,
        # an Invalid only from 34.
        try:
            self._numa_constraints({'hw:locked_memory': 'true'})
        except nova_compat.CONSTRAINT_REFUSALS as exc:
            self.assertEqual(release.installed() >= 34,
                             isinstance(exc, nova_exception.Invalid))
        else:
            self.fail('hw:locked_memory without hw:mem_page_size passed')
        # Memory encryption without a UEFI image: 34 refuses it here,
        # with an exception that is no Invalid; 31 to 33 build the
        # topology (none: nothing asks for one).
        try:
            topology = self._numa_constraints({'hw:mem_encryption': 'true'})
        except nova_compat.CONSTRAINT_REFUSALS as exc:
            self.assertGreaterEqual(release.installed(), 34)
            self.assertNotIsInstance(exc, nova_exception.Invalid)
            self.assertIsInstance(exc, nova_exception.FlavorImageConflict)
        else:
            self.assertLess(release.installed(), 34)
            self.assertIsNone(topology)
