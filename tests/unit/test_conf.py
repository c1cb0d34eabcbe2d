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

"""The conf package: one module per group, the old paths, the renamed option.

The sample config and the configuration reference are checked in
test_config_options and test_registration; the import rules in
test_layering.
"""

import importlib
import os
import sys
import warnings

import fixtures
from nova.conf import utils as nova_conf_utils
from oslo_config import cfg

from nova_sched_ext import conf
from nova_sched_ext.conf import capacity
from nova_sched_ext.conf import checks
from nova_sched_ext.conf import defrag
from nova_sched_ext.conf import evictor
from nova_sched_ext.conf import fake_virt
from nova_sched_ext.conf import opts
from nova_sched_ext.conf import scheduler
from nova_sched_ext.conf import utils
from tests import base

#: the modules the options lived in, and what their names are now
OLD_MODULES = {
    'nova_sched_ext.preemption.conf': {
        'list_opts': opts.list_preemption_opts,
        'EVICTOR_GROUP_NAME': evictor.GROUP_NAME,
        'evictor_group': evictor.evictor_group,
        'ACTION_SHELVE_OFFLOAD': scheduler.ACTION_SHELVE_OFFLOAD,
        'ALL_OPTS': scheduler.preemption_opts,
        'service_credential_opts': utils.service_credential_opts},
    'nova_sched_ext.capacity.conf': {
        'list_opts': opts.list_capacity_opts,
        'GROUP_NAME': capacity.GROUP_NAME,
        'FIT_ENGINE': capacity.FIT_ENGINE,
        'count_opts': capacity.count_opts},
    'nova_sched_ext.capacity.api_conf': {
        'list_opts': opts.list_capacity_api_opts,
        'SCOPES': capacity.SCOPES,
        'SERVICE_TYPE': capacity.SERVICE_TYPE,
        'capacity_group': capacity.capacity_group,
        'ALL_OPTS': capacity.api_opts + capacity.exporter_opts},
    'nova_sched_ext.defrag.conf': {
        'list_opts': opts.list_defrag_opts,
        'GROUP_NAME': defrag.GROUP_NAME,
        'executor_opts': defrag.executor_opts},
    'nova_sched_ext.virt.conf': {
        'list_opts': opts.list_fake_virt_opts,
        'GROUP_NAME': fake_virt.GROUP_NAME,
        'fake_virt_opts': fake_virt.fake_virt_opts},
}

#: the namespaces' functions, which setup.cfg's entry points name
NAMESPACE_FUNCTIONS = (opts.list_scheduler_opts, opts.list_preemption_opts,
                       opts.list_capacity_opts, opts.list_capacity_api_opts,
                       opts.list_defrag_opts, opts.list_fake_virt_opts)


def _dests(listed):
    return [(getattr(group, 'name', group), [opt.dest for opt in group_opts])
            for group, group_opts in listed]


class TestOneModulePerGroup(base.TestCase):

    def test_the_namespaces_list_each_option_of_a_group_once(self):
        # The namespaces split two groups as the old modules did; together
        # they list every registered option of every group, once.
        listed = {}
        for function in NAMESPACE_FUNCTIONS:
            for group, names in _dests(function()):
                listed.setdefault(group, []).extend(names)
        whole = {group: names for group, names in _dests(opts.list_opts())}
        self.assertEqual(set(whole), set(listed))
        for group, names in whole.items():
            # (the password plugins' options appear under both plugins)
            self.assertEqual(sorted(names), sorted(listed[group]), group)

    def test_each_module_registers_its_group(self):
        for module in (scheduler, evictor, capacity, defrag, fake_virt):
            fresh = cfg.ConfigOpts()
            # What a default such as $state_path/... refers to.
            fresh.register_opt(cfg.StrOpt('state_path', default='/state'))
            module.register_opts(fresh)
            # Twice is the same as once.
            module.register_opts(fresh)
            fresh([])
            ((group, listed),) = module.list_opts()
            for opt in listed:
                if opt.dest in fresh[group.name]:
                    expected = opt.default
                    if isinstance(expected, str):
                        expected = expected.replace('$state_path', '/state')
                    self.assertEqual(expected, fresh[group.name][opt.dest])
            self.assertIn(group.name, list(fresh))

    def test_the_package_registered_every_group(self):
        for group, _listed in opts.list_opts():
            self.assertIn(group.name, list(conf.CONF))


class TestServiceCredentials(base.TestCase):
    """The keystoneauth sections are Nova's, without importing Nova."""

    def registered(self, register, text=''):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('[section]\n' + text)
        fresh = cfg.ConfigOpts()
        register(fresh)
        fresh(['--config-file', path])
        return {name: fresh.section[name] for name in fresh.section}

    def test_the_options_are_nova_conf_utils(self):
        for text in ('', 'version = 2.1\nmin_version = 2\nmax_version = 3\n'
                         'valid_interfaces = admin\ntimeout = 5\n'):
            ours = self.registered(
                lambda c: utils.register_service_credentials(
                    c, 'section', 'compute'), text)
            nova = self.registered(
                lambda c: nova_conf_utils.register_ksa_opts(
                    c, 'section', 'compute'), text)
            self.assertEqual(nova, ours)
            self.assertIsNone(ours['version'])

    def test_the_listed_options_are_nova_conf_utils(self):
        def described(opts_):
            return [(opt.dest, type(opt), opt.default,
                     [(d.group, d.name) for d in opt.deprecated_opts])
                    for opt in opts_]
        self.assertEqual(
            described(nova_conf_utils.get_ksa_adapter_opts('compute')),
            described(utils.adapter_opts('compute')))


class TestCoordinationUrl(base.TestCase):
    """The coordination backend's option, and the name it had."""

    def read(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('[nova_sched_ext]\n' + text)
        fresh = cfg.ConfigOpts()
        scheduler.register_opts(fresh)
        fresh(['--config-file', path])
        return fresh.nova_sched_ext.coordination_url

    def test_the_old_name_is_read(self):
        self.assertEqual('redis://h:6379',
                         self.read('deployment_set_lock_url = '
                                   'redis://h:6379\n'))

    def test_the_new_name_wins(self):
        self.assertEqual('redis://new:6379', self.read(
            'deployment_set_lock_url = redis://old:6379\n'
            'coordination_url = redis://new:6379\n'))

    def test_unset_is_the_file_backend(self):
        self.assertIsNone(self.read(''))


class TestOldPaths(base.TestCase):
    """The old modules and names work, and warn."""

    def import_afresh(self, name):
        parent, _dot, leaf = name.rpartition('.')
        old = sys.modules.pop(name, None)
        package = importlib.import_module(parent)
        had = getattr(package, leaf, None)

        def restore():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
            if had is not None:
                setattr(package, leaf, had)
        self.addCleanup(restore)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            module = importlib.import_module(name)
        return module, [w for w in caught
                        if issubclass(w.category, DeprecationWarning)]

    def test_the_old_modules_warn_and_keep_their_names(self):
        for name, names in OLD_MODULES.items():
            module, caught = self.import_afresh(name)
            self.assertEqual(1, len(caught), name)
            self.assertIn(name, str(caught[0].message))
            self.assertIn('nova_sched_ext.conf', str(caught[0].message))
            for old, new in names.items():
                self.assertEqual(new, getattr(module, old),
                                 '%s.%s' % (name, old))
            self.assertIs(cfg.CONF, module.CONF)

    def test_the_old_module_names_of_the_package_warn(self):
        for old, new in (('list_opts', opts.list_scheduler_opts),
                         ('check_values', checks.check_values),
                         ('InvalidOptionValue', checks.InvalidOptionValue),
                         ('ALL_OPTS', scheduler.SCHEDULER_OPTS),
                         ('FIT_BACKEND_ENV', scheduler.FIT_BACKEND_ENV),
                         ('nova_sched_ext_group',
                          scheduler.nova_sched_ext_group)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter('always')
                self.assertEqual(new, getattr(conf, old))
            self.assertEqual([DeprecationWarning],
                             [w.category for w in caught], old)
            self.assertIn('nova_sched_ext.conf.%s' % old,
                          str(caught[0].message))

    def test_an_unknown_name_is_an_attribute_error(self):
        self.assertRaises(AttributeError, getattr, conf, 'no_such_name')
        self.assertFalse(hasattr(conf, 'no_such_name'))
