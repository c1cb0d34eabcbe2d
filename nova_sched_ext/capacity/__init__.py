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


"""NUMA-exact capacity: how many more instances of each flavor fit.

``compute(context, flavors=None, by='cloud', az=None, aggregate=None,
per_host=False)`` counts, for every compute host the scheduler could pick,
how many instances of each flavor it takes at once, placed as Nova places
them, and adds the counts up per scope; see
:mod:`nova_sched_ext.capacity.service`. The command
``nova-sched-ext-capacity`` (:mod:`~nova_sched_ext.capacity.cmd`), the
capacity API, the OpenStackClient plugin and the Prometheus exporter are
built on it.

Importing this package loads neither Nova nor the fit engine (the API and
the exporter must choose Nova's concurrency mode first): ``compute``,
``Report`` and ``Scope`` are loaded on first use. The errors are plain
exceptions, importable at once.
"""

from nova_sched_ext.capacity.errors import BackendUnavailable  # noqa: F401
from nova_sched_ext.capacity.errors import CapacityError  # noqa: F401
from nova_sched_ext.capacity.errors import ConfigError  # noqa: F401
from nova_sched_ext.capacity.errors import UnknownFlavor  # noqa: F401
from nova_sched_ext.capacity.errors import UnknownScope  # noqa: F401

#: what ``by`` accepts (service.BY, without loading Nova)
BY = ('host', 'aggregate', 'az', 'cell', 'cloud')

_LAZY = ('compute', 'Report', 'Scope', 'FlavorInfo')


def __getattr__(name):
    if name in _LAZY:
        from nova_sched_ext.capacity import service
        return getattr(service, name)
    raise AttributeError('module %r has no attribute %r' % (__name__, name))
