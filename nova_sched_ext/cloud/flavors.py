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


"""Flavors from the API database: by name or ID, the public ones, the
NUMA-slot weigher's reference flavors.

One lookup of a flavor by name or ID (:func:`by_name_or_id`): the name
first, then the ID.  It raises :class:`~.errors.UnknownFlavor`; a caller
that goes on without the flavor (the NUMA-slot weigher, which warns)
catches it.  :func:`read_flavors` (the flavors a command names, or every
public one) and :func:`reference_flavors` (the weigher's, whose slots the
defragmentation planner recovers too) are built on it.
:mod:`~nova_sched_ext.cloud.flavor_requests` says what a flavor asks of a
host.
"""

from nova import exception as nova_exc
from nova import objects
from oslo_config import cfg
from oslo_log import log as logging

from nova_sched_ext.cloud import cells as cloud_cells
from nova_sched_ext.cloud import errors

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

_FLAVORS = 'API database (flavors)'


def public_flavors(context):
    """The public, enabled flavors, smallest first."""
    with cloud_cells.database(_FLAVORS):
        flavors = objects.FlavorList.get_all(
            context, inactive=False,
            filters={'is_public': True, 'disabled': False})
    return sorted(flavors, key=lambda f: (f.vcpus, f.memory_mb, f.name))


def by_name_or_id(context, name):
    """The ``objects.Flavor`` whose name, else whose ID, is ``name``.

    :raises UnknownFlavor: no flavor has this name or ID
    """
    with cloud_cells.database(_FLAVORS):
        for lookup in (objects.Flavor.get_by_name,
                       objects.Flavor.get_by_flavor_id):
            try:
                return lookup(context, name)
            except nova_exc.FlavorNotFound:
                continue
    raise errors.UnknownFlavor('unknown flavor %r (no flavor has this name '
                               'or ID)' % name)


def read_flavors(context, names=None):
    """``names`` (names or IDs, each flavor once) or every public flavor.

    :raises UnknownFlavor: a name is neither a flavor's name nor its ID
    """
    if names is None:
        return public_flavors(context)
    flavors, seen = [], set()
    for name in names:
        flavor = by_name_or_id(context, name)
        if flavor.flavorid not in seen:
            seen.add(flavor.flavorid)
            flavors.append(flavor)
    return flavors


def all_flavors(context):
    """Every flavor, with its extra specs, in one read (for :func:`pick`)."""
    with cloud_cells.database(_FLAVORS):
        return list(objects.FlavorList.get_all(context))


def pick(flavors, names=None):
    """:func:`read_flavors`' answer, from ``flavors`` read before.

    :param flavors: every flavor (:func:`all_flavors`)
    :raises UnknownFlavor: a name is neither a flavor's name nor its ID
    """
    if names is None:
        return sorted((f for f in flavors if f.is_public and not f.disabled),
                      key=lambda f: (f.vcpus, f.memory_mb, f.name))
    by_name = {f.name: f for f in flavors}
    by_id = {f.flavorid: f for f in flavors}
    chosen, seen = [], set()
    for name in names:
        flavor = by_name.get(name) or by_id.get(name)
        if flavor is None:
            raise errors.UnknownFlavor('unknown flavor %r (no flavor has '
                                       'this name or ID)' % name)
        if flavor.flavorid not in seen:
            seen.add(flavor.flavorid)
            chosen.append(flavor)
    return chosen


def reference_flavors(context, log=LOG):
    """The NUMA-slot weigher's reference flavors (``objects.Flavor``).

    ``[nova_sched_ext] numa_slot_reference_flavors`` (names or IDs; one
    that does not exist is left out, with a warning on ``log``), else the
    ``numa_slot_auto_reference_count`` largest enabled flavors.  The
    defragmentation planner recovers the slots of the same flavors.
    """
    wanted = CONF.nova_sched_ext.numa_slot_reference_flavors
    if wanted:
        flavors = []
        for name in wanted:
            try:
                flavors.append(by_name_or_id(context, name))
            except errors.UnknownFlavor:
                log.warning('NUMASlotWeigher: reference flavor %r '
                            '([nova_sched_ext] '
                            'numa_slot_reference_flavors) does not '
                            'exist; ignored.', name)
        return flavors
    flavors = [f for f in objects.FlavorList.get_all(context)
               if not f.disabled]
    flavors.sort(key=lambda f: (f.vcpus, f.memory_mb), reverse=True)
    return flavors[:CONF.nova_sched_ext.numa_slot_auto_reference_count]
