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


"""The capacity count from kept state: :class:`KeptCount`.

With ``[nova_sched_ext_capacity] kept_state``, the capacity API and the
exporter keep what a count reads current, in a thread of their own, and
answer from it (:meth:`KeptCount.report`) in milliseconds instead of
reading the whole cloud per count (:func:`~.service.compute`: three
placement calls per compute host, minutes at 10,000 hosts).

**What is kept, and how** (every ``kept_state_poll_interval`` seconds):

* Nova's compute nodes, ``nova-compute`` services and aggregates
  (:class:`~nova_sched_ext.cloud.compute_state.ComputeState`): one narrow
  row per node, the records read again only for the nodes whose times
  moved;
* placement's providers (:class:`~nova_sched_ext.cloud.provider_state.
  ProviderState`): one listing, the providers whose generation moved read
  again.  Placement does not move a generation when allocations are
  removed; a compute node's record moves when the resource tracker sees an
  instance go, so the providers of every node whose record moved are read
  again at that poll and at the next (placement's allocations are removed
  right after the record is saved).  Every provider's usages are read
  again once per ``kept_state_resync_interval`` too, spread over the
  polls, for room freed with no record moving;
* the count of each host, per set of flavors asked: kept while the host
  (its node, service state and aggregates) and its provider tree are the
  objects the last count used, counted again otherwise;
* the sums of each query's last answer (its flavors, ``by``, zone and
  aggregate: the scopes' :class:`~.service.Tally`): each poll notes the
  hosts whose ``Host`` or tree object changed, came or went
  (:attr:`_View.changes`), and the next answer takes out the old figures
  of those hosts and puts in their new ones (:meth:`~.service.Tallied.
  changed`), so that it costs what changed, not the cloud.  Every host is
  summed when the query is new or its last answer is more than
  ``CHANGES_KEPT`` polls old, with ``per_host`` or ``by=host`` (a scope
  per host), and while sharing providers are in placement (their room is
  shared by their hosts, it does not add up).

A report is the function :func:`~.service.assemble` of the state polled,
the same as a full count of that state: ``tests/unit/capacity/
test_kept.py`` and the functional ``test_kept_capacity`` compare them
after random changes, for every grouping and selection.

The flavors are read at each poll too (every flavor with its extra
specs, one query), so a new flavor or extra spec counts from the next
poll on.  A state that has not completed a
poll, or whose last successful poll started more than
``kept_state_max_age`` seconds ago, is not used: the count is made in
full (:meth:`KeptCount.unusable` says why).
"""

import collections
import datetime
import threading
import time
import typing

from nova import context as nova_context
from oslo_log import log as logging

from nova_sched_ext.capacity import service
from nova_sched_ext.cloud import compute_state
from nova_sched_ext.cloud import flavor_requests
from nova_sched_ext.cloud import flavors as cloud_flavors
from nova_sched_ext.cloud import placement
from nova_sched_ext.cloud import poller
from nova_sched_ext.cloud import provider_snapshot
from nova_sched_ext.cloud import provider_state
from nova_sched_ext import conf

CONF = conf.CONF
LOG = logging.getLogger(__name__)

#: how many sets of flavors keep their hosts' counts (the API's queries:
#: every flavor, or the few a caller names)
FLAVOR_SETS = 16

#: how many flavors' requests are kept before they are made again
MAX_REQUESTS = 1000

#: how many answers (flavors, grouping, zone, aggregate) keep their sums
ANSWERS = 16

#: how many polls' changes are kept: an answer last made longer ago is
#: summed again over every host
CHANGES_KEPT = 64

_FLAVOR_FIELDS = ('id', 'flavorid', 'name', 'vcpus', 'memory_mb', 'root_gb',
                  'ephemeral_gb', 'swap', 'is_public', 'disabled')


class _View(object):
    """What one poll published: read together, never changed.

    :param previous: the view of the poll before, or None
    """

    __slots__ = ('snapshot', 'trees', 'flavors', 'generated_at', 'number',
                 'hosts', 'changes', 'zones', 'sharing')

    def __init__(self, snapshot, trees, flavors, generated_at,
                 previous=None):
        self.snapshot = snapshot
        self.trees = trees
        self.flavors = flavors
        self.generated_at = generated_at
        #: {host key: Host}
        self.hosts = {service.host_key(h): h for h in snapshot.hosts}
        #: the polls' number, from 1
        self.number = previous.number + 1 if previous else 1
        #: frozensets of the host keys whose Host or provider tree changed
        #: (or that came or went) at each of the last polls, this one last
        self.changes = ()
        if previous is not None:
            self.changes = (previous.changes + (
                self._changed_since(previous),))[-CHANGES_KEPT:]
        self.zones = frozenset(service.known_zones(snapshot))
        #: whether a tree has sharing providers: their room is shared by
        #: their hosts, not added up, so every answer sums every host
        self.sharing = any(tree.sharing for tree in trees.values())

    def _changed_since(self, previous):
        # what the kept results of a host are valid for: the same Host and
        # Tree objects (see KeptCount.report)
        trees, before = self.trees, previous.trees
        changed = {key for key, host in self.hosts.items()
                   if previous.hosts.get(key) is not host or
                   before.get(host.uuid) is not trees.get(host.uuid)}
        return frozenset(changed.union(previous.hosts.keys() -
                                       self.hosts.keys()))


class _Answer(typing.NamedTuple):
    """The sums of an answer, as of a view."""

    number: int
    tallied: service.Tallied


def flavor_key(flavor):
    """What a flavor's count depends on, comparable and hashable."""
    values = tuple(getattr(flavor, name) if flavor.obj_attr_is_set(name)
                   else None for name in _FLAVOR_FIELDS)
    specs = (flavor.extra_specs if flavor.obj_attr_is_set('extra_specs')
             else None) or {}
    return values + (tuple(sorted(specs.items())),)


class KeptCount(object):
    """The capacity count's inputs kept current, and reports from them.

    :param context: an admin ``RequestContext`` (default: a new one)
    :param reader: the :class:`~nova_sched_ext.cloud.placement.
        PlacementReader` (default: Nova's report client, from
        ``[placement]``), built at the first poll
    :param clock: monotonic seconds
    :param wall_clock: what a report's ``generated_at`` comes from

    Options (read when built): ``[nova_sched_ext_capacity]
    kept_state_poll_interval``, ``kept_state_resync_interval``,
    ``kept_state_resync_max_rate``, ``kept_state_max_age``,
    ``kept_state_snapshot_*`` (:mod:`~nova_sched_ext.cloud.
    provider_snapshot`), ``placement_workers``; ``[nova_sched_ext]
    host_state_clock_margin``.
    """

    def __init__(self, context=None, reader=None, clock=time.monotonic,
                 wall_clock=None):
        opts = CONF.nova_sched_ext_capacity
        self.poll_interval = opts.kept_state_poll_interval
        self.resync_interval = opts.kept_state_resync_interval
        self.resync_max_rate = opts.kept_state_resync_max_rate
        self.max_age = opts.kept_state_max_age
        self.snapshot = provider_snapshot.Snapshot.from_options(
            opts, 'Kept capacity state', clock=clock)
        self._context = context or nova_context.get_admin_context()
        self._reader = reader
        self._clock = clock
        self._wall_clock = wall_clock or (
            lambda: datetime.datetime.now(datetime.timezone.utc))
        self._poll_lock = threading.Lock()
        self._providers = None
        self._computes = compute_state.ComputeState(
            self._context,
            clock_margin=CONF.nova_sched_ext.host_state_clock_margin)
        #: node UUIDs whose providers the next poll reads again
        self._follow_up = frozenset()
        #: the node UUIDs of the last poll
        self._known_nodes = frozenset()
        self._trees = {}
        self._view = None
        self._polled_at = None
        #: {flavor keys: {node uuid: (Host, Tree, HostResult)}}
        self._counted = collections.OrderedDict()
        self._counted_lock = threading.Lock()
        #: {flavor key: FlavorRequest}
        self._requests = {}
        #: {(flavor keys, by, az, aggregate): _Answer}
        self._answers = collections.OrderedDict()
        self._poller = poller.Poller(
            lambda: self.poll(), lambda: self.poll_interval,
            'Kept capacity state', 'placement and the cells',
            'counts are made in full once it is older than %s s'
            % self.max_age, done=self._log_poll, clock=clock,
            log=LOG)
        #: how reports were made: ``kept``, and why not (``not_ready``,
        #: ``too_old``), counted by the callers; hosts counted again
        self.counts = collections.Counter()

    # --- the feed -----------------------------------------------------------

    def poll(self):
        """One poll now: ``(node UUIDs changed, provider UUIDs changed)``.

        :raises CloudError: a database or placement could not be read (the
            state stays as it was)
        """
        with self._poll_lock:
            started = self._clock()
            generated_at = self._wall_clock()
            if self._providers is None:
                reader = self._reader or placement.PlacementReader(
                    self._context,
                    workers=CONF.nova_sched_ext_capacity.placement_workers)
                self._providers = provider_state.ProviderState(
                    reader, snapshot=self.snapshot)
            nodes = self._computes.refresh()
            # a node's record moved: an instance came or went; placement
            # frees without a new generation, right after the record.  A
            # node new to the state is not one: its provider is read in
            # full when it is new too (every one, at the first poll).
            moved = nodes & self._known_nodes
            self._providers.stale(*(moved | self._follow_up))
            self._follow_up = moved
            changes = self._providers.refresh()
            freed = frozenset()
            if self.resync_interval:
                freed = self._providers.resync(self._clock(),
                                               self.resync_interval,
                                               self.poll_interval,
                                               self.resync_max_rate)
                if freed:
                    LOG.info('Kept capacity state: the resync found the '
                             'usages of %d provider(s) changed while their '
                             'compute nodes\' records did not.', len(freed))
            snapshot = self._computes.snapshot()
            self._trees = self._make_trees(
                frozenset(h.uuid for h in snapshot.hosts))
            flavors = cloud_flavors.all_flavors(self._context)
            self._view = _View(snapshot, self._trees, flavors, generated_at,
                               previous=self._view)
            self._known_nodes = frozenset(h.uuid for h in snapshot.hosts)
            self._polled_at = started
            self._providers.save_snapshot()
            if nodes:
                self._forget_gone(snapshot)
            return nodes, (changes.added | changes.changed |
                           changes.removed | freed)

    def _make_trees(self, nodes):
        """{root uuid: Tree}, the old Tree kept where its providers are.

        :param nodes: the compute nodes' UUIDs
        """
        providers = self._providers.providers()
        old = self._trees
        if self._providers.outside() is None:
            # every provider a tree of its own, nothing shared
            trees = {}
            for provider in providers:
                tree = old.get(provider.uuid)
                if tree is None or tree.providers[0] is not provider:
                    tree = placement.Tree(providers=(provider,))
                trees[provider.uuid] = tree
            return trees
        # A sharing provider is a pool of the compute nodes' trees it
        # shares an aggregate with, as PlacementReader.trees reads them for
        # a full count; made a root of its own, it would be in no tree's
        # pools.
        roots = [p.uuid for p in providers if not p.parent_uuid and (
            p.uuid in nodes or placement.SHARING_TRAIT not in p.traits)]
        trees = placement.trees_of(providers, roots)
        for root, tree in trees.items():
            before = old.get(root)
            if before is not None and _same_members(before, tree):
                trees[root] = before
        return trees

    def _forget_gone(self, snapshot):
        live = {host.uuid for host in snapshot.hosts}
        with self._counted_lock:
            for counted in self._counted.values():
                # reports add to it meanwhile, without this lock
                for uuid in [u for u in list(counted) if u not in live]:
                    counted.pop(uuid, None)

    @staticmethod
    def _log_poll(result):
        nodes, providers = result
        if nodes or providers:
            # The UUIDs too: devstack-lite measures the staleness of the
            # capacity API from these lines.
            LOG.debug('Kept capacity state: compute nodes read again %s; '
                      'providers read again %s.', _uuids(nodes),
                      _uuids(providers))

    def start(self):
        """Poll in a thread of its own until :meth:`stop`."""
        if self._poller.running:
            return
        self._poller.start('nova-sched-ext-kept-capacity')
        LOG.info('Capacity: counted from state kept by polling placement '
                 'and the cells every %(poll)s s (usages read again every '
                 '%(resync)s s; counted in full when older than %(age)s s).',
                 {'poll': self.poll_interval,
                  'resync': self.resync_interval or 'never',
                  'age': self.max_age})

    def stop(self):
        """Stop polling; save the snapshot file, when there is one."""
        self._poller.stop()
        if self._providers is not None:
            with self._poll_lock:
                self._providers.save_snapshot(force=True)

    # --- the answer ---------------------------------------------------------

    def age(self):
        """Seconds since the start of the last successful poll, or None."""
        polled = self._polled_at
        return None if polled is None else self._clock() - polled

    def unusable(self):
        """Why a report cannot come from the kept state now, or None.

        ``(count name, reason)``: ``not_ready`` (no poll has completed) or
        ``too_old`` (the last successful poll started more than
        ``kept_state_max_age`` seconds ago).
        """
        age = self.age()
        if self._view is None or age is None:
            return 'not_ready', 'no poll has completed'
        if age > self.max_age:
            return 'too_old', 'the last poll started %.1f s ago' % age
        return None

    def report(self, flavors=None, by='cloud', az=None, aggregate=None,
               per_host=False):
        """:func:`~.service.compute`'s report, of the state last polled.

        Its ``generated_at`` is when that poll started.  The caller checks
        :meth:`unusable` first.

        :raises CapacityError: as :func:`~.service.compute` (an unknown
            flavor, zone, aggregate or ``by``)
        """
        view = self._view
        service.check_by(by)
        flavor_objects = cloud_flavors.pick(view.flavors, flavors)
        keys = tuple(flavor_key(f) for f in flavor_objects)
        requests = self._requests_for(keys, flavor_objects)
        # its aggregates and cells, as a Cloud's (no copy of its hosts)
        cloud = view.snapshot
        agg = service.choose(cloud, az=az, aggregate=aggregate,
                             zones=view.zones)
        counted = self._counted_for(keys)
        recounted = []

        def count_host(host, tree, requests, checks):
            kept = counted.get(host.uuid)
            if kept is not None and kept[0] is host and kept[1] is tree:
                return kept[2]
            result = service.count_one_host(host, tree, requests, checks)
            counted[host.uuid] = (host, tree, result)
            recounted.append(host.uuid)
            return result

        def tally_all():
            selected = [h for h in view.snapshot.hosts
                        if service.selects(h, az, agg)]
            trees = {h.uuid: view.trees[h.uuid] for h in selected
                     if not h.skipped and h.uuid in view.trees}
            return service.tally(selected, trees, requests, by, agg,
                                 count_host=count_host), trees

        if per_host or by == 'host' or view.sharing:
            # the hosts' own scopes, and the pools' shares, are made of
            # every host anyway
            tallied, trees = tally_all()
        else:
            trees = None
            answer = (keys, by, az,
                      None if agg is None else (agg.id, agg.name))
            tallied = self._tallied(answer, view, az, agg, requests,
                                    count_host, tally_all)
        report = service.assemble(view.generated_at, flavor_objects, cloud,
                                  None, agg, trees, by=by, az=az,
                                  per_host=per_host, requests=requests,
                                  tallied=tallied)
        self.counts['hosts_counted_again'] += len(recounted)
        LOG.debug('Capacity from kept state: %d host(s) counted again.',
                  len(recounted))
        return report

    def _tallied(self, answer, view, az, agg, requests, count_host,
                 tally_all):
        """The :class:`~.service.Tallied` of ``answer`` as of ``view``.

        The one of the last answer brought up to date: only the hosts that
        changed since (:attr:`_View.changes`) are judged and summed again;
        every host if it is too old or there is none.
        """
        with self._counted_lock:
            last = self._answers.get(answer)
        polls = view.number - last.number if last is not None else None
        if polls == 0:
            return last.tallied
        if polls is not None and 0 < polls <= len(view.changes):
            checks = service.HostChecks()
            outcomes = {}
            for key in frozenset().union(*view.changes[-polls:]):
                host = view.hosts.get(key)
                outcomes[key] = (
                    service.judge(host, view.trees.get(host.uuid), requests,
                                  checks, count_host)
                    if host is not None and service.selects(host, az, agg)
                    else None)
            tallied = last.tallied.changed(outcomes)
        else:
            tallied = tally_all()[0]
        with self._counted_lock:
            last = self._answers.get(answer)
            # another report may have kept a newer one meanwhile
            if last is None or last.number < view.number:
                self._answers[answer] = _Answer(view.number, tallied)
            self._answers.move_to_end(answer)
            while len(self._answers) > ANSWERS:
                self._answers.popitem(last=False)
        return tallied

    def _requests_for(self, keys, flavor_objects):
        """The flavors' requests, made once per flavor as it is."""
        with self._counted_lock:
            missing = [(key, flavor) for key, flavor
                       in zip(keys, flavor_objects)
                       if key not in self._requests]
        made = {key: flavor_requests.flavor_request(flavor)
                for key, flavor in missing}
        with self._counted_lock:
            self._requests.update(made)
            requests = [self._requests[key] for key in keys]
            if len(self._requests) > MAX_REQUESTS:
                wanted = set(keys)
                for key in [k for k in self._requests if k not in wanted]:
                    del self._requests[key]
            return requests

    def _counted_for(self, key):
        with self._counted_lock:
            counted = self._counted.get(key)
            if counted is None:
                counted = self._counted[key] = {}
            self._counted.move_to_end(key)
            while len(self._counted) > FLAVOR_SETS:
                self._counted.popitem(last=False)
            return counted


def _same_members(old, new):
    return (len(old.members) == len(new.members) and
            all(a is b for a, b in zip(old.members, new.members)))


def _uuids(uuids):
    return ', '.join(sorted(uuids)) or 'none'
