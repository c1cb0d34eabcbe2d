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

"""Deprecated: the preemption driver's options moved to the conf package.

``[nova_sched_ext]``'s are in :mod:`nova_sched_ext.conf.scheduler`,
``[nova_sched_ext_evictor]`` in :mod:`nova_sched_ext.conf.evictor`.  This
module was the target of the ``oslo.config.opts`` entry point
``nova_sched_ext.preemption``, which now names
:func:`nova_sched_ext.conf.opts.list_preemption_opts`; it keeps its names
for code outside the package, and warns when imported.
"""

import warnings

from oslo_config import cfg

from nova_sched_ext.conf import evictor
from nova_sched_ext.conf import opts
from nova_sched_ext.conf import scheduler
from nova_sched_ext.conf import utils

warnings.warn('nova_sched_ext.preemption.conf is deprecated: use '
              'nova_sched_ext.conf (the scheduler and evictor modules)',
              DeprecationWarning, stacklevel=2)

EVICTOR_GROUP_NAME = evictor.GROUP_NAME
EVICTOR_SERVICE_TYPE = evictor.SERVICE_TYPE
ACTION_DELETE = scheduler.ACTION_DELETE
ACTION_SHELVE_OFFLOAD = scheduler.ACTION_SHELVE_OFFLOAD
evictor_group = evictor.evictor_group
preemption_opts = ALL_OPTS = scheduler.preemption_opts
service_credential_opts = utils.service_credential_opts
list_opts = opts.list_preemption_opts
CONF = cfg.CONF


def register_opts(conf):
    scheduler.register_opts(conf)
    evictor.register_opts(conf)
