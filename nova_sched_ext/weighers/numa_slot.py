"""NUMASlotWeigher: place requests where they destroy the fewest big slots.

Fragmentation is what strands large flavors in a cloud with plenty of free
capacity: small instances land on every host, each host keeps a little room
in each NUMA cell, and no cell (or pair of cells) is left with room for a big
instance. This weigher counts, for every candidate host, how many instances
of each *reference flavor* the host could still take (its slots, NUMA cell by
NUMA cell: dedicated CPUs and thread siblings, shared CPUs against the
allocation ratio, memory, huge pages; multi-cell flavors need distinct
cells; capped by the host-level room placement sees). It then counts the
same after placing the request the way Nova places it (one fit run, as the
scheduler's ``consume_from_request`` and the compute's claim make it, not
one per allocation candidate as ``NUMATopologyFilter`` runs it: a host that
passed on a later candidate's run but fails a fresh one weighs as a host
the request cannot be placed on). The weight is minus
the weighted number of slots lost, so the host where the request costs the
least wins. Among hosts with equal losses the fuller host wins, so empty
hosts stay empty for the largest flavors.

Room mode: the first member of an affinity (or soft-affinity) server group
fixes the host of every later member, so for it the weigher first prefers
the hosts that can still take the most instances of the request's own
shape (up to ``numa_slot_affinity_group_size``), and the slot loss only
orders hosts of equal room.

All hosts and reference flavors are counted in one call into the C fit
engine. With the C helper, packed hosts and their weights per request shape
are kept between requests (:mod:`nova_sched_ext.fit.slotcache`), so a
request only counts the hosts that changed since the last request of its
shape. A host the engine cannot place the request on (outside its
supported subset) weighs as much as the worst host, and so does a host the
engine treats as unknown (absurd reported values), whatever the request.

Options, group ``[nova_sched_ext]``:

* ``numa_slot_weight_multiplier``: the multiplier. An aggregate's metadata
  key of the same name overrides it per host, as with Nova's weighers.
* ``numa_slot_reference_flavors``: the flavors to protect. If empty, the
  ``numa_slot_auto_reference_count`` largest enabled flavors, reloaded every
  ``numa_slot_reference_refresh_interval`` seconds.
* ``numa_slot_weight_by`` and ``numa_slot_flavor_weights``: what losing one
  slot of each flavor costs.
* ``numa_slot_affinity_room`` and ``numa_slot_affinity_group_size``: the
  room mode for an affinity group's first member.

How it plays with Nova's weighers: Nova normalises every weigher's weights
to 0..1 over the candidate hosts and then adds them up, each multiplied by
its multiplier. ``RAMWeigher`` and ``CPUWeigher`` spread by default
(positive multipliers), which works against slot protection. The
recommended settings, measured with ``nova-sched-ext-sim --compare``, are in
``doc/source/numa_slot_weigher.rst``.
"""

import math
import operator
import threading
import time

from nova import context as nova_context
from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights
from oslo_log import log as logging

from nova_sched_ext.cloud import flavors as cloud_flavors
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import slotcache

LOG = logging.getLogger(__name__)
CONF = conf.CONF

#: Settings the documentation recommends beside the weigher (and the
#: simulator's ``numa-slot`` preset applies): a multiplier that outweighs
#: the weighers still active, and no RAM/CPU/disk spreading, which works
#: against slot protection; the weigher's own tie-break (the fuller host)
#: decides among equal losses.
RECOMMENDED_SETTINGS = {
    'nova_sched_ext.numa_slot_weight_multiplier': 10.0,
    'filter_scheduler.ram_weight_multiplier': 0.0,
    'filter_scheduler.cpu_weight_multiplier': 0.0,
    'filter_scheduler.disk_weight_multiplier': 0.0,
}


class ReferenceFlavors:
    """The reference flavors' shapes and weights, cached and refreshed.

    Shared by every thread of the scheduler: readers take the current
    ``(shapes, weights, names)`` tuple without a lock; one thread at a time
    reloads it, and a failed reload keeps the previous list.
    """

    def __init__(self, loader=None):
        self._lock = threading.Lock()
        self._current = ((), (), ())
        self._loaded_at = None
        self._loader = loader or self._load_flavors

    def get(self):
        interval = CONF.nova_sched_ext.numa_slot_reference_refresh_interval
        now = time.monotonic()
        stale = (self._loaded_at is None or
                 (interval and now - self._loaded_at >= interval))
        if stale and self._lock.acquire(blocking=self._loaded_at is None):
            try:
                self._refresh(now)
            finally:
                self._lock.release()
        return self._current

    def _refresh(self, now):
        try:
            flavors = self._loader()
        except Exception:
            LOG.warning('NUMASlotWeigher could not load its reference '
                        'flavors; keeping the previous list (%d flavors).',
                        len(self._current[0]), exc_info=True)
            self._loaded_at = now
            return
        shapes, weights_, names = [], [], []
        for flavor in flavors:
            try:
                shape = adapters.shape_from_flavor(flavor)
            except (adapters.Unsupported,) + \
                    nova_compat.CONSTRAINT_REFUSALS as exc:
                LOG.warning('NUMASlotWeigher ignores reference flavor %s: '
                            '%s', flavor.name, exc)
                continue
            shapes.append(shape)
            weights_.append(_slot_weight(flavor))
            names.append(flavor.name)
        self._current = (tuple(shapes), tuple(weights_), tuple(names))
        self._loaded_at = now
        LOG.info('NUMASlotWeigher reference flavors: %s',
                 ', '.join('%s (weight %g)' % (n, w)
                           for n, w in zip(names, weights_)) or 'none')

    @staticmethod
    def _load_flavors():
        return load_reference_flavors(nova_context.get_admin_context())


def load_reference_flavors(context):
    """The reference flavors' ``objects.Flavor``, as the options name them.

    The cloud reader's (the defragmentation planner recovers the slots of
    the same flavors); an unknown one is warned about here.
    """
    return cloud_flavors.reference_flavors(context, log=LOG)


def _slot_weight(flavor):
    explicit = CONF.nova_sched_ext.numa_slot_flavor_weights
    for key in (flavor.name, flavor.flavorid):
        if key in explicit:
            try:
                value = float(explicit[key])
                # float() reads 'inf' and 'nan': neither is a weight.
                if value > 0 and math.isfinite(value):
                    return value
            except ValueError:
                pass
            LOG.warning('NUMASlotWeigher: slot weight %r of flavor %s '
                        '([nova_sched_ext] numa_slot_flavor_weights) is not '
                        'a positive finite number; using the default.',
                        explicit[key], key)
            break
    by = CONF.nova_sched_ext.numa_slot_weight_by
    if by == 'memory_mb':
        return max(flavor.memory_mb / 1024.0, 1.0 / 1024)
    if by == 'equal':
        return 1.0
    return float(max(flavor.vcpus, 1))


_AFFINITY_POLICIES = ('affinity', 'soft-affinity')
_HOST_STATE = operator.attrgetter('obj')


def room_cap(spec_obj):
    """The room mode's cap for this request, or None for slot loss alone.

    Room mode applies to the first member of an affinity (or soft-affinity)
    server group: the group's ``hosts`` are known and empty.  Steered by
    ``[nova_sched_ext] numa_slot_affinity_room`` and
    ``numa_slot_affinity_group_size``.
    """
    opts = CONF.nova_sched_ext
    if not opts.numa_slot_affinity_room:
        return None
    group = adapters._field(spec_obj, 'instance_group')
    if group is None or adapters._field(group, 'policy') not in \
            _AFFINITY_POLICIES:
        return None
    # 'hosts' lazy-loads from the database when unset: never trigger that
    # here; Nova's setup_instance_group always sets it.
    if not group.obj_attr_is_set('hosts') or group.hosts:
        return None
    size = opts.numa_slot_affinity_group_size
    if size:
        size = max(size, adapters._field(spec_obj, 'num_instances', 1) or 1)
    return size


class _ArenaHolder(object):
    """The slot arena of the current reference list, shared by threads.

    A new arena replaces the old one (one attribute write) when the
    reference list changes; the arena itself locks around each call.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._arena = None

    def get(self, shapes, slot_weights):
        arena = self._arena
        if not self._serves(arena, shapes, slot_weights):
            with self._lock:
                arena = self._arena
                if not self._serves(arena, shapes, slot_weights):
                    arena = self._arena = slotcache.SlotArena(shapes,
                                                              slot_weights)
        return arena

    @staticmethod
    def _serves(arena, shapes, slot_weights):
        # ReferenceFlavors hands out tuples of floats, as the arena keeps.
        return (arena is not None and arena.shapes == shapes and
                arena.shape_weights == slot_weights)


class NUMASlotWeigher(weights.BaseHostWeigher):
    """Prefer the host where the request costs the fewest reference slots.

    With the C helper, packed hosts and their weights per request shape are
    kept between requests (:mod:`nova_sched_ext.fit.slotcache`): a host
    that did not change since a request of the same shape is not counted
    again.
    """

    #: it reads each host's packed fit model: the kept host state's
    #: warm-up ([nova_sched_ext] host_state_warm_up_nodes) builds them
    READS_FIT_MODELS = True

    def __init__(self):
        super().__init__()
        # fit_backend = c without a usable C helper: fail here, when Nova
        # loads the weigher, so that the scheduler does not start.
        engine.check_backend()
        self.references = ReferenceFlavors()
        self._arenas = _ArenaHolder()
        # The multiplier option as the last weigh_objects read it. Nova's
        # handler asks weight_multiplier() once per host right after
        # weigh_objects; reading an oslo.config option costs about a
        # microsecond, which at 10,000 hosts is more than the weighing
        # itself. This is configuration, not request state: every thread
        # writes the option's current value.
        self._multiplier_read = None

    def weight_multiplier(self, host_state):
        # Nova's handler asks once per host and request: skip the aggregate
        # lookup for the (usual) host without aggregates, and the option
        # lookup once weigh_objects has read it.
        if not host_state.aggregates:
            multiplier = self._multiplier_read
            if multiplier is None:
                multiplier = CONF.nova_sched_ext.numa_slot_weight_multiplier
            return multiplier
        configured = CONF.nova_sched_ext.numa_slot_weight_multiplier
        multiplier = scheduler_utils.get_weight_multiplier(
            host_state, 'numa_slot_weight_multiplier', configured)
        if not math.isfinite(multiplier):
            # Nova's helper reads aggregate metadata with float(): 'nan'
            # would make every weight nan and cancel the other weighers.
            LOG.warning('NUMASlotWeigher: aggregate metadata '
                        'numa_slot_weight_multiplier of host %s is %s, not '
                        'a finite number; using %s.', host_state.host,
                        multiplier, configured)
            return configured
        return multiplier

    def _weigh_object(self, host_state, weight_properties):
        return self._weigh([host_state], weight_properties)[0]

    def weigh_objects(self, weighed_obj_list, weight_properties):
        self._multiplier_read = \
            CONF.nova_sched_ext.numa_slot_weight_multiplier
        return self._weigh(list(map(_HOST_STATE, weighed_obj_list)),
                           weight_properties)

    def _weigh(self, hosts, spec_obj):
        try:
            shapes, slot_weights, _names = self.references.get()
            if not shapes or not hosts:
                return [0.0] * len(hosts)
            request = adapters.shape_from_spec(spec_obj)
            cap = room_cap(spec_obj)
            if engine.backend_name() == 'c':
                arena = self._arenas.get(shapes, slot_weights)
                return arena.weights(hosts, request, cap)
            # Placed as consume_from_request places it: one fit run,
            # however many allocation candidates the filters left.
            prepared = adapters.prepared_hosts(hosts, per_candidate=False)
            _before, _after, result = engine.slot_weights(
                prepared, shapes, slot_weights, request, counts=False,
                room_cap=cap)
            return result
        except adapters.Unsupported as exc:
            LOG.debug('NUMASlotWeigher: request outside the fit engine\'s '
                      'subset (%s); all hosts weigh the same.', exc)
        except Exception:
            LOG.exception('NUMASlotWeigher could not weigh the hosts; all '
                          'hosts weigh the same for this request.')
        return [0.0] * len(hosts)
