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

"""Each scheduler's claims, cast to the other schedulers.

With ``[nova_sched_ext] kept_candidates`` and ``kept_state_claim_casts``,
every claim placement accepts from a nova-sched-ext-scheduler is cast to
every scheduler of the cloud: one fanout cast on the scheduler topic, as
Nova's computes cast ``update_instance_info``, in a namespace of the
package's own (``nova_sched_ext.kept_state``, version 1.0), so that
Nova's own scheduler API is untouched.  Each scheduler process (each
worker too) counts the claim in its kept provider state at once
(:meth:`nova_sched_ext.cloud.provider_state.ProviderState.claimed`):

* the others see the room taken within the cast's delivery (milliseconds)
  instead of at their next poll (``kept_state_poll_interval``), so fewer
  of their claims are refused for room already gone;
* a poll that lists the provider's generation moved by exactly the claims
  counted reads nothing of it: without the casts each claim costs every
  other scheduler four reads of placement at its next poll.

Nothing depends on a cast arriving.  A cast lost, late or never sent (a
scheduler without the option, RabbitMQ down) leaves the generation moved
by a claim not counted, and the poll reads the provider in full as it
does without casts; a cast that comes twice shows less room than
placement has until the provider is read.  Placement stays the authority
for every claim.  The sender ignores its own cast (it counted the claim
when placement accepted it); each process tells its casts by a UUID of
its own.

Turn the option on once every scheduler of the cloud runs a release that
has it: a scheduler without the endpoint logs an error for each cast it
cannot dispatch.
"""

import collections

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import uuidutils

LOG = logging.getLogger(__name__)

#: the RPC namespace and version of the casts
NAMESPACE = 'nova_sched_ext.kept_state'
VERSION = '1.0'
#: how often a cast is tried again when the broker does not take it
CAST_RETRIES = 1


class ClaimCasts(object):
    """Cast this scheduler's claims; count the others' in the kept state.

    :param kept: the :class:`~nova_sched_ext.kept_candidates.
        KeptCandidates` the others' claims are counted in
    :param topic: the topic the schedulers listen on (None: Nova's,
        ``nova.scheduler.rpcapi.RPC_TOPIC``)
    :param get_client: ``get_client(target)``, an RPC client (Nova's
        ``nova.rpc.get_client``, looked up when the first claim is cast)

    :attr:`endpoint` goes into the manager's ``additional_endpoints``: the
    service's RPC server then dispatches the casts to it.
    """

    def __init__(self, kept, topic=None, get_client=None):
        self.kept = kept
        self.topic = topic
        #: tells this process's casts from the others'
        self.sender = uuidutils.generate_uuid()
        self.endpoint = ClaimCastsEndpoint(self)
        self._get_client = get_client
        self._client = None
        self._failures = set()
        #: ``sent``, ``failed``, ``counted`` (the others'), ``own``
        self.counts = collections.Counter()

    def cast(self, context, alloc_request):
        """Tell the other schedulers of a claim placement accepted.

        Never raises: a cast that cannot be sent is logged (a warning the
        first time for each reason) and the others read the providers at
        their next poll, as without casts.
        """
        allocations = {
            uuid: {'resources': dict(alloc.get('resources', {}))}
            for uuid, alloc in alloc_request.get('allocations', {}).items()}
        if not allocations:
            return
        try:
            # One retry, not oslo.messaging's endless ones: the cast is
            # sent from the request's thread, and a broker that does not
            # answer must not hold the request.
            self._client_now().prepare(fanout=True, retry=CAST_RETRIES).cast(
                context, 'kept_state_claimed', sender=self.sender,
                allocations=allocations)
        except Exception as exc:
            self.counts['failed'] += 1
            reason = type(exc).__name__
            log = LOG.debug if reason in self._failures else LOG.warning
            self._failures.add(reason)
            log('Kept provider state: could not cast a claim to the other '
                'schedulers (%(reason)s: %(exc)s); they read it from '
                'placement at their next poll.',
                {'reason': reason, 'exc': exc})
            return
        self.counts['sent'] += 1

    def _client_now(self):
        if self._client is None:
            get_client, topic = self._get_client, self.topic
            if get_client is None:
                from nova import rpc
                get_client = rpc.get_client
            if topic is None:
                from nova.scheduler import rpcapi
                topic = rpcapi.RPC_TOPIC
            self._client = get_client(messaging.Target(
                topic=topic, namespace=NAMESPACE, version=VERSION))
        return self._client

    def received(self, sender, allocations):
        """A claim cast by a scheduler: counted unless it is this one's."""
        if sender == self.sender:
            self.counts['own'] += 1
            return
        self.counts['counted'] += 1
        self.kept.claimed_elsewhere(allocations)


class ClaimCastsEndpoint(object):
    """The RPC endpoint of the casts (``kept_state_claimed``)."""

    target = messaging.Target(namespace=NAMESPACE, version=VERSION)

    def __init__(self, casts):
        self._casts = casts

    def kept_state_claimed(self, context, sender, allocations):
        """Another scheduler's claim: ``{provider uuid: {'resources'}}``."""
        try:
            self._casts.received(sender, allocations)
        except Exception:
            # A cast is never answered: a fault here only costs the read
            # the cast would have spared.
            LOG.exception('Kept provider state: could not count a claim '
                          'cast by another scheduler.')
