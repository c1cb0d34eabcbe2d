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

"""openstack-placement in this process, for tests and benchmarks.

Placement's own WSGI application on an in-memory sqlite database, called
through ``placement.direct`` (wsgi-intercept: no socket, no HTTP server),
so that a test or a bench can ask placement's real queries of a cloud it
wrote.  Placement's database engine is global to a process (its
``db_api``): :func:`configure` sets it up once, and every user shares
that database (:meth:`Placement.reset` empties it).

:meth:`Placement.create` writes compute nodes from a plain description
and returns them as the cloud reader's
:class:`~nova_sched_ext.cloud.placement.Provider`, with their
aggregates.
"""

import contextlib
import uuid as uuid_lib

from nova_sched_ext.cloud import placement as p

#: the resource classes and traits :meth:`Placement.create` creates when
#: a description names them
CUSTOM_PREFIX = 'CUSTOM_'

_PLACEMENT = {}


def configure():
    """Placement's configuration on an in-memory sqlite, once per process."""
    if 'conf' not in _PLACEMENT:
        from oslo_config import cfg
        from placement import conf as placement_conf
        from placement import db_api
        from placement import deploy
        conf = cfg.ConfigOpts()
        placement_conf.register_opts(conf)
        conf.set_default('connection', 'sqlite://',
                         group='placement_database')
        conf([], default_config_files=[])
        conf.set_override('sync_on_startup', True,
                          group='placement_database')
        db_api.configure(conf)
        deploy.update_database(conf)
        # Once: placement.direct loads the application for every request,
        # which would migrate the schema each time.
        conf.set_override('sync_on_startup', False,
                          group='placement_database')
        _PLACEMENT['conf'] = conf
    return _PLACEMENT['conf']


class Placement(object):
    """A client of the in-process placement (a keystoneauth adapter)."""

    def __init__(self, client):
        self.client = client

    def get(self, url, version=None, global_request_id=None):
        """As Nova's report client's ``get``: the response, any status."""
        return self.client.get(url, microversion=version)

    def call(self, method, url, body=None, version='1.36', ok=(200, 204)):
        kwargs = {'microversion': version}
        if body is not None:
            kwargs['json'] = body
        resp = getattr(self.client, method)(url, **kwargs)
        if resp.status_code not in ok:
            raise RuntimeError('placement answered %s %s with HTTP %d: %s'
                               % (method.upper(), url, resp.status_code,
                                  resp.text))
        return resp.json() if resp.status_code == 200 else None

    def ensure(self, classes=(), traits=()):
        """Create the custom resource classes and traits named here.

        Placement refuses a query that names one it does not know.
        """
        for name in sorted(classes):
            if name.startswith(CUSTOM_PREFIX):
                self.call('put', '/resource_classes/%s' % name,
                          ok=(201, 204))
        for name in sorted(traits):
            if name.startswith(CUSTOM_PREFIX):
                self.call('put', '/traits/%s' % name, ok=(201, 204))

    def reset(self):
        providers = self.call('get', '/resource_providers')[
            'resource_providers']
        for rp in providers:
            allocations = self.call(
                'get', '/resource_providers/%s/allocations' % rp['uuid'])
            for consumer in allocations['allocations']:
                self.call('delete', '/allocations/%s' % consumer,
                          ok=(204, 404))
        # children before their parents: placement refuses the other way
        while providers:
            parents = {rp['parent_provider_uuid'] for rp in providers}
            leaves = [rp for rp in providers if rp['uuid'] not in parents]
            for rp in leaves:
                self.call('delete', '/resource_providers/%s' % rp['uuid'])
            providers = [rp for rp in providers if rp not in leaves]

    def create(self, cloud):
        """Write ``cloud``; its providers, in order.

        ``cloud``: one mapping per compute node: ``inventories``
        ({resource class: :class:`~nova_sched_ext.cloud.placement.
        Inventory`}), ``usages`` ({resource class: used}, written as one
        allocation; it may exceed the inventory's capacity, as placement
        allows once a ratio or reserve changes), ``traits`` and
        ``aggregates``.  Custom resource classes and traits are created.
        """
        self.ensure({rc for spec in cloud for rc in spec['inventories']},
                    {t for spec in cloud for t in spec['traits']})
        providers = []
        for i, spec in enumerate(cloud):
            uuid = str(uuid_lib.uuid4())
            self.call('post', '/resource_providers',
                      {'uuid': uuid, 'name': 'rp%d-%s' % (i, uuid[:8])})
            base_url = '/resource_providers/%s' % uuid
            # Usages first, on inventories that allow them; then the
            # real inventories, which may leave a provider over capacity
            # (placement allows that: a ratio or reserve changed later).
            gen = 0
            if spec['usages']:
                gen = self.call('put', base_url + '/inventories', {
                    'resource_provider_generation': gen,
                    'inventories': {rc: {'total': used, 'max_unit': used}
                                    for rc, used in spec['usages'].items()},
                })['resource_provider_generation']
                consumer = str(uuid_lib.uuid4())
                self.call('put', '/allocations/%s' % consumer, {
                    'allocations': {uuid: {'resources': spec['usages']}},
                    'project_id': str(uuid_lib.uuid4()),
                    'user_id': str(uuid_lib.uuid4()),
                    'consumer_generation': None})
                gen = self.call('get', base_url)['generation']
            if spec['inventories']:
                gen = self.call('put', base_url + '/inventories', {
                    'resource_provider_generation': gen,
                    'inventories': {rc: dict(inv._asdict())
                                    for rc, inv in
                                    spec['inventories'].items()},
                })['resource_provider_generation']
            if spec['traits']:
                gen = self.call('put', base_url + '/traits', {
                    'resource_provider_generation': gen,
                    'traits': sorted(spec['traits'])})[
                        'resource_provider_generation']
            if spec['aggregates']:
                self.call('put', base_url + '/aggregates', {
                    'resource_provider_generation': gen,
                    'aggregates': sorted(spec['aggregates'])})
            providers.append(p.Provider(
                uuid=uuid, name='rp%d' % i, parent_uuid=None,
                inventories=spec['inventories'],
                usages={rc: spec['usages'].get(rc, 0)
                        for rc in spec['inventories']},
                traits=frozenset(spec['traits']),
                aggregates=frozenset(spec['aggregates'])))
        return providers


class Context(object):
    """The request context a reader needs: a global request id."""

    def __init__(self, global_id='req-nse-placement-direct'):
        self.global_id = global_id


class Counting(object):
    """A client (a :class:`Placement`), counting the GETs made through it.

    What a :class:`~nova_sched_ext.cloud.placement.PlacementReader` is
    given in place of Nova's report client.
    """

    def __init__(self, client):
        self.client = client
        self.calls = 0

    def get(self, url, version=None, global_request_id=None):
        self.calls += 1
        return self.client.get(url, version=version,
                               global_request_id=global_request_id)


@contextlib.contextmanager
def running():
    """A :class:`Placement` of the in-process placement, while entered."""
    from placement import direct
    with direct.PlacementDirect(configure()) as client:
        yield Placement(client)
