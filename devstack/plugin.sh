#!/bin/bash
# nova-sched-ext devstack plugin
# ==============================
#
# Enable in local.conf:
#
#     enable_plugin nova-sched-ext https://opendev.org/x/nova-sched-ext
#
# Phases (devstack calls this file as "plugin.sh MODE [PHASE]"):
#
# stack install      install the package next to Nova
# stack post-config  write nova.conf: available_filters, weight_classes, the
#                    [nova_sched_ext] options from NOVA_SCHED_EXT_* variables,
#                    with NOVA_SCHED_EXT_PREEMPTION=True the preemption driver
#                    and its [nova_sched_ext_evictor] credentials (Nova's
#                    [service_user]), with NOVA_SCHED_EXT_DEFRAG=True the
#                    [nova_sched_ext_defrag] credentials that
#                    nova-sched-ext-defrag apply live-migrates with (the
#                    same user) and, for test clouds, each fake
#                    compute's NUMA layout; then check the result and stop
#                    on a misconfiguration; with nse-capacity-api or
#                    nse-capacity-exporter enabled, write the capacity
#                    services' file and register the capacity API in
#                    keystone; where placement-api runs, placement.conf's
#                    [placement] allocation_conflict_retry_count
#                    (NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES)
# stack extra        run n-sch as nova-sched-ext-scheduler when a feature
#                    that needs it is enabled, and with
#                    NOVA_SCHED_EXT_SCHEDULERS > 1 more of them (n-sch-2,
#                    ...); for test clouds, restart the
#                    fake computes on the fake NUMA virt driver; start the
#                    enabled capacity services
# stack test-config  write tempest's [nova_sched_ext] options
# unstack            stop the extra schedulers and the capacity services
#                    and take the package's
#                    settings out of the configuration
# clean              the same, and uninstall the package
#
# The variables are described in devstack/settings.

NOVA_SCHED_EXT_CHECK=$NOVA_SCHED_EXT_DIR/devstack/tools/check_config.py
# Nova loads drivers from nova.virt only; nova_sched_ext.virt.compute is
# nova-compute with the package's fake NUMA driver available there.
NOVA_SCHED_EXT_FAKE_DRIVER=nova_sched_ext_fake_numa.FakeNUMADriver
NOVA_SCHED_EXT_FAKE_COMPUTE_MODULE=nova_sched_ext.virt.compute
# Nova's fake driver with a stable node UUID, which the fake computes start
# on before "stack extra" (devstack's stable/2025.1 and 2025.2 start them
# on fake.FakeDriver).
NOVA_SCHED_EXT_STABLE_FAKE_DRIVER=fake.FakeDriverWithoutFakeNodes
NOVA_SCHED_EXT_AVAILABLE_FILTERS=nova_sched_ext.filters.all_filters
NOVA_SCHED_EXT_NOVA_AVAILABLE_FILTERS=nova.scheduler.filters.all_filters
NOVA_SCHED_EXT_NOVA_WEIGHT_CLASSES=nova.scheduler.weights.all_weighers
# The preemption driver's and the defragmentation executor's credentials
# sections, and what is copied into each from nova.conf's [service_user].
NOVA_SCHED_EXT_EVICTOR_SECTION=nova_sched_ext_evictor
NOVA_SCHED_EXT_DEFRAG_SECTION=nova_sched_ext_defrag
NOVA_SCHED_EXT_SERVICE_AUTH_KEYS="auth_type auth_url username password
user_domain_name project_name project_domain_name cafile"
# Plugin variables that are not [nova_sched_ext] options.
NOVA_SCHED_EXT_CONTROL_VARIABLES="DIR FILTERS WEIGHT_CLASSES PREEMPTION
DEPLOYMENT_SET_LOCKING SCHEDULER SCHEDULERS SCHEDULER_LAUNCHER FAKE_VIRT FAKE_NUMA_TOPOLOGIES
CHECK FAKE_DRIVER FAKE_COMPUTE_MODULE STABLE_FAKE_DRIVER
AVAILABLE_FILTERS NOVA_AVAILABLE_FILTERS NOVA_WEIGHT_CLASSES
EVICTOR_SECTION SERVICE_AUTH_KEYS CONTROL_VARIABLES
DEFRAG DEFRAG_SECTION
CAPACITY_CONF CAPACITY_UWSGI_CONF CAPACITY_WSGI CAPACITY_SERVICE_TYPE
CAPACITY_URL_PATH CAPACITY_ALLOWED_ROLES CAPACITY_REFRESH_INTERVAL
CAPACITY_EXPORTER_PORT CAPACITY_EXPORT_PER_HOST PLACEMENT_CONFLICT_RETRIES"
# The capacity API's WSGI application and keystone service type.
NOVA_SCHED_EXT_CAPACITY_WSGI=nova_sched_ext.capacity.wsgi:application
NOVA_SCHED_EXT_CAPACITY_SERVICE_TYPE=numa-capacity

# The python that runs Nova, which is where the package is installed.
function _nova_sched_ext_python {
    if [[ -x ${NOVA_BIN_DIR:-/nonexistent}/python3 ]]; then
        echo "$NOVA_BIN_DIR/python3"
    else
        command -v python3
    fi
}

# Print the names of the [nova_sched_ext] options, one a line.
function _nova_sched_ext_options {
    "$(_nova_sched_ext_python)" "$NOVA_SCHED_EXT_CHECK" options
}

# Print "OLD NEW" for each renamed [nova_sched_ext] option, one a line.
function _nova_sched_ext_renamed_options {
    "$(_nova_sched_ext_python)" "$NOVA_SCHED_EXT_CHECK" renamed
}

# Whether n-sch must run the package's scheduler (status 0) or Nova's (1).
function _nova_sched_ext_own_scheduler {
    case "${NOVA_SCHED_EXT_SCHEDULER,,}" in
        true|yes|on|1)
            return 0
            ;;
        false|no|off|0)
            return 1
            ;;
        auto|"")
            [[ "$NOVA_SCHED_EXT_PREEMPTION" == "True" ||
               "$NOVA_SCHED_EXT_DEPLOYMENT_SET_LOCKING" == "True" ]]
            return
            ;;
        *)
            die $LINENO "nova-sched-ext: NOVA_SCHED_EXT_SCHEDULER must be" \
                "auto, True or False, not '$NOVA_SCHED_EXT_SCHEDULER'"
            ;;
    esac
}

# The services of the package's schedulers, one a line: n-sch, n-sch-2 ...
# n-sch-$NOVA_SCHED_EXT_SCHEDULERS.
function _nova_sched_ext_scheduler_services {
    local i
    echo n-sch
    for i in $(seq 2 "$NOVA_SCHED_EXT_SCHEDULERS"); do
        echo "n-sch-$i"
    done
}

# The command line of each of the package's schedulers.
function nova_sched_ext_scheduler_command {
    echo "${NOVA_SCHED_EXT_SCHEDULER_LAUNCHER:+$NOVA_SCHED_EXT_SCHEDULER_LAUNCHER }$NOVA_BIN_DIR/nova-sched-ext-scheduler --config-file $NOVA_CONF"
}

# Stop unless NOVA_SCHED_EXT_SCHEDULERS is a number the plugin can run.
function _nova_sched_ext_check_schedulers {
    if [[ ! "$NOVA_SCHED_EXT_SCHEDULERS" =~ ^[1-9][0-9]*$ ]]; then
        die $LINENO "nova-sched-ext: NOVA_SCHED_EXT_SCHEDULERS must be a" \
            "whole number of 1 or more, not '$NOVA_SCHED_EXT_SCHEDULERS'"
    fi
    if [[ "$NOVA_SCHED_EXT_SCHEDULERS" -gt 1 ]] && \
            ! _nova_sched_ext_own_scheduler; then
        die $LINENO "nova-sched-ext: NOVA_SCHED_EXT_SCHEDULERS=" \
            "$NOVA_SCHED_EXT_SCHEDULERS runs nova-sched-ext-scheduler" \
            "processes, but n-sch runs nova-scheduler here (set" \
            "NOVA_SCHED_EXT_SCHEDULER=True or enable a feature that needs it)"
    fi
}

# Drop the words of $2 (comma- or space-separated) from the comma-separated
# list $1.
function _nova_sched_ext_without {
    local list=",$1," word
    for word in ${2//,/ }; do
        while [[ "$list" == *",$word,"* ]]; do
            list=${list/,$word,/,}
        done
    done
    list=${list#,}
    echo "${list%,}"
}

function install_nova_sched_ext {
    # Builds the C fit helper: needs a compiler and the python headers,
    # which devstack installs for Nova anyway.
    setup_develop "$NOVA_SCHED_EXT_DIR"
}

function configure_nova_sched_ext {
    local conf=$NOVA_CONF

    # available_filters is a multi-valued option: keep Nova's own entry,
    # writing it if nova.conf relied on the default.
    local available
    available=$(iniget_multiline "$conf" filter_scheduler available_filters)
    if [[ -z "$available" ]]; then
        iniadd "$conf" filter_scheduler available_filters \
            "$NOVA_SCHED_EXT_NOVA_AVAILABLE_FILTERS"
    fi
    if [[ " $available " != *" $NOVA_SCHED_EXT_AVAILABLE_FILTERS "* ]]; then
        iniadd "$conf" filter_scheduler available_filters \
            "$NOVA_SCHED_EXT_AVAILABLE_FILTERS"
    fi

    # lib/nova wrote enabled_filters from NOVA_FILTERS, which settings
    # extended; write it again in case nova.conf was made before.
    iniset "$conf" filter_scheduler enabled_filters "$NOVA_FILTERS"

    if [[ -n "$NOVA_SCHED_EXT_WEIGHT_CLASSES" ]]; then
        local classes weigher
        classes=$(iniget "$conf" filter_scheduler weight_classes)
        classes=${classes:-$NOVA_SCHED_EXT_NOVA_WEIGHT_CLASSES}
        for weigher in ${NOVA_SCHED_EXT_WEIGHT_CLASSES//,/ }; do
            if [[ ",$classes," != *",$weigher,"* ]]; then
                classes+=",$weigher"
            fi
        done
        iniset "$conf" filter_scheduler weight_classes "$classes"
    fi

    # NOVA_SCHED_EXT_<OPTION> -> [nova_sched_ext] <option>, for the
    # variables that are set (an empty value is written as empty).
    local option variable options
    options=$(_nova_sched_ext_options) || \
        die $LINENO "nova-sched-ext: cannot list the package's options;" \
            "is it installed in $(_nova_sched_ext_python)?"
    for option in $options; do
        variable=NOVA_SCHED_EXT_${option^^}
        if [[ " ${NOVA_SCHED_EXT_CONTROL_VARIABLES//$'\n'/ } " == *" ${option^^} "* ]]; then
            die $LINENO "nova-sched-ext: the option [nova_sched_ext]" \
                "$option clashes with the plugin variable $variable"
        fi
        if [[ -v $variable ]]; then
            iniset "$conf" nova_sched_ext "$option" "${!variable}"
        fi
    done

    # The variable of a renamed option's old name still sets it, unless the
    # variable of its new name is set; the old name leaves nova.conf.
    local old new renamed
    renamed=$(_nova_sched_ext_renamed_options) || \
        die $LINENO "nova-sched-ext: cannot list the renamed options"
    while read -r old new; do
        [[ -n "$old" ]] || continue
        variable=NOVA_SCHED_EXT_${old^^}
        if [[ -v $variable || -v NOVA_SCHED_EXT_${new^^} ]]; then
            inidelete "$conf" nova_sched_ext "$old"
        fi
        if [[ ! -v $variable ]]; then
            continue
        elif [[ -v NOVA_SCHED_EXT_${new^^} ]]; then
            warn $LINENO "nova-sched-ext: $variable is ignored:" \
                "NOVA_SCHED_EXT_${new^^} is set ([nova_sched_ext] $old" \
                "is now $new)"
        else
            warn $LINENO "nova-sched-ext: $variable is deprecated: set" \
                "NOVA_SCHED_EXT_${new^^} ([nova_sched_ext] $old is now $new)"
            iniset "$conf" nova_sched_ext "$new" "${!variable}"
        fi
    done <<< "$renamed"

    if [[ "$NOVA_SCHED_EXT_PREEMPTION" == "True" ]]; then
        configure_nova_sched_ext_preemption
    fi

    if [[ "$NOVA_SCHED_EXT_DEFRAG" == "True" ]]; then
        configure_nova_sched_ext_defrag
    fi

    if [[ "$NOVA_SCHED_EXT_FAKE_VIRT" == "True" ]]; then
        configure_nova_sched_ext_fake_virt
    fi
}

# Placement retries a provider generation conflict inside the transaction
# of the claim, and a claim retried so can exceed the provider's capacity;
# with one attempt per request the conflict goes back to Nova's report
# client, which sends the claim again in a new transaction.
function configure_nova_sched_ext_placement {
    local retries=$NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES
    if [[ -z "$retries" ]] || ! is_service_enabled placement-api; then
        return 0
    fi
    if [[ -z "${PLACEMENT_CONF:-}" ]]; then
        die $LINENO "nova-sched-ext: placement-api runs here but" \
            "PLACEMENT_CONF (lib/placement's placement.conf) is not set"
    fi
    if [[ ! "$retries" =~ ^[1-9][0-9]*$ ]]; then
        die $LINENO "nova-sched-ext: NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES" \
            "must be a whole number of at least 1 (or empty), not '$retries'"
    fi
    iniset "$PLACEMENT_CONF" placement allocation_conflict_retry_count \
        "$retries"
}

# Copy Nova's own service user (lib/nova writes it to [service_user]; it
# has the admin role) into the keystoneauth section $1 of nova.conf, with
# the region of [placement]. iniset replaces: running it again changes
# nothing.
function _nova_sched_ext_service_credentials {
    local conf=$NOVA_CONF section=$1 key value
    for key in $NOVA_SCHED_EXT_SERVICE_AUTH_KEYS; do
        value=$(iniget "$conf" service_user "$key")
        if [[ -n "$value" ]]; then
            iniset "$conf" "$section" "$key" "$value"
        fi
    done
    value=$(iniget "$conf" placement region_name)
    if [[ -n "$value" ]]; then
        iniset "$conf" "$section" region_name "$value"
    fi
}

# The preemption driver, and the credentials it evicts with (deleting any
# project's servers needs the admin role).
function configure_nova_sched_ext_preemption {
    if [[ ! -v NOVA_SCHED_EXT_SCHEDULER_DRIVER ]]; then
        iniset "$NOVA_CONF" nova_sched_ext scheduler_driver preemption
    fi
    _nova_sched_ext_service_credentials "$NOVA_SCHED_EXT_EVICTOR_SECTION"
}

# The credentials nova-sched-ext-defrag apply live-migrates with (live
# migration to a given host needs the admin role under the default
# policy). The planner and executor are run by an operator, not a service:
# nothing is started.
function configure_nova_sched_ext_defrag {
    _nova_sched_ext_service_credentials "$NOVA_SCHED_EXT_DEFRAG_SECTION"
}

function configure_nova_sched_ext_fake_virt {
    if [[ "$VIRT_DRIVER" != "fake" ]]; then
        die $LINENO "nova-sched-ext: NOVA_SCHED_EXT_FAKE_VIRT=True needs" \
            "VIRT_DRIVER=fake (it is '$VIRT_DRIVER')"
    fi
    local topologies=($NOVA_SCHED_EXT_FAKE_NUMA_TOPOLOGIES)
    if [[ ${#topologies[@]} -eq 0 ]]; then
        die $LINENO "nova-sched-ext: NOVA_SCHED_EXT_FAKE_NUMA_TOPOLOGIES" \
            "is empty"
    fi
    # lib/nova gives each fake compute its own file (host, state_path) and
    # only adds options to it, so the layout written here stays. The
    # driver itself is switched in "stack extra": lib/nova starts the
    # computes with nova-compute, which cannot load it.
    local i
    for i in $(seq 1 "${NUMBER_FAKE_NOVA_COMPUTE:-1}"); do
        iniset "${NOVA_FAKE_CONF}-${i}" nova_sched_ext_fake_virt \
            numa_topology "${topologies[(i - 1) % ${#topologies[@]}]}"
        _nova_sched_ext_fake_compute_identity "$i"
    done
}

# The fake compute $1 must keep its node UUID when "stack extra" restarts
# it on the fake NUMA driver, which reads it from compute_id in its
# state_path. devstack's master (and stable/2026.1) gives each fake compute
# its own state_path and compute_id and runs it on
# fake.FakeDriverWithoutFakeNodes, which reads it too. Up to stable/2025.2,
# lib/nova runs them on fake.FakeDriver, whose node UUIDs are new in every
# process, all in nova.conf's state_path: restarted, the first would find
# its node under another UUID (a duplicate record: nova-compute stops) and
# the others would share one compute_id and take each other's node. So do
# what master does, before lib/nova starts them: a state_path and a
# compute_id of its own, and the driver that reads it. On master lib/nova
# writes the same state_path and a new compute_id before the start.
function _nova_sched_ext_fake_compute_identity {
    local fake_conf="${NOVA_FAKE_CONF}-$1" state_path
    state_path=$(iniget "$fake_conf" DEFAULT state_path)
    if [[ -z "$state_path" ]]; then
        state_path="$NOVA_STATE_PATH/${HOSTNAME}$1"
        iniset "$fake_conf" DEFAULT state_path "$state_path"
    fi
    mkdir -p "$state_path"
    if [[ ! -s "$state_path/compute_id" ]]; then
        "$(_nova_sched_ext_python)" -c 'import uuid; print(uuid.uuid4())' \
            > "$state_path/compute_id"
    fi
    if [[ "$(iniget "$fake_conf" DEFAULT compute_driver)" != \
            "$NOVA_SCHED_EXT_FAKE_DRIVER" ]]; then
        iniset "$fake_conf" DEFAULT compute_driver \
            "$NOVA_SCHED_EXT_STABLE_FAKE_DRIVER"
    fi
}

# The fake computes have registered with devstack's fake driver; restart
# each on the fake NUMA driver. It keeps its host name and node UUID
# (state_path), so Nova updates the node's inventory and NUMA topology.
function start_nova_sched_ext_fake_computes {
    local i fake_conf
    echo_summary "Restarting the fake computes on the fake NUMA virt driver"
    for i in $(seq 1 "${NUMBER_FAKE_NOVA_COMPUTE:-1}"); do
        fake_conf="${NOVA_FAKE_CONF}-${i}"
        iniset "$fake_conf" DEFAULT compute_driver \
            "$NOVA_SCHED_EXT_FAKE_DRIVER"
        stop_process "n-cpu-${i}"
        run_process "n-cpu-${i}" "$(_nova_sched_ext_python) -m \
$NOVA_SCHED_EXT_FAKE_COMPUTE_MODULE --config-file $NOVA_CPU_CONF \
--config-file $fake_conf"
    done
}

# Stop here, with the reasons, rather than start a scheduler that fails
# later or silently ignores a setting.
function check_nova_sched_ext_config {
    local args=(check --config-file "$NOVA_CONF")
    local topology
    if [[ "$NOVA_SCHED_EXT_FAKE_VIRT" == "True" ]]; then
        for topology in $NOVA_SCHED_EXT_FAKE_NUMA_TOPOLOGIES; do
            args+=(--fake-topology "$topology")
        done
    fi
    if is_service_enabled n-sch && _nova_sched_ext_own_scheduler; then
        args+=(--scheduler-command "$NOVA_BIN_DIR/nova-sched-ext-scheduler")
    fi
    if ! "$(_nova_sched_ext_python)" "$NOVA_SCHED_EXT_CHECK" "${args[@]}"; then
        die $LINENO "nova-sched-ext: the configuration above is invalid;" \
            "fix the NOVA_SCHED_EXT_* / NOVA_FILTERS settings in local.conf"
    fi
}

function start_nova_sched_ext_scheduler {
    if ! is_service_enabled n-sch || ! _nova_sched_ext_own_scheduler; then
        return 0
    fi
    echo_summary "Running n-sch as $NOVA_SCHED_EXT_SCHEDULERS" \
        "nova-sched-ext-scheduler process(es)"
    # lib/nova has started nova-scheduler; the first service keeps its name
    # so that everything that looks for n-sch still finds it. The others
    # share the RPC topic: each request goes to one of them.
    stop_process n-sch
    local service
    for service in $(_nova_sched_ext_scheduler_services); do
        enable_service "$service"
        run_process "$service" "$(nova_sched_ext_scheduler_command)"
    done
}

# lib/nova stops n-sch; the other schedulers are the plugin's.
function stop_nova_sched_ext_schedulers {
    local service
    for service in $(_nova_sched_ext_scheduler_services); do
        if [[ "$service" != n-sch ]]; then
            stop_process "$service"
        fi
    done
}

# The capacity services read nova.conf (databases, [placement],
# [keystone_authtoken]) and their own file, with the
# [nova_sched_ext_capacity] options.
function configure_nova_sched_ext_capacity {
    local conf=$NOVA_SCHED_EXT_CAPACITY_CONF
    iniset "$conf" nova_sched_ext_capacity auth_strategy keystone
    iniset "$conf" nova_sched_ext_capacity allowed_roles \
        "$NOVA_SCHED_EXT_CAPACITY_ALLOWED_ROLES"
    iniset "$conf" nova_sched_ext_capacity refresh_interval \
        "$NOVA_SCHED_EXT_CAPACITY_REFRESH_INTERVAL"
    iniset "$conf" nova_sched_ext_capacity exporter_port \
        "$NOVA_SCHED_EXT_CAPACITY_EXPORTER_PORT"
    iniset "$conf" nova_sched_ext_capacity export_per_host \
        "$NOVA_SCHED_EXT_CAPACITY_EXPORT_PER_HOST"
    iniset "$conf" nova_sched_ext_capacity kept_state \
        "$NOVA_SCHED_EXT_CAPACITY_KEPT_STATE"
    iniset "$conf" nova_sched_ext_capacity kept_state_poll_interval \
        "$NOVA_SCHED_EXT_CAPACITY_KEPT_STATE_POLL_INTERVAL"
    if is_service_enabled nse-capacity-api; then
        # Served like nova-api: uWSGI behind Apache at the URL path.
        write_uwsgi_config "$NOVA_SCHED_EXT_CAPACITY_UWSGI_CONF" \
            "$NOVA_SCHED_EXT_CAPACITY_WSGI" \
            "$NOVA_SCHED_EXT_CAPACITY_URL_PATH" "" nse-capacity-api
        # The application reads nova.conf and nova-sched-ext-capacity.conf
        # from this directory.
        iniset "$NOVA_SCHED_EXT_CAPACITY_UWSGI_CONF" uwsgi env \
            "NOVA_SCHED_EXT_CAPACITY_CONFIG_DIR=$(dirname "$NOVA_CONF")"
    fi
}

# The catalog entry that OpenStackClient's "openstack capacity" and the
# multi-cluster broker look the capacity API up by.
function create_nova_sched_ext_capacity_accounts {
    local url service_id endpoint_id
    url=$SERVICE_PROTOCOL://$SERVICE_HOST$NOVA_SCHED_EXT_CAPACITY_URL_PATH
    # devstack's helpers print the new IDs: said with what they are, not
    # as bare IDs on lines of their own in the log.
    service_id=$(get_or_create_service nova-sched-ext-capacity \
        "$NOVA_SCHED_EXT_CAPACITY_SERVICE_TYPE" \
        "NUMA-exact capacity of the flavors (nova-sched-ext)") ||
        die $LINENO "cannot create the capacity API's catalog service"
    endpoint_id=$(get_or_create_endpoint \
        "$NOVA_SCHED_EXT_CAPACITY_SERVICE_TYPE" "$REGION_NAME" "$url") ||
        die $LINENO "cannot create the capacity API's catalog endpoint"
    echo "nova-sched-ext capacity API in the catalog:" \
        "service $NOVA_SCHED_EXT_CAPACITY_SERVICE_TYPE ($service_id)," \
        "endpoint $url ($endpoint_id)"
}

function start_nova_sched_ext_capacity {
    if is_service_enabled nse-capacity-api; then
        echo_summary "Starting the nova-sched-ext capacity API"
        run_process nse-capacity-api "$(which uwsgi) --procname-prefix \
nse-capacity-api --ini $NOVA_SCHED_EXT_CAPACITY_UWSGI_CONF"
        local url
        url="$SERVICE_PROTOCOL://$SERVICE_HOST$NOVA_SCHED_EXT_CAPACITY_URL_PATH"
        if ! wait_for_service "${SERVICE_TIMEOUT:-60}" "$url"; then
            die $LINENO "nova-sched-ext: the capacity API did not start" \
                "at $url"
        fi
    fi
    if is_service_enabled nse-capacity-exporter; then
        echo_summary "Starting the nova-sched-ext capacity exporter"
        run_process nse-capacity-exporter "$NOVA_BIN_DIR/\
nova-sched-ext-capacity-exporter --config-file $NOVA_CONF \
--config-file $NOVA_SCHED_EXT_CAPACITY_CONF"
    fi
}

function stop_nova_sched_ext_capacity {
    local service
    for service in nse-capacity-api nse-capacity-exporter; do
        if is_service_enabled "$service"; then
            stop_process "$service"
        fi
    done
    if [[ -f "$NOVA_SCHED_EXT_CAPACITY_UWSGI_CONF" ]]; then
        remove_uwsgi_config "$NOVA_SCHED_EXT_CAPACITY_UWSGI_CONF" \
            nse-capacity-api
    fi
    rm -f "$NOVA_SCHED_EXT_CAPACITY_CONF"
}

function configure_tempest_for_nova_sched_ext {
    local weigher=False classes multiplier
    classes=$(iniget "$NOVA_CONF" filter_scheduler weight_classes)
    multiplier=$(iniget "$NOVA_CONF" nova_sched_ext numa_slot_weight_multiplier)
    if [[ ",$classes," == *",nova_sched_ext.weighers.all_weighers,"* ||
          ",$classes," == *"NUMASlotWeigher,"* ]]; then
        if [[ -z "$multiplier" ]] || \
                awk -v m="$multiplier" 'BEGIN { exit !(m > 0) }'; then
            weigher=True
        fi
    fi
    iniset "$TEMPEST_CONFIG" nova_sched_ext slot_weigher "$weigher"

    # The slot weigher scenario creates the first reference flavor itself
    # and waits for the weigher to load it.
    local references interval
    references=$(iniget "$NOVA_CONF" nova_sched_ext numa_slot_reference_flavors)
    interval=$(iniget "$NOVA_CONF" nova_sched_ext \
        numa_slot_reference_refresh_interval)
    iniset "$TEMPEST_CONFIG" nova_sched_ext slot_reference_flavor \
        "${references%%,*}"
    iniset "$TEMPEST_CONFIG" nova_sched_ext slot_reference_refresh_interval \
        "${interval:-300}"

    local deployment_sets=False domain_key
    if [[ ",$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)," == \
            *",DeploymentSetFilter,"* ]]; then
        deployment_sets=True
    fi
    domain_key=$(iniget "$NOVA_CONF" nova_sched_ext deployment_set_domain_key)
    iniset "$TEMPEST_CONFIG" nova_sched_ext deployment_sets "$deployment_sets"
    iniset "$TEMPEST_CONFIG" nova_sched_ext deployment_set_domain_key \
        "${domain_key:-failure_domain}"
    iniset "$TEMPEST_CONFIG" nova_sched_ext preemption \
        "$NOVA_SCHED_EXT_PREEMPTION"

    local capacity_api=False
    if is_service_enabled nse-capacity-api; then
        capacity_api=True
    fi
    iniset "$TEMPEST_CONFIG" nova_sched_ext capacity_api "$capacity_api"

    # The defragmentation scenario runs nova-sched-ext-defrag, which reads
    # the cloud's databases and [nova_sched_ext_defrag] from nova.conf.
    iniset "$TEMPEST_CONFIG" nova_sched_ext defrag "$NOVA_SCHED_EXT_DEFRAG"
    iniset "$TEMPEST_CONFIG" nova_sched_ext defrag_nova_conf "$NOVA_CONF"
}

# Undo configure_nova_sched_ext and configure_tempest_for_nova_sched_ext.
function unconfigure_nova_sched_ext {
    local conf=$NOVA_CONF value option section
    if [[ -n "$NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES" && \
            -f "${PLACEMENT_CONF:-}" ]]; then
        inidelete "$PLACEMENT_CONF" placement allocation_conflict_retry_count
    fi
    if [[ -f "$conf" ]]; then
        value=$(iniget_multiline "$conf" filter_scheduler available_filters)
        if [[ " $value " == *" $NOVA_SCHED_EXT_AVAILABLE_FILTERS "* ]]; then
            value=$(_nova_sched_ext_without "${value// /,}" \
                "$NOVA_SCHED_EXT_AVAILABLE_FILTERS")
            inidelete "$conf" filter_scheduler available_filters
            if [[ -n "$value" ]]; then
                iniadd "$conf" filter_scheduler available_filters ${value//,/ }
            fi
        fi
        value=$(iniget "$conf" filter_scheduler enabled_filters)
        if [[ -n "$value" && -n "$NOVA_SCHED_EXT_FILTERS" ]]; then
            iniset "$conf" filter_scheduler enabled_filters \
                "$(_nova_sched_ext_without "$value" "$NOVA_SCHED_EXT_FILTERS")"
        fi
        value=$(iniget "$conf" filter_scheduler weight_classes)
        if [[ -n "$value" && -n "$NOVA_SCHED_EXT_WEIGHT_CLASSES" ]]; then
            iniset "$conf" filter_scheduler weight_classes \
                "$(_nova_sched_ext_without "$value" \
                    "$NOVA_SCHED_EXT_WEIGHT_CLASSES")"
        fi
        for option in $("$(_nova_sched_ext_python)" \
                "$NOVA_SCHED_EXT_CHECK" options --old-names 2>/dev/null); do
            inidelete "$conf" nova_sched_ext "$option"
        done
        for section in "$NOVA_SCHED_EXT_EVICTOR_SECTION" \
                "$NOVA_SCHED_EXT_DEFRAG_SECTION"; do
            for option in $NOVA_SCHED_EXT_SERVICE_AUTH_KEYS region_name; do
                inidelete "$conf" "$section" "$option"
            done
        done
    fi
    local fake_conf
    for fake_conf in "${NOVA_FAKE_CONF}"-*; do
        if [[ -f "$fake_conf" ]]; then
            inidelete "$fake_conf" nova_sched_ext_fake_virt numa_topology
            case "$(iniget "$fake_conf" DEFAULT compute_driver)" in
                "$NOVA_SCHED_EXT_FAKE_DRIVER"|\
                "$NOVA_SCHED_EXT_STABLE_FAKE_DRIVER")
                    inidelete "$fake_conf" DEFAULT compute_driver
                    ;;
            esac
        fi
    done
    if [[ -n "$TEMPEST_CONFIG" && -f "$TEMPEST_CONFIG" ]]; then
        for option in slot_weigher slot_reference_flavor \
                slot_reference_refresh_interval deployment_sets \
                deployment_set_domain_key preemption capacity_api defrag \
                defrag_nova_conf; do
            inidelete "$TEMPEST_CONFIG" nova_sched_ext "$option"
        done
    fi
}

if [[ "$1" == "stack" ]]; then
    case "$2" in
        install)
            echo_summary "Installing nova-sched-ext"
            install_nova_sched_ext
            ;;
        post-config)
            echo_summary "Configuring nova-sched-ext"
            _nova_sched_ext_check_schedulers
            configure_nova_sched_ext
            configure_nova_sched_ext_placement
            check_nova_sched_ext_config
            if is_service_enabled nse-capacity-api nse-capacity-exporter; then
                echo_summary "Configuring the nova-sched-ext capacity services"
                configure_nova_sched_ext_capacity
            fi
            if is_service_enabled nse-capacity-api; then
                create_nova_sched_ext_capacity_accounts
            fi
            ;;
        extra)
            start_nova_sched_ext_scheduler
            if [[ "$NOVA_SCHED_EXT_FAKE_VIRT" == "True" ]] && \
                    is_service_enabled n-cpu; then
                start_nova_sched_ext_fake_computes
            fi
            start_nova_sched_ext_capacity
            ;;
        test-config)
            if is_service_enabled tempest; then
                echo_summary "Configuring tempest for nova-sched-ext"
                configure_tempest_for_nova_sched_ext
            fi
            ;;
    esac
fi

if [[ "$1" == "unstack" ]]; then
    stop_nova_sched_ext_schedulers
    stop_nova_sched_ext_capacity
    unconfigure_nova_sched_ext
fi

if [[ "$1" == "clean" ]]; then
    stop_nova_sched_ext_schedulers
    stop_nova_sched_ext_capacity
    unconfigure_nova_sched_ext
    pip_uninstall nova-sched-ext
fi
