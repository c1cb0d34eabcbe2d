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

"""The placement payloads of a reservation and of its release."""

from unittest import mock

from nova import context as nova_context
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_sched_ext.preemption import reservation

RES = {'VCPU': 2, 'MEMORY_MB': 512}


def response(status, body=None, text=''):
    resp = mock.Mock(status_code=status, text=text)
    resp.__bool__ = lambda self: status < 400
    resp.json.return_value = body
    return resp


def current(rp_uuid=uuids.h1, generation=3, resources=RES):
    return {'allocations': {rp_uuid: {'resources': dict(resources)}}
            if rp_uuid else {},
            'consumer_generation': generation,
            'project_id': 'p-victim', 'user_id': 'u-victim'}


class TestReservation(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext('u', 'p')
        self.client = mock.Mock()
        self.client.post.return_value = response(204)

    def test_read_allocations_drops_provider_generations(self):
        self.client.get.return_value = response(200, {
            'allocations': {uuids.h1: {'generation': 7, 'resources': RES}},
            'consumer_generation': 2, 'project_id': 'p', 'user_id': 'u'})
        found = reservation.read_allocations(self.client, self.context,
                                             uuids.v)
        self.assertEqual({uuids.h1: {'resources': RES}},
                         found['allocations'])
        self.assertEqual(2, found['consumer_generation'])
        self.client.get.assert_called_once_with(
            '/allocations/%s' % uuids.v, version='1.28',
            global_request_id=self.context.global_id)
        self.client.get.return_value = response(200, {'allocations': {}})
        self.assertIsNone(reservation.read_allocations(
            self.client, self.context, uuids.v)['consumer_generation'])
        self.client.get.return_value = response(500, text='oops')
        self.assertRaises(reservation.ReservationFailed,
                          reservation.read_allocations, self.client,
                          self.context, uuids.v)

    def test_one_post_moves_the_room(self):
        reservation.reserve(
            self.client, self.context, [(uuids.new, uuids.h1, RES)],
            {uuids.v1: current(generation=3), uuids.v2: current(
                generation=8)}, 'p-new', 'u-new')
        self.client.post.assert_called_once_with(
            '/allocations', {
                uuids.new: {
                    'allocations': {uuids.h1: {'resources': RES}},
                    'project_id': 'p-new', 'user_id': 'u-new',
                    'consumer_generation': None},
                uuids.v1: {'allocations': {}, 'project_id': 'p-victim',
                           'user_id': 'u-victim', 'consumer_generation': 3},
                uuids.v2: {'allocations': {}, 'project_id': 'p-victim',
                           'user_id': 'u-victim', 'consumer_generation': 8},
            }, version='1.28', global_request_id=self.context.global_id)

    def test_a_conflict_is_reported_as_such(self):
        self.client.post.return_value = response(409, text='generation')
        exc = self.assertRaises(
            reservation.ReservationFailed, reservation.reserve, self.client,
            self.context, [(uuids.new, uuids.h1, RES)],
            {uuids.v1: current()}, 'p', 'u')
        self.assertTrue(exc.conflict)
        self.client.post.return_value = response(400, text='bad')
        exc = self.assertRaises(
            reservation.ReservationFailed, reservation.reserve, self.client,
            self.context, [(uuids.new, uuids.h1, RES)], {}, 'p', 'u')
        self.assertFalse(exc.conflict)

    def test_release_restores_victims_and_drops_new_instances(self):
        now = {uuids.new: current(generation=1),
               uuids.v1: current(rp_uuid=None, generation=None)}
        self.client.get.side_effect = lambda url, **kw: response(
            200, now[url.rsplit('/', 1)[1]])
        before = current(generation=3)
        reservation.release(self.client, self.context, [uuids.new],
                            {uuids.v1: before})
        payload = self.client.post.call_args[0][1]
        self.assertEqual({
            uuids.new: {'allocations': {}, 'project_id': 'p-victim',
                        'user_id': 'u-victim', 'consumer_generation': 1},
            uuids.v1: {'allocations': before['allocations'],
                       'project_id': 'p-victim', 'user_id': 'u-victim',
                       'consumer_generation': None},
        }, payload)

    def test_release_retries_conflicts_then_gives_up(self):
        self.client.get.return_value = response(200, current())
        self.client.post.side_effect = [response(409), response(204)]
        reservation.release(self.client, self.context, [uuids.new], {})
        self.assertEqual(2, self.client.post.call_count)
        self.client.post.side_effect = None
        self.client.post.return_value = response(409)
        self.assertRaises(reservation.ReservationFailed, reservation.release,
                          self.client, self.context, [uuids.new], {})

    def test_release_of_nothing_posts_nothing(self):
        self.client.get.return_value = response(200, {'allocations': {}})
        reservation.release(self.client, self.context, [uuids.new], {})
        self.client.post.assert_not_called()
