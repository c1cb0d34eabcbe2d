#!/usr/bin/env python3
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


"""An HTTP proxy that fails chosen requests, for devstack-lite's faults.

    fault_proxy.py --port PORT --target http://127.0.0.1:N --rules FILE

Listens on 127.0.0.1:PORT and forwards every request to the target, except
those the rules file (JSON, re-read on each request; absent means no
rules) says to fail::

    [{"method": "POST", "path": "/allocations", "status": 409,
      "count": 2}]

A rule matches a request of that method whose path (without the query)
is ``path``, or starts with ``path_prefix``; the request is answered with
``status`` and a body in the error format of placement and Nova, without
reaching the target, and ``count`` goes down by one (the rule is gone at
0). The schedulers of devstack-lite reach placement and the Compute API
through two of these proxies (their ``endpoint_override``), so a fault
round can make placement refuse an eviction's reservation, or the Compute
API fail a victim's deletion, for real HTTP clients.
"""

import argparse
import http.client
import http.server
import json
import os
import sys
import threading
import urllib.parse

#: headers not forwarded as they are (hop by hop, or recomputed)
HOP_HEADERS = frozenset(('connection', 'keep-alive', 'proxy-connection',
                         'transfer-encoding', 'te', 'trailer', 'upgrade',
                         'content-length'))


class Rules(object):
    """The rules file, matched and counted down under one lock."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def take(self, method, path):
        """The status to answer ``method path`` with, or None."""
        with self.lock:
            try:
                with open(self.path) as f:
                    rules = json.load(f)
            except FileNotFoundError:
                return None
            for rule in rules:
                if rule.get('method', method) != method:
                    continue
                if 'path' in rule and rule['path'] != path:
                    continue
                if not path.startswith(rule.get('path_prefix', '')):
                    continue
                rule['count'] = rule.get('count', 1) - 1
                rules = [r for r in rules if r.get('count', 1) > 0]
                tmp = self.path + '.tmp'
                with open(tmp, 'w') as f:
                    json.dump(rules, f)
                os.replace(tmp, self.path)
                return int(rule['status'])
        return None


def make_handler(target, rules):
    parsed = urllib.parse.urlsplit(target)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, fmt, *args):
            sys.stderr.write('%s %s\n' % (self.address_string(),
                                          fmt % args))

        def _forward(self):
            length = int(self.headers.get('Content-Length') or 0)
            body = self.rfile.read(length) if length else None
            path = urllib.parse.urlsplit(self.path).path
            status = rules.take(self.command, path)
            if status is not None:
                self.log_message('FAULT %s %s -> %d', self.command, path,
                                 status)
                self._answer(status, json.dumps({'errors': [{
                    'status': status, 'title': http.client.responses.get(
                        status, 'Error'),
                    'detail': 'injected by devstack-lite fault_proxy',
                    'code': 'placement.concurrent_update'
                    if status == 409 else 'placement.undefined_code'}]}))
                return
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in HOP_HEADERS}
            headers['Host'] = parsed.netloc
            connection = http.client.HTTPConnection(parsed.hostname,
                                                    parsed.port, timeout=300)
            try:
                connection.request(self.command, self.path, body=body,
                                   headers=headers)
                response = connection.getresponse()
                data = response.read()
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                if self.command != 'HEAD':
                    self.wfile.write(data)
            except OSError as exc:
                self._answer(502, json.dumps({'errors': [{
                    'status': 502, 'title': 'Bad Gateway',
                    'detail': 'fault_proxy: %s' % exc}]}))
            finally:
                connection.close()

        def _answer(self, status, text):
            data = text.encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = \
            _forward

    return Handler


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--target', required=True)
    parser.add_argument('--rules', required=True)
    args = parser.parse_args(argv)
    server = http.server.ThreadingHTTPServer(
        ('127.0.0.1', args.port), make_handler(args.target,
                                               Rules(args.rules)))
    server.daemon_threads = True
    sys.stderr.write('fault_proxy: 127.0.0.1:%d -> %s, rules %s\n'
                     % (args.port, args.target, args.rules))
    sys.stderr.flush()
    server.serve_forever()


if __name__ == '__main__':
    sys.exit(main())
