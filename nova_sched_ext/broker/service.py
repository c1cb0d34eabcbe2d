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

"""The broker: survey the clusters, plan, boot, fall back.

:meth:`Broker.place` reads every cluster (:meth:`Broker.survey`), plans
(:func:`~nova_sched_ext.broker.planning.plan`) and boots the candidates
in order: the first whose ``count`` servers all become ACTIVE wins.  A
boot that fails (the cluster refuses it, a server goes to ERROR because
the capacity read was stale, the servers are not ACTIVE in time) is
cleaned up, its (cluster, variant) marked tried, and the next candidate
is booted, up to ``broker.max_attempts`` boots.  The :class:`Result`
says which variant in which cluster took the request, and every attempt
before, with its reason; each one is logged as it happens.

The clusters are read concurrently (``broker.survey_workers`` at once),
and every call to a cluster's APIs is bounded by its ``connect_timeout``
and ``read_timeout``: a cluster that does not answer, or whose
``clouds.yaml`` entry cannot be used, is skipped with one WARNING while
the others are read.
"""

from concurrent import futures
import dataclasses
import time
import typing

from oslo_log import log as logging

from nova_sched_ext.broker import choosers
from nova_sched_ext.broker import clusters as broker_clusters
from nova_sched_ext.broker import planning

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Attempt:
    cluster: str
    flavor: str
    #: 'active', 'failed' or 'skipped' (the cluster failed before)
    outcome: str
    reason: str

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Result:
    request: planning.Request
    plan: planning.Plan
    attempts: list
    cluster: typing.Optional[str] = None
    variant: typing.Optional[object] = None
    servers: list = dataclasses.field(default_factory=list)
    #: why the request was not placed, or None
    error: typing.Optional[str] = None

    @property
    def placed(self):
        return self.cluster is not None

    def to_dict(self):
        return {'placed': self.placed, 'cluster': self.cluster,
                'flavor': self.variant.flavor if self.variant else None,
                'pool': self.variant.pool if self.variant else None,
                'numa': self.variant.numa if self.variant else None,
                'servers': list(self.servers), 'error': self.error,
                'attempts': [a.to_dict() for a in self.attempts],
                'plan': self.plan.to_dict()}


def _connect_with_openstacksdk(cluster):
    """The openstacksdk ``Connection`` of ``cluster``.

    Every call through it, keystone's included, gives up after the
    cluster's ``connect_timeout`` to connect and ``read_timeout`` of
    silence; they replace the entry's ``api_timeout``.

    :raises broker_clusters.UnusableCloudEntry: the entry is incomplete
        (an ``auth_url`` alone, a ``v3token`` without its token, ...)
    """
    from keystoneauth1 import session as ks_session
    from openstack import config as sdk_config
    from openstack import connection as sdk_connection

    # requests takes a (connect, read) pair; keystoneauth's option, and
    # openstacksdk's api_timeout with it, is one number for both.
    timeouts = (cluster.connect_timeout, cluster.read_timeout)

    class TimedSession(ks_session.Session):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.timeout = timeouts

    try:
        region = sdk_config.OpenStackConfig(
            session_constructor=TimedSession).get_one(
                cloud=cluster.cloud, region_name=cluster.region)
        return sdk_connection.Connection(config=region)
    except broker_clusters.UNREACHABLE:
        raise
    except Exception as exc:
        # keystoneauth's loaders build the auth plugin from the entry's
        # keys and raise whatever its constructor does (a TypeError for a
        # token plugin without a token): one cluster's entry, one line.
        LOG.debug('Cluster %s: the clouds.yaml entry %s cannot be used',
                  cluster.name, cluster.cloud, exc_info=True)
        raise broker_clusters.UnusableCloudEntry(
            'the clouds.yaml entry %s cannot be used: %s'
            % (cluster.cloud, broker_clusters.one_line(exc)))


class Broker:
    """Places requests across the clusters of a configuration.

    :param conf: a :class:`~nova_sched_ext.broker.config.Config`
    :param connect: ``connect(cluster) -> Connection``; by default
        ``openstack.connect`` with the cluster's cloud and region
    :param chooser: a :class:`~.choosers.Chooser`; by default the one
        ``broker.chooser`` names
    """

    def __init__(self, conf, connect=None, chooser=None,
                 clock=time.monotonic, sleep=time.sleep):
        self.conf = conf
        self._connect = connect or _connect_with_openstacksdk
        self.chooser = chooser or choosers.load(conf)
        self._clock = clock
        self._sleep = sleep
        self._clients = {}

    def _client(self, cluster):
        """The cluster's client, or a one-line reason it has none."""
        client = self._clients.get(cluster.name)
        if client is None:
            try:
                connection = self._connect(cluster)
            except broker_clusters.UNUSABLE as exc:
                reason = broker_clusters.one_line(exc)
                LOG.warning('Cluster %s (cloud %s, region %s) skipped: '
                            'cannot connect: %s', cluster.name,
                            cluster.cloud, cluster.region, reason)
                return None, 'cannot connect: %s' % reason
            client = broker_clusters.ClusterClient(
                cluster, connection, self._clock, self._sleep)
            # Each survey worker sets its own cluster's key only.
            self._clients[cluster.name] = client
        return client, None

    def _view(self, cluster, request, variants, count_preemptible):
        client, error = self._client(cluster)
        if client is None:
            return planning.ClusterView(cluster=cluster, error=error)
        return client.view(request, variants, count_preemptible)

    def survey(self, request):
        """``{cluster name: ClusterView}`` for ``request``.

        The clusters are read at once, ``broker.survey_workers`` at a
        time; each call is bounded by the cluster's timeouts, so the
        survey takes about as long as its slowest cluster.

        :raises planning.RequestError: the request names an unknown
            family, role, cluster or data center
        """
        role, variants = planning.role_variants(self.conf, request)
        count_preemptible = role.preemptible and bool(
            self.conf.preemptible_caps)
        views = {}
        read = [cluster for name, cluster in self.conf.clusters.items()
                if not request.clusters or name in request.clusters]
        with futures.ThreadPoolExecutor(
                max_workers=max(1, min(self.conf.survey_workers, len(read))),
                thread_name_prefix='broker-survey') as pool:
            reading = {cluster.name: pool.submit(
                self._view, cluster, request, variants, count_preemptible)
                for cluster in read}
            for name, cluster in self.conf.clusters.items():
                if name in reading:
                    views[name] = reading[name].result()
                else:
                    # not read: the plan drops it for this reason
                    views[name] = planning.ClusterView(cluster=cluster)
        return views

    def plan(self, request, tried=()):
        """The :class:`~.planning.Plan` of ``request`` on a fresh survey."""
        return planning.plan(self.conf, request, self.survey(request),
                             self.chooser, tried=tried)

    def place(self, request):
        """Boot ``request`` in one cluster and one variant, or nowhere.

        :returns: a :class:`Result`; ``result.error`` says why nothing
            was placed
        :raises planning.RequestError: see :meth:`survey`
        """
        the_plan = self.plan(request)
        result = Result(request=request, plan=the_plan, attempts=[])
        for warning in the_plan.warnings:
            LOG.warning('%s', warning)
        if the_plan.refusal:
            result.error = the_plan.refusal
            LOG.warning('Request %s refused: %s', request.name,
                        the_plan.refusal)
            return result
        failed_clusters = {}
        boots = 0
        for candidate in the_plan.candidates:
            if boots >= self.conf.max_attempts:
                result.error = ('%d boots failed (broker.max_attempts); '
                                'last: %s' % (boots,
                                              result.attempts[-1].reason))
                break
            if candidate.cluster in failed_clusters:
                self._note(result, candidate, 'skipped',
                           failed_clusters[candidate.cluster])
                continue
            client, error = self._client(
                self.conf.clusters[candidate.cluster])
            if client is None:
                failed_clusters[candidate.cluster] = error
                self._note(result, candidate, 'skipped', error)
                continue
            boots += 1
            try:
                servers = client.boot(request, candidate.variant,
                                      self.conf.boot_timeout,
                                      self.conf.poll_interval)
            except broker_clusters.BootFailed as exc:
                self._note(result, candidate, 'failed', str(exc))
                continue
            except broker_clusters.CleanupFailed as exc:
                # Booting elsewhere would pile a second copy on top of
                # what is left here: stop, and say what is left.
                self._note(result, candidate, 'failed', str(exc))
                result.error = str(exc)
                return result
            except broker_clusters.UNREACHABLE as exc:
                reason = 'the cluster failed during the boot: %s' % (
                    broker_clusters.one_line(exc))
                failed_clusters[candidate.cluster] = reason
                self._note(result, candidate, 'failed', reason)
                continue
            self._note(result, candidate, 'active',
                       '%d servers ACTIVE' % len(servers))
            self.chooser.placed(candidate)
            result.cluster = candidate.cluster
            result.variant = candidate.variant
            result.servers = servers
            return result
        if result.error is None:
            result.error = 'every candidate failed: %s' % '; '.join(
                '%s/%s: %s' % (a.cluster, a.flavor, a.reason)
                for a in result.attempts)
        return result

    @staticmethod
    def _note(result, candidate, outcome, reason):
        attempt = Attempt(candidate.cluster, candidate.variant.flavor,
                          outcome, reason)
        result.attempts.append(attempt)
        log = LOG.info if outcome == 'active' else LOG.warning
        log('Request %s: %s in cluster %s: %s: %s', result.request.name,
            candidate.variant.flavor, candidate.cluster, outcome, reason)
