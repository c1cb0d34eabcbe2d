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

"""A fake cloud at the openstacksdk ``Connection`` boundary.

:class:`FakeCloud` is one cluster: it keeps flavors, images, networks
with their addresses, servers, ports, server groups, what Nova would
really still accept per flavor (``room``) and what its capacity API says
(``capacity``, the room unless told to lie).  It answers the calls the
broker makes the way openstacksdk and Nova do: ``compute.create_server``
with ``min_count = max_count`` creates every server or none, the servers
are BUILD first and then ACTIVE, or all ERROR with Nova's NoValidHost
fault when the room does not cover the count; a server on a host has one
port holding one address of the network; deleting a server deletes its
port (unless ``leak_ports``).  It can be made unreachable, refuse the
credentials, have its capacity API down, and be filled behind the
broker's back (``on_create`` runs before a boot is looked at).
"""

import itertools
import json
import re
import types

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc

NO_VALID_HOST = ('No valid host was found. There are not enough hosts '
                 'available.')
PREEMPTIBLE_SPEC = 'nova_sched_ext:preemptible'

_ids = itertools.count(1)


def _new_id(prefix):
    return '%s-%04d' % (prefix, next(_ids))


class FakeCloud:

    #: the project of the broker's account in every fake cloud
    PROJECT = 'project-broker'

    def __init__(self, name, flavors=(), images=('cirros',),
                 networks=None, room=None, preemptible_flavors=()):
        self.name = name
        #: the project the connection's credentials are scoped to
        self.current_project_id = self.PROJECT
        self.flavors = {f: types.SimpleNamespace(
            id=_new_id('flavor'), name=f, extra_specs=(
                {PREEMPTIBLE_SPEC: 'true'} if f in preemptible_flavors
                else {})) for f in flavors}
        self.images = set(images)
        self.networks = {}
        for net, total in (networks or {'private': 250}).items():
            self.networks[net] = types.SimpleNamespace(
                id=_new_id('net'), name=net, total_ips=total, used_ips=0)
        self.room = dict(room or {})
        #: what the capacity API reports instead of the room, by flavor
        self.capacity_lies = {}
        #: HTTP status the capacity API answers with instead of a report
        self.capacity_status = None
        self.servers = {}
        self.ports = {}
        self.groups = {}
        #: an exception every call raises (the cloud is down)
        self.failure = None
        self.leak_ports = False
        #: polls a server stays in BUILD; None: never leaves it
        self.build_polls = 1
        self.on_create = []
        self.calls = []
        self.creates = 0
        self.compute = _Compute(self)
        self.network = _Network(self)
        self.image = _Image(self)
        self.session = _Session(self)

    # -- switches ----------------------------------------------------------

    def go_down(self):
        self.failure = ks_exc.ConnectFailure(
            'Unable to establish connection to http://%s:8774' % self.name)

    def refuse_credentials(self):
        self.failure = ks_exc.Unauthorized(
            'The request you have made requires authentication. (HTTP 401)')

    def add_group(self, name, project_id, member_ids=()):
        """A server group of another project (or ours), made by hand."""
        group = types.SimpleNamespace(
            id=_new_id('group'), name=name, policy='anti-affinity',
            project_id=project_id, member_ids=list(member_ids))
        self.groups[group.id] = group
        return group

    def fill(self, flavor):
        """Nothing of ``flavor`` fits any more (another user took it)."""
        self.room[flavor] = 0

    # -- what the tests look at --------------------------------------------

    def active(self):
        return sorted(s.id for s in self.servers.values()
                      if s.status == 'ACTIVE')

    def authorize(self):
        self.check('authorize')
        return 'token-%s' % self.name

    def check(self, what):
        self.calls.append(what)
        if self.failure is not None:
            raise self.failure

    def capacity_report(self, flavors, by, az):
        counts = {f: self.capacity_lies.get(f, self.room.get(f, 0))
                  for f in flavors}
        name = az if by == 'az' else ''
        return {'by': by, 'flavors': [], 'hosts_counted': 3,
                'hosts_skipped': {}, 'engine_fallbacks': 0,
                'generated_at': '2026-12-01T00:00:00Z',
                'scopes': [{'scope': by, 'name': name, 'capacity': counts,
                            'placement_only': counts,
                            'largest_flavor': None, 'fragmentation': {},
                            'hosts': 3}]}


class _Compute:

    def __init__(self, cloud):
        self.cloud = cloud

    def find_flavor(self, name, ignore_missing=True):
        self.cloud.check('find_flavor')
        found = self.cloud.flavors.get(name)
        if found is None and not ignore_missing:
            raise sdk_exc.NotFoundException('No Flavor found for %s' % name)
        return found

    def _flavor_by_id(self, flavor_id):
        for flavor in self.cloud.flavors.values():
            if flavor.id == flavor_id:
                return flavor
        raise sdk_exc.BadRequestException('Flavor %s could not be found'
                                          % flavor_id)

    def create_server(self, **attrs):
        cloud = self.cloud
        cloud.check('create_server')
        cloud.creates += 1
        for hook in cloud.on_create:
            hook()
        flavor = self._flavor_by_id(attrs['flavor_id'])
        if attrs.get('image_id') not in cloud.images:
            raise sdk_exc.BadRequestException('Image %s could not be found'
                                              % attrs.get('image_id'))
        count = attrs.get('min_count', 1)
        if count != attrs.get('max_count', 1):
            raise AssertionError('the broker boots min_count = max_count')
        net_id = attrs['networks'][0]['uuid']
        network = next(n for n in cloud.networks.values() if n.id == net_id)
        hints = attrs.get('scheduler_hints') or {}
        group = cloud.groups.get(hints.get('group'))
        fits = cloud.room.get(flavor.name, 0) >= count and \
            network.total_ips - network.used_ips >= count
        created = []
        for i in range(count):
            name = attrs['name'] if count == 1 else '%s-%d' % (
                attrs['name'], i + 1)
            server = types.SimpleNamespace(
                id=_new_id('server'), name=name, status='BUILD',
                metadata=dict(attrs.get('metadata') or {}),
                flavor={'original_name': flavor.name,
                        'extra_specs': dict(flavor.extra_specs)},
                fault=None, polls=0, fits=fits,
                availability_zone=attrs.get('availability_zone'))
            cloud.servers[server.id] = server
            created.append(server)
            if group is not None:
                group.member_ids.append(server.id)
        if fits:
            cloud.room[flavor.name] -= count
            for server in created:
                port = types.SimpleNamespace(id=_new_id('port'),
                                             device_id=server.id,
                                             network_id=net_id)
                cloud.ports[port.id] = port
                network.used_ips += 1
        # Nova answers 202 with the first server only.
        return types.SimpleNamespace(id=created[0].id, name=created[0].name)

    def _advance(self, server):
        if server.status != 'BUILD':
            return
        server.polls += 1
        if not server.fits:
            server.status = 'ERROR'
            server.fault = {'code': 500, 'message': NO_VALID_HOST}
        elif self.cloud.build_polls is not None and \
                server.polls > self.cloud.build_polls:
            server.status = 'ACTIVE'

    def servers(self, details=True, all_projects=False, name=None):
        self.cloud.check('servers')
        found = []
        for server in list(self.cloud.servers.values()):
            if name is not None and not re.search(name, server.name):
                continue
            self._advance(server)
            found.append(server)
        return iter(found)

    def find_server(self, server_id, ignore_missing=True):
        self.cloud.check('find_server')
        return self.cloud.servers.get(server_id)

    def delete_server(self, server_id, ignore_missing=True):
        cloud = self.cloud
        cloud.check('delete_server')
        server = cloud.servers.pop(server_id, None)
        if server is None:
            return
        for group in cloud.groups.values():
            if server_id in group.member_ids:
                group.member_ids.remove(server_id)
        if server.fits:
            cloud.room[server.flavor['original_name']] += 1
        if not cloud.leak_ports:
            for port in [p for p in cloud.ports.values()
                         if p.device_id == server_id]:
                self.cloud.network.delete_port(port)

    def server_groups(self, all_projects=False):
        # Nova: the caller's project's groups, every project's with
        # all_projects (an admin's call)
        self.cloud.check('server_groups')
        return iter([g for g in self.cloud.groups.values()
                     if all_projects or
                     g.project_id == self.cloud.current_project_id])

    def create_server_group(self, name, policy):
        self.cloud.check('create_server_group')
        group = types.SimpleNamespace(
            id=_new_id('group'), name=name, policy=policy,
            project_id=self.cloud.current_project_id, member_ids=[])
        self.cloud.groups[group.id] = group
        return group

    def delete_server_group(self, group, ignore_missing=True):
        self.cloud.check('delete_server_group')
        self.cloud.groups.pop(group.id, None)


class _Network:

    def __init__(self, cloud):
        self.cloud = cloud

    def find_network(self, name, ignore_missing=True):
        self.cloud.check('find_network')
        return self.cloud.networks.get(name)

    def get_network_ip_availability(self, network_id):
        self.cloud.check('get_network_ip_availability')
        network = next(n for n in self.cloud.networks.values()
                       if n.id == network_id)
        return types.SimpleNamespace(network_id=network.id,
                                     total_ips=network.total_ips,
                                     used_ips=network.used_ips)

    def ports(self, device_id=None):
        self.cloud.check('ports')
        return iter([p for p in self.cloud.ports.values()
                     if device_id is None or p.device_id == device_id])

    def delete_port(self, port, ignore_missing=True):
        self.cloud.check('delete_port')
        if self.cloud.ports.pop(port.id, None) is not None:
            for network in self.cloud.networks.values():
                if network.id == port.network_id:
                    network.used_ips -= 1


class _Image:

    def __init__(self, cloud):
        self.cloud = cloud

    def find_image(self, name, ignore_missing=True):
        self.cloud.check('find_image')
        if name in self.cloud.images:
            return types.SimpleNamespace(id=name, name=name)
        return None


class _Response:

    def __init__(self, status_code, body):
        self.status_code = status_code
        self._body = body
        self.reason = 'fake'
        self.text = json.dumps(body)

    def json(self):
        return self._body


class _Session:
    """The keystoneauth session: the capacity API behind the catalog."""

    def __init__(self, cloud):
        self.cloud = cloud

    def request(self, url, method, endpoint_filter=None, params=None,
                **kwargs):
        self.cloud.check('capacity')
        assert (endpoint_filter or {}).get('service_type') == \
            'numa-capacity', endpoint_filter
        if self.cloud.capacity_status is not None:
            return _Response(self.cloud.capacity_status, {'errors': [{
                'status': self.cloud.capacity_status,
                'title': 'Service Unavailable',
                'detail': 'The capacity cannot be counted now, a backend '
                          'is unreachable: placement'}]})
        flavors = [v for k, v in params if k == 'flavor']
        query = dict(params)
        return _Response(200, self.cloud.capacity_report(
            flavors, query.get('by', 'cloud'), query.get('az')))
