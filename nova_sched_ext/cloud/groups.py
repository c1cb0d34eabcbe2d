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


"""Server groups and their members, from the API database.

What the deployment-set filter's member source and the defragmentation
planner both read of a group: the groups themselves, the rule a group
sets (``max_server_per_host``) and the deployment-set hints each member
was booted with (its ``RequestSpec``).
"""

from nova import exception as nova_exc
from nova import objects

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import set_hints


def server_groups(context):
    """Every server group (``objects.InstanceGroup``).

    :raises CloudError: the API database cannot be read, in one line
    """
    with cloud_cells.database('API database (server groups)'):
        return list(objects.InstanceGroupList.get_all(context))


def max_server_per_host(group):
    """The group's ``max_server_per_host`` rule; 1 if unset or unreadable."""
    try:
        return int((group.rules or {}).get('max_server_per_host', 1))
    except (TypeError, ValueError):
        return 1


def member_hints(context, uuid):
    """The deployment-set hints an existing member was booted with.

    Read from its request spec in the API database, leniently
    (:func:`~.set_hints.parse_lenient`); :data:`~.set_hints.NO_HINTS`
    without one.
    """
    try:
        spec = objects.RequestSpec.get_by_instance_uuid(context, uuid)
    except nova_exc.RequestSpecNotFound:
        return set_hints.NO_HINTS
    scheduler_hints = spec.scheduler_hints \
        if 'scheduler_hints' in spec else None
    return set_hints.parse_lenient(scheduler_hints)
