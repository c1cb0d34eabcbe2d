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


"""Read the cloud as nova-scheduler reads it: the capacity count's names.

The reading lives in the one reader of the cloud, :mod:`nova_sched_ext.cloud`
(the cells and their databases in :mod:`~nova_sched_ext.cloud.cells`, the
compute nodes, services and aggregates in
:mod:`~nova_sched_ext.cloud.computes`, the flavors in
:mod:`~nova_sched_ext.cloud.flavors`); the count reads through the names
below, which the rest of ``capacity/`` and its tests use.  A database that
cannot be read is a one-line :class:`~nova_sched_ext.capacity.errors.
CapacityError` (the cloud's own errors: see that module); nothing is
written anywhere.
"""

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import computes
from nova_sched_ext.cloud import flavors as cloud_flavors

SKIP_NO_SERVICE = computes.SKIP_NO_SERVICE
SKIP_SERVICE_DISABLED = computes.SKIP_SERVICE_DISABLED
SKIP_SERVICE_DOWN = computes.SKIP_SERVICE_DOWN
SKIP_NOT_REPORTING = computes.SKIP_NOT_REPORTING
SKIP_NO_PROVIDER = computes.SKIP_NO_PROVIDER
AZ_KEY = computes.AZ_KEY

Host = computes.Host
Cloud = computes.Cloud

DB_ERRORS = cloud_cells.DB_ERRORS
database = cloud_cells.database
register_transport_options = cloud_cells.register_transport_options
enabled_cells = cloud_cells.enabled_cells
in_every_cell = cloud_cells.in_cells

host_availability_zone = computes.host_availability_zone
read_aggregates = computes.read_aggregates
read_cloud = computes.read_cloud

read_flavors = cloud_flavors.read_flavors
