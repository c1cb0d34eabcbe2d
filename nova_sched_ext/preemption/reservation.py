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

"""Placement side of an eviction: claim the victims' room in one request.

:func:`reserve` sends ONE ``POST /allocations`` that gives each new
instance its allocation on its chosen host and empties the allocations of
every victim, each victim with the consumer generation read just before.
Placement applies all of it or nothing: if another scheduler changed a
victim (it reserved the same victim, or Nova moved it) in the meantime,
the generation no longer matches and the whole request fails with 409, so
two requests can never both get one victim's room.  :func:`release` undoes
a reservation, again in one request.
"""

from oslo_log import log as logging

from nova_sched_ext import exception as sched_ext_exception

LOG = logging.getLogger(__name__)

#: consumer generations in POST /allocations and GET /allocations/{uuid}
VERSION = '1.28'
#: the allocation request format the conductor reads (with ``mappings``)
ALLOCATION_REQUEST_VERSION = '1.36'


class ReservationFailed(sched_ext_exception.NovaSchedExtError):
    """Placement refused the reservation (or its release)."""

    def __init__(self, message, conflict=False):
        super().__init__(message)
        #: True for a 409: someone else changed a consumer or provider
        self.conflict = conflict


def read_allocations(client, context, consumer_uuid):
    """``GET /allocations/{consumer}``: allocations, generation, owner.

    :returns: ``{'allocations': {rp: {'resources': {...}}},
        'consumer_generation': int or None, 'project_id', 'user_id'}``
        (allocations empty, generation None for an unknown consumer)
    """
    resp = client.get('/allocations/%s' % consumer_uuid, version=VERSION,
                      global_request_id=context.global_id)
    if resp is None or not resp:
        raise ReservationFailed(
            'cannot read the allocations of %s: %s' % (
                consumer_uuid, getattr(resp, 'text', 'no answer')))
    body = resp.json()
    body['allocations'] = {
        rp: {'resources': dict(alloc['resources'])}
        for rp, alloc in body.get('allocations', {}).items()}
    body.setdefault('consumer_generation', None)
    return body


def allocation_request(rp_uuid, resources):
    """What the conductor expects in ``Selection.allocation_request``."""
    return {'allocations': {rp_uuid: {'resources': dict(resources)}},
            'mappings': {'': [rp_uuid]}}


def reserve(client, context, new_instances, victims, project_id, user_id):
    """Move the victims' room to the new instances, atomically.

    :param new_instances: ``[(instance uuid, rp uuid, {rc: amount})]``
    :param victims: ``{victim uuid: read_allocations() answer}``, read
        before the plan was trusted
    :raises ReservationFailed: placement refused; nothing changed
    """
    payload = {}
    for uuid, rp_uuid, resources in new_instances:
        payload[uuid] = dict(
            allocation_request(rp_uuid, resources),
            project_id=project_id, user_id=user_id,
            consumer_generation=None)
        del payload[uuid]['mappings']
    for uuid, current in victims.items():
        payload[uuid] = {
            'allocations': {},
            'project_id': current['project_id'],
            'user_id': current['user_id'],
            'consumer_generation': current['consumer_generation'],
        }
    _post(client, context, payload)


def release(client, context, new_uuids, restore):
    """Drop the new instances' allocations and give victims theirs back.

    Generations are read again first (the reservation changed them);
    a conflict is retried a few times, since the only writers left are
    the compute hosts of victims and Nova's own cleanup.

    :param new_uuids: the new instances whose allocations go
    :param restore: ``{victim uuid: read_allocations() answer before the
        reservation}``: victims that were not evicted and get their
        allocations back
    :raises ReservationFailed: placement refused every attempt
    """
    last = None
    for _attempt in range(3):
        payload = {}
        for uuid in new_uuids:
            current = read_allocations(client, context, uuid)
            if current['allocations']:
                payload[uuid] = {
                    'allocations': {},
                    'project_id': current['project_id'],
                    'user_id': current['user_id'],
                    'consumer_generation': current['consumer_generation']}
        for uuid, before in restore.items():
            current = read_allocations(client, context, uuid)
            payload[uuid] = {
                'allocations': before['allocations'],
                'project_id': before['project_id'],
                'user_id': before['user_id'],
                'consumer_generation': current['consumer_generation']}
        if not payload:
            return
        try:
            _post(client, context, payload)
            return
        except ReservationFailed as exc:
            last = exc
            if not exc.conflict:
                raise
    raise last


def _post(client, context, payload):
    resp = client.post('/allocations', payload, version=VERSION,
                       global_request_id=context.global_id)
    if resp is None:
        raise ReservationFailed('placement did not answer')
    if resp.status_code == 204:
        return
    raise ReservationFailed(
        'placement refused POST /allocations (%d): %s'
        % (resp.status_code, resp.text), conflict=resp.status_code == 409)
