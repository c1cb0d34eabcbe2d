#!/usr/bin/env bash
# devstack-lite with two clusters: the multi-cluster broker on real services.
#
#   tools/devstack-lite/two-clusters.sh     (or: tox -e e2e-clusters)
#
# Brings up one keystone and two complete Nova deployments on this machine,
# each its own cluster in its own region (cluster-a in RegionOne, cluster-b
# in RegionTwo), configured by the devstack plugin like run.sh's cloud:
#
# * per cluster: placement, nova-api, nova-conductor, nova-scheduler, two
#   nova-compute processes on the package's fake NUMA virt driver (two
#   cells of 2 CPUs and 2 GiB each), the capacity API registered in the
#   catalog as numa-capacity for the cluster's region, and a stand-in for
#   the image and network APIs (stub_services.py) with the cluster's own
#   images and networks; databases <prefix>_<cluster>_* and a RabbitMQ
#   vhost <prefix>_<cluster>; logs and pids in $WORK/<cluster>/;
# * the pools: compute 1 of each cluster is the dpdk pool (trait
#   CUSTOM_NSE_POOL_DPDK on its resource provider, aggregate
#   nse-pool-dpdk), compute 2 the normal pool (aggregate nse-pool-normal);
#   the variant flavors require (dpdk) or forbid (normal) the trait, so each
#   variant lands only in its pool (broker_clusters.py setup);
# * clouds.yaml with one entry per cluster and the broker's YAML
#   ($WORK/etc/), then broker_clusters.py: the broker's scenarios against
#   both clusters (see its docstring), and the teardown.
#
# It prints "broker-clusters: N passed, N failed, N skipped" and the wall
# time last; the exit status is non-zero on any failure.
#
# Environment (defaults in brackets):
#   NSE_LITE_WORK        work directory [<repo>/.tox/devstack-lite-clusters]
#   NSE_LITE_VENV        the virtualenv with keystone, placement, nova and
#                        the package; one that run.sh built is reused
#                        [$NSE_LITE_WORK/venv, built if missing]
#   NSE_LITE_PYTHON      interpreter for a new virtualenv [python3]
#   NSE_LITE_CLUSTERS_PORT_BASE  first of nine consecutive TCP
#                        ports, best below the ephemeral range [28370]
#   NSE_LITE_DB_PREFIX   prefix of the databases and vhosts [nse2c]
#   NSE_LITE_DB_URL      MariaDB server [mysql+pymysql://root@127.0.0.1:3306]
#   NSE_LITE_RABBIT      RabbitMQ host:port, user guest/guest [127.0.0.1:5672]
#   NSE_LITE_TIMEOUT     seconds for the whole run [1200]
#   NSE_LITE_CLUSTERS_REGEX  which scenarios of broker_clusters.py [all]
set -o errexit -o pipefail

LITE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$LITE_DIR/../.." && pwd)
WORK=${NSE_LITE_WORK:-$REPO/.tox/devstack-lite-clusters}
VENV=${NSE_LITE_VENV:-$WORK/venv}
ETC=$WORK/etc
RUN_TIMEOUT=${NSE_LITE_TIMEOUT:-1200}
PORT_BASE=${NSE_LITE_CLUSTERS_PORT_BASE:-28370}
DB_URL=${NSE_LITE_DB_URL:-mysql+pymysql://root@127.0.0.1:3306}
RABBIT=${NSE_LITE_RABBIT:-127.0.0.1:5672}
PREFIX=${NSE_LITE_DB_PREFIX:-nse2c}
PASSWORD=nse-lite-secret
CLUSTERS="a b"
KEYSTONE_PORT=$PORT_BASE
KEYSTONE_URL=http://127.0.0.1:$KEYSTONE_PORT
export PYTHONDONTWRITEBYTECODE=1
export NSE_LITE_KEYSTONE_URL=$KEYSTONE_URL NSE_LITE_PASSWORD=$PASSWORD

STARTED=$SECONDS

mkdir -p "$WORK"
exec 9> "$WORK/.lock"
flock -n 9 || { echo "another two-cluster run holds $WORK/.lock" >&2; exit 1; }

# Keystone's logs and pids; each cluster switches to its own (cluster_env).
LOGDIR=$WORK/logs
PIDDIR=$WORK/pids
# shellcheck source=tools/devstack-lite/functions.sh
source "$LITE_DIR/functions.sh"
# shellcheck source=tools/devstack-lite/services.sh
source "$LITE_DIR/services.sh"

# The per-cluster settings: ports, names, files, region. Called in the
# subshell that sets a cluster up and again for its teardown.
function cluster_env {
    local name=$1 index
    [[ $name == a ]] && index=0 || index=1
    CLUSTER=cluster-$name
    REGION_NAME=$([[ $name == a ]] && echo RegionOne || echo RegionTwo)
    local base=$((PORT_BASE + 1 + index * 4))
    PLACEMENT_PORT=$base
    NOVA_API_PORT=$((base + 1))
    STUB_PORT=$((base + 2))
    CAPACITY_PORT=$((base + 3))
    PLACEMENT_URL=http://127.0.0.1:$PLACEMENT_PORT
    NOVA_URL=http://127.0.0.1:$NOVA_API_PORT
    STUB_URL=http://127.0.0.1:$STUB_PORT
    DB_NAMES="${PREFIX}_${name}_placement ${PREFIX}_${name}_nova_api"
    DB_NAMES+=" ${PREFIX}_${name}_nova ${PREFIX}_${name}_nova_cell0"
    RABBIT_VHOST=${PREFIX}_$name
    TRANSPORT_URL=rabbit://guest:guest@$RABBIT/$RABBIT_VHOST
    LOGDIR=$WORK/$CLUSTER/logs
    PIDDIR=$WORK/$CLUSTER/pids
    CETC=$WORK/$CLUSTER/etc
    DATA_DIR=$WORK/$CLUSTER/data
    # devstack's variables, as run.sh sets them for its one cluster
    DEST=$WORK/$CLUSTER
    declare -gA GITDIR
    GITDIR[nova-sched-ext]=$REPO
    ENABLED_SERVICES=placement-api,n-api,n-cond,n-sch,n-cpu,stub
    PLACEMENT_CONF=$CETC/placement/placement.conf
    NOVA_BIN_DIR=$VENV/bin
    NOVA_CONF_DIR=$CETC/nova
    NOVA_CONF=$NOVA_CONF_DIR/nova.conf
    NOVA_CPU_CONF=$NOVA_CONF_DIR/nova-cpu.conf
    NOVA_FAKE_CONF=$NOVA_CONF_DIR/nova-fake.conf
    NOVA_STATE_PATH=$DATA_DIR/nova
    HOSTNAME=nse-$name-cpu
    SERVICE_PROTOCOL=http
    SERVICE_HOST=127.0.0.1:$CAPACITY_PORT
    SERVICE_TIMEOUT=120
    VIRT_DRIVER=fake
    NUMBER_FAKE_NOVA_COMPUTE=2
    # The plugin: its filters with Nova's, the fake NUMA computes, the
    # capacity API answering from a count at most 1 s old (the scenarios
    # read it right after they boot). One nova-scheduler: the broker's
    # proof needs no preemption driver and no lock service. Its NUMA
    # filter is FastNUMATopologyFilter in NUMATopologyFilter's place, so
    # that real processes run it too (run.sh's cloud runs NUMAFitFilter).
    NOVA_SCHED_EXT_FILTERS=FastNUMATopologyFilter,DeploymentSetFilter
    NOVA_SCHED_EXT_DEPLOYMENT_SET_LOCKING=False
    NOVA_SCHED_EXT_PREEMPTION=False
    NOVA_SCHED_EXT_SCHEDULERS=1
    NOVA_SCHED_EXT_FAKE_VIRT=True
    NOVA_SCHED_EXT_FAKE_NUMA_TOPOLOGIES="2x2x2048 2x2x2048"
    NOVA_SCHED_EXT_CAPACITY_REFRESH_INTERVAL=1
    enable_service nse-capacity-api
    NOVA_FILTERS="ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,SameHostFilter,DifferentHostFilter"
    # shellcheck source=devstack/settings
    source "$REPO/devstack/settings"
    # What each cluster's stand-in holds: an image only cluster-a has,
    # and a network with one free address in cluster-a, eight in cluster-b.
    if [[ $name == a ]]; then
        STUB_IMAGES="nse-image=5e1ec7ed-0000-4000-8000-0000000000a1"
        STUB_IMAGES+=" nse-image-a-only=5e1ec7ed-0000-4000-8000-0000000000a2"
        STUB_NETWORKS="nse-net=16 nse-net-small=1"
    else
        STUB_IMAGES="nse-image=5e1ec7ed-0000-4000-8000-0000000000b1"
        STUB_NETWORKS="nse-net=16 nse-net-small=8"
    fi
}


# -- teardown ---------------------------------------------------------------

CREATED=""
function teardown {
    local status=$?
    trap - EXIT
    set +o errexit
    step "teardown"
    stop_background_jobs
    # Both clusters side by side (each waits up to 15 s for its services
    # to stop), keystone then.
    local name teardowns=()
    for name in $CLUSTERS; do
        [[ " $CREATED " == *" $name "* ]] || continue
        (
            cluster_env "$name"
            stop_all_services
            [[ -f "$NOVA_CONF" ]] && ( source "$REPO/devstack/plugin.sh" \
                unstack ) >> "$LOGDIR/unstack.log" 2>&1
            local statements=() db
            for db in $DB_NAMES; do
                statements+=("DROP DATABASE IF EXISTS $db")
            done
            sql "${statements[@]}" || echo "$CLUSTER: could not drop" \
                "its databases"
            rabbitmqctl -q delete_vhost "$RABBIT_VHOST" > /dev/null 2>&1
            [[ $status -eq 0 ]] || show_logs
        ) > "$WORK/cluster-$name/teardown.log" 2>&1 &
        teardowns+=("$name=$!")
    done
    local teardown
    for teardown in "${teardowns[@]}"; do
        wait "${teardown#*=}"
        cat "$WORK/cluster-${teardown%%=*}/teardown.log"
    done
    LOGDIR=$WORK/logs PIDDIR=$WORK/pids stop_all_services
    # keystone's: CI keeps no logs, and a keystone that did not start is
    # where a run ends before any cluster is created
    [[ $status -eq 0 ]] || LOGDIR=$WORK/logs show_logs
    [[ " $CREATED " == *" keystone "* ]] &&
        sql "DROP DATABASE IF EXISTS ${PREFIX}_keystone"
    [[ $status -eq 0 ]] || echo "two-cluster devstack-lite FAILED" \
        "(status $status); logs in $WORK"
    echo "two-cluster devstack-lite wall time: $(elapsed)" \
        "(limit $((RUN_TIMEOUT / 60)) min)"
    exit $status
}
trap teardown EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# -- preflight and virtualenv -------------------------------------------------

step "preflight"
require_ports_free \
    "set NSE_LITE_CLUSTERS_PORT_BASE to a free range of nine ports" \
    $(seq "$PORT_BASE" $((PORT_BASE + 8)))
port_in_use "${RABBIT##*:}" || die $LINENO "RabbitMQ does not answer on $RABBIT"
command -v rabbitmqctl > /dev/null ||
    die $LINENO "rabbitmqctl is needed for the clusters' vhosts"
for name in $CLUSTERS; do
    rm -rf "$WORK/cluster-$name"
    mkdir -p "$WORK/cluster-$name/logs" "$WORK/cluster-$name/pids" \
        "$WORK/cluster-$name/etc"
done
rm -rf "$LOGDIR" "$PIDDIR" "$ETC" "$WORK/bin"
mkdir -p "$LOGDIR" "$PIDDIR" "$ETC" "$WORK/bin"

if [[ -x "$VENV/bin/nova-manage" && -x "$VENV/bin/keystone-manage" &&
      -x "$VENV/bin/placement-manage" && -x "$VENV/bin/gunicorn" ]]; then
    echo "reusing $VENV"
else
    step "virtualenv with keystone, placement and nova from PyPI"
    rm -rf "$VENV"
    "${NSE_LITE_PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --no-input --upgrade pip \
        >> "$LOGDIR/pip.log" 2>&1
    "$VENV/bin/python" -m pip install --no-input --no-compile \
        -r "$LITE_DIR/requirements.txt" >> "$LOGDIR/pip.log" 2>&1 ||
        die $LINENO "pip install failed; see $LOGDIR/pip.log"
    compile_venv
fi
cat > "$WORK/bin/uwsgi" <<EOF
#!/bin/sh
exec "$VENV/bin/python" "$LITE_DIR/uwsgi.py" --gunicorn "$VENV/bin/gunicorn" "\$@"
EOF
chmod +x "$WORK/bin/uwsgi"
export PATH=$WORK/bin:$PATH
# The plugin's install phase, unless this checkout is installed already
# (run.sh's phase did it when its virtualenv is reused). Asked from /: from
# the checkout, "import nova_sched_ext" finds its sources, installed or not.
if (cd / && "$VENV/bin/python" -c 'import sys, nova_sched_ext
sys.exit(not nova_sched_ext.__file__.startswith(sys.argv[1]))' "$REPO/") \
        2> /dev/null; then
    echo "nova-sched-ext is installed from $REPO in $VENV"
else
    (
        cluster_env a
        source "$REPO/devstack/plugin.sh" stack install
    )
fi

# -- keystone and the clusters' databases, side by side -----------------------

# What a cluster needs before keystone answers: its databases and vhost,
# placement.conf and its schema, placement and the stand-in started,
# nova.conf as lib/nova writes it, and cells v2 (api_db sync, map_cell0,
# db sync, create_cell). Run beside keystone's own db_sync and bootstrap.
function prepare_cluster {
    cluster_env "$1"
    local statements=() db
    for db in $DB_NAMES; do
        statements+=("DROP DATABASE IF EXISTS $db"
                     "CREATE DATABASE $db CHARACTER SET utf8mb4")
    done
    sql "${statements[@]}"
    # Each rabbitmqctl starts an Erlang node: beside the schemas.
    {
        rabbitmqctl -q delete_vhost "$RABBIT_VHOST" > /dev/null 2>&1 || true
        rabbitmqctl -q add_vhost "$RABBIT_VHOST" > /dev/null &&
            rabbitmqctl -q set_permissions -p "$RABBIT_VHOST" guest \
                '.*' '.*' '.*' > /dev/null
    } &
    local vhost=$!

    local placement_conf=$PLACEMENT_CONF
    iniset "$placement_conf" placement_database connection \
        "$(db_url "${PREFIX}_$1_placement")"
    iniset "$placement_conf" api auth_strategy keystone
    configure_auth_token "$placement_conf" placement
    # Each cluster's placement starts here, before the plugin's
    # post-config (run.sh follows stack.sh's order and checks what the
    # plugin writes to placement.conf): the value it would write.
    if [[ -n "$NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES" ]]; then
        iniset "$placement_conf" placement allocation_conflict_retry_count \
            "$NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES"
    fi
    "$VENV/bin/placement-manage" --config-file "$placement_conf" db sync \
        >> "$LOGDIR/placement-manage.log" 2>&1 ||
        die $LINENO "$CLUSTER: placement-manage db sync failed"
    run_process placement-api "$(gunicorn_command placement.wsgi.api \
        "$PLACEMENT_PORT")" "" "" "OS_PLACEMENT_CONFIG_DIR=$CETC/placement"
    # run_process splits its environment on blanks: the lists go through
    # gunicorn's --env.
    run_process stub "$VENV/bin/gunicorn --bind 127.0.0.1:$STUB_PORT \
        --workers 1 --threads 4 --no-control-socket --limit-request-line 0 \
        --pythonpath $LITE_DIR --env NSE_LITE_IMAGES='$STUB_IMAGES' \
        --env NSE_LITE_NETWORKS='$STUB_NETWORKS' stub_services:application"

    write_nova_conf "${PREFIX}_$1_nova_api" "${PREFIX}_$1_nova" "nse-$1"
    # Capacity in whole instances: no overcommit, nothing held back, so
    # that the capacity API, placement and the NUMA fit agree.
    iniset "$NOVA_CONF" DEFAULT cpu_allocation_ratio 1.0
    iniset "$NOVA_CONF" DEFAULT ram_allocation_ratio 1.0
    iniset "$NOVA_CONF" DEFAULT reserved_host_memory_mb 0
    iniset "$NOVA_CONF" DEFAULT reserved_host_disk_mb 0
    iniset "$NOVA_CONF" cinder os_region_name "$REGION_NAME"

    local nova_manage=("$VENV/bin/nova-manage" --config-file "$NOVA_CONF")
    {
        "${nova_manage[@]}" api_db sync
        "${nova_manage[@]}" cell_v2 map_cell0 --database_connection \
            "$(db_url "${PREFIX}_$1_nova_cell0")"
        "${nova_manage[@]}" db sync
        "${nova_manage[@]}" cell_v2 create_cell --name cell1 --verbose
    } >> "$LOGDIR/nova-manage.log" 2>&1 ||
        die $LINENO "$CLUSTER: nova-manage failed; see $LOGDIR/nova-manage.log"
    wait "$vhost" || die $LINENO "$CLUSTER: could not make its vhost"
}

# The rest, once keystone holds the catalog: the plugin's post-config,
# nova-api, conductor, scheduler; the plugin's extra phase starts the fake
# NUMA computes and the capacity API.
function start_cluster {
    cluster_env "$1"
    source "$REPO/devstack/plugin.sh" stack post-config
    run_process n-api "$(gunicorn_command nova.wsgi.osapi_compute \
        "$NOVA_API_PORT")" "" "" "OS_NOVA_CONFIG_DIR=$NOVA_CONF_DIR"
    run_process n-cond "$NOVA_BIN_DIR/nova-conductor --config-file $NOVA_CONF"
    run_process n-sch "$NOVA_BIN_DIR/nova-scheduler --config-file $NOVA_CONF"
    cp "$NOVA_CONF" "$NOVA_CPU_CONF"
    inidelete "$NOVA_CPU_CONF" database connection
    inidelete "$NOVA_CPU_CONF" api_database connection
    local i
    for i in $(seq 1 "$NUMBER_FAKE_NOVA_COMPUTE"); do
        iniset "${NOVA_FAKE_CONF}-$i" DEFAULT host "${HOSTNAME}$i"
        iniset "${NOVA_FAKE_CONF}-$i" DEFAULT state_path \
            "$NOVA_STATE_PATH/${HOSTNAME}$i"
        mkdir -p "$NOVA_STATE_PATH/${HOSTNAME}$i"
    done
    # lib/nova would start nova-compute on devstack's fake driver first;
    # the plugin's extra phase starts them on the fake NUMA driver, which
    # is all these computes ever run.
    source "$REPO/devstack/plugin.sh" stack extra
}

# Wait until the cluster answers and its computes are mapped and seen.
function finish_cluster {
    cluster_env "$1"
    wait_http placement-api "$PLACEMENT_URL/"
    wait_http stub "$STUB_URL/image/"
    wait_http n-api "$NOVA_URL/" 180
    local i
    for i in $(seq 1 "$NUMBER_FAKE_NOVA_COMPUTE"); do
        wait_log "n-cpu-$i" "Starting compute node" 180
    done
    wait_log n-sch "Starting scheduler" 180
    discover_computes
    wait_http nse-capacity-api \
        "http://$SERVICE_HOST$NOVA_SCHED_EXT_CAPACITY_URL_PATH" 180
    # every compute a hypervisor with its NUMA layout trait
    NSE_LITE_REGION=$REGION_NAME "$VENV/bin/python" "$LITE_DIR/lite.py" \
        nova-setup --computes "$NUMBER_FAKE_NOVA_COMPUTE"
}

# in_clusters FUNCTION TITLE: FUNCTION for both clusters side by side, each
# with its output in its own file, shown (prefixed with the cluster's name)
# when it is done; dies if either failed.
function in_clusters {
    local function=$1 title=$2 name starters=() starter status
    for name in $CLUSTERS; do
        ( "$function" "$name" ) > "$WORK/cluster-$name/$function.log" 2>&1 &
        starters+=("$name=$!")
    done
    for starter in "${starters[@]}"; do
        name=${starter%%=*}
        status=0
        wait "${starter#*=}" || status=$?
        sed "s/^/cluster-$name: /" "$WORK/cluster-$name/$function.log"
        [[ $status -eq 0 ]] || die $LINENO "cluster-$name: $title failed"
    done
}

step "keystone (RegionOne, RegionTwo) beside cluster-a's and cluster-b's" \
    "databases, placement and cells v2"
CREATED+=" keystone"
sql "DROP DATABASE IF EXISTS ${PREFIX}_keystone" \
    "CREATE DATABASE ${PREFIX}_keystone CHARACTER SET utf8mb4"
for name in $CLUSTERS; do
    CREATED+=" $name"
done
(
    ENABLED_SERVICES=key
    start_keystone "${PREFIX}_keystone"
) > "$LOGDIR/start-keystone.log" 2>&1 &
keystone_starter=$!
in_clusters prepare_cluster "databases, placement and cells v2"
keystone_status=0
wait "$keystone_starter" || keystone_status=$?
cat "$LOGDIR/start-keystone.log"
[[ $keystone_status -eq 0 ]] || die $LINENO "keystone did not start"

# The catalog, one cluster after the other (two "get or create" at once
# would both create): the service users, each region's endpoints, and the
# capacity API's (the plugin's post-config then finds them).
step "the catalog of both regions"
for name in $CLUSTERS; do
    (
        cluster_env "$name"
        NSE_LITE_REGION=$REGION_NAME NSE_LITE_NOVA_URL=$NOVA_URL \
            NSE_LITE_PLACEMENT_URL=$PLACEMENT_URL NSE_LITE_STUB_URL=$STUB_URL \
            "$VENV/bin/python" "$LITE_DIR/lite.py" keystone-setup \
            | sed "s/^/$CLUSTER: /"
        # the plugin's functions, no phase
        source "$REPO/devstack/plugin.sh"
        create_nova_sched_ext_capacity_accounts > /dev/null
    )
done

# Both clusters start side by side (their imports overlap).
step "cluster-a and cluster-b: nova.conf (plugin post-config), Nova" \
    "services (plugin extra)"
in_clusters start_cluster "start"
step "cluster-a and cluster-b: waiting for their services and computes"
in_clusters finish_cluster "waiting for its services"

# -- the broker's scenarios ---------------------------------------------------

step "clouds.yaml, the pools and flavors, broker.yaml"
export OS_CLIENT_CONFIG_FILE=$ETC/clouds.yaml
export NOVA_SCHED_EXT_BROKER_CONFIG=$ETC/broker.yaml
cluster_pidfiles=()
for name in $CLUSTERS; do
    cluster_pidfiles+=("cluster-$name=$WORK/cluster-$name/pids/n-api.pid")
done
"$VENV/bin/python" "$LITE_DIR/broker_clusters.py" setup \
    --clouds "$OS_CLIENT_CONFIG_FILE" --broker "$NOVA_SCHED_EXT_BROKER_CONFIG"

step "broker_clusters.py: the broker's scenarios on both clusters"
left=$((RUN_TIMEOUT - (SECONDS - STARTED)))
[[ $left -gt 60 ]] || die $LINENO "no time left for the scenarios ($left s)"
scenarios_status=0
timeout --kill-after 10 "$left" "$VENV/bin/python" \
    "$LITE_DIR/broker_clusters.py" run \
    --nova-api-pidfiles "${cluster_pidfiles[@]}" \
    ${NSE_LITE_CLUSTERS_REGEX:+--regex "$NSE_LITE_CLUSTERS_REGEX"} \
    2>&1 | tee "$LOGDIR/broker-clusters.log" || scenarios_status=$?
grep -q '^broker-clusters: [0-9]* passed, 0 failed' \
    "$LOGDIR/broker-clusters.log" || scenarios_status=1
# The boots above went through FastNUMATopologyFilter in real schedulers.
fast_passes=0
for name in $CLUSTERS; do
    passes=$(grep -c 'Filter FastNUMATopologyFilter returned' \
        "$WORK/cluster-$name/logs/n-sch.log" || true)
    echo "cluster-$name: scheduler passes through FastNUMATopologyFilter: $passes"
    fast_passes=$((fast_passes + passes))
done
if [[ $fast_passes -eq 0 ]]; then
    echo "no scheduler pass went through FastNUMATopologyFilter" >&2
    scenarios_status=1
fi
exit $scenarios_status
