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

"""Deprecated: the fake NUMA virt driver's options moved to the conf package.

They are in :mod:`nova_sched_ext.conf.fake_virt`.  This module was the
target of the ``oslo.config.opts`` entry point
``nova_sched_ext.fake_virt``, which now names
:func:`nova_sched_ext.conf.opts.list_fake_virt_opts`; it keeps its names
for code outside the package, and warns when imported.
"""

import warnings

from oslo_config import cfg

from nova_sched_ext.conf import fake_virt
from nova_sched_ext.conf import opts

warnings.warn('nova_sched_ext.virt.conf is deprecated: use '
              'nova_sched_ext.conf.fake_virt',
              DeprecationWarning, stacklevel=2)

GROUP_NAME = fake_virt.GROUP_NAME
fake_virt_group = fake_virt.fake_virt_group
fake_virt_opts = fake_virt.fake_virt_opts
register_opts = fake_virt.register_opts
list_opts = opts.list_fake_virt_opts
CONF = cfg.CONF
