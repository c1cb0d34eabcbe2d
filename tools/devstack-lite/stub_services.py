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

For the two-cluster run (two-clusters.sh) each cluster's stand-in holds
what the broker reads and what Nova needs to boot onto a network:

``NSE_LITE_IMAGES``
    ``name=id`` pairs, space-separated: the images of this cluster
    (default: the one image above);
``NSE_LITE_NETWORKS``
    ``name=addresses`` pairs: networks, each with one subnet of that many
    addresses. Ports are kept in memory: Nova creates, binds, lists and
    deletes them; a port takes an address and the network's
    ``network-ip-availabilities`` count it; a network without a free
    address answers a port creation 409 as Neutron does. Every project has
    a ``default`` security group.

Served by gunicorn like the real services (``stub_services:application``).
"""

import json
import logging
import os
import re
import sys
import threading
import urllib.parse
import uuid

LOG = logging.getLogger('nse-lite-stub')
logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                    format='%(asctime)s %(message)s')

IMAGE_ID = os.environ.get('NSE_LITE_IMAGE_ID',
                          '5e1ec7ed-0000-4000-8000-00000000a1fe')
TIMESTAMP = '2026-01-01T00:00:00Z'


def _image(image_id, name):
    return {
        'id': image_id,
        'name': name,
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
        'file': '/v2/images/%s/file' % image_id,
        'self': '/v2/images/%s' % image_id,
        'schema': '/v2/schemas/image',
    }


def _pairs(variable, default):
    pairs = os.environ.get(variable, '').split() or default
    return [tuple(pair.split('=', 1)) for pair in pairs]


IMAGES = {image_id: _image(image_id, name) for name, image_id in
          _pairs('NSE_LITE_IMAGES', ['nse-lite-image=' + IMAGE_ID])}


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
    data = b'' if body is None else json.dumps(body).encode()
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
        query = _query(environ)
        images = [image for image in IMAGES.values()
                  if all(image.get(key) in values
                         for key, values in query.items()
                         if key in ('id', 'name'))]
        return _json(start_response, '200 OK', {
            'images': images, 'schema': '/v2/schemas/images',
            'first': '/v2/images'})
    if path.startswith('/v2/images/'):
        image = IMAGES.get(path.rstrip('/').rsplit('/', 1)[-1])
        if image is not None:
            return _json(start_response, '200 OK', image)
        return _not_found(start_response, 'image')
    return _not_found(start_response, path)


def _network_api(environ, start_response, path):
    base = _base_url(environ) + '/network'
    if path in ('', '/'):
        return _json(start_response, '200 OK', {'versions': [
            {'id': 'v2.0', 'status': 'CURRENT',
             'links': [{'rel': 'self', 'href': base + '/v2.0/'}]}]})
    if NETWORKS.networks:
        answer = NETWORKS.answer(environ, path)
        if answer is not None:
            return _json(start_response, *answer)
    match = _COLLECTION.match(path)
    if match and environ['REQUEST_METHOD'] == 'GET':
        return _json(start_response, '200 OK',
                     {match.group(1).replace('-', '_'): []})
    return _not_found(start_response, path)


def _query(environ):
    return urllib.parse.parse_qs(environ.get('QUERY_STRING', ''))


def _body(environ):
    length = int(environ.get('CONTENT_LENGTH') or 0)
    return json.loads(environ['wsgi.input'].read(length) or b'{}')


def _matches(item, query):
    """Neutron's list filters: every given field among its values."""
    for key, values in query.items():
        if key in ('fields', 'limit', 'marker', 'sort_key', 'sort_dir'):
            continue
        if key == 'tenant_id' or key == 'project_id':
            continue  # the stand-in has one pool of ports for every project
        if str(item.get(key)) not in values:
            return False
    return True


class Networks:
    """The networks of NSE_LITE_NETWORKS, their subnets and ports."""

    def __init__(self, pairs):
        self.lock = threading.Lock()
        self.networks, self.subnets, self.ports = {}, {}, {}
        for index, (name, size) in enumerate(pairs, start=1):
            net_id = str(uuid.uuid5(uuid.NAMESPACE_URL, 'net/' + name))
            subnet_id = str(uuid.uuid5(uuid.NAMESPACE_URL, 'subnet/' + name))
            # 10.<index>.0.0/24 inside the stand-in only: nothing routes it
            addresses = ['10.%d.0.%d' % (index, host)
                         for host in range(2, 2 + int(size))]
            self.networks[net_id] = {
                'id': net_id, 'name': name, 'status': 'ACTIVE',
                'admin_state_up': True, 'shared': True,
                'router:external': False, 'port_security_enabled': True,
                'mtu': 1450, 'subnets': [subnet_id], 'tenant_id': '',
                'project_id': '', 'addresses': addresses}
            self.subnets[subnet_id] = {
                'id': subnet_id, 'name': name + '-subnet',
                'network_id': net_id, 'ip_version': 4,
                'cidr': '10.%d.0.0/24' % index, 'gateway_ip': '10.%d.0.1'
                % index, 'enable_dhcp': False, 'dns_nameservers': [],
                'host_routes': [], 'tenant_id': '', 'project_id': ''}

    def _network(self, net_id):
        network = dict(self.networks[net_id])
        network.pop('addresses')
        return network

    def _used(self, net_id):
        return {ip['ip_address'] for port in self.ports.values()
                if port['network_id'] == net_id for ip in port['fixed_ips']}

    def availability(self, net_id):
        network = self.networks[net_id]
        used = len(self._used(net_id))
        total = len(network['addresses'])
        return {'network_id': net_id, 'network_name': network['name'],
                'tenant_id': '', 'project_id': '', 'total_ips': total,
                'used_ips': used, 'subnet_ip_availability': [{
                    'subnet_id': network['subnets'][0], 'ip_version': 4,
                    'cidr': self.subnets[network['subnets'][0]]['cidr'],
                    'total_ips': total, 'used_ips': used}]}

    def create_port(self, body):
        net_id = body.get('network_id')
        if net_id not in self.networks:
            return '404 Not Found', {'NeutronError': {
                'type': 'NetworkNotFound', 'detail': '',
                'message': 'Network %s could not be found.' % net_id}}
        free = [a for a in self.networks[net_id]['addresses']
                if a not in self._used(net_id)]
        if not free:
            return '409 Conflict', {'NeutronError': {
                'type': 'IpAddressGenerationFailure', 'detail': '',
                'message': 'No more IP addresses available on network %s.'
                           % net_id}}
        port_id = str(uuid.uuid4())
        port = {'id': port_id, 'name': '', 'status': 'ACTIVE',
                'admin_state_up': True, 'network_id': net_id,
                'mac_address': 'fa:16:3e:%02x:%02x:%02x' % tuple(
                    uuid.UUID(port_id).bytes[:3]),
                'fixed_ips': [{'subnet_id': self.networks[net_id][
                    'subnets'][0], 'ip_address': free[0]}],
                'device_id': '', 'device_owner': '', 'security_groups': [],
                'binding:vnic_type': 'normal', 'binding:vif_type': 'ovs',
                'binding:vif_details': {}, 'binding:profile': {},
                'binding:host_id': '', 'tenant_id': '', 'project_id': '',
                'tags': []}
        port.update({key: value for key, value in body.items()
                     if key in ('device_id', 'device_owner', 'name',
                                'security_groups', 'tenant_id',
                                'project_id', 'binding:host_id',
                                'binding:profile', 'admin_state_up')})
        self.ports[port_id] = port
        LOG.info('port %s on %s: %s for %s', port_id, net_id, free[0],
                 port['device_id'])
        return '201 Created', {'port': port}

    def answer(self, environ, path):
        """(status, body), or None for what the plain stand-in answers."""
        method = environ['REQUEST_METHOD']
        parts = path.strip('/').split('/')[1:]  # after v2.0
        if not parts:
            return None
        kind = parts[0].replace('.json', '')
        item = parts[1].replace('.json', '') if len(parts) > 1 else None
        with self.lock:
            if kind == 'networks' and method == 'GET':
                if item:
                    if item not in self.networks:
                        return '404 Not Found', {'NeutronError': {
                            'type': 'NetworkNotFound', 'detail': '',
                            'message': 'Network %s could not be found.'
                                       % item}}
                    return '200 OK', {'network': self._network(item)}
                return '200 OK', {'networks': [
                    self._network(i) for i in self.networks
                    if _matches(self._network(i), _query(environ))]}
            if kind == 'subnets' and method == 'GET':
                return '200 OK', {'subnets': [
                    s for s in self.subnets.values()
                    if _matches(s, _query(environ))]}
            if kind == 'network-ip-availabilities' and method == 'GET':
                if item in self.networks:
                    return '200 OK', {
                        'network_ip_availability': self.availability(item)}
                return '200 OK', {'network_ip_availabilities': [
                    self.availability(i) for i in self.networks]}
            if kind == 'quotas' and item and method == 'GET':
                return '200 OK', {'quota': {
                    'port': -1, 'network': -1, 'subnet': -1,
                    'security_group': -1, 'floatingip': -1}}
            if kind == 'security-groups' and method == 'GET':
                return '200 OK', {'security_groups': [{
                    'id': DEFAULT_GROUP_ID, 'name': 'default',
                    'tenant_id': '', 'project_id': '',
                    'security_group_rules': []}]}
            if kind == 'ports':
                if method == 'GET' and not item:
                    return '200 OK', {'ports': [
                        p for p in self.ports.values()
                        if _matches(p, _query(environ))]}
                if method == 'POST' and not item:
                    return self.create_port(_body(environ).get('port', {}))
                if item not in self.ports:
                    return '404 Not Found', {'NeutronError': {
                        'type': 'PortNotFound', 'detail': '',
                        'message': 'Port %s could not be found.' % item}}
                if method == 'GET':
                    return '200 OK', {'port': self.ports[item]}
                if method == 'PUT':
                    self.ports[item].update(_body(environ).get('port', {}))
                    return '200 OK', {'port': self.ports[item]}
                if method == 'DELETE':
                    del self.ports[item]
                    LOG.info('port %s deleted', item)
                    return '204 No Content', None
        return None


DEFAULT_GROUP_ID = str(uuid.uuid5(uuid.NAMESPACE_URL,
                                  'security-group/default'))
NETWORKS = Networks(_pairs('NSE_LITE_NETWORKS', []))


def application(environ, start_response):
    path = environ.get('PATH_INFO', '')
    query = environ.get('QUERY_STRING', '')
    LOG.info('%s %s%s', environ['REQUEST_METHOD'], path,
             '?' + query if query else '')
    for prefix, api in (('/image', _image_api), ('/network', _network_api)):
        if path == prefix or path.startswith(prefix + '/'):
            return api(environ, start_response, path[len(prefix):])
    return _not_found(start_response, path)
