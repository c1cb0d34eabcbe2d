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

"""Deprecated: the capacity count's options moved to the conf package.

They are in :mod:`nova_sched_ext.conf.capacity`, and ``check_options`` in
:mod:`nova_sched_ext.capacity.backends`.  This module was the target of
the ``oslo.config.opts`` entry point ``nova_sched_ext.capacity``, which
now names :func:`nova_sched_ext.conf.opts.list_capacity_opts`; it keeps
its names for code outside the package, and warns when imported.
"""

import warnings

from oslo_config import cfg

from nova_sched_ext.cloud import backends
from nova_sched_ext.conf import capacity
from nova_sched_ext.conf import opts

warnings.warn('nova_sched_ext.capacity.conf is deprecated: use '
              'nova_sched_ext.conf.capacity',
              DeprecationWarning, stacklevel=2)

GROUP_NAME = capacity.GROUP_NAME
FIT_ENGINE = capacity.FIT_ENGINE
FIT_NOVA = capacity.FIT_NOVA
count_opts = capacity.count_opts
register_opts = capacity.register_opts
list_opts = opts.list_capacity_opts
check_options = backends.check_options
CONF = cfg.CONF
