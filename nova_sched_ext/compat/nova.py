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

"""Nova's names that are no API, each behind one function or constant.

Read from Nova 34.0.0 (2026.2) and compared with 31.3.1, 32.2.1 and
33.0.2: where those differ, the entry follows the installed release
(:func:`nova_sched_ext.compat.release.release`) and says what each does.
Each entry names the upstream name it stands for and what it returns;
``tests/unit/test_compat.py`` checks every one against the installed
Nova.  See :mod:`nova_sched_ext.compat` and
``doc/source/support-matrix.rst``.
"""

from nova.db.main import api as main_db_api
from nova.db.main import models as main_db_models
from nova import exception as nova_exception
from nova import objects

from nova_sched_ext.compat import release

#: Private methods of Nova's classes that the package's subclasses
#: override, by ``module.Class.method``, with the parameters Nova calls
#: them with.  An override keeps Nova's name (Nova calls it), so it cannot
#: live here; this table is the inventory, and the test checks each still
#: exists with these parameters.
#:
#: * ``HostManager._get_computes_for_cells`` and ``_get_host_states``:
#:   :class:`nova_sched_ext.host_state.KeptHostManager` keeps the host
#:   state between requests; ``get_host_states_by_uuids`` and
#:   ``get_all_host_states`` call the first, then the second with its
#:   answer.
#: * ``BaseWeigher._weigh_object``: the abstract method every Nova weigher
#:   implements (``weigh_objects`` calls it per host), as
#:   :class:`nova_sched_ext.weighers.numa_slot.NUMASlotWeigher` does.
OVERRIDDEN_HOOKS = {
    'nova.scheduler.host_manager.HostManager._get_computes_for_cells':
        ('self', 'context', 'cells', 'compute_uuids'),
    'nova.scheduler.host_manager.HostManager._get_host_states':
        ('self', 'context', 'compute_nodes', 'services'),
    'nova.weights.BaseWeigher._weigh_object':
        ('self', 'obj', 'weight_properties'),
}


# --- the weighers -------------------------------------------------------

def multiplier_reads_aggregates_only(weigher):
    """Whether ``weigher.weight_multiplier(host)`` reads only aggregates.

    Every weigher of Nova's own (``nova.scheduler.weights.*``) returns
    ``nova.scheduler.utils.get_weight_multiplier(host_state, name, option)``:
    the option, or the value of the host's aggregates' metadata key; the
    base class's (``nova.weights``) returns 1.0.  Within one weighing,
    hosts with the same aggregate objects get the same multiplier.  A
    weigher whose method is defined anywhere else (a subclass's own, the
    package's, a third party's) is asked per host.
    """
    function = getattr(type(weigher), 'weight_multiplier', None)
    module = getattr(function, '__module__', None) or ''
    return module == 'nova.weights' or module.startswith(
        'nova.scheduler.weights.')


# --- the cell database --------------------------------------------------

def compute_nodes_table():
    """``nova.db.main.models.ComputeNode.__table__``: the compute nodes.

    The kept host state reads the rows' ``uuid``, ``created_at``,
    ``updated_at`` and ``deleted`` columns in bulk, which no object API
    offers.
    """
    return main_db_models.ComputeNode.__table__


def services_table():
    """``nova.db.main.models.Service.__table__``: the service rows."""
    return main_db_models.Service.__table__


def cell_engine(cctxt):
    """``nova.db.main.api.get_engine(context=cctxt)``: a cell's engine.

    :param cctxt: a context targeted at the cell
    """
    return main_db_api.get_engine(context=cctxt)


def configure_databases(conf):
    """``nova.db.main.api.configure`` and ``nova.db.api.api.configure``.

    What ``nova.config.parse_args`` does for the main (cell) and the API
    database, for a process that reads ``conf`` itself.
    """
    from nova.db.api import api as api_db_api
    main_db_api.configure(conf)
    api_db_api.configure(conf)


def service_from_row(context, row):
    """``objects.Service._from_db_object``: a ``Service`` from a raw row.

    :param row: a mapping of the ``services`` table's columns (a
        SQLAlchemy row's ``_mapping``)
    :returns: the ``objects.Service`` Nova's own query would give
    """
    return objects.Service._from_db_object(context, objects.Service(), row)


# --- the service and its manager ----------------------------------------

def parse_args(argv, prog=None, **kwargs):
    """``nova.config.parse_args(argv, prog=prog, **kwargs)``.

    Nova 33 added ``prog`` (the name oslo.config gives in usage and
    errors); Nova 31 and 32 take the name from ``argv[0]``, and the
    argument is left out for them.
    """
    from nova import config
    if prog is not None and release.release() >= 33:
        kwargs['prog'] = prog
    return config.parse_args(argv, **kwargs)


def reset_executors():
    """What ``nova-scheduler`` does to its executors before the fork.

    * Nova 34: ``nova.thread_pool_factory.reset_all_executors()``;
    * Nova 32, 33: ``nova.utils.destroy_scatter_gather_executor()`` and
      ``destroy_default_executor()``;
    * Nova 31: nothing (eventlet's green pools, no executor).
    """
    major = release.release()
    if major >= 34:
        from nova import thread_pool_factory
        thread_pool_factory.reset_all_executors()
    elif major >= 32:
        from nova import utils
        utils.destroy_scatter_gather_executor()
        utils.destroy_default_executor()


def manager_graceful_shutdown(parent, timeout=None):
    """Nova's ``graceful_shutdown`` of a manager, as the release has it.

    * Nova 34: ``graceful_shutdown(timeout)`` (the service passes its
      shutdown timeout; the scheduler manager waits for its in-progress
      tasks, then shuts its executors down);
    * Nova 33: ``graceful_shutdown()`` (the scheduler manager sleeps
      ``[DEFAULT] manager_shutdown_timeout``);
    * Nova 31, 32: no such hook; the service never calls it.

    :param parent: ``super()`` of the package's manager, or a Nova
        manager
    :param timeout: what Nova 34's service passes (None from 33's)
    """
    major = release.release()
    if major >= 34:
        parent.graceful_shutdown(timeout)
    elif major == 33:
        parent.graceful_shutdown()


# --- the scheduler ------------------------------------------------------

def request_spec_sentinel():
    """``nova.scheduler.manager.SchedulerManager._sentinel``.

    The default of ``select_destinations``'s ``spec_obj``: what an older
    conductor's call without a ``RequestSpec`` leaves there.
    """
    from nova.scheduler import manager
    return manager.SchedulerManager._sentinel


def runs_novas_host_loop(host_filter):
    """Whether a host filter decides host by host as Nova's base does.

    True when its class keeps ``BaseFilter.filter_all`` (one
    ``_filter_one`` per host) and ``BaseHostFilter._filter_one`` (pass
    every host of a rebuild unless ``RUN_ON_REBUILD``, else
    ``host_passes``): then nothing but ``host_passes`` and
    ``RUN_ON_REBUILD`` decides a host.
    """
    from nova import filters
    from nova.scheduler import filters as host_filters
    cls = type(host_filter)
    return (isinstance(host_filter, host_filters.BaseHostFilter) and
            cls.filter_all is filters.BaseFilter.filter_all and
            cls._filter_one is host_filters.BaseHostFilter._filter_one)


def host_aggregates(host_manager, host):
    """``HostManager._get_aggregates_info(host)``: the host's aggregates.

    :returns: the list of ``objects.Aggregate`` the manager keeps for the
        host, as a ``HostState``'s ``aggregates``
    """
    return host_manager._get_aggregates_info(host)


def host_instances(host_manager, context, compute):
    """``HostManager._get_instance_info(context, compute)``.

    :returns: the host's instances by uuid, as a ``HostState``'s
        ``instances``
    """
    return host_manager._get_instance_info(context, compute)


def satisfies_cpu_policy(numa_filter, host_state, extra_specs, image_props):
    """``NUMATopologyFilter._satisfies_cpu_policy``: the filter's CPU check.

    What Nova's ``NUMATopologyFilter`` checks of a host before the NUMA
    fit (a ``hw:cpu_policy`` the host can serve, ``hw:cpu_thread_policy``).

    :returns: True if the host passes
    """
    return numa_filter._satisfies_cpu_policy(host_state, extra_specs,
                                             image_props)


def max_instances_per_host(count_filter, host_state, spec_obj):
    """``NumInstancesFilter._get_max_instances_per_host``.

    Also ``AggregateNumInstancesFilter``'s, which reads the host's
    aggregates.

    :returns: the most instances the filter lets the host hold
    """
    return count_filter._get_max_instances_per_host(host_state, spec_obj)


# --- the placement request of a RequestSpec -----------------------------

def request_groups(resource_request):
    """``ResourceRequest._rg_by_id.values()``: every ``RequestGroup``.

    ``ResourceRequest`` offers no public iterator over its groups (the
    unnumbered one included); Nova's own code reads ``_rg_by_id``.

    :returns: a list of ``objects.RequestGroup``
    """
    return list(resource_request._rg_by_id.values())


def root_required(resource_request):
    """``ResourceRequest._root_required``: traits the root must have.

    :returns: a set of trait names (empty if there are none)
    """
    return set(getattr(resource_request, '_root_required', None) or ())


def root_forbidden(resource_request):
    """``ResourceRequest._root_forbidden``: traits the root must not have.

    :returns: a set of trait names (empty if there are none)
    """
    return set(getattr(resource_request, '_root_forbidden', None) or ())


def query_limit(resource_request):
    """``ResourceRequest._limit``: the ``limit`` of the candidates query.

    Nova sets it to None itself for the queries it wants unlimited.

    :returns: the limit, or None if there is none or it is not a number
        (a Nova that keeps it elsewhere)
    """
    limit = getattr(resource_request, '_limit', None)
    return limit if isinstance(limit, int) else None


def set_query_limit(resource_request, limit):
    """Set ``ResourceRequest._limit``: the query asks for ``limit``."""
    resource_request._limit = limit


# --- PCI ----------------------------------------------------------------

#: ``PciDeviceStats``'s private filters, in the order
#: ``PciDeviceStats._filter_pools`` applies them after the spec match: the
#: devices a request could take are those left by every one.
PCI_POOL_FILTERS = (
    '_filter_pools_for_unrequested_pfs',
    '_filter_pools_for_unrequested_vdpa_devices',
    '_filter_pools_for_unrequested_remote_managed_devices',
    '_filter_pools_for_live_migratable_devices',
)


def pci_pools(stats, pools, pci_request):
    """The pools that match ``pci_request``, and those it may take.

    ``PciDeviceStats._filter_pools_for_spec``, then each of
    :data:`PCI_POOL_FILTERS`, without the NUMA and count checks that
    ``_filter_pools`` adds (the fit engine makes those itself).

    :param stats: a ``nova.pci.stats.PciDeviceStats``
    :param pools: its pools (``list(stats.pools)``)
    :param pci_request: an ``objects.InstancePCIRequest``
    :returns: ``(matching pools, eligible pools)``, lists of pool dicts
    """
    matching = stats._filter_pools_for_spec(pools, pci_request)
    eligible = matching
    for name in PCI_POOL_FILTERS:
        eligible = getattr(stats, name)(eligible, pci_request)
    return matching, eligible


# --- the instance NUMA topology of a flavor -----------------------------

#: What ``hardware.numa_get_constraints(flavor, image_meta)`` raises for a
#: flavor (and image) that Nova refuses to build a topology for, in every
#: supported release.  ``nova.exception.Invalid`` is not all of it:
#:
#: * ``LockMemoryForbidden`` (``hw:locked_memory`` without
#:   ``hw:mem_page_size``) is a ``Forbidden`` up to Nova 33, an
#:   ``Invalid`` from 34;
#: * from Nova 34, ``get_locked_memory_constraint`` (which
#:   ``numa_get_constraints`` calls) checks memory encryption too: a
#:   ``hw:mem_encryption`` flavor without an image whose
#:   ``hw_firmware_type`` is ``uefi`` raises ``FlavorImageConflict`` (a
#:   plain ``NovaException``); Nova 31 to 33 build the topology;
#: * ``FlavorImageLockedMemoryConflict`` is a ``NovaException`` up to 33,
#:   a ``FlavorImageConflict`` from 34.
#:
#: The classes exist in all four releases; the tuple holds for each.
CONSTRAINT_REFUSALS = (
    nova_exception.Invalid,
    nova_exception.LockMemoryForbidden,
    nova_exception.FlavorImageConflict,
    nova_exception.FlavorImageLockedMemoryConflict,
)


# --- the virt driver and its objects ------------------------------------

def numa_topology_json(topology):
    """``objects.NUMATopology._to_json()``: the compute node's column.

    :returns: the JSON text Nova stores in ``compute_nodes.numa_topology``
        (``objects.NUMATopology.obj_from_db_obj`` reads it back)
    """
    return topology._to_json()


def allocation_ratios(driver, inventory):
    """``ComputeDriver._get_allocation_ratios(inventory)``.

    :returns: ``{resource class: ratio}`` for VCPU, MEMORY_MB and DISK_GB,
        from the ``*_allocation_ratio`` options or the inventory's own
    """
    return driver._get_allocation_ratios(inventory)


def reserved_host_disk_gb(driver):
    """``ComputeDriver._get_reserved_host_disk_gb_from_config()``.

    :returns: ``[DEFAULT] reserved_host_disk_mb`` in GiB, rounded up
    """
    return driver._get_reserved_host_disk_gb_from_config()
