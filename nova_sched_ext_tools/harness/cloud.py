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

"""A real Nova in one process on fake NUMA hosts, with the package enabled.

:class:`NUMACloudTestBase` extends Nova's own libvirt functional test base
(``nova.tests.functional.libvirt.base.ServersTestBase``): API, conductor and
the real scheduler run in-process on sqlite, placement runs from the
``openstack-placement`` fixture, and each compute is a libvirt driver on a
fake libvirt connection built from a :class:`~.fake_hosts.HostLayout`.

The package's plugins are switched on only through the options a deployer
writes in ``nova.conf``::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_sched_ext.filters.all_filters
    enabled_filters = ...,NUMAFitFilter,NUMATopologyFilter

and weighers through ``[filter_scheduler] weight_classes`` and the
``[nova_sched_ext]`` options, so a test proves the entry points and class
paths work, not only the classes.  :meth:`NUMACloudTestBase.run_setups`
boots the same servers under several such configurations in turn, as an
operator would by editing ``nova.conf`` and restarting nova-scheduler.
"""

import dataclasses
import importlib.metadata
import os
import sys
import time
import warnings

from sqlalchemy import exc as sqla_exc

from nova.compute import vm_states
from nova import context as nova_context
from nova import objects
from nova.tests.functional.api import client as api_client
from nova.tests.functional.libvirt import base as libvirt_base

# Registers the [nova_sched_ext] options, so scenario flags can set them
# before anything else imports the plugins.
from nova_sched_ext import conf as ext_conf
from nova_sched_ext_tools.harness import capacity_check
from nova_sched_ext_tools.harness import fake_hosts
from nova_sched_ext_tools.harness import filter_trace
from nova_sched_ext_tools.harness import scenarios

CONF = ext_conf.CONF
NOVA_FILTERS = 'nova.scheduler.filters.all_filters'
PACKAGE_FILTERS = 'nova_sched_ext.filters.all_filters'
NUMA_FIT_FILTER = 'NUMAFitFilter'
NUMA_TOPOLOGY_FILTER = 'NUMATopologyFilter'
FAST_NUMA_FILTER = 'FastNUMATopologyFilter'
TIE_BREAKER = scenarios.TIE_BREAKER

#: Nova's default filters plus the NUMA and PCI ones an operator running
#: NUMA flavors enables; NUMAFitFilter goes right before NUMATopologyFilter
#: so Nova's slow check only sees the hosts the fast one kept.
BASE_FILTERS = (
    'ComputeFilter',
    'ComputeCapabilitiesFilter',
    'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter',
    'ServerGroupAffinityFilter',
    'PciPassthroughFilter',
)


def enabled_filters(numa_fit=True):
    """The ``[filter_scheduler] enabled_filters`` list, with or without us.

    ``numa_fit`` as ``scenarios.Setup.numa_fit`` has it.
    """
    if numa_fit == scenarios.FAST_NUMA:
        return list(BASE_FILTERS + (FAST_NUMA_FILTER,))
    numa = (NUMA_FIT_FILTER,) if numa_fit else ()
    return list(BASE_FILTERS + numa + (NUMA_TOPOLOGY_FILTER,))


def find_api_paste_config():
    """Where the installed Nova keeps ``api-paste.ini``.

    A source checkout has it in ``etc/nova``; the wheel installs it as data
    under ``sys.prefix``; a few layouts put it elsewhere in the
    distribution's file list.
    """
    candidates = [os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')]
    try:
        for path in importlib.metadata.files('nova') or ():
            if path.name == 'api-paste.ini':
                candidates.append(str(path.locate()))
    except importlib.metadata.PackageNotFoundError:
        pass
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise RuntimeError('Cannot find Nova\'s api-paste.ini (looked in %s)'
                       % ', '.join(candidates))


def tolerate_newer_sqlalchemy():
    """Keep Nova 34's test harness working on SQLAlchemy 2.1.

    Nova's ``WarningsFixture`` turns every SQLAlchemy deprecation warning
    raised from ``nova`` into an error; SQLAlchemy 2.1 deprecates
    ``orm.noload()``, which Nova 34 uses to load instances, so every boot
    would fail with HTTP 500.  Only that one warning is let through; the
    fixture restores the filters at clean-up.
    """
    warnings.filterwarnings(
        'ignore', message=r'The noload\(\) option is deprecated',
        category=sqla_exc.SADeprecationWarning)


@dataclasses.dataclass(frozen=True)
class BootResult:
    """Where one server landed, and what the filters did for it."""

    server: str
    flavor: str
    #: compute host, or None if the server went to ERROR
    host: object
    #: host NUMA cells the guest was placed on, e.g. (0, 1)
    cells: tuple
    #: the fault message of a server in ERROR
    fault: object
    #: the filter passes the request caused: one per server, and for a
    #: request of several servers one more, to pick alternate hosts
    passes: tuple

    @property
    def no_valid_host(self):
        return self.host is None and 'No valid host' in (self.fault or '')

    def outcome(self):
        """What must not differ between runs: host and cells, or error."""
        if self.host is None:
            return ('ERROR', self.fault)
        return (self.host, self.cells)

    def survivors(self):
        """Hosts that passed all filters, per pass (what weighers saw)."""
        return [p.survivors for p in self.passes]

    def where(self):
        """``numa2-4k cell 1`` / ``numa2-4k cells 0+1`` / ``NoValidHost``."""
        if self.host is None:
            return 'NoValidHost' if self.no_valid_host else 'ERROR'
        if not self.cells:
            return self.host
        return '%s cell%s %s' % (self.host, 's' if len(self.cells) > 1
                                 else '', '+'.join(map(str, self.cells)))


def _name_key(name):
    base, _, index = name.rpartition('-')
    return (base, int(index)) if index.isdigit() else (name, 0)


def compare_runs(reference, candidate):
    """Differences between two runs of the same boots, as text lines.

    Both the outcome (host, cells or error) and the hosts that survived
    filtering must match: the second proves that a filter added in front
    of NUMATopologyFilter removed nothing that Nova would have kept, even
    where the weighers happened to pick the same host anyway.
    """
    reference = [r for results in reference for r in results]
    candidate = [r for results in candidate for r in results]
    problems = []
    if len(reference) != len(candidate):
        problems.append('%d servers vs %d'
                        % (len(reference), len(candidate)))
    for ref, cand in zip(reference, candidate):
        if ref.outcome() != cand.outcome():
            problems.append('%s: %s vs %s' % (ref.server, ref.where(),
                                              cand.where()))
        if ref.survivors() != cand.survivors():
            problems.append('%s: filters kept %s vs %s' % (
                ref.server, ref.survivors(), cand.survivors()))
    return problems


@dataclasses.dataclass
class SetupRun:
    """One run of a boot sequence under one scheduler configuration."""

    setup: scenarios.Setup
    #: per boot, the ``BootResult`` list
    results: list
    #: ``[filter_scheduler]`` options as nova-scheduler read them
    available_filters: list
    weight_classes: list
    #: class names of what the running nova-scheduler loaded
    enabled_filters: list
    weighers: list
    #: after the last boot: free pinned CPUs per host, one count per cell
    free_pinned: dict
    #: the capacity count before, during and after the boots
    #: (``capacity_check.CapacityRun``), if the test asked for it
    capacity: object = None

    def hosts_of(self, flavor_name):
        """The hosts servers of a flavor landed on, in boot order."""
        return [r.host for results in self.results for r in results
                if r.flavor == flavor_name]


class NUMACloudTestBase(libvirt_base.ServersTestBase):
    """Nova with NUMA-aware scheduling over fake hosts of several layouts.

    Subclasses set :attr:`HOSTS` (a tuple of ``HostLayout``); every host is
    started in :meth:`setUp`.  :attr:`NUMA_FIT` chooses whether
    ``NUMAFitFilter`` is in ``enabled_filters``; :meth:`reconfigure_scheduler`
    changes that mid-test the way an operator would (edit the option,
    restart nova-scheduler).
    """

    ADMIN_API = True
    microversion = 'latest'

    #: hosts to start, as ``fake_hosts.HostLayout``
    HOSTS = ()
    #: extra ``(group, option, value)`` settings, e.g. a scenario's flags
    EXTRA_FLAGS = ()
    #: put NUMAFitFilter in enabled_filters
    NUMA_FIT = True
    #: Nova's weighers plus a name tie-breaker, so runs are reproducible
    WEIGHT_CLASSES = scenarios.STOCK_WEIGHT_CLASSES
    #: seconds to wait for a server to leave BUILD (or to go): a guard
    #: against a hung boot, not a measure of speed; a boot took over 60 s
    #: on a 2-core machine at load 17
    BOOT_TIMEOUT = 600
    #: :meth:`run_setups` counts capacity around every request
    COUNT_CAPACITY = False

    def setUp(self):
        self.flags(api_paste_config=find_api_paste_config(), group='wsgi')
        # PCI options must be set before the computes start, and Nova's
        # PCI tests set them before the base set-up for the same reason.
        self.flags(device_spec=[fake_hosts.PCI_DEVICE_SPEC],
                   alias=[fake_hosts.PCI_ALIAS], group='pci')
        self._configure_scheduler(self.NUMA_FIT)
        for group, option, value in self.EXTRA_FLAGS:
            self.flags(group=group, **{option: value})
        super().setUp()
        tolerate_newer_sqlalchemy()
        self.ctxt = nova_context.get_admin_context()
        self.filter_trace = self.useFixture(filter_trace.FilterTrace())
        self.flavor_ids = {}
        self.image_id = None
        # Scenarios fill hosts on purpose; quota must not be what stops them.
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.flags(cpu_shared_set=fake_hosts.CPU_SHARED_SET,
                   cpu_dedicated_set=fake_hosts.CPU_DEDICATED_SET,
                   group='compute')
        for layout in self.HOSTS:
            self.start_host(layout)

    # --- configuration -----------------------------------------------------

    def _configure_scheduler(self, numa_fit, weight_classes=None):
        if weight_classes is None:
            weight_classes = self.WEIGHT_CLASSES
        self.numa_fit_enabled = numa_fit
        self.weight_classes = tuple(weight_classes)
        self.flags(available_filters=[NOVA_FILTERS, PACKAGE_FILTERS],
                   enabled_filters=enabled_filters(numa_fit),
                   weight_classes=list(weight_classes),
                   host_subset_size=1,
                   shuffle_best_same_weighed_hosts=False,
                   group='filter_scheduler')

    def _setup_scheduler_service(self):
        # The libvirt base appends its ADDITIONAL_FILTERS to whatever is
        # configured; the filter list here is complete already.
        return self.start_service('scheduler')

    def reconfigure_scheduler(self, numa_fit=None, weight_classes=None):
        """Change filters or weighers and restart nova-scheduler.

        :param numa_fit: as ``scenarios.Setup.numa_fit`` (None: unchanged).
        :param weight_classes: ``[filter_scheduler] weight_classes`` (None:
            unchanged).

        The new scheduler reads the options afresh, as after an operator's
        restart: filter and weigher objects and host manager are new.
        """
        if numa_fit is None:
            numa_fit = self.numa_fit_enabled
        if weight_classes is None:
            weight_classes = self.weight_classes
        self.scheduler.stop()
        self._configure_scheduler(numa_fit, weight_classes)
        self.scheduler = self._setup_scheduler_service()
        self.addCleanup(self.scheduler.stop)

    def use_setup(self, setup):
        """Run nova-scheduler as ``setup`` (a ``scenarios.Setup``) says.

        Restarts it only if the configuration changes.
        """
        if (setup.numa_fit, tuple(setup.weight_classes)) != (
                self.numa_fit_enabled, self.weight_classes):
            self.reconfigure_scheduler(setup.numa_fit, setup.weight_classes)

    def loaded_filters(self):
        """Class names of the filters the running nova-scheduler uses."""
        return [type(f).__name__
                for f in self.scheduler.manager.host_manager.enabled_filters]

    def loaded_weighers(self):
        """Class names of the weighers the running nova-scheduler uses."""
        return [type(w).__name__
                for w in self.scheduler.manager.host_manager.weighers]

    def loaded_weigher(self, name):
        """The running nova-scheduler's weigher object of class ``name``."""
        for weigher in self.scheduler.manager.host_manager.weighers:
            if type(weigher).__name__ == name:
                return weigher
        self.fail('nova-scheduler runs no %s (weighers: %s)'
                  % (name, ', '.join(self.loaded_weighers())))

    # --- hosts -------------------------------------------------------------

    def start_host(self, layout):
        return self.start_compute(hostname=layout.name,
                                  host_info=layout.host_info(),
                                  pci_info=layout.pci_info())

    def host_usage(self):
        """Placement usages per host, only the non-zero ones."""
        usage = {}
        for host, rp_uuid in sorted(self.compute_rp_uuids.items()):
            used = self.placement.get(
                '/resource_providers/%s/usages' % rp_uuid).body['usages']
            used = {rc: n for rc, n in used.items() if n}
            if used:
                usage[host] = used
        return usage

    def free_pinned_cpus(self):
        """Free pinned (dedicated) CPUs per host, one count per NUMA cell.

        Measured from the compute nodes' NUMA topologies, as the resource
        tracker recorded them.
        """
        usage = self.host_numa_usage()
        free = {}
        for layout in self.HOSTS:
            free[layout.name] = tuple(
                total - len(usage.get((layout.name, cell), {})
                            .get('pinned', ()))
                for cell, total in enumerate(
                    layout.dedicated_cpus_per_cell()))
        return free

    def host_numa_usage(self):
        """Pinned CPUs, used memory and pages per host cell (non-zero)."""
        usage = {}
        with nova_context.target_cell(
                self.ctxt, self.cell_mappings['cell1']) as cctxt:
            nodes = objects.ComputeNodeList.get_all(cctxt)
        for node in nodes:
            topology = objects.NUMATopology.obj_from_db_obj(
                node.numa_topology)
            for cell in topology.cells:
                pages = {p.size_kb: p.used for p in cell.mempages if p.used}
                if cell.pinned_cpus or cell.memory_usage or cell.cpu_usage \
                        or pages:
                    usage[(node.host, cell.id)] = {
                        'pinned': sorted(cell.pinned_cpus),
                        'cpu_usage': cell.cpu_usage,
                        'memory_usage': cell.memory_usage,
                        'pages': pages,
                    }
        return usage

    # --- servers -----------------------------------------------------------

    def flavor_id(self, shape):
        """Create the flavor on first use; return its id."""
        if shape.name not in self.flavor_ids:
            self.flavor_ids[shape.name] = self._create_flavor(
                name=shape.name, vcpu=shape.vcpus, memory_mb=shape.ram_mb,
                disk=shape.disk_gb, ephemeral=0,
                extra_spec=dict(shape.extra_specs))
        return self.flavor_ids[shape.name]

    def boot(self, name, shape, count=1):
        """Create ``count`` servers in one request; wait for each to settle.

        A request for several servers is scheduled in one pass per server,
        each seeing the hosts as the previous ones left them; Nova names them
        ``name-1``, ``name-2``...

        :returns: ``([BootResult], [server dict])`` in name order; the filter
            passes of the request are on the first result.
        """
        self.filter_trace.take()
        if self.image_id is None:
            self.image_id = self._build_server()['imageRef']
        request = self._build_server(name=name, image_uuid=self.image_id,
                                     flavor_id=self.flavor_id(shape),
                                     networks='none')
        if count > 1:
            request.update(min_count=count, max_count=count,
                           return_reservation_id=True)
            reservation = self.api.post_server({'server': request})
            servers = self.api.get_servers(search_opts={
                'reservation_id': reservation['reservation_id']})
            servers.sort(key=lambda server: _name_key(server['name']))
        else:
            servers = [self.api.post_server({'server': request})]
        servers = [self._wait_until_built(server) for server in servers]
        passes = tuple(self.filter_trace.take())
        results = []
        for server in servers:
            host = cells = fault = None
            if server['status'] == 'ACTIVE':
                host = server['OS-EXT-SRV-ATTR:host']
                cells = self._guest_host_cells(server['id'])
            else:
                fault = server.get('fault', {}).get('message', '')
            results.append(BootResult(
                server=server['name'], flavor=shape.name, host=host,
                cells=cells, fault=fault, passes=passes))
            passes = ()
        return results, servers

    def _wait_until_built(self, server):
        """Wait until the server is ACTIVE, or ERROR with its fault.

        Polls the database rather than the API: an API call costs far more
        and slows the services it waits for.  The API is asked once at the
        end, for what a user would see.
        """
        deadline = time.monotonic() + self.BOOT_TIMEOUT
        delay = 0.02
        while True:
            instance = self._instance(server['id'])
            if instance is not None and instance.task_state is None and \
                    instance.vm_state in (vm_states.ACTIVE, vm_states.ERROR):
                server = self.api.get_server(server['id'])
                # Nova sets ERROR before it records the fault.
                if server['status'] == 'ACTIVE' or 'fault' in server:
                    return server
            if time.monotonic() > deadline:
                state = (instance.vm_state, instance.task_state) \
                    if instance is not None else 'not scheduled'
                # A multi-create's reservation answer has no name.
                self.fail('server %s still %s after %ss'
                          % (server.get('name', server['id']), state,
                             self.BOOT_TIMEOUT))
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _instance(self, server_id):
        """The instance from its cell's database, None before scheduling."""
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            self.ctxt, server_id)
        if mapping.cell_mapping is None:
            return None
        with nova_context.target_cell(self.ctxt,
                                      mapping.cell_mapping) as cctxt:
            return objects.Instance.get_by_uuid(cctxt, server_id)

    def _guest_host_cells(self, server_id):
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            self.ctxt, server_id)
        with nova_context.target_cell(self.ctxt,
                                      mapping.cell_mapping) as cctxt:
            topology = objects.InstanceNUMATopology.get_by_instance_uuid(
                cctxt, server_id)
        if not topology:
            return ()
        return tuple(cell.id for cell in topology.cells)

    def delete_servers(self, servers):
        for server in servers:
            self.api.delete_server(server['id'])
        for server in servers:
            try:
                self._wait_until_gone(server)
            except api_client.OpenStackApiNotFoundException:
                pass

    def _wait_until_gone(self, server):
        # Backs off as _wait_until_built does: each API call costs the
        # services it waits for their CPU, which a loaded machine lacks.
        deadline = time.monotonic() + self.BOOT_TIMEOUT
        delay = 0.02
        while time.monotonic() < deadline:
            self.api.get_server(server['id'])  # raises once it is gone
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        self.fail('server %s was not deleted' % server['name'])

    def assert_hosts_idle(self):
        """No allocation in placement, nothing used in any host cell."""
        self.assertEqual({}, self.host_usage())
        self.assertEqual({}, self.host_numa_usage())

    def run_both_ways(self, boots):
        """Boot ``boots`` with Nova's filters alone, then with NUMAFitFilter.

        See :meth:`run_setups`; the weighers stay as they are.

        :returns: ``(results without, results with)``; the servers of the
            second run are left in place.
        """
        setups = [dataclasses.replace(setup,
                                      weight_classes=self.weight_classes)
                  for setup in (scenarios.NOVA_FILTERS_ALONE,
                                scenarios.WITH_NUMA_FIT)]
        reference, results = self.run_setups(boots, setups)
        return reference.results, results.results

    def run_setups(self, boots, setups):
        """Boot the same servers once per setup (``scenarios.Setup``).

        Before each run nova-scheduler is restarted with the setup's
        filters and weighers, if they change.  Each run's servers are
        deleted and every host is checked idle before the next run, so all
        runs start from the same state; the last run's servers are left in
        place.

        :returns: a :class:`SetupRun` per setup.
        """
        runs = []
        for index, setup in enumerate(setups):
            self.use_setup(setup)
            counted = None
            if self.COUNT_CAPACITY:
                counted = capacity_check.CapacityRun(
                    [boot.flavor.name for boot in boots])
            results, servers = self.run_boots(boots, counted)
            options = CONF.filter_scheduler
            runs.append(SetupRun(
                setup=setup, results=results,
                available_filters=list(options.available_filters),
                weight_classes=list(options.weight_classes),
                enabled_filters=self.loaded_filters(),
                weighers=self.loaded_weighers(),
                free_pinned=self.free_pinned_cpus(),
                capacity=counted))
            if index < len(setups) - 1:
                self.delete_servers(servers)
                self.assert_hosts_idle()
        return runs

    def run_boots(self, boots, capacity=None):
        """Boot ``boots`` (``scenarios.Boot``) in order.

        Every flavor is created first, as a deployer creates flavors before
        users boot them: a weigher that protects flavors by name finds them
        on its first request.

        :param capacity: a ``capacity_check.CapacityRun`` to fill: the
            cloud's capacity of its flavors before and after the boots, and
            the count of each request's flavor checked around the request
        :returns: ``([[BootResult] per boot], [server dict])``
        """
        for boot in boots:
            self.flavor_id(boot.flavor)
        if capacity is not None:
            capacity.before = capacity_check.snapshot(capacity.flavors)
        results, servers = [], []
        for boot in boots:
            if capacity is not None:
                before = capacity_check.per_host(boot.flavor.name)
            boot_results, boot_servers = self.boot(
                boot.server, boot.flavor, boot.count)
            if capacity is not None:
                capacity.checks.append(capacity_check.check_boot(
                    boot, before, capacity_check.per_host(boot.flavor.name),
                    boot_results))
            results.append(boot_results)
            servers.extend(boot_servers)
        if capacity is not None:
            capacity.after = capacity_check.snapshot(capacity.flavors)
        return results, servers
