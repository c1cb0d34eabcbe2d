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

"""One cluster as the broker sees it: its public APIs through openstacksdk.

:class:`ClusterClient` wraps the ``openstack.connection.Connection`` of
one cluster (its ``clouds.yaml`` entry and region) and does the reads of
the decision (:meth:`~ClusterClient.view`: image, free addresses through
Neutron's network-ip-availability, the capacity API, preemptible
instances, deployment-set members) and the boot: one multi-create, a
bounded wait for ACTIVE, and on failure the deletion of every server the
request created and of any port left behind, checked.

The capacity API (catalog service type ``numa-capacity``, see
:mod:`nova_sched_ext.capacity.api`) is read with the client of the
OpenStackClient plugin (:class:`nova_sched_ext.capacity.osc.CapacityClient`)
over the connection's keystoneauth session.  Nothing here imports Nova.
"""

import re
import uuid

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc
from osc_lib import exceptions as osc_exc
from oslo_log import log as logging

from nova_sched_ext.broker import planning
from nova_sched_ext.capacity import osc as capacity_osc
from nova_sched_ext import exception as sched_ext_exception

LOG = logging.getLogger(__name__)

#: the flavor extra spec of preemptible instances
#: (``nova_sched_ext.preemption.extra_specs``)
PREEMPTIBLE_SPEC = 'nova_sched_ext:preemptible'
#: server metadata key: which broker request created the server
REQUEST_TAG = 'nova_sched_ext_broker_request'
#: the scheduler hint of the package's deployment-set filter
SET_STRATEGY_HINT = 'deployment_set_strategy'

_TRUE = ('1', 'true', 'yes', 'on')

#: what an unreachable cloud or refused credentials raise
UNREACHABLE = (ks_exc.ClientException, sdk_exc.SDKException, OSError)


class UnusableCloudEntry(sched_ext_exception.NovaSchedExtError):
    """A ``clouds.yaml`` entry that cannot make a connection or a token.

    An incomplete entry (an ``auth_url`` alone, a ``v3token`` without its
    token) fails in keystoneauth's auth plugin with whatever its code
    raises (``TypeError``, a bare ``Exception``): the message says which
    entry and why.
    """


#: what makes a cluster unusable for this request: it is skipped
UNUSABLE = UNREACHABLE + (UnusableCloudEntry,)


# Polls of a boot's servers that may fail in a row before the boot is
# given up on as the cluster's failure.
POLLS_BEFORE_GIVING_UP = 3


def one_line(exc):
    text = ' '.join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + '...'


class BootFailed(sched_ext_exception.NovaSchedExtError):
    """A boot that did not give ``count`` ACTIVE servers; cleaned up."""


class CleanupFailed(sched_ext_exception.NovaSchedExtError):
    """Servers or ports of a failed boot are still there; says which."""


class ClusterClient:
    """The broker's view of, and actions on, one cluster.

    :param cluster: its :class:`~nova_sched_ext.broker.config.Cluster`
    :param connection: an ``openstack.connection.Connection`` (or the
        tests' fake cloud of the same shape)
    :param clock, sleep: the monotonic clock and sleep of the waits
    """

    def __init__(self, cluster, connection, clock, sleep):
        self.cluster = cluster
        self.conn = connection
        self._clock = clock
        self._sleep = sleep
        self._flavors = {}

    # -- reads -----------------------------------------------------------

    def flavor(self, name):
        """The cluster's flavor ``name``, or None (cached)."""
        if name not in self._flavors:
            self._flavors[name] = self.conn.compute.find_flavor(
                name, ignore_missing=True)
        return self._flavors[name]

    def view(self, request, variants, count_preemptible):
        """A :class:`~.planning.ClusterView` for ``request``.

        An unreachable cluster or refused credentials give a view with
        ``error`` set; a capacity API that cannot answer a view with
        ``capacity`` None and ``capacity_error`` set.
        """
        view = planning.ClusterView(cluster=self.cluster)
        try:
            self.authorize()
            view.image_present = self.conn.image.find_image(
                request.image, ignore_missing=True) is not None
            network = self.conn.network.find_network(
                request.network, ignore_missing=True)
            if network is not None:
                availability = self.conn.network.get_network_ip_availability(
                    network.id)
                view.free_ips = max(0, (availability.total_ips or 0) -
                                    (availability.used_ips or 0))
            view.missing_flavors = frozenset(
                v.flavor for v in variants if self.flavor(v.flavor) is None)
            if count_preemptible:
                view.preemptible = self.preemptible_count()
            if request.deployment_set:
                group = self.set_group(request.deployment_set)
                view.set_members = len(group.member_ids or ()) \
                    if group is not None else 0
        except UNUSABLE as exc:
            view.error = one_line(exc)
            LOG.warning('Cluster %s (cloud %s, region %s) skipped: %s',
                        self.cluster.name, self.cluster.cloud,
                        self.cluster.region, view.error)
            return view
        flavors = [v.flavor for v in variants
                   if v.flavor not in view.missing_flavors and
                   v.pool in self.cluster.pools]
        if flavors:
            try:
                view.capacity = self.capacity(flavors)
            except CapacityUnavailable as exc:
                view.capacity_error = str(exc)
                LOG.warning('Cluster %s: the capacity API cannot be read '
                            '(%s); the cluster is tried last, on Nova\'s '
                            'answer alone', self.cluster.name, exc)
        else:
            view.capacity = {}
        return view

    def authorize(self):
        """Get the cluster's token, the first call of a survey.

        :raises UnusableCloudEntry: the entry's auth plugin cannot run
        """
        try:
            self.conn.authorize()
        except UNREACHABLE:
            raise
        except Exception as exc:
            # keystoneauth's plugins check their options only when asked
            # for a token, and raise what their code does.
            LOG.debug('Cluster %s: no token from the clouds.yaml entry %s',
                      self.cluster.name, self.cluster.cloud, exc_info=True)
            raise UnusableCloudEntry(
                'the clouds.yaml entry %s cannot be used: %s'
                % (self.cluster.cloud, one_line(exc)))

    def capacity(self, flavors):
        """``{flavor: instances}`` from the cluster's capacity API.

        Scoped to the cluster's zone when it has one.

        :raises CapacityUnavailable: no endpoint, an error answer,
            something other than a report
        """
        zone = self.cluster.zone
        api = capacity_osc.CapacityClient(self.conn.session,
                                          region_name=self.cluster.region)
        try:
            report = api.get_capacity(flavors=flavors,
                                      by='az' if zone else 'cloud', az=zone)
        except (osc_exc.CommandError,) + UNREACHABLE as exc:
            raise CapacityUnavailable(one_line(exc))
        try:
            scopes = report['scopes']
            wanted = ('az', zone) if zone else ('cloud', None)
            for scope in scopes:
                if scope['scope'] == wanted[0] and (
                        wanted[1] is None or scope['name'] == wanted[1]):
                    return {f: int(scope['capacity'].get(f, 0))
                            for f in flavors}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CapacityUnavailable('not a capacity report: %s'
                                      % one_line(exc))
        if zone:
            # the zone has no compute host the count could read
            return {f: 0 for f in flavors}
        raise CapacityUnavailable('the report has no cloud scope')

    def preemptible_count(self):
        """Preemptible instances in the cluster (every project)."""
        held = 0
        for server in self.conn.compute.servers(details=True,
                                                all_projects=True):
            specs = (server.flavor or {}).get('extra_specs') or {}
            if str(specs.get(PREEMPTIBLE_SPEC, '')).lower() in _TRUE:
                held += 1
        return held

    def set_group(self, name):
        """The server group of deployment set ``name``, or None.

        A set belongs to the project that asked for it, the broker's
        account's project in this cluster: a group of that name in
        another project is someone else's set, neither joined nor
        counted.  Nova lists the caller's own project's groups unless
        asked for ``all_projects``; the project check keeps the answer
        right should a listing (or a proxy in front of it) return more.
        """
        project_id = self.conn.current_project_id
        for group in self.conn.compute.server_groups():
            if group.name != name:
                continue
            if group.project_id is not None and \
                    group.project_id != project_id:
                LOG.debug('Cluster %s: server group %s (%s) belongs to '
                          'project %s, not ours: not deployment set %s',
                          self.cluster.name, group.id, group.name,
                          group.project_id, name)
                continue
            return group
        return None

    # -- the boot --------------------------------------------------------

    def boot(self, request, variant, timeout, poll_interval):
        """Boot ``request.count`` servers of ``variant``; their IDs.

        :raises BootFailed: the cluster refused the boot, a server went to
            ERROR (NoValidHost: the capacity read was stale) or the
            servers were not all ACTIVE within ``timeout``; whatever was
            created has been deleted
        :raises CleanupFailed: the deletion of the failed boot's servers
            or ports could not be completed
        """
        flavor = self.flavor(variant.flavor)
        image = self.conn.image.find_image(request.image,
                                           ignore_missing=True)
        network = self.conn.network.find_network(request.network,
                                                 ignore_missing=True)
        if flavor is None or image is None or network is None:
            raise BootFailed('flavor, image or network vanished since the '
                             'survey')
        token = uuid.uuid4().hex
        name = '%s-%s' % (request.name, token[:8])
        group, group_created = None, False
        if request.deployment_set:
            group = self.set_group(request.deployment_set)
            if group is None:
                group = self.conn.compute.create_server_group(
                    name=request.deployment_set, policy='anti-affinity')
                group_created = True
        attrs = dict(name=name, flavor_id=flavor.id, image_id=image.id,
                     networks=[{'uuid': network.id}],
                     min_count=request.count, max_count=request.count,
                     metadata={REQUEST_TAG: token})
        if self.cluster.zone:
            attrs['availability_zone'] = self.cluster.zone
        if group is not None:
            attrs['scheduler_hints'] = {'group': group.id,
                                        SET_STRATEGY_HINT: 'host'}
        LOG.info('Cluster %s: booting %d x %s (%s)', self.cluster.name,
                 request.count, variant.flavor, name)
        try:
            try:
                self.conn.compute.create_server(**attrs)
            except UNREACHABLE as exc:
                raise BootFailed('the boot was refused: %s' % one_line(exc))
            return self._wait_active(name, token, request.count, timeout,
                                     poll_interval)
        except BootFailed:
            self.cleanup(name, token, timeout, poll_interval)
            if group_created:
                self._delete_group(group)
            raise

    def _servers_of(self, name, token):
        """The servers one boot created (name prefix and tag)."""
        pattern = '^%s(-[0-9]+)?$' % re.escape(name)
        return [s for s in self.conn.compute.servers(details=True,
                                                     name=pattern)
                if (s.metadata or {}).get(REQUEST_TAG) == token]

    def _wait_active(self, name, token, count, timeout, poll_interval):
        deadline = self._clock() + timeout
        failed_polls = 0
        while True:
            try:
                servers = self._servers_of(name, token)
            except UNREACHABLE as exc:
                # One dropped poll (a kept-alive connection the API closed
                # as the request went out, a proxy restarting) says little
                # about the boot; deleting a boot that is going well for it
                # would.  A cluster that keeps failing is given up on.
                failed_polls += 1
                if failed_polls >= POLLS_BEFORE_GIVING_UP or \
                        self._clock() >= deadline:
                    raise BootFailed(
                        'the cluster stopped answering during the boot '
                        '(%d polls in a row failed): %s'
                        % (failed_polls, one_line(exc)))
                LOG.warning('Cluster %s: poll %d of the boot %s failed, '
                            'polling again: %s', self.cluster.name,
                            failed_polls, name, one_line(exc))
                self._sleep(poll_interval)
                continue
            failed_polls = 0
            failed = [s for s in servers if s.status == 'ERROR']
            if failed:
                fault = (failed[0].fault or {}).get('message') or 'no fault'
                raise BootFailed('%d of %d servers went to ERROR: %s'
                                 % (len(failed), count, fault))
            active = [s for s in servers if s.status == 'ACTIVE']
            if len(active) == count:
                return sorted(s.id for s in active)
            if self._clock() >= deadline:
                raise BootFailed(
                    'only %d of %d servers ACTIVE after %g s'
                    % (len(active), count, timeout))
            self._sleep(poll_interval)

    def cleanup(self, name, token, timeout, poll_interval):
        """Delete the servers of a boot and their ports, and check it.

        :raises CleanupFailed: something is still there at the deadline
        """
        deadline = self._clock() + timeout
        try:
            servers = self._servers_of(name, token)
            ids = [s.id for s in servers]
            for server_id in ids:
                self.conn.compute.delete_server(server_id,
                                                ignore_missing=True)
            while True:
                left = [i for i in ids if self.conn.compute.find_server(
                    i, ignore_missing=True) is not None]
                if not left:
                    break
                if self._clock() >= deadline:
                    raise CleanupFailed(
                        'cluster %s: servers %s of the failed boot are '
                        'still there after %g s; delete them by hand'
                        % (self.cluster.name, ', '.join(left), timeout))
                self._sleep(poll_interval)
            # Nova deletes the ports it created; one it could not is
            # deleted here, so that no address stays taken.
            for server_id in ids:
                for port in self.conn.network.ports(device_id=server_id):
                    LOG.warning('Cluster %s: deleting port %s left by the '
                                'deleted server %s', self.cluster.name,
                                port.id, server_id)
                    self.conn.network.delete_port(port, ignore_missing=True)
            left_ports = [p.id for i in ids
                          for p in self.conn.network.ports(device_id=i)]
        except UNREACHABLE as exc:
            raise CleanupFailed(
                'cluster %s: the failed boot %s could not be cleaned up (%s); '
                'delete its servers (metadata %s=%s) by hand'
                % (self.cluster.name, name, one_line(exc), REQUEST_TAG,
                   token))
        if left_ports:
            raise CleanupFailed('cluster %s: ports %s of the failed boot '
                                'could not be deleted' % (
                                    self.cluster.name, ', '.join(left_ports)))
        LOG.info('Cluster %s: the %d servers of the failed boot %s are '
                 'deleted, no port left', self.cluster.name, len(ids), name)

    def _delete_group(self, group):
        try:
            self.conn.compute.delete_server_group(group,
                                                  ignore_missing=True)
        except UNREACHABLE as exc:
            LOG.warning('Cluster %s: the server group %s created for the '
                        'failed boot could not be deleted: %s',
                        self.cluster.name, group.id, one_line(exc))


class CapacityUnavailable(sched_ext_exception.UpstreamUnavailable):
    """The capacity API could not answer; the message says why."""
