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

"""Discovery of plugin classes through stevedore entry-point namespaces.

Every plugin kind has its own namespace (``nova_sched_ext.filters``,
``nova_sched_ext.weighers``, ...).  Any installed distribution, this one or a
third party's, adds a plugin by declaring an entry point there; nothing in
this package has to change.

Two ways of loading, for two kinds of plugins:

- :func:`load_classes`: every plugin of a namespace (filters, weighers).
  Nova builds its name -> class map from what it returns, once at
  scheduler start, and the deployer then picks by name in ``nova.conf``.
  One broken plugin must not stop the scheduler from starting, so a plugin
  that fails to import or is not of the expected kind is logged and
  skipped instead of raising.
- :func:`load_named`: the plugins an option names, in its order (request
  wrappers, victim strategies).  The deployer asked for each of them, and
  running without one (without the deployment-set lock, say) would be
  unsafe, so a name that is unknown, fails to load or is not of the
  expected kind raises :class:`PluginLoadError`, which stops the service
  at start with one message naming the option, the entry point and the
  namespace.
"""

import importlib.metadata

from oslo_log import log as logging
from stevedore import extension
from stevedore import named

from nova_sched_ext import exception as sched_ext_exception

LOG = logging.getLogger(__name__)

#: the entry-point namespace of the scheduler drivers (managers)
DRIVER_NAMESPACE = 'nova_sched_ext.scheduler_drivers'


def _log_skipped(namespace, entry_point, why):
    LOG.error('Skipping plugin %(name)s = %(target)s of entry point '
              'namespace %(ns)s: %(why)s',
              {'name': entry_point.name, 'target': entry_point.value,
               'ns': namespace, 'why': why})


def _log_load_failure(manager, entry_point, exc):
    _log_skipped(manager.namespace, entry_point,
                 'it failed to load: %s' % exc)


def load_classes(namespace, base_class):
    """Return the classes registered in an entry-point namespace.

    :param namespace: the stevedore namespace, e.g. ``nova_sched_ext.filters``
    :param base_class: the class every plugin must derive from (Nova's
        ``BaseHostFilter``, ``BaseHostWeigher``, ...); other objects are
        logged and skipped.
    :returns: a list of classes, ordered by entry-point name, each class once.
    """
    manager = extension.ExtensionManager(
        namespace,
        invoke_on_load=False,
        on_load_failure_callback=_log_load_failure)

    classes = []
    by_class_name = {}
    for ext in sorted(manager, key=lambda ext: ext.name):
        plugin = ext.plugin
        if not (isinstance(plugin, type) and issubclass(plugin, base_class)):
            _log_skipped(namespace, ext.entry_point,
                         'it is not a subclass of %s.%s'
                         % (base_class.__module__, base_class.__name__))
            continue
        other = by_class_name.get(plugin.__name__)
        if other is plugin:
            continue
        if other is not None:
            # Nova keys its plugin map by bare class name: the later class
            # would silently replace the earlier one.
            LOG.warning('Plugins %(a)s.%(n)s and %(b)s.%(n)s in entry point '
                        'namespace %(ns)s share the class name %(n)s; Nova '
                        'can only use one of them.',
                        {'a': other.__module__, 'b': plugin.__module__,
                         'n': plugin.__name__, 'ns': namespace})
        by_class_name[plugin.__name__] = plugin
        classes.append(plugin)
    return classes


class PluginLoadError(ValueError, sched_ext_exception.UserFacingError):
    """An option names a plugin that cannot be used; the message says why."""


def load_named(namespace, names, base_class, option=None):
    """Return the classes registered under ``names``, in the order given.

    :param namespace: the stevedore namespace, e.g.
        ``nova_sched_ext.request_wrappers``
    :param names: entry-point names, as the deployer wrote them
    :param base_class: the class every plugin must derive from
    :param option: the option the names come from, e.g. ``[nova_sched_ext]
        request_wrappers``, for the error message
    :returns: a list of classes, one per name
    :raises PluginLoadError: a name is given twice, is not registered, is
        registered twice, fails to import or is not a subclass of
        ``base_class``; the message lists every such problem
    """
    names = list(names)
    label = option or 'the configuration'
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise PluginLoadError(
            '%s names %s more than once' % (label, ', '.join(repeated)))

    failed = {}

    def remember_failure(manager, entry_point, exc):
        failed[entry_point.name] = exc

    manager = named.NamedExtensionManager(
        namespace, names, invoke_on_load=False, name_order=True,
        on_load_failure_callback=remember_failure,
        on_missing_entrypoints_callback=None)
    registered = {}
    for entry_point in manager.list_entry_points():
        registered.setdefault(entry_point.name, set()).add(entry_point.value)

    unknown = [name for name in names if name not in registered]
    problems = []
    if unknown:
        problems.append(
            '%s %s not registered in the entry-point namespace %s '
            '(registered: %s)'
            % (', '.join(map(repr, unknown)),
               'is' if len(unknown) == 1 else 'are', namespace,
               ', '.join(sorted(registered)) or
               'none; is the distribution that provides them installed?'))
    classes = []
    for name in names:
        targets = registered.get(name)
        if not targets:
            continue
        if len(targets) > 1:
            problems.append(
                '%r is registered more than once in the entry-point '
                'namespace %s (%s); uninstall all but one'
                % (name, namespace, ', '.join(sorted(targets))))
            continue
        target, = targets
        if name in failed:
            exc = failed[name]
            # One line, whatever the import error says.
            problems.append(
                'the entry point %s = %s of namespace %s failed to load: '
                '%s: %s' % (name, target, namespace, type(exc).__name__,
                            ' '.join(str(exc).split())))
            continue
        plugin = manager[name].plugin
        if not (isinstance(plugin, type) and issubclass(plugin, base_class)):
            problems.append(
                'the entry point %s = %s of namespace %s is not a subclass '
                'of %s.%s' % (name, target, namespace, base_class.__module__,
                              base_class.__qualname__))
            continue
        classes.append(plugin)
    if problems:
        raise PluginLoadError('%s cannot be used: %s'
                              % (label, '; '.join(problems)))
    return classes


def registered_names(namespace):
    """The sorted entry-point names of a namespace, without loading them."""
    return sorted({entry_point.name for entry_point in
                   importlib.metadata.entry_points(group=namespace)})


class UnknownDriver(PluginLoadError):
    """``[nova_sched_ext] scheduler_driver`` names no registered driver."""


def driver_class_path(name):
    """The class path of the scheduler manager registered as driver ``name``.

    Unlike filters and weighers, a driver is not imported here: Nova's
    service imports its manager from the class path.

    :raises UnknownDriver: no such entry point, or one that is not a class
    """
    found = importlib.metadata.entry_points(group=DRIVER_NAMESPACE)
    for entry_point in found:
        if entry_point.name == name:
            module, _, attr = entry_point.value.partition(':')
            if not attr or ' ' in attr.strip():
                break
            return '%s.%s' % (module.strip(), attr.strip())
    raise UnknownDriver(
        '[nova_sched_ext] scheduler_driver = %r is not a scheduler driver; '
        'known: %s' % (name, ', '.join(sorted(ep.name for ep in found))
                       or 'none (is nova-sched-ext installed?)'))
