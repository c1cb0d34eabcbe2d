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


"""Deprecated: placement's reader and model moved to the cloud reader.

:mod:`nova_sched_ext.cloud.placement` reads placement (providers,
inventories, usages, allocations, traits, aggregates, sharing providers)
for every feature; :mod:`nova_sched_ext.cloud.claims` says what placement
would let the scheduler claim; :mod:`nova_sched_ext.cloud.room` is the one
free-room rule.  This module re-exports their names for code outside the
package that imported them from here (the offline tools); it goes in a
later release.
"""

import warnings

from nova_sched_ext.cloud.claims import Claims  # noqa: F401
from nova_sched_ext.cloud.claims import CPU_CLASSES  # noqa: F401
from nova_sched_ext.cloud.claims import free_room  # noqa: F401
from nova_sched_ext.cloud.claims import has_trait  # noqa: F401
from nova_sched_ext.cloud.claims import MAX_STEPS  # noqa: F401
from nova_sched_ext.cloud.claims import MEMORY_CLASS  # noqa: F401
from nova_sched_ext.cloud.claims import placement_claims  # noqa: F401
from nova_sched_ext.cloud.claims import placement_limit  # noqa: F401
from nova_sched_ext.cloud.claims import placement_only  # noqa: F401
from nova_sched_ext.cloud.claims import pool_allowances  # noqa: F401
from nova_sched_ext.cloud.claims import units  # noqa: F401
from nova_sched_ext.cloud.placement import Group  # noqa: F401
from nova_sched_ext.cloud.placement import Inventory  # noqa: F401
from nova_sched_ext.cloud.placement import MICROVERSION  # noqa: F401
from nova_sched_ext.cloud.placement import PlacementReader  # noqa: F401
from nova_sched_ext.cloud.placement import Provider  # noqa: F401
from nova_sched_ext.cloud.placement import Request  # noqa: F401
from nova_sched_ext.cloud.placement import SHARING_MICROVERSION  # noqa: F401
from nova_sched_ext.cloud.placement import SHARING_TRAIT  # noqa: F401
from nova_sched_ext.cloud.placement import Tree  # noqa: F401

warnings.warn('nova_sched_ext.capacity.placement is deprecated: import '
              'nova_sched_ext.cloud.placement (the reader and the model) and '
              'nova_sched_ext.cloud.claims (what placement lets be claimed)',
              DeprecationWarning, stacklevel=2)
