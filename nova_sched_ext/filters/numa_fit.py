"""NUMAFitFilter: drop hosts that cannot fit the request's NUMA shape, fast.

Nova's ``NUMATopologyFilter`` runs ``numa_fit_instance_to_host`` in Python
for every host (about 0.2 ms each on a two-cell host, more on bigger ones).
In a nearly full cloud most of that time is spent proving that hosts do
*not* fit.  This filter answers the same question for all hosts of a request
in one call into the C fit engine and removes every host that cannot fit;
``NUMATopologyFilter``, placed after it, then runs only on the survivors and
still makes the final decision (and records the limits the compute service
needs).

It never removes a host that ``NUMATopologyFilter`` would keep: its answer
is Nova's own, replayed (see ``doc/source/numa_fit.rst`` for the supported
subset), once per allocation candidate as Nova runs it, each run starting
from what the last one left in the request; it removes a host only when
every run fails.  For a request or host outside the subset it keeps the
host, and it leaves the allocation candidates of the hosts it keeps to
``NUMATopologyFilter``, which keeps only those whose run fits.
Requests without a NUMA topology pass through untouched.

Enable it in ``nova.conf``::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_sched_ext.filters.all_filters
    enabled_filters = ...,NUMAFitFilter,NUMATopologyFilter,...

Options (group ``[nova_sched_ext]``): ``fit_backend`` chooses the C helper or
the pure-Python twin (``c``: the C helper, or the scheduler does not start);
``numa_fit_filter_log_summary`` logs one debug line per request.  Nova's
``[compute] packing_host_numa_cells_allocation_strategy`` and
``[filter_scheduler] pci_in_placement`` are honoured as Nova honours them.
"""

import time

from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_sched_ext import conf
from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model

LOG = logging.getLogger(__name__)
CONF = conf.CONF


class NUMAFitFilter(filters.BaseHostFilter):
    """Reject hosts whose NUMA cells cannot fit the requested topology."""

    # Like NUMATopologyFilter: a rebuild keeps the instance's topology.
    RUN_ON_REBUILD = False

    #: it reads each host's packed fit model: the kept host state's
    #: warm-up ([nova_sched_ext] host_state_warm_up_nodes) builds them
    READS_FIT_MODELS = True

    def __init__(self):
        super().__init__()
        # fit_backend = c without a usable C helper: fail here, when Nova
        # loads the filter, so that the scheduler does not start.
        engine.check_backend()

    def host_passes(self, host_state, spec_obj):
        return bool(list(self.filter_all([host_state], spec_obj)))

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        try:
            return self._filter(hosts, spec_obj)
        except Exception:
            # A filter must never fail a request; Nova's own filter still
            # checks every host we keep.
            LOG.exception('NUMAFitFilter could not check the request; '
                          'keeping all %d hosts for NUMATopologyFilter.',
                          len(hosts))
            return hosts

    def _filter(self, hosts, spec_obj):
        started = time.perf_counter()
        answers = engine_answers(hosts, spec_obj, 'NUMATopologyFilter')
        if answers is None:
            return hosts
        kept = []
        unknown = 0
        # Thousands of rejections per request: skip building log records
        # nobody will see.
        debug = LOG.isEnabledFor(logging.DEBUG)
        for host, answer in zip(hosts, answers):
            if answer == model.NO and replayed_every_candidate(host):
                if debug:
                    log_rejection(host, spec_obj)
                continue
            if answer != model.YES:
                unknown += 1
            kept.append(host)
        if debug and CONF.nova_sched_ext.numa_fit_filter_log_summary:
            LOG.debug('NUMAFitFilter checked %(total)d hosts with the '
                      '%(backend)s engine in %(ms).2f ms: rejected '
                      '%(rejected)d, kept %(kept)d (%(unknown)d undecided, '
                      'left to NUMATopologyFilter).',
                      {'total': len(hosts), 'backend': engine.backend_name(),
                       'ms': (time.perf_counter() - started) * 1000,
                       'rejected': len(hosts) - len(kept),
                       'kept': len(kept), 'unknown': unknown},
                      instance_uuid=spec_obj.instance_uuid)
        return kept


def engine_answers(hosts, spec_obj, decider):
    """The fit engine's YES / NO / UNKNOWN for each host, or None.

    None means the engine has nothing to say about this request: it has no
    NUMA topology, it is a rebuild (Nova keeps the instance's topology), or
    it lies outside the engine's subset.  ``decider`` names who decides
    instead, for the debug line.
    """
    if not hosts or scheduler_utils.request_is_rebuild(spec_obj):
        return None
    try:
        request, pci_requests = adapters.request_from_spec(spec_obj)
    except adapters.Unsupported as exc:
        LOG.debug('Request outside the fit engine\'s subset (%s); '
                  'leaving all %d hosts to %s.', exc, len(hosts), decider,
                  instance_uuid=spec_obj.instance_uuid)
        return None
    if request is None:
        return None
    prepared = adapters.prepared_hosts(hosts)
    pcis = None
    if request.pci is not None:
        pcis = [adapters.host_pci(h, pci_requests[0]) for h in hosts]
    return engine.check_hosts(prepared, request, pcis)


def candidate_runs(hosts, spec_obj):
    """Whether each allocation candidate's run of Nova's fit fits, per host.

    For hosts the engine answered YES with several candidates: Nova's
    filter keeps the candidates whose run fits, each run starting from
    what the one before left (:func:`nova_sched_ext.fit.engine.
    run_outcomes`).

    :returns: a list parallel to ``hosts`` of tuples of booleans, one per
        candidate, or None for a host the engine cannot tell about and
        for every host of a request with PCI devices (Nova decides them)
    """
    if not hosts:
        return []
    try:
        request, pci_requests = adapters.request_from_spec(spec_obj)
    except adapters.Unsupported:
        return [None] * len(hosts)
    if request is None or request.pci is not None:
        # With a PCI request each run also reads its candidate's provider
        # mapping (which pools it may take): Nova decides.
        return [None] * len(hosts)
    runs = engine.run_outcomes(adapters.prepared_hosts(hosts), request)
    # None where a host has more candidates than the engine replays
    return [None if host_runs is None or len(host_runs) != len(
        host.allocation_candidates) else host_runs
        for host, host_runs in zip(hosts, runs)]


def replayed_every_candidate(host):
    """Whether the engine's NO covers every allocation candidate of a host.

    Nova's filter runs the fit once per candidate on one copy of the
    request, each run starting from the instance cell ids (and page sizes)
    the run before left, so a run that failed can be followed by one that
    fits.  The engine replays those runs and answers NO only when all of
    them fail, for up to ``model.MAX_CANDIDATES`` candidates (far more than
    placement returns for one host): past that its NO is not a proof.
    """
    return len(host.allocation_candidates) <= model.MAX_CANDIDATES


def log_rejection(host, spec_obj):
    LOG.debug('%(host)s, %(node)s fails NUMA fit: the requested NUMA '
              'topology does not fit its free NUMA resources.',
              {'host': host.host, 'node': host.nodename},
              instance_uuid=spec_obj.instance_uuid)
