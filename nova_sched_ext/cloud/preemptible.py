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

"""The flavor extra spec that marks instances preemptible.

One rule read by the preemption driver, its caps and census, the evictor
and the defragmentation planner, so it sits in the cloud ring
(``nova_sched_ext.preemption.extra_specs``, the path of the
``nova.api.extra_spec_validators`` entry point, is the same module).

``nova_sched_ext:preemptible=true`` on a flavor makes its instances
preemptible: an on-demand request that finds no room may evict them.

:func:`register` is the ``nova.api.extra_spec_validators`` entry point:
Nova's API loads it with stevedore at start-up and then rejects, with a 400
at flavor extra-spec set, a value that is not a boolean and any other key of
the ``nova_sched_ext:`` namespace (Nova treats a namespace it has validators
for as closed).  Nova validates only requests at microversion 2.86 or
later, so readers of the extra spec (:func:`is_preemptible`) must still
cope with any stored value.
"""

from nova.api.validation.extra_specs import base
from oslo_log import log as logging
from oslo_utils import strutils

LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_sched_ext'
PREEMPTIBLE_KEY = NAMESPACE + ':preemptible'

EXTRA_SPEC_VALIDATORS = [
    base.ExtraSpecValidator(
        name=PREEMPTIBLE_KEY,
        description=(
            'Whether instances of this flavor are preemptible: when the '
            'cloud is full, an on-demand (non-preemptible) request may '
            'evict them to make room. Preemptible requests never evict. '
            'Only honoured when the nova-sched-ext preemption scheduler '
            'driver runs.'
        ),
        value={
            'type': bool,
            'description': 'Whether the flavor is preemptible.',
        },
    ),
]

# Invalid values already warned about, so that a flavor with one (set at a
# microversion before 2.86, or before the validator was installed) logs
# once, not on every scheduling request.
# Adding to a set is atomic, so concurrent requests at worst warn twice.
_warned = set()


def register():
    """The validators of the ``nova_sched_ext`` namespace, for Nova's API."""
    return EXTRA_SPEC_VALIDATORS


def _extra_specs(flavor):
    if flavor is None:
        return {}
    if isinstance(flavor, dict):
        return flavor
    if hasattr(flavor, 'obj_attr_is_set'):
        if not flavor.obj_attr_is_set('extra_specs'):
            return {}
    return getattr(flavor, 'extra_specs', None) or {}


def is_preemptible(flavor):
    """Whether a flavor's instances are preemptible.

    :param flavor: a Nova ``Flavor`` object, or a dict of its extra specs
    :returns: True only when :data:`PREEMPTIBLE_KEY` is a true boolean
        string.  A missing key is False.  A value the validator would reject
        is False too, and logged once at warning, so a typo never makes an
        instance evictable.  Such a value can be stored at any time, not
        only before the package was installed: Nova validates extra specs
        only for requests at compute API microversion 2.86 or later, and
        stores whatever a request at 2.85 or earlier sets (as well as
        values set before the validator was installed, or written to the
        database directly).
    """
    value = _extra_specs(flavor).get(PREEMPTIBLE_KEY)
    if value is None:
        return False
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError:
        flavor_id = None
        if (hasattr(flavor, 'obj_attr_is_set') and
                flavor.obj_attr_is_set('flavorid')):
            flavor_id = flavor.flavorid
        marker = (flavor_id, str(value))
        if marker not in _warned:
            _warned.add(marker)
            LOG.warning('Flavor %(flavor)s has an invalid value %(value)r '
                        'for extra spec %(key)s (expected a boolean such '
                        'as true or false); its instances are treated as '
                        'not preemptible. Fix it with: openstack flavor '
                        'set --property %(key)s=<true|false> %(flavor)s',
                        {'flavor': flavor_id or '(unknown)', 'value': value,
                         'key': PREEMPTIBLE_KEY})
        return False
