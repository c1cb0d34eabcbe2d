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

"""The ``[nova_sched_ext]`` group: the scheduler's options.

The filters, the weighers, the fit engine, deployment sets, the
coordination backend the schedulers share, nova-sched-ext-scheduler's
manager (driver, request wrappers, kept host state, wider candidate
queries) and the preemption driver read them from ``nova.conf``.
"""

from oslo_config import cfg

from nova_sched_ext.conf import types
from nova_sched_ext.conf import utils

GROUP_NAME = 'nova_sched_ext'

nova_sched_ext_group = cfg.OptGroup(
    GROUP_NAME,
    title='nova-sched-ext scheduler plugins',
    help='Options of the nova-sched-ext filters, weighers and fit engine.')

FIT_BACKEND_ENV = 'NOVA_SCHED_EXT_FIT_BACKEND'

#: the values of preemption_action
ACTION_DELETE = 'delete'
ACTION_SHELVE_OFFLOAD = 'shelve_offload'

fit_opts = [
    cfg.StrOpt(
        'fit_backend',
        default='auto',
        choices=[
            ('auto', 'Use the compiled C helper when it can be used, else '
                     'the pure-Python engine (one warning is logged).'),
            ('c', 'Use the compiled C helper, or fail: if it is not built, '
                  'does not load or was built from another version of the '
                  'package, NUMAFitFilter, FastNUMATopologyFilter and '
                  'NUMASlotWeigher refuse to start (so does '
                  'nova-scheduler), and any other use of '
                  'the fit engine raises an error, saying why.'),
            ('python', 'Always use the pure-Python engine.'),
        ],
        help='Which implementation of the NUMA fit engine to use. Both give '
             'identical answers; the C helper is about two orders of '
             'magnitude faster. Choose "c" where the pure-Python engine '
             'would be too slow to run at all. Whatever the choice, a call '
             'the C helper refuses (a bug, logged as an error) is answered '
             'by the pure-Python engine. The environment variable '
             '%s=python overrides this option.' % FIT_BACKEND_ENV),
]

numa_fit_filter_opts = [
    cfg.BoolOpt(
        'numa_fit_filter_log_summary',
        default=True,
        help='Log, at debug level, one summary line per request for '
             'NUMAFitFilter: how many hosts it saw, how many it rejected, '
             'how many it could not decide (left to NUMATopologyFilter) and '
             'how long the check took.'),
]

numa_slot_weigher_opts = [
    types.FiniteFloatOpt(
        'numa_slot_weight_multiplier',
        default=10.0,
        help='Multiplier of NUMASlotWeigher. The default, 10, outweighs '
             "Nova's default spreading weighers (RAM, CPU and disk at 1.0), "
             'which would otherwise undo the slot protection. Positive '
             'values prefer the host '
             'where the request destroys the fewest slots of the reference '
             'flavors (and, among equals, the fuller host); negative values '
             'do the opposite; 0 disables it. An aggregate can override it '
             'with the metadata key numa_slot_weight_multiplier, like '
             "Nova's own weigher multipliers. The other weighers' "
             'multipliers compete with this one after normalisation: see '
             'the NUMASlotWeigher documentation for recommended settings.'),
    cfg.ListOpt(
        'numa_slot_reference_flavors',
        default=[],
        help='Flavors (names or flavor IDs) whose slots NUMASlotWeigher '
             'protects, typically the large flavors that fragmentation '
             'makes unplaceable. Empty means automatic: the '
             'numa_slot_auto_reference_count largest enabled flavors, by '
             'vCPUs then memory. Unknown names are logged and ignored.'),
    cfg.IntOpt(
        'numa_slot_auto_reference_count',
        default=8, min=1, max=64,
        help='How many flavors the automatic reference list holds.'),
    cfg.IntOpt(
        'numa_slot_reference_refresh_interval',
        default=300, min=0,
        help='Seconds between reloads of the reference flavors from the '
             'API database; 0 loads them once.'),
    cfg.StrOpt(
        'numa_slot_weight_by',
        default='vcpus',
        choices=[
            ('vcpus', "A flavor's slot weighs its vCPU count."),
            ('memory_mb', "A flavor's slot weighs its memory in GiB."),
            ('equal', 'Every slot weighs 1.'),
        ],
        help='How much losing one slot of a reference flavor costs, unless '
             'numa_slot_flavor_weights names the flavor.'),
    cfg.DictOpt(
        'numa_slot_flavor_weights',
        default={},
        help='Explicit slot weights per reference flavor (name or flavor '
             'ID), for example "m1.xlarge:32,r1.2xlarge:64". Weights must be '
             'positive numbers.'),
    cfg.BoolOpt(
        'numa_slot_affinity_room',
        default=True,
        help='Room mode for the first member of an affinity (or '
             'soft-affinity) server group, that is a group with no hosts '
             'yet: NUMASlotWeigher then prefers the hosts that can still '
             'take the most instances of the request\'s own shape (at most '
             'numa_slot_affinity_group_size of them), and counts slot '
             'losses only among hosts with equal room. The later members '
             'must share the first one\'s host, so a first member placed on '
             'a nearly full host strands the rest of its group. False '
             'weighs every request by slot loss alone.'),
    cfg.IntOpt(
        'numa_slot_affinity_group_size',
        default=0, min=0,
        help='How many members of an affinity group the room mode makes '
             'room for: hosts that can take this many instances of the '
             'request\'s shape are equal, and the one where the request '
             'costs the fewest reference slots wins. 0 means no limit (the '
             'host with room for the most members wins). A multi-create '
             'request counts its own instances when they are more.'),
]

deployment_set_opts = [
    cfg.IntOpt(
        'deployment_set_max_size',
        default=20, min=1,
        help='Largest number of members a deployment set may have. A '
             'deployment set is a Nova server group (policy anti-affinity) '
             'whose members are booted with the deployment_set_strategy '
             'scheduler hint; DeploymentSetFilter rejects, with '
             'NoValidHost, the request that would make it bigger. The hint '
             'deployment_set_max_size can lower the cap of one set, never '
             'raise it above this value. Every member that is not deleted '
             'counts, members in ERROR included, as for Nova\'s quota; '
             'Nova\'s own limit, [quota] server_group_members (default '
             '10), must allow at least as many members.'),
    cfg.IntOpt(
        'deployment_set_max_partitions',
        default=7, min=1,
        help='Number of partitions of a deployment set with strategy '
             'partition: the hint deployment_set_partition takes a value '
             'from 0 to this number minus one.'),
    cfg.StrOpt(
        'deployment_set_domain_key',
        default='failure_domain',
        help='Host aggregate metadata key naming the failure domain (rack, '
             'power zone, ...) of the hosts in the aggregate. '
             'DeploymentSetFilter puts at most one member of a set with '
             'strategy domain in one failure domain, and never members of '
             'different partitions in one. A host in no aggregate with '
             'this key is a failure domain of its own; a host in several '
             'with different values belongs to all of them.'),
    cfg.StrOpt(
        'coordination_url',
        deprecated_name='deployment_set_lock_url',
        secret=True,
        help='tooz coordination backend URL that all nova-sched-ext-scheduler '
             'processes share: the per-set lock held while members of a '
             'deployment set are placed, and, with the preemption driver, '
             'the lock around the count-and-claim of preemptible requests '
             'under a cap and the records of evictions in progress. '
             'redis://host:6379 is the tested backend for several hosts; '
             'tooz and redis client options go in the query string, e.g. '
             'redis://host:6379?socket_timeout=5&socket_connect_timeout=1 '
             '(see the coordination page of the documentation). Other tooz '
             'backends (etcd3+http://host:2379, zookeeper://, '
             'memcached://) hold the deployment-set lock only: the '
             'preemption driver needs redis or the file backend. Unset '
             'means file locks and records under deployment_set_lock_dir, '
             'which only coordinate the schedulers of one host.'),
    cfg.StrOpt(
        'deployment_set_lock_dir',
        default='$state_path/nova_sched_ext/deployment_set_locks',
        help='Directory of the file locks and records used when '
             'coordination_url is unset. All scheduler processes of '
             'the host must see the same directory.'),
    cfg.IntOpt(
        'deployment_set_lock_timeout',
        default=60, min=1,
        help='Seconds a scheduling request waits for the lock of its '
             'deployment set; when they pass, or when the lock backend '
             'cannot be reached, the request fails with NoValidHost rather '
             'than risk two members in one failure domain.'),
    cfg.BoolOpt(
        'deployment_set_alternates',
        default=False,
        help='Whether nova-sched-ext-scheduler returns alternate hosts for '
             'members of a deployment set. Nova\'s conductor retries a '
             'failed build or move on an alternate without asking the '
             'scheduler again, so nothing checks the set\'s failure '
             'domains then, and another request may have taken the '
             'alternate\'s domain meanwhile. False returns no alternates '
             'for deployment sets: such a build fails rather than land in '
             'a taken domain. True keeps Nova\'s retries; nova-compute '
             'still refuses a second member on one host, but not in one '
             'failure domain.'),
]

scheduler_driver_opts = [
    cfg.StrOpt(
        'scheduler_driver',
        default='default',
        help='The scheduler manager nova-sched-ext-scheduler runs, by name '
             'in the entry-point namespace nova_sched_ext.scheduler_drivers: '
             '"default" is the package\'s manager (Nova\'s, with the '
             'request wrappers of the package), "preemption" adds the '
             'eviction of preemptible instances. Read at service start.'),
]

request_wrapper_opts = [
    cfg.ListOpt(
        'request_wrappers',
        default=['deployment_set_lock'],
        help='The request wrappers nova-sched-ext-scheduler runs around '
             'every scheduling request, by name in the entry-point '
             'namespace nova_sched_ext.request_wrappers, outermost first: '
             'the first one sees the request first and its answer last. '
             'Shipped: "deployment_set_lock" holds the lock of the '
             'request\'s deployment set while its hosts are chosen and '
             'claimed, so that concurrent requests cannot put two members '
             'in one failure domain (keep it whenever DeploymentSetFilter '
             'is enabled); "preemptible_caps" enforces '
             'preemptible_max_per_az and preemptible_max_per_host; '
             '"eviction" evicts preemptible instances when an on-demand '
             'request ends in NoValidHost. The "preemption" scheduler '
             'driver adds preemptible_caps then eviction inside the ones '
             'named here unless this list names them (its order then '
             'holds); named here, they also run with the "default" '
             'driver. Other distributions register more. A name that is '
             'unknown, fails to load or is not a request wrapper stops '
             'the scheduler at start. Read at service start.'),
]

host_state_opts = [
    cfg.BoolOpt(
        'keep_host_state',
        default=True,
        help='Whether nova-sched-ext-scheduler keeps the state it built '
             'from each compute node between scheduling requests. Nova '
             'reads every candidate compute node and every nova-compute '
             'service from the cell database on each request and parses '
             'its NUMA topology and PCI pools again; kept, a request reads '
             'only the creation and update times of its candidates, '
             'reloads the compute nodes whose times moved (or that were '
             'updated less than host_state_clock_margin seconds before '
             'they were read) and rebuilds the service records that '
             'changed. Each request still gets HostState objects of its '
             'own, equal field by field to those Nova would build, so the '
             'filters, weighers and claims of concurrent requests never '
             'see each other. False builds them as Nova does, from scratch '
             'on every request. Read at service start.'),
    cfg.IntOpt(
        'host_state_full_refresh_interval',
        default=600, min=0,
        help='Seconds after which the kept host state is dropped and the '
             'next request reloads every candidate compute node, as Nova '
             'does on every request: a safety net for a compute node '
             'record changed without its updated_at (by hand in the '
             'database). With host_state_warm_up_nodes, the kept provider '
             'state\'s poller instead reads each record again when it is '
             'this old, and a request reads again one older than this plus '
             'kept_state_max_age. 0 never drops it. SIGHUP drops it too.'),
    cfg.IntOpt(
        'host_state_clock_margin',
        default=30, min=1,
        help='Seconds a compute node record must have been unchanged when '
             'it was read for the kept state to be trusted while its '
             'updated_at stays the same. MySQL stores updated_at to the '
             'second, and each nova-compute writes it from its own clock: '
             'a second save in the same second, or by a compute whose '
             'clock is behind the scheduler\'s, keeps the same updated_at. '
             'A record read sooner than this after its update is read '
             'again on the next request. Set it above the largest clock '
             'difference between the schedulers and the computes, plus '
             'one second.'),
    cfg.IntOpt(
        'host_state_warm_up_nodes',
        default=1000, min=0,
        help='With keep_host_state and kept_candidates: how many compute '
             'nodes the kept provider state\'s poller reads and builds per '
             'poll, in its own thread, so that requests find them ready: '
             'first the nodes never read (every node after the service '
             'starts), then those whose row changed at least '
             'host_state_clock_margin seconds before, then those read '
             'host_state_full_refresh_interval seconds before, which it '
             'reads again a batch at a time instead of the whole kept '
             'state being dropped at once. For each it builds the '
             'HostState requests copy and, when NUMAFitFilter, '
             'FastNUMATopologyFilter or NUMASlotWeigher is enabled, its '
             'packed NUMA model; it also builds the service record of '
             'each changed nova-compute service row. A request still reads '
             'a candidate it finds unread, changed, or older than '
             'host_state_full_refresh_interval plus kept_state_max_age. 0 '
             'leaves all of it to the requests (the whole state is then '
             'dropped every host_state_full_refresh_interval). Read at '
             'each poll.'),
]

candidate_limit_opts = [
    cfg.IntOpt(
        'placement_results_max',
        default=10000, min=0,
        help='Placement returns at most [scheduler] max_placement_results '
             'allocation candidates per query, chosen without regard to '
             'NUMA cells, pinned CPUs, huge pages or PCI devices. When the '
             'filters leave fewer hosts than the request has instances and '
             'placement returned as many candidates as that limit, so that '
             'it may hold more, nova-sched-ext-scheduler asks placement '
             'again with a limit placement_results_growth_factor times '
             'larger, up to this value, before it answers NoValidHost (and '
             'before the preemption driver evicts anything). Each widening '
             'is logged at INFO. 0, or a value not above '
             'max_placement_results, never widens. Queries Nova makes '
             'without a limit (server group and same_host/different_host '
             'hints, a host with several nodes) are not widened. Keep '
             'NUMAFitFilter enabled: it rejects a host in microseconds, '
             'NUMATopologyFilter alone takes about 0.2 ms per host. Read '
             'per request.'),
    cfg.IntOpt(
        'placement_results_growth_factor',
        default=4, min=2,
        help='How many times larger each widened query of placement is '
             'than the one before (see placement_results_max). With the '
             'defaults, 1000 then 4000 then 10000 candidates: at most two '
             'more queries per request, ceil(log(placement_results_max / '
             'max_placement_results) / log(this factor)) in general. Read '
             'per request.'),
]

kept_state_opts = [
    cfg.BoolOpt(
        'kept_candidates',
        default=False,
        help='Whether nova-sched-ext-scheduler answers placement\'s '
             'allocation candidate query itself, from resource provider '
             'state it keeps current, instead of sending GET '
             '/allocation_candidates for every request (12 s at 10,000 '
             'compute nodes). Only queries inside a documented subset are '
             'answered (the unnumbered request group; compute nodes that '
             'are trees of one provider, no sharing providers; required '
             'and forbidden traits, member_of, in_tree, root_required); '
             'any other query, and every query while the state is older '
             'than kept_state_max_age, goes to placement unchanged, and a '
             'request the kept candidates cannot place (none among them, '
             'or none that passes the filters) is asked of placement\'s own '
             'query before NoValidHost. Claims still go to placement as '
             'Nova makes them, so a stale state costs a failed claim and an '
             'alternate, never an over-commit. With keep_host_state, the '
             'same poll reads the candidates\' compute node and service '
             'rows, which requests then do not read. Read at service '
             'start.'),
    types.FiniteFloatOpt(
        'kept_state_poll_interval',
        default=1.0, min=0.05,
        help='Seconds between two polls of placement by the kept provider '
             'state (kept_candidates). A poll is one GET '
             '/resource_providers, then four reads of each provider whose '
             'generation moved, appeared, or was marked changed (by a claim '
             'of this scheduler, or by a compute telling the scheduler of '
             'an instance deleted or moved), and, with keep_host_state, '
             'the cells\' compute node stamps and nova-compute service '
             'rows. A change that takes room is in the state at most this '
             'long plus one poll after it was made.'),
    cfg.BoolOpt(
        'kept_state_claim_casts',
        default=False,
        help='Whether each nova-sched-ext-scheduler with kept_candidates '
             'tells every other scheduler of each claim placement accepted '
             'from it, by a fanout cast on the scheduler topic (namespace '
             'nova_sched_ext.kept_state), and counts theirs. The others '
             'then see the room taken at once instead of at their next '
             'poll (fewer claims refused), and a poll reads nothing of a '
             'provider whose generation moved by exactly the claims '
             'counted (without casts, each claim costs every other '
             'scheduler four reads of placement). A cast lost or never '
             'sent only costs those reads. Turn it on once every '
             'scheduler of the cloud runs a release that has it: one '
             'without it logs an error for each cast. Read at service '
             'start.'),
    cfg.IntOpt(
        'kept_state_resync_interval',
        default=600, min=0,
        help='Seconds in which the kept provider state reads the usages '
             'of every provider again (one call a provider, spread over '
             'the polls), in the background: the bound on how long room '
             'freed without a '
             'compute telling the scheduler (an allocation removed by hand '
             'or by another service) stays unseen. 0 never does. Placement '
             'does not change a provider\'s generation when allocations '
             'are removed.'),
    utils.resync_max_rate_opt('kept provider state', 'scheduler'),
    types.FiniteFloatOpt(
        'kept_state_max_age',
        default=30.0, min=0.1,
        help='Seconds since the start of the last successful poll after '
             'which the kept provider state is no longer used: while '
             'placement cannot be polled, queries go to placement\'s own '
             'allocation candidates, as with kept_candidates off.'),
    cfg.IntOpt(
        'kept_state_workers',
        default=4, min=1,
        help='How many placement reads the kept provider state has in '
             'flight at once when it reads providers again.'),
] + utils.snapshot_opts(
    'kept provider state', 'scheduler', 'when the scheduler stops')

preemption_opts = [
    cfg.StrOpt(
        'preemption_victim_strategy',
        default='minimal',
        help='How the preemption driver chooses the preemptible instances '
             'to evict, by name in the entry-point namespace '
             'nova_sched_ext.victim_strategies: "minimal" minimises the '
             'number of victims, then the resources wasted, and prefers '
             'the youngest; "random" picks random victims that suffice '
             '(for comparison).'),
    cfg.StrOpt(
        'preemption_action',
        default=ACTION_DELETE,
        choices=[
            (ACTION_DELETE, 'Delete the victim.'),
            (ACTION_SHELVE_OFFLOAD,
             'Shelve the victim and offload it from its host; its owner '
             'can unshelve it later, when there is room. Slower: the '
             'driver waits for the offload.'),
        ],
        help='What the preemption driver does to a victim. Only actions '
             'that free the victim\'s placement allocations and its host '
             'resources are offered: stopping or suspending a server keeps '
             'both.'),
    cfg.IntOpt(
        'preemption_wait_timeout',
        default=120, min=1,
        help='Seconds the preemption driver waits for its victims to be '
             'gone (deleted, or offloaded) before it gives up: the request '
             'then fails with NoValidHost and the room is released. It '
             'must stay well under [DEFAULT] long_rpc_timeout, the time the '
             'conductor waits for the scheduler.'),
    types.FiniteFloatOpt(
        'preemption_poll_interval',
        default=1.0, min=0.01,
        help='Seconds between two checks of the victims while the '
             'preemption driver waits for them to go.'),
    cfg.IntOpt(
        'preemption_eviction_ttl',
        default=30, min=2,
        help='Seconds an eviction in progress stays claimed by its scheduler '
             'without a heartbeat. Every eviction is recorded on the '
             'coordination backend ([nova_sched_ext] '
             'coordination_url) before the victims\' room is '
             'reserved; its scheduler renews the record every third of '
             'this time. When a scheduler dies, its records run out after '
             'this time and the reconcile of another scheduler rolls them '
             'back: the reservations whose request never became an '
             'instance are released, victims already evicted stay evicted '
             'and the request fails.'),
    cfg.IntOpt(
        'preemption_reconcile_interval',
        default=60, min=1,
        help='Seconds between two reconciles of the evictions whose '
             'scheduler died (their record ran out, see '
             'preemption_eviction_ttl). Every preemption scheduler process '
             'reconciles when it starts and then at this interval; a '
             'record is rolled back by one of them only. The longest a '
             'dead scheduler\'s reservation outlives it is about '
             'preemption_eviction_ttl plus this interval.'),
    cfg.IntOpt(
        'preemptible_max_per_az',
        default=-1, min=-1,
        help='Most preemptible instances one availability zone may hold; '
             'a preemptible request that would exceed it fails with '
             'NoValidHost. -1 means unlimited. Instances of every cell '
             'count, whatever their state, until they are deleted (or '
             'shelved and offloaded). Enforced by the preemption driver '
             'only; exactly, with any number of schedulers, when they all '
             'share one coordination backend ([nova_sched_ext] '
             'coordination_url).'),
    cfg.IntOpt(
        'preemptible_max_per_host',
        default=-1, min=-1,
        help='Most preemptible instances one compute host may hold; -1 '
             'means unlimited. Counted like preemptible_max_per_az.'),
    cfg.IntOpt(
        'preemptible_caps_lock_timeout',
        default=60, min=1,
        help='Seconds a preemptible request under a cap waits for the lock '
             'of its availability zone(s), which every scheduler takes on '
             'the coordination backend ([nova_sched_ext] '
             'coordination_url) around counting the preemptible '
             'instances and claiming the chosen hosts, so that several '
             'schedulers never overshoot a cap. When the time passes, or '
             'the backend cannot be reached, the request fails with '
             'NoValidHost.'),
]

#: The options oslo-config-generator lists under the namespace
#: ``nova_sched_ext``; the preemption driver's are listed under
#: ``nova_sched_ext.preemption`` (:mod:`nova_sched_ext.conf.opts`).
SCHEDULER_OPTS = (fit_opts + numa_fit_filter_opts + numa_slot_weigher_opts +
                  deployment_set_opts + scheduler_driver_opts +
                  request_wrapper_opts + host_state_opts +
                  candidate_limit_opts + kept_state_opts)

ALL_OPTS = SCHEDULER_OPTS + preemption_opts


def register_opts(conf):
    conf.register_group(nova_sched_ext_group)
    conf.register_opts(ALL_OPTS, group=nova_sched_ext_group)


def list_opts():
    return [(nova_sched_ext_group, ALL_OPTS)]
