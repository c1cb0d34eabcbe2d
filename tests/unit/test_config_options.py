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

"""Every option of the package is in the sample config and the docs.

The options the package registers on ``nova.conf`` (its groups are named
``nova_sched_ext...``) must each be listed by a ``list_opts`` function of
an ``oslo.config.opts`` entry point in ``setup.cfg``; every such namespace
must be in a config generator's file (nova.conf's, or watcher.conf's for
the Watcher strategy) and on the configuration reference page.  setup.cfg
is read as a file, not through the installed metadata, so a namespace
added there counts before the package is installed again.
"""

import configparser
import importlib
import os
import re

import fixtures
from oslo_config import cfg
from oslo_config import types

import nova_sched_ext
from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PACKAGE_DIR = os.path.dirname(os.path.abspath(nova_sched_ext.__file__))
GENERATOR_CONF = os.path.join(REPO, 'etc',
                              'nova-sched-ext-config-generator.conf')
#: watcher.conf's options (the Watcher strategy's): a sample of their own,
#: as they are not nova.conf's
WATCHER_GENERATOR_CONF = os.path.join(
    REPO, 'etc', 'nova-sched-ext-watcher-config-generator.conf')
REFERENCE_PAGE = os.path.join(REPO, 'doc', 'source', 'index.rst')

#: the package's groups in nova.conf
OWN_GROUP_PREFIX = 'nova_sched_ext'

#: a module-level call that registers options on the global CONF:
#: ``register_opts(CONF)``, ``conf.register_opts(CONF)``,
#: ``CONF.register_opts(...)``
REGISTERS_ON_CONF = re.compile(
    r'^(?:[\w.]*register\w*\((?:cfg\.|nova\.conf\.)?CONF\b'
    r'|(?:cfg\.)?CONF\.register_\w+\()', re.MULTILINE)

#: tempest's own configuration (tempest.conf), registered by tempest
NOT_NOVA_CONF = ('nova_sched_ext.tempest_plugin',)

#: placeholders that Nova's ``register_ksa_opts`` registers for the adapter
#: version options, which no one can set (the code knows the API versions
#: it needs), and that Nova lists nowhere either
UNSETTABLE = {(group, name)
              for group in ('nova_sched_ext_evictor', 'nova_sched_ext_defrag')
              for name in ('version', 'min_version', 'max_version')}


def config_namespaces():
    """{namespace: 'module:function'} of setup.cfg's oslo.config.opts."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, 'setup.cfg'))
    entries = {}
    for line in parser['entry_points']['oslo.config.opts'].splitlines():
        if line.strip():
            name, target = (part.strip() for part in line.split('=', 1))
            entries[name] = target
    return entries


#: floating-point options of keystoneauth's session and adapter, which the
#: package's service-credential sections list as Nova's [placement] does:
#: keystoneauth defines and reads them, not the package
KEYSTONEAUTH_FLOATS = {(group, name)
                       for group in ('nova_sched_ext_evictor',
                                     'nova_sched_ext_defrag')
                       for name in ('timeout', 'connect_retry_delay',
                                    'status_code_retry_delay')}


def listed_groups():
    """[(namespace, group name, [opts])] of setup.cfg's list_opts."""
    found = []
    for namespace, target in sorted(config_namespaces().items()):
        module_name, function = target.split(':')
        list_opts = getattr(importlib.import_module(module_name), function)
        for group, opts in list_opts():
            found.append((namespace, getattr(group, 'name', group) or
                          'DEFAULT', list(opts)))
    return found


def listed_options():
    """{(group, option)} that the list_opts functions of setup.cfg list."""
    listed = set()
    for target in config_namespaces().values():
        module_name, function = target.split(':')
        list_opts = getattr(importlib.import_module(module_name), function)
        for group, opts in list_opts():
            group_name = getattr(group, 'name', group) or 'DEFAULT'
            listed.update((group_name, opt.dest) for opt in opts)
    return listed


def modules_that_register_options():
    """The package's modules that register options on CONF on import."""
    for directory, _dirs, files in os.walk(PACKAGE_DIR):
        for filename in sorted(files):
            if not filename.endswith('.py'):
                continue
            path = os.path.join(directory, filename)
            relative = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))
            module = relative[:-len('.py')].replace(os.sep, '.')
            module = module[:-len('.__init__')] if module.endswith(
                '.__init__') else module
            if module.startswith(NOT_NOVA_CONF):
                continue
            with open(path, encoding='utf-8') as f:
                if REGISTERS_ON_CONF.search(f.read()):
                    yield module


def registered_options():
    """{(group, option)} registered on CONF in the package's groups."""
    for module in modules_that_register_options():
        importlib.import_module(module)
    registered = set()
    for name in cfg.CONF:
        if not name.startswith(OWN_GROUP_PREFIX):
            continue
        group = cfg.CONF[name]
        if isinstance(group, cfg.ConfigOpts.GroupAttr):
            registered.update((name, opt) for opt in group)
    return registered


class TestEveryOptionIsListed(base.TestCase):

    def test_the_modules_that_register_options_are_found(self):
        # One place registers them all, as nova/conf/__init__.py does.
        self.assertEqual({'nova_sched_ext.conf'},
                         set(modules_that_register_options()))

    def test_every_registered_option_is_in_a_namespace(self):
        registered = registered_options()
        # The package's own groups, at least, are there to compare.
        groups = {group for group, _opt in registered}
        for group in ('nova_sched_ext', 'nova_sched_ext_evictor',
                      'nova_sched_ext_fake_virt'):
            self.assertIn(group, groups)
        missing = sorted(registered - listed_options() - UNSETTABLE)
        self.assertEqual(
            [], missing,
            'registered on nova.conf but in no oslo.config.opts namespace '
            'of setup.cfg (so missing from the sample config and the '
            'configuration reference): %s' % ', '.join(
                '[%s] %s' % option for option in missing))

    def test_the_generator_reads_every_namespace(self):
        namespaces = []
        for path in (GENERATOR_CONF, WATCHER_GENERATOR_CONF):
            with open(path) as f:
                namespaces += [line.split('=', 1)[1].strip()
                               for line in f if line.startswith('namespace')]
        self.assertEqual(sorted(config_namespaces()), sorted(namespaces))

    def test_the_configuration_reference_shows_every_namespace(self):
        with open(REFERENCE_PAGE) as f:
            page = f.read()
        directive = re.search(r'^\.\. show-options::\n((?:\n|   .*\n)+)',
                              page, re.MULTILINE)
        self.assertIsNotNone(directive, 'no show-options directive')
        shown = [line.strip() for line in directive.group(1).splitlines()
                 if line.strip() and not line.strip().startswith(':')]
        self.assertEqual(sorted(config_namespaces()), sorted(shown))


class TestFloatOptionsAreFinite(base.TestCase):
    """No floating-point option of the package takes nan or infinity.

    ``float()`` reads ``nan`` and ``inf``, and ``nan`` passes every
    ``min``/``max`` check: a multiplier of ``nan`` makes every host weigh
    ``nan``, an interval of ``inf`` never ends.
    """

    NOT_FINITE = ('nan', 'NaN', 'inf', '-inf', 'Infinity', '1e999')

    def float_options(self):
        found = [(namespace, group, opt)
                 for namespace, group, opts in listed_groups()
                 for opt in opts if isinstance(opt.type, types.Float)
                 and (group, opt.dest) not in KEYSTONEAUTH_FLOATS]
        # The walk found the package's options, not an empty list.
        names = {(group, opt.dest) for _ns, group, opt in found}
        self.assertIn(('nova_sched_ext', 'numa_slot_weight_multiplier'),
                      names)
        self.assertIn(('nova_sched_ext', 'preemption_poll_interval'), names)
        self.assertIn(('nova_sched_ext_defrag', 'poll_interval'), names)
        return found

    def test_every_float_option_refuses_what_is_not_finite(self):
        directory = self.useFixture(fixtures.TempDir()).path
        for namespace, group, opt in self.float_options():
            for text in self.NOT_FINITE:
                conf = cfg.ConfigOpts()
                conf.register_opt(opt, group=group)
                path = os.path.join(directory, 'x.conf')
                with open(path, 'w') as f:
                    f.write('[%s]\n%s = %s\n' % (group, opt.dest, text))
                conf(['--config-file', path])
                where = '%s: [%s] %s = %s' % (namespace, group, opt.dest,
                                              text)
                try:
                    value = conf[group][opt.dest]
                except cfg.ConfigFileValueError:
                    pass
                else:
                    self.fail('%s accepted as %r' % (where, value))
            # A finite value within its bounds still counts.
            self.assertEqual(opt.default, opt.type(str(opt.default)))
