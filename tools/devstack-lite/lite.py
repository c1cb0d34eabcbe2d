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


"""API-side steps of devstack-lite, run with the lite virtualenv's python.

``wait-http URL [--timeout S]``
    Wait until URL answers HTTP (any status below 500).
``keystone-setup``
    What devstack's lib/keystone and the service libs do through the
    openstack client: the ``service`` project, the ``nova`` and
    ``placement`` service users (roles admin and service), and the
    services and endpoints of compute, placement, image and network in
    region ``NSE_LITE_REGION`` (created if missing; default RegionOne).
``catalog-service NAME TYPE DESCRIPTION``
    devstack's ``get_or_create_service``: the service of that type, created
    if missing; prints its ID.
``catalog-endpoint SERVICE REGION PUBLIC_URL [ADMIN_URL [INTERNAL_URL]]``
    devstack's ``get_or_create_endpoint``: an endpoint per URL given, for
    the service of that name or type; prints the public one's ID.
``requirements [--nova-version NN] [--repo DIR]``
    Print the requirements devstack-lite installs into its virtualenv for
    Nova release NN (31 = 2025.1 ... 34 = 2026.2; default 34, or
    ``NSE_LITE_NOVA_VERSION``): ``requirements.txt`` with its keystone,
    placement, nova and tempest lines replaced by that OpenStack release's,
    and ``-c tools/constraints/nova-NN.txt`` first when the repository has
    that file (the pins the project keeps for the release).
``release-info [--nova-version NN]``
    Print ``NAME=VALUE`` lines (``NSE_LITE_RELEASE``, ``NSE_LITE_DEVSTACK``,
    ``NSE_LITE_FAKE_DRIVER``, ``NSE_LITE_FAKE_STATE_PATHS``,
    ``NSE_LITE_API_ENV``) that run.sh
    evaluates to configure the cloud as that release's devstack branch does.
``nova-setup``
    Create the flavors tempest's ``flavor_ref`` options name, then wait
    until every fake compute is a hypervisor in Nova and a resource provider
    with its NUMA layout trait in placement; print the hosts. In region
    ``NSE_LITE_REGION`` when set (the two-cluster run has two).

The endpoints and credentials come from ``NSE_LITE_*`` environment
variables set by run.sh.
"""

import argparse
import os
import sys
import time
import urllib.error
import urllib.request

ENV = os.environ

# Nova major -> the OpenStack release and its keystone, placement and
# tempest releases (tempest is branchless: the tag made for that release).
# devstack's stable/2025.1 and stable/2025.2 run the fake computes on
# fake.FakeDriver, all in nova.conf's state_path; from stable/2026.1 on
# fake.FakeDriverWithoutFakeNodes, each with a state_path (and compute_id
# file) of its own. Nova 31 and 32 patch the API with eventlet when it is
# imported (devstack serves it with uWSGI); under gunicorn's thread worker
# that leaves every request after the first hanging, so their API runs
# with OS_NOVA_DISABLE_EVENTLET_PATCHING=1 here ('api_env').
RELEASES = {
    31: {'release': '2025.1', 'keystone': 27, 'placement': 13,
         'tempest': '43.0.0', 'fake_driver': 'fake.FakeDriver',
         'fake_state_paths': False,
         'api_env': 'OS_NOVA_DISABLE_EVENTLET_PATCHING=1'},
    32: {'release': '2025.2', 'keystone': 28, 'placement': 14,
         'tempest': '45.0.0', 'fake_driver': 'fake.FakeDriver',
         'fake_state_paths': False,
         'api_env': 'OS_NOVA_DISABLE_EVENTLET_PATCHING=1'},
    33: {'release': '2026.1', 'keystone': 29, 'placement': 15,
         'tempest': '46.2.0',
         'fake_driver': 'fake.FakeDriverWithoutFakeNodes',
         'fake_state_paths': True},
    34: {'release': '2026.2', 'keystone': 30, 'placement': 16,
         'tempest': '47.0.0',
         'fake_driver': 'fake.FakeDriverWithoutFakeNodes',
         'fake_state_paths': True},
}
DEFAULT_NOVA_VERSION = 34
HERE = os.path.dirname(os.path.abspath(__file__))


def nova_version(value):
    """The Nova major of ``value`` (31 ... 34), or exit with one line."""
    value = (value or '').strip() or str(DEFAULT_NOVA_VERSION)
    if value.isdigit() and int(value) in RELEASES:
        return int(value)
    sys.exit('NSE_LITE_NOVA_VERSION must be one of %s, not %r'
             % (', '.join('%d (%s)' % (major, RELEASES[major]['release'])
                          for major in sorted(RELEASES)), value))


def release_pins(major):
    """The requirement of each service distribution for Nova ``major``."""
    release = RELEASES[major]
    return {
        'keystone': 'keystone==%d.*' % release['keystone'],
        'openstack-placement': 'openstack-placement==%d.*'
                               % release['placement'],
        'nova': 'nova==%d.*' % major,
        'tempest': 'tempest==%s' % release['tempest'],
    }


def _requirement_name(line):
    line = line.split('#', 1)[0].strip()
    for separator in '<>=!~;[ ':
        line = line.split(separator, 1)[0]
    return line.lower().replace('_', '-')


def release_requirements(lines, major, constraints=None):
    """devstack-lite's requirement ``lines`` for Nova ``major``.

    The lines of the service distributions are replaced by the release's
    pins (any missing is added); ``constraints``, a path, goes first as
    ``-c``. Comments and the other lines stay as they are.
    """
    pins = release_pins(major)
    out = ['-c %s' % constraints] if constraints else []
    for line in lines:
        line = line.rstrip('\n')
        name = _requirement_name(line)
        if name in pins:
            comment = line.partition('#')[2].strip()
            line = pins.pop(name) + (' # ' + comment if comment else '')
        out.append(line)
    out.extend(pins[name] for name in sorted(pins))
    return out


def constraints_file(repo, major):
    """The repository's constraints file for Nova ``major``, or None."""
    path = os.path.join(repo, 'tools', 'constraints', 'nova-%d.txt' % major)
    return path if os.path.isfile(path) else None


def requirements(args):
    major = nova_version(args.nova_version)
    with open(os.path.join(HERE, 'requirements.txt')) as source:
        lines = source.readlines()
    for line in release_requirements(
            lines, major, constraints_file(args.repo, major)):
        print(line)
    return 0


def release_info(args):
    major = nova_version(args.nova_version)
    release = RELEASES[major]
    print('NSE_LITE_RELEASE=%s' % release['release'])
    print('NSE_LITE_DEVSTACK=%s' % ('master' if major == max(RELEASES)
                                    else 'stable/' + release['release']))
    print('NSE_LITE_FAKE_DRIVER=%s' % release['fake_driver'])
    print('NSE_LITE_FAKE_STATE_PATHS=%d' % release['fake_state_paths'])
    print('NSE_LITE_API_ENV=%s' % release.get('api_env', ''))
    return 0


def wait_http(url, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return exc.code
            last = exc
        except (urllib.error.URLError, OSError) as exc:
            last = exc
        time.sleep(0.5)
    sys.exit('%s did not answer within %d s (last error: %s)'
             % (url, timeout, last))


def _admin_session():
    from keystoneauth1.identity import v3
    from keystoneauth1 import session

    auth = v3.Password(auth_url=ENV['NSE_LITE_KEYSTONE_URL'],
                       username='admin',
                       password=ENV['NSE_LITE_PASSWORD'],
                       project_name='admin',
                       user_domain_id='default',
                       project_domain_id='default')
    return session.Session(auth=auth)


class Identity:
    """The few identity v3 calls the setup needs, idempotent."""

    def __init__(self, sess):
        self.sess = sess
        self.url = ENV['NSE_LITE_KEYSTONE_URL'] + '/v3'

    def _find(self, collection, **query):
        found = self.sess.get('%s/%s' % (self.url, collection),
                              params=query).json()[collection]
        return found[0] if found else None

    def _create(self, collection, body):
        key = collection[:-1]
        return self.sess.post('%s/%s' % (self.url, collection),
                              json={key: body}).json()[key]

    def ensure(self, collection, body, **query):
        return self._find(collection, **query) or self._create(collection,
                                                               body)

    def ensure_region(self, region):
        """The region (keystone-manage bootstrap makes only the first)."""
        url = '%s/regions/%s' % (self.url, region)
        if self.sess.get(url, raise_exc=False).status_code == 404:
            self.sess.post('%s/regions' % self.url,
                           json={'region': {'id': region}})

    def grant(self, project, user, role_name):
        role = self._find('roles', name=role_name)
        if role is None:
            sys.exit('keystone has no role %r (keystone-manage bootstrap '
                     'creates admin, member, reader and service)' % role_name)
        self.sess.put('%s/projects/%s/users/%s/roles/%s'
                      % (self.url, project['id'], user['id'], role['id']))


def service_user(identity, name):
    """The service user ``name``: admin and service in project service.

    As devstack creates the users of its services; idempotent.
    """
    project = identity.ensure(
        'projects', {'name': 'service', 'domain_id': 'default',
                     'description': 'devstack-lite service users'},
        name='service', domain_id='default')
    user = identity.ensure(
        'users', {'name': name, 'domain_id': 'default',
                  'password': ENV['NSE_LITE_PASSWORD'],
                  'default_project_id': project['id']},
        name=name, domain_id='default')
    for role in ('admin', 'service'):
        identity.grant(project, user, role)
    return user


def keystone_setup(args):
    identity = Identity(_admin_session())
    region = ENV.get('NSE_LITE_REGION', 'RegionOne')
    identity.ensure_region(region)
    for name in ('nova', 'placement'):
        service_user(identity, name)
    for name, service_type, url in (
            ('nova', 'compute', ENV['NSE_LITE_NOVA_URL'] + '/v2.1'),
            ('placement', 'placement', ENV['NSE_LITE_PLACEMENT_URL']),
            ('glance', 'image', ENV['NSE_LITE_STUB_URL'] + '/image'),
            ('neutron', 'network', ENV['NSE_LITE_STUB_URL'] + '/network')):
        service = identity.ensure(
            'services', {'name': name, 'type': service_type,
                         'enabled': True},
            type=service_type)
        for interface in ('public', 'internal'):
            identity.ensure(
                'endpoints', {'service_id': service['id'], 'url': url,
                              'interface': interface, 'region_id': region},
                service_id=service['id'], interface=interface,
                region_id=region)
        print('%-10s %s' % (service_type, url))
    return 0


def catalog_service(args):
    identity = Identity(_admin_session())
    service = identity.ensure(
        'services', {'name': args.name, 'type': args.type,
                     'description': args.description, 'enabled': True},
        type=args.type)
    print(service['id'])
    return 0


def catalog_endpoint(args):
    identity = Identity(_admin_session())
    service = (identity._find('services', type=args.service) or
               identity._find('services', name=args.service))
    if service is None:
        sys.exit('no service named or of type %r in the catalog'
                 % args.service)
    ids = {}
    for interface, url in (('public', args.public_url),
                           ('admin', args.admin_url),
                           ('internal', args.internal_url)):
        if not url:
            continue
        endpoint = identity.ensure(
            'endpoints', {'service_id': service['id'], 'url': url,
                          'interface': interface,
                          'region_id': args.region},
            service_id=service['id'], interface=interface,
            region_id=args.region)
        ids[interface] = endpoint['id']
    print(ids['public'])
    return 0


def nova_setup(args):
    from keystoneauth1 import adapter

    sess = _admin_session()
    region = ENV.get('NSE_LITE_REGION')
    compute = adapter.Adapter(sess, service_type='compute',
                              interface='public', region_name=region,
                              default_microversion='2.53')
    placement = adapter.Adapter(sess, service_type='placement',
                                interface='public', region_name=region,
                                default_microversion='1.6')

    for flavor_id, name, ram, vcpus, disk in (
            ('42', 'm1.lite', 256, 1, 1), ('84', 'm1.lite.alt', 512, 1, 1)):
        response = compute.get('/flavors/%s' % flavor_id,
                               raise_exc=False)
        if response.status_code == 404:
            compute.post('/flavors', json={'flavor': {
                'id': flavor_id, 'name': name, 'ram': ram, 'vcpus': vcpus,
                'disk': disk}})

    deadline = time.monotonic() + args.timeout
    hosts = {}
    while time.monotonic() < deadline:
        hypervisors = compute.get(
            '/os-hypervisors/detail').json()['hypervisors']
        hosts = {}
        for hypervisor in hypervisors:
            if hypervisor['state'] != 'up':
                continue
            traits = placement.get(
                '/resource_providers/%s/traits' % hypervisor['id'],
                raise_exc=False)
            if traits.status_code != 200:
                continue
            layouts = [t for t in traits.json()['traits']
                       if t.startswith('CUSTOM_NSE_NUMA_')]
            if layouts:
                hosts[hypervisor['service']['host']] = layouts[0]
        if len(hosts) >= args.computes:
            break
        time.sleep(2)
    for host in sorted(hosts):
        print('%-16s %s' % (host, hosts[host]))
    if len(hosts) < args.computes:
        sys.exit('only %d of %d computes are up with a NUMA layout trait '
                 'after %d s' % (len(hosts), args.computes, args.timeout))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    wait = sub.add_parser('wait-http')
    wait.add_argument('url')
    wait.add_argument('--timeout', type=int, default=60)
    sub.add_parser('keystone-setup')
    service = sub.add_parser('catalog-service')
    service.add_argument('name')
    service.add_argument('type')
    service.add_argument('description', nargs='?', default='')
    endpoint = sub.add_parser('catalog-endpoint')
    endpoint.add_argument('service')
    endpoint.add_argument('region')
    endpoint.add_argument('public_url')
    endpoint.add_argument('admin_url', nargs='?', default='')
    endpoint.add_argument('internal_url', nargs='?', default='')
    for name in ('requirements', 'release-info'):
        release = sub.add_parser(name)
        release.add_argument('--nova-version',
                             default=ENV.get('NSE_LITE_NOVA_VERSION', ''))
        if name == 'requirements':
            release.add_argument('--repo', default=os.path.dirname(
                os.path.dirname(HERE)))
    nova = sub.add_parser('nova-setup')
    nova.add_argument('--computes', type=int, required=True)
    nova.add_argument('--timeout', type=int, default=180)
    args = parser.parse_args(argv)
    if args.command == 'wait-http':
        wait_http(args.url, args.timeout)
        return 0
    commands = {'keystone-setup': keystone_setup,
                'catalog-service': catalog_service,
                'catalog-endpoint': catalog_endpoint,
                'nova-setup': nova_setup,
                'requirements': requirements,
                'release-info': release_info}
    return commands[args.command](args)


if __name__ == '__main__':
    sys.exit(main())
