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

"""FastNUMATopologyFilter: Nova's NUMATopologyFilter, decided in C.

``NUMAFitFilter`` only removes the hosts that cannot fit; Nova's
``NUMATopologyFilter`` after it still runs ``numa_fit_instance_to_host`` in
Python on every host that can, once per allocation candidate, on a copy of
the request spec.  In a cloud 40-70% full that is most hosts, and at a few
thousand hosts per request it is most of the scheduler's own time.

This filter *replaces* ``NUMATopologyFilter`` (enable it instead of it, not
beside it).  It asks the fit engine once for all hosts of a request and,
where the engine's answer is exact, decides alone, with the same outcome
Nova's filter would have:

- a host with one allocation candidate that fits passes, with
  ``limits['numa_topology']`` set as Nova's filter sets it (the host's
  allocation ratios and the request's network metadata), which is what the
  compute's claim reads, and its candidate left in place;
- a host that does not fit is rejected, however many candidates it has:
  the engine replays Nova's runs, one per candidate, each starting from
  what the run before left in Nova's one copy of the request (the instance
  cells take the ids of the host cells they were tried on, and Nova's pair
  cache is keyed by those ids), and answers NO only when every run fails;
- a host that fits with several allocation candidates (a pinned flavor's
  hosts have two: Nova asks placement for ``PCPU`` and again for
  ``VCPU``) passes with the candidates Nova's filter would keep: those
  whose run fits.  Because each run starts from the last one's ids, a
  later candidate can fail where the first fitted; for these hosts the
  engine replays every run to say which
  (:func:`nova_sched_ext.fit.engine.run_outcomes`: the C helper's
  ``nse_fit_runs``, or its Python twin ``pyfit.run_outcomes``).  The
  scheduler claims from the pruned list (its first candidate), builds
  alternates from it and filters it again in a multi-create's next round;
- every other case is handed to Nova's own ``NUMATopologyFilter`` code for
  that host: a request or host outside the engine's subset (see
  ``doc/source/numa_fit.rst``), a host the engine cannot tell about, and a
  host with more allocation candidates than the engine replays.

The ``hw:cpu_thread_policy=require`` check Nova makes before the fit runs
here first, through Nova's own method.  Requests without a NUMA topology
pass, as they do in Nova's filter.  The tests compare this filter with
Nova's on random hosts and requests, with several candidates per host and
multi-create rounds: same hosts, same limits, same allocation candidates.

Enable it in ``nova.conf``::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_sched_ext.filters.all_filters
    enabled_filters = ...,FastNUMATopologyFilter,...

Options (group ``[nova_sched_ext]``): ``fit_backend`` chooses the C helper
or the pure-Python twin, as for ``NUMAFitFilter``; Nova's
``[compute] packing_host_numa_cells_allocation_strategy`` and
``[filter_scheduler] pci_in_placement`` are honoured as Nova honours them.
"""

from nova.scheduler.filters import numa_topology_filter
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext import conf
from nova_sched_ext.filters import numa_fit
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import model
from nova_sched_ext.fit import nova_fit

LOG = logging.getLogger(__name__)
CONF = conf.CONF

#: Filters this one makes redundant when enabled beside it.
REDUNDANT = ('NUMATopologyFilter', 'NUMAFitFilter')


class FastNUMATopologyFilter(numa_topology_filter.NUMATopologyFilter):
    """NUMATopologyFilter with the fit decided by the C engine."""

    RUN_ON_REBUILD = False

    #: it reads each host's packed fit model: the kept host state's
    #: warm-up ([nova_sched_ext] host_state_warm_up_nodes) builds them
    READS_FIT_MODELS = True

    def __init__(self):
        super().__init__()
        engine.check_backend()
        both = [name for name in REDUNDANT
                if name in CONF.filter_scheduler.enabled_filters]
        if both:
            LOG.warning('FastNUMATopologyFilter replaces %s; enabled beside '
                        'it, %s only repeats its work. Remove it from '
                        '[filter_scheduler] enabled_filters.',
                        ' and '.join(REDUNDANT), ' and '.join(both))

    def host_passes(self, host_state, spec_obj):
        return bool(self.filter_all([host_state], spec_obj))

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if not hosts or scheduler_utils.request_is_rebuild(spec_obj):
            # Nova's filter does not run on a rebuild either.
            return hosts
        extra_specs = spec_obj.flavor.extra_specs
        image_props = spec_obj.image.properties
        if spec_obj.numa_topology is None:
            # All Nova's filter checks then, without copying the spec.
            return [host for host in hosts if nova_compat.satisfies_cpu_policy(
                self, host, extra_specs, image_props)]
        try:
            answers = numa_fit.engine_answers(hosts, spec_obj,
                                              "Nova's NUMATopologyFilter")
        except Exception:
            LOG.exception('FastNUMATopologyFilter could not ask the fit '
                          'engine; Nova\'s NUMATopologyFilter decides all '
                          '%d hosts.', len(hosts))
            answers = None
        if answers is None:
            answers = (model.UNKNOWN,) * len(hosts)
        network_metadata = None
        if 'network_metadata' in spec_obj:
            network_metadata = spec_obj.network_metadata
        debug = LOG.isEnabledFor(logging.DEBUG)
        several = [host for host, answer in zip(hosts, answers)
                   if answer == model.YES and
                   len(host.allocation_candidates) > 1]
        runs = {}
        if several:
            try:
                runs = dict(zip(map(id, several),
                                numa_fit.candidate_runs(several, spec_obj)))
            except Exception:
                LOG.exception('FastNUMATopologyFilter could not replay '
                              'the candidates\' runs; Nova\'s '
                              'NUMATopologyFilter decides %d hosts.',
                              len(several))
        kept = []
        for host, answer in zip(hosts, answers):
            if answer == model.NO and numa_fit.replayed_every_candidate(
                    host):
                # Exact whatever the number of candidates: the engine
                # replays Nova's runs, one per candidate, on one copy of
                # the request, and says NO only when every run fails.
                if debug:
                    numa_fit.log_rejection(host, spec_obj)
            elif answer == model.YES and len(host.allocation_candidates) == 1:
                # One candidate: Nova's one run is the engine's, and Nova
                # leaves the list as it is.
                if self._passes(host, extra_specs, image_props,
                                network_metadata):
                    kept.append(host)
            elif answer == model.YES and runs.get(id(host)) is not None:
                # Several candidates: Nova keeps those whose run fits,
                # each run starting from what the one before left; the
                # engine replays them all.
                if self._passes(host, extra_specs, image_props,
                                network_metadata):
                    host.allocation_candidates = [
                        candidate for candidate, fits in zip(
                            host.allocation_candidates, runs[id(host)])
                        if fits]
                    kept.append(host)
            elif self._nova_passes(host, spec_obj):
                kept.append(host)
        return kept

    def _passes(self, host, extra_specs, image_props, network_metadata):
        """Nova's filter on a host that fits: the CPU policy, the limits."""
        if not nova_compat.satisfies_cpu_policy(self, host, extra_specs,
                                                image_props):
            return False
        host.limits['numa_topology'] = nova_fit.host_limits(
            host, network_metadata)
        return True

    def _nova_passes(self, host, spec_obj):
        try:
            return super().host_passes(host, spec_obj)
        except Exception:
            LOG.exception('NUMATopologyFilter failed on %(host)s, %(node)s; '
                          'rejecting the host.',
                          {'host': host.host, 'node': host.nodename},
                          instance_uuid=spec_obj.instance_uuid)
            return False
