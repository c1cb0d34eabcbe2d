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

"""Scheduler settings for the simulator: its defaults and named presets.

Everything is a ``nova.conf`` option, set with oslo.config, so a preset is
exactly what a deployer would write in ``nova.conf``:

* :func:`set_simulator_defaults` changes *defaults* only (a
  ``--config-file`` still wins): Nova's default filters with
  ``NUMAFitFilter, NUMATopologyFilter`` appended, as a deployer enables
  NUMA-aware scheduling with this package.
* a :class:`Policy` preset *overrides* the weigher options:
  ``nova-default`` (all of Nova's weighers, every multiplier at Nova's
  default), ``best-fit`` (the same with negative RAM and CPU multipliers:
  stacking) and ``numa-slot`` (Nova's weighers plus NUMASlotWeigher; the
  weigher module may publish the other multipliers it recommends as
  ``RECOMMENDED_SETTINGS``, a ``{'group.option': value}`` mapping; until it
  does, the RAM and CPU multipliers are 0.0).
"""

import dataclasses
import importlib

import nova.conf
from oslo_config import cfg

from nova_sched_ext import exception as sched_ext_exception

CONF = nova.conf.CONF

NOVA_WEIGHERS = 'nova.scheduler.weights.all_weighers'
NUMA_SLOT_WEIGHER = 'nova_sched_ext.weighers.numa_slot.NUMASlotWeigher'

SIM_AVAILABLE_FILTERS = [
    'nova.scheduler.filters.all_filters',
    'nova_sched_ext.filters.all_filters',
    # Named by path too: all_filters() finds plugins through entry points,
    # which exist only once the package is installed.
    'nova_sched_ext.filters.numa_fit.NUMAFitFilter',
]
SIM_ENABLED_FILTERS = [
    'ComputeFilter',
    'ComputeCapabilitiesFilter',
    'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter',
    'ServerGroupAffinityFilter',
    # NUMAFitFilter answers in C for all hosts at once what
    # NUMATopologyFilter then confirms in Python for the survivors only.
    'NUMAFitFilter',
    'NUMATopologyFilter',
]


class PolicyError(sched_ext_exception.NovaSchedExtError):
    """A preset that cannot be used here; the message says why."""


def set_simulator_defaults(conf=CONF):
    conf.set_default('available_filters', SIM_AVAILABLE_FILTERS,
                     group='filter_scheduler')
    conf.set_default('enabled_filters', SIM_ENABLED_FILTERS,
                     group='filter_scheduler')


def multiplier_defaults(conf=CONF):
    """``{'filter_scheduler.X_weight_multiplier': Nova's default}``."""
    result = {}
    for group in ('filter_scheduler', 'metrics'):
        for name in conf[group]:
            if name.endswith('weight_multiplier'):
                opt = conf._get_opt_info(name, group)['opt']
                result['%s.%s' % (group, name)] = opt.default
    return result


@dataclasses.dataclass(frozen=True)
class Policy:
    name: str
    description: str
    weight_classes: tuple
    multipliers: tuple = ()
    # a class that must import, and what to say if it does not
    requires: str = None
    recommended_from: str = None

    def settings(self, conf=CONF):
        """``{'group.option': value}`` this preset sets."""
        if self.requires:
            module_name, _, class_name = self.requires.rpartition('.')
            try:
                module = importlib.import_module(module_name)
                getattr(module, class_name)
            except (ImportError, AttributeError) as exc:
                raise PolicyError(
                    'policy %s needs %s, which cannot be imported (%s); it '
                    'is not available in this tree yet' % (
                        self.name, self.requires, exc))
        values = multiplier_defaults(conf)
        values['filter_scheduler.weight_classes'] = list(self.weight_classes)
        values.update(dict(self.multipliers))
        if self.recommended_from:
            module = importlib.import_module(self.recommended_from)
            values.update(getattr(module, 'RECOMMENDED_SETTINGS', {}) or {})
        return values


PRESETS = {p.name: p for p in (
    Policy('nova-default',
           "Nova's default weighers and multipliers (spreading).",
           (NOVA_WEIGHERS,)),
    Policy('best-fit',
           "Nova's weighers with ram_weight_multiplier and "
           'cpu_weight_multiplier at -1.0 (stacking).',
           (NOVA_WEIGHERS,),
           (('filter_scheduler.ram_weight_multiplier', -1.0),
            ('filter_scheduler.cpu_weight_multiplier', -1.0))),
    # Until the weigher module publishes RECOMMENDED_SETTINGS, RAM and CPU
    # spreading, which works against slot protection, is switched off.
    Policy('numa-slot',
           "Nova's weighers plus NUMASlotWeigher, others as the weigher "
           'module recommends (default: RAM and CPU weighers at 0.0).',
           (NOVA_WEIGHERS, NUMA_SLOT_WEIGHER),
           (('filter_scheduler.ram_weight_multiplier', 0.0),
            ('filter_scheduler.cpu_weight_multiplier', 0.0)),
           requires=NUMA_SLOT_WEIGHER,
           recommended_from='nova_sched_ext.weighers.numa_slot'),
)}


def parse_setting(text):
    """``group.option=value`` -> ``('group.option', 'value')``."""
    key, sep, value = text.partition('=')
    group, dot, name = key.strip().rpartition('.')
    if not sep or not dot or not group or not name:
        raise PolicyError('setting %r is not of the form group.option=value'
                          % text)
    return '%s.%s' % (group, name), value.strip()


class Overrides(object):
    """Apply ``{'group.option': value}`` as oslo.config overrides.

    Values given as strings are parsed by the option's own type (lists are
    comma-separated, as in ``nova.conf``).  Used as a context manager, the
    overrides are cleared again on exit.
    """

    def __init__(self, values, conf=CONF):
        self.values = dict(values)
        self.conf = conf
        self._applied = []

    def _opt(self, key):
        group, _, name = key.rpartition('.')
        if group == 'DEFAULT':
            group = None
        try:
            info = self.conf._get_opt_info(name, group)
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            raise PolicyError('unknown option %s (is the module that '
                              'registers it imported?)' % key)
        return group, name, info['opt']

    def apply(self):
        for key, value in self.values.items():
            group, name, opt = self._opt(key)
            if isinstance(value, str):
                try:
                    value = opt.type(value)
                except (ValueError, TypeError) as exc:
                    raise PolicyError('bad value %r for %s: %s'
                                      % (value, key, exc))
            self.conf.set_override(name, value, group=group)
            self._applied.append((name, group))
        return self

    def clear(self):
        for name, group in reversed(self._applied):
            self.conf.clear_override(name, group=group)
        self._applied = []

    def __enter__(self):
        return self.apply()

    def __exit__(self, *exc_info):
        self.clear()
