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

"""The broker's real openstacksdk connection against bad clusters.

One cluster at a time gets a real ``clouds.yaml`` entry and the broker's
own openstacksdk connection (the others stay fake clouds): an entry
openstacksdk cannot use, and a cluster that accepts connections and never
answers (a socket on 127.0.0.1 that this test opens).  Each is skipped
with one WARNING while the others are planned on.
"""

import http.server
import json
import logging
import os
import socket
import threading

import fixtures
import yaml

from nova_sched_ext.broker import service

from tests import base
from tests.unit.broker import helpers as h
from tests.unit.broker import test_place

# What turns a hang of broken code into a failure: the silent cluster
# drops its connections after this long.  The broker gives up long before
# (its read_timeout here is half a second); no assertion is on time.
HANG_GUARD = 30


class SilentCluster(fixtures.Fixture):
    """Accepts connections on 127.0.0.1 and never answers."""

    def _setUp(self):
        self.listener = socket.socket()
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(16)
        self.url = 'http://127.0.0.1:%d/identity' % (
            self.listener.getsockname()[1])
        self.held = []
        self.lock = threading.Lock()
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self.addCleanup(self.release)
        self.addCleanup(self.listener.close)

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.held.append(conn)

    def release(self):
        with self.lock:
            for conn in self.held:
                conn.close()
            self.held = []


class _Keystone(http.server.BaseHTTPRequestHandler):
    """Version discovery, and 401 for every token request."""

    def do_GET(self):
        port = self.server.server_address[1]
        body = json.dumps({'version': {
            'id': 'v3.14', 'status': 'stable', 'media-types': [],
            'links': [{'rel': 'self', 'href': 'http://127.0.0.1:%d/'
                       'identity/v3/' % port}]}}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.send_response(401)
        self.send_header('Content-Length', '0')
        self.end_headers()

    def log_message(self, *args):
        pass


class StubKeystone(fixtures.Fixture):

    def _setUp(self):
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      _Keystone)
        self.server.daemon_threads = True
        thread = threading.Thread(target=self.server.serve_forever,
                                  daemon=True)
        thread.start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        self.url = 'http://127.0.0.1:%d/identity' % (
            self.server.server_address[1])


def password_auth(url):
    return {'auth_url': url, 'username': 'broker', 'password': 'secret',
            'project_name': 'broker', 'user_domain_id': 'default',
            'project_domain_id': 'default'}


class RealSDKTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.warnings = []
        handler = logging.Handler(level=logging.WARNING)
        handler.emit = self.warnings.append
        logger = logging.getLogger('nova_sched_ext.broker')
        logger.addHandler(handler)
        self.addCleanup(logger.removeHandler, handler)

    def clouds_yaml(self, clouds):
        path = os.path.join(self.tmp, 'clouds.yaml')
        with open(path, 'w', encoding='utf-8') as f:
            yaml.safe_dump({'clouds': clouds}, f)
        self.useFixture(fixtures.EnvironmentVariable('OS_CLIENT_CONFIG_FILE',
                                                     path))

    def broker(self, conf, real):
        """A broker on fake clouds, but the clusters ``real`` for real."""
        room = {n: {h.NORMAL_SINGLE: 5} for n in conf.clusters}
        self.clouds = h.make_clouds(conf, room)
        clock = h.FakeClock()

        def connect(cluster):
            if cluster.name in real:
                return service._connect_with_openstacksdk(cluster)
            return self.clouds[cluster.name]
        return service.Broker(conf, connect=connect, clock=clock,
                              sleep=clock.sleep)

    def cluster_warnings(self, name):
        return [r.getMessage() for r in self.warnings
                if r.getMessage().startswith('Cluster %s ' % name)]

    def test_the_connection_carries_the_cluster_timeouts(self):
        self.clouds_yaml({'east-1': {'auth': password_auth(
            'http://127.0.0.1:9/identity')}})
        conf = h.make_config(broker={'connect_timeout': 2,
                                     'read_timeout': 7})
        conn = service._connect_with_openstacksdk(conf.clusters['east-1'])
        self.assertEqual((2, 7), conn.session.timeout)

    def test_incomplete_clouds_yaml_entries_are_skipped(self):
        keystone = self.useFixture(StubKeystone())
        self.clouds_yaml({
            # the password plugin with an auth_url alone
            'east-1': {'auth': {'auth_url': keystone.url}},
            'east-2': {'auth_type': 'v3token',
                       'auth': {'auth_url': keystone.url}},
        })
        conf = h.make_config()
        broker = self.broker(conf, real=('east-1', 'east-2'))
        result = broker.place(test_place.request())
        self.assertTrue(result.placed, result.error)
        self.assertEqual('west-1', result.cluster)
        reasons = {v.cluster: v.reason for v in result.plan.verdicts
                   if v.variant is None}
        self.assertEqual(
            'unreachable: the clouds.yaml entry east-1 cannot be used: '
            'password is a required attribute', reasons['east-1'])
        self.assertIn(
            'unreachable: cannot connect: the clouds.yaml entry east-2 '
            'cannot be used: ', reasons['east-2'])
        self.assertIn("'token'", reasons['east-2'])
        for name in ('east-1', 'east-2'):
            self.assertEqual(1, len(self.cluster_warnings(name)),
                             self.cluster_warnings(name))
        self.assertEqual([], self.cluster_warnings('west-1'))

    def test_a_cluster_that_accepts_and_never_answers_is_skipped(self):
        silent = self.useFixture(SilentCluster())
        guard = threading.Timer(HANG_GUARD, silent.release)
        guard.daemon = True
        guard.start()
        self.addCleanup(guard.cancel)
        self.clouds_yaml({'east-1': {'auth': password_auth(silent.url)}})
        clusters = h.config_dict()['clusters']
        clusters['east-1'].update(connect_timeout=0.5, read_timeout=0.5)
        conf = h.make_config(clusters=clusters)
        broker = self.broker(conf, real=('east-1',))
        the_plan = broker.plan(test_place.request())
        reasons = {v.cluster: v.reason for v in the_plan.verdicts
                   if v.variant is None}
        self.assertIn('timed out', reasons['east-1'])
        self.assertEqual({'east-2', 'west-1'},
                         {c.cluster for c in the_plan.candidates})
        self.assertEqual(1, len(self.cluster_warnings('east-1')),
                         self.cluster_warnings('east-1'))


class TestConcurrentSurvey(base.TestCase):

    def test_the_clusters_are_read_at_once(self):
        # Each cluster's first read waits until every cluster has begun:
        # read one after another, the first would wait alone and fail.
        conf = h.make_config()
        room = {n: {h.NORMAL_SINGLE: 5} for n in conf.clusters}
        clouds = h.make_clouds(conf, room)
        all_begun = threading.Barrier(len(clouds), timeout=HANG_GUARD)
        for cloud in clouds.values():
            real_find_image = cloud.image.find_image

            def find_image(name, ignore_missing=True,
                           real_find_image=real_find_image):
                all_begun.wait()
                return real_find_image(name, ignore_missing)
            cloud.image.find_image = find_image
        broker = h.make_broker(conf, clouds)
        the_plan = broker.plan(test_place.request())
        self.assertEqual(set(conf.clusters),
                         {c.cluster for c in the_plan.candidates})

    def test_one_worker_reads_them_in_turn(self):
        conf = h.make_config(broker={'survey_workers': 1})
        room = {n: {h.NORMAL_SINGLE: 5} for n in conf.clusters}
        clouds = h.make_clouds(conf, room)
        readers = set()
        for cloud in clouds.values():
            real_find_image = cloud.image.find_image

            def find_image(name, ignore_missing=True,
                           real_find_image=real_find_image):
                readers.add(threading.current_thread().name)
                return real_find_image(name, ignore_missing)
            cloud.image.find_image = find_image
        the_plan = h.make_broker(conf, clouds).plan(test_place.request())
        self.assertEqual(3, len(the_plan.candidates))
        self.assertEqual(1, len(readers), readers)
