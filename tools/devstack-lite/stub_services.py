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


"""Stand-ins for the image and network APIs of a devstack-lite cloud.

Nova cannot boot a server without an image service to look the image up in,
and it asks the network service for ports on every server show and delete,
even for servers booted with ``"networks": "none"``. devstack-lite runs
neither glance nor neutron: they are not what the package is about and they
would double the set-up time. This WSGI application answers the few
requests Nova makes, and logs every request so that a new kind of call
shows up in ``stub-services.log``:

``/image``
    one public, active raw image (id from ``NSE_LITE_IMAGE_ID``), its
    schema and the version document;
``/network``
    the version document and an empty list for every collection (no ports,
    no networks, no security groups); anything else is answered 404.

Served by gunicorn like the real services (``stub_services:application``).
"""

import json
import logging
import os
import re
import sys

LOG = logging.getLogger('nse-lite-stub')
logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                    format='%(asctime)s %(message)s')

IMAGE_ID = os.environ.get('NSE_LITE_IMAGE_ID',
                          '5e1ec7ed-0000-4000-8000-00000000a1fe')
TIMESTAMP = '2026-01-01T00:00:00Z'

IMAGE = {
    'id': IMAGE_ID,
    'name': 'nse-lite-image',
    'status': 'active',
    'visibility': 'public',
    'protected': False,
    'os_hidden': False,
    'size': 1048576,
    'virtual_size': 1048576,
    'min_ram': 0,
    'min_disk': 0,
    'disk_format': 'raw',
    'container_format': 'bare',
    'checksum': 'b6d81b360a5672d80c27430f39153e2c',
    'os_hash_algo': 'sha512',
    'os_hash_value': '0' * 128,
    'owner': None,
    'tags': [],
    'created_at': TIMESTAMP,
    'updated_at': TIMESTAMP,
    'file': '/v2/images/%s/file' % IMAGE_ID,
    'self': '/v2/images/%s' % IMAGE_ID,
    'schema': '/v2/schemas/image',
}


def _loose(*types):
    return {'type': list(types) + ['null']}


IMAGE_SCHEMA = {
    'name': 'image',
    'properties': {
        'id': _loose('string'),
        'name': _loose('string'),
        'status': _loose('string'),
        'visibility': _loose('string'),
        'protected': _loose('boolean'),
        'os_hidden': _loose('boolean'),
        'size': _loose('integer'),
        'virtual_size': _loose('integer'),
        'min_ram': _loose('integer'),
        'min_disk': _loose('integer'),
        'disk_format': _loose('string'),
        'container_format': _loose('string'),
        'checksum': _loose('string'),
        'os_hash_algo': _loose('string'),
        'os_hash_value': _loose('string'),
        'owner': _loose('string'),
        'tags': {'type': 'array', 'items': {'type': 'string'}},
        'created_at': _loose('string'),
        'updated_at': _loose('string'),
        'file': _loose('string'),
        'self': _loose('string'),
        'schema': _loose('string'),
        'locations': {'type': 'array'},
        'direct_url': _loose('string'),
    },
    'additionalProperties': {'type': 'string'},
    'links': [{'rel': 'self', 'href': '{self}'},
              {'rel': 'enclosure', 'href': '{file}'},
              {'rel': 'describedby', 'href': '{schema}'}],
}

_COLLECTION = re.compile(r'^/v2\.0/([a-z][a-z0-9_-]*?)(?:\.json)?/?$')


def _json(start_response, status, body):
    data = json.dumps(body).encode()
    start_response(status, [('Content-Type', 'application/json'),
                            ('Content-Length', str(len(data)))])
    return [data]


def _not_found(start_response, what):
    return _json(start_response, '404 Not Found',
                 {'error': {'code': 404, 'message': '%s not found' % what}})


def _base_url(environ):
    return '%s://%s' % (environ.get('wsgi.url_scheme', 'http'),
                        environ.get('HTTP_HOST', 'localhost'))


def _image_api(environ, start_response, path):
    base = _base_url(environ) + '/image'
    if path in ('', '/'):
        return _json(start_response, '300 Multiple Choices', {'versions': [
            {'id': 'v2.16', 'status': 'CURRENT',
             'links': [{'rel': 'self', 'href': base + '/v2/'}]}]})
    if path == '/v2/schemas/image':
        return _json(start_response, '200 OK', IMAGE_SCHEMA)
    if path == '/v2/images':
        return _json(start_response, '200 OK', {
            'images': [IMAGE], 'schema': '/v2/schemas/images',
            'first': '/v2/images'})
    if path.startswith('/v2/images/'):
        if path.rstrip('/').rsplit('/', 1)[-1] == IMAGE_ID:
            return _json(start_response, '200 OK', IMAGE)
        return _not_found(start_response, 'image')
    return _not_found(start_response, path)


def _network_api(environ, start_response, path):
    base = _base_url(environ) + '/network'
    if path in ('', '/'):
        return _json(start_response, '200 OK', {'versions': [
            {'id': 'v2.0', 'status': 'CURRENT',
             'links': [{'rel': 'self', 'href': base + '/v2.0/'}]}]})
    match = _COLLECTION.match(path)
    if match and environ['REQUEST_METHOD'] == 'GET':
        return _json(start_response, '200 OK',
                     {match.group(1).replace('-', '_'): []})
    return _not_found(start_response, path)


def application(environ, start_response):
    path = environ.get('PATH_INFO', '')
    query = environ.get('QUERY_STRING', '')
    LOG.info('%s %s%s', environ['REQUEST_METHOD'], path,
             '?' + query if query else '')
    for prefix, api in (('/image', _image_api), ('/network', _network_api)):
        if path == prefix or path.startswith(prefix + '/'):
            return api(environ, start_response, path[len(prefix):])
    return _not_found(start_response, path)
