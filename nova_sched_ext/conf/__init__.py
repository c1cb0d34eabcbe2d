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

"""The options of nova-sched-ext in ``nova.conf``, registered here.

One module per option group, as in Nova's ``nova.conf`` package:

* :mod:`~nova_sched_ext.conf.scheduler`: ``[nova_sched_ext]``, the
  scheduler's (filters, weighers, fit engine, deployment sets, the
  coordination backend, nova-sched-ext-scheduler, preemption);
* :mod:`~nova_sched_ext.conf.evictor`: ``[nova_sched_ext_evictor]``, the
  credentials the preemption driver evicts with;
* :mod:`~nova_sched_ext.conf.capacity`: ``[nova_sched_ext_capacity]``, the
  capacity count, its API and its exporter;
* :mod:`~nova_sched_ext.conf.defrag`: ``[nova_sched_ext_defrag]``, the
  credentials and waits of ``nova-sched-ext-defrag apply``;
* :mod:`~nova_sched_ext.conf.fake_virt`: ``[nova_sched_ext_fake_virt]``,
  the fake NUMA virt driver of test clouds.

Each has ``register_opts(conf)`` and ``list_opts()``; this module registers
them all on the global ``CONF``, and nothing else registers them.  Code
that reads an option imports this package::

    from nova_sched_ext import conf

    CONF = conf.CONF

:mod:`~nova_sched_ext.conf.opts` feeds oslo-config-generator,
:mod:`~nova_sched_ext.conf.checks` checks values at a service's start and
:mod:`~nova_sched_ext.conf.types` holds option types.  The package imports
oslo.config and keystoneauth only, never Nova: the broker, which sits above
Nova, reads the capacity API's constants here.

The Watcher strategy's options are not here: they live in watcher.conf,
Watcher's loader registers them from the strategy, and the strategy runs
in Watcher's decision engine, which must not get nova.conf's groups
(:mod:`nova_sched_ext.defrag.watcher_conf`).
"""

import importlib
import warnings

from oslo_config import cfg

from nova_sched_ext.conf import capacity
from nova_sched_ext.conf import defrag
from nova_sched_ext.conf import evictor
from nova_sched_ext.conf import fake_virt
from nova_sched_ext.conf import scheduler

CONF = cfg.CONF

scheduler.register_opts(CONF)
evictor.register_opts(CONF)
capacity.register_opts(CONF)
defrag.register_opts(CONF)
fake_virt.register_opts(CONF)

#: The names of the single module this package replaces, and where they
#: went: ``{old name: (module, name there)}``.
_MOVED = dict(
    {name: ('scheduler', name) for name in (
        'GROUP_NAME', 'nova_sched_ext_group', 'FIT_BACKEND_ENV', 'fit_opts',
        'numa_fit_filter_opts', 'numa_slot_weigher_opts',
        'deployment_set_opts', 'scheduler_driver_opts',
        'request_wrapper_opts', 'host_state_opts', 'candidate_limit_opts',
        'register_opts')},
    ALL_OPTS=('scheduler', 'SCHEDULER_OPTS'),
    InvalidOptionValue=('checks', 'InvalidOptionValue'),
    check_values=('checks', 'check_values'),
    list_opts=('opts', 'list_scheduler_opts'),
)


def __getattr__(name):
    # The names of the module nova_sched_ext/conf.py was, kept for code
    # outside the package (list_opts was an oslo.config.opts entry point).
    try:
        module, new_name = _MOVED[name]
    except KeyError:
        raise AttributeError('module %r has no attribute %r'
                             % (__name__, name)) from None
    warnings.warn('nova_sched_ext.conf.%s is deprecated: use '
                  'nova_sched_ext.conf.%s.%s' % (name, module, new_name),
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module('%s.%s' % (__name__, module)),
                   new_name)
