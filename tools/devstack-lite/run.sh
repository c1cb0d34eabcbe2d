#!/usr/bin/env bash
# devstack-lite: the nova-sched-ext devstack integration, run for real here.
#
#   tools/devstack-lite/run.sh          (or: tox -e e2e)
#
# Brings up an OpenStack cloud on this machine, one process per service,
# configured the way devstack configures it with the plugin enabled, then
# runs the plugin's tempest tests against it and tears it all down:
#
# * its own virtualenv ($NSE_LITE_WORK/venv) with keystone, placement, nova
#   and tempest from PyPI (tools/devstack-lite/requirements.txt);
# * keystone, placement and nova-api served by gunicorn; nova-conductor,
#   three schedulers (NOVA_SCHED_EXT_SCHEDULERS) on a redis-server of the
#   run's own, and NUMBER_FAKE_NOVA_COMPUTE (3) nova-compute processes on
#   the package's fake NUMA virt driver; a stand-in for the image and network
#   APIs (stub_services.py); MariaDB databases nse_* and a RabbitMQ vhost of
#   its own;
# * the package's capacity API (nse-capacity-api), which the plugin serves
#   with uWSGI behind Apache: here the "uwsgi" of $WORK/bin (uwsgi.py)
#   serves the plugin's uWSGI file with gunicorn, at the URL path on a port
#   of its own, and the plugin registers it in the keystone catalog;
# * nova.conf written like lib/nova writes it, then by sourcing
#   devstack/settings and running the phases of devstack/plugin.sh (install,
#   post-config, extra, test-config, and unstack at the end) with
#   functions.sh standing in for devstack's functions;
# * cells v2 (api_db sync, map_cell0, create_cell, db sync, discover_hosts);
# * tempest init, tempest.conf like lib/tempest plus the plugin's
#   test-config phase, then tempest run of nova_sched_ext.tempest_plugin;
# * then multisched.py: a load burst on the three schedulers and one round
#   of each fault (a scheduler killed mid-eviction, placement and the
#   Compute API failing, RabbitMQ connections closed, redis stopped), each
#   followed by the invariants (see its docstring).
#
# Every run starts clean (databases, vhost, work directory) and stops every
# process it started, even on failure or Ctrl-C. Logs stay in
# $NSE_LITE_WORK/logs; a failed run prints their last lines. The last lines
# of the output are the tempest counts and the wall time.
#
# Environment (defaults in brackets):
#   NSE_LITE_WORK        work directory [<repo>/.tox/devstack-lite]
#   NSE_LITE_REUSE_VENV  1: keep an existing virtualenv [0: build a new one]
#   NSE_LITE_PYTHON      interpreter for the virtualenv [python3]
#   NSE_LITE_NOVA_VERSION  the Nova release of the cloud: 31 (2025.1), 32
#                        (2025.2), 33 (2026.1) or 34 (2026.2), installed
#                        with that OpenStack release's keystone, placement
#                        and tempest under tools/constraints/nova-NN.txt
#                        when the repository has it, and configured as
#                        that release's devstack branch does [34]
#   NSE_LITE_CONSTRAINTS a pip constraints file for the virtualenv too, e.g.
#                        the upper-constraints.txt of openstack/requirements'
#                        branch of the release (as devstack installs) [none]
#   NSE_LITE_PORT_BASE   first of eight consecutive TCP ports, best below
#                        net.ipv4.ip_local_port_range [28350]
#   NSE_LITE_DB_URL      MariaDB server [mysql+pymysql://root@127.0.0.1:3306]
#   NSE_LITE_DB_PREFIX   prefix of the databases <prefix>_keystone, ... and
#                        of the RabbitMQ vhost <prefix>_lite [nse]
#   NSE_LITE_RABBIT      RabbitMQ host:port, user guest/guest [127.0.0.1:5672]
#   NSE_LITE_TIMEOUT     seconds for the whole run [2400]
#   NSE_LITE_TEST_REGEX  tempest --regex [^nova_sched_ext\.tempest_plugin\.]
#   NSE_LITE_KEEP_DBS    1: leave the databases for inspection [0]
#   NSE_LITE_MULTISCHED  multisched.py commands run after tempest against
#                        the three schedulers ("burst", "staleness",
#                        "faults", "soak") ["burst staleness faults";
#                        empty: none]
#   NSE_LITE_SOAK_REQUESTS  requests of "soak" [300]
#   NSE_LITE_RESOURCES_INTERVAL  the computes' [DEFAULT]
#                        update_resources_interval, seconds [10]
#   NSE_LITE_READY_FILE  a file written once the cloud is up, before
#                        tempest: the virtualenv is complete then, and
#                        .ci/run starts the two-cluster run on it [none]
#   NSE_LITE_WATCHER     1: then the Watcher stage (watcher.sh: live Watcher
#                        services, an audit of the package's strategy, its
#                        action plan applied), on port PORT_BASE + 8; not
#                        part of CI [0]
# and any devstack/plugin variable of tools/devstack-lite/localrc.
set -o errexit -o pipefail

LITE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$LITE_DIR/../.." && pwd)
WORK=${NSE_LITE_WORK:-$REPO/.tox/devstack-lite}
VENV=$WORK/venv
LOGDIR=$WORK/logs
PIDDIR=$WORK/pids
ETC=$WORK/etc
RUN_TIMEOUT=${NSE_LITE_TIMEOUT:-2400}
PORT_BASE=${NSE_LITE_PORT_BASE:-28350}
DB_URL=${NSE_LITE_DB_URL:-mysql+pymysql://root@127.0.0.1:3306}
RABBIT=${NSE_LITE_RABBIT:-127.0.0.1:5672}
DB_PREFIX=${NSE_LITE_DB_PREFIX:-nse}
RABBIT_VHOST=${DB_PREFIX}_lite
TEST_REGEX=${NSE_LITE_TEST_REGEX:-'^nova_sched_ext\.tempest_plugin\.'}
DATABASES="${DB_PREFIX}_keystone ${DB_PREFIX}_placement ${DB_PREFIX}_nova_api ${DB_PREFIX}_nova ${DB_PREFIX}_nova_cell0"
LITE_WATCHER=${NSE_LITE_WATCHER:-0}
[[ "$LITE_WATCHER" == 1 ]] && DATABASES+=" ${DB_PREFIX}_watcher"
PASSWORD=nse-lite-secret
IMAGE_ID=5e1ec7ed-0000-4000-8000-00000000a1fe

KEYSTONE_PORT=$PORT_BASE
PLACEMENT_PORT=$((PORT_BASE + 1))
NOVA_API_PORT=$((PORT_BASE + 2))
STUB_PORT=$((PORT_BASE + 3))
CAPACITY_PORT=$((PORT_BASE + 4))
# The schedulers' coordination backend: a redis-server of this run's own,
# which the fault rounds stop and start.
REDIS_PORT=$((PORT_BASE + 5))
# Fault proxies in front of placement and the Compute API, for the
# schedulers only (fault_proxy.py).
PLACEMENT_PROXY_PORT=$((PORT_BASE + 6))
COMPUTE_PROXY_PORT=$((PORT_BASE + 7))
FAULTS_DIR=$WORK/faults
KEYSTONE_URL=http://127.0.0.1:$KEYSTONE_PORT
PLACEMENT_URL=http://127.0.0.1:$PLACEMENT_PORT
NOVA_URL=http://127.0.0.1:$NOVA_API_PORT
STUB_URL=http://127.0.0.1:$STUB_PORT

export NSE_LITE_KEYSTONE_URL=$KEYSTONE_URL NSE_LITE_PLACEMENT_URL=$PLACEMENT_URL
export NSE_LITE_NOVA_URL=$NOVA_URL NSE_LITE_STUB_URL=$STUB_URL
export NSE_LITE_PASSWORD=$PASSWORD NSE_LITE_IMAGE_ID=$IMAGE_ID
export PYTHONDONTWRITEBYTECODE=1

STARTED=$SECONDS
[[ -z "${NSE_LITE_READY_FILE:-}" ]] || rm -f "$NSE_LITE_READY_FILE"
# shellcheck source=tools/devstack-lite/services.sh
source "$LITE_DIR/services.sh"

mkdir -p "$WORK"
# One run at a time on this machine: the databases and ports are fixed.
exec 9> "$WORK/.lock"
if ! flock -n 9; then
    echo "another devstack-lite run holds $WORK/.lock" >&2
    exit 1
fi

# shellcheck source=tools/devstack-lite/functions.sh
source "$LITE_DIR/functions.sh"

# A run that was killed outright (no teardown) leaves its services running:
# stop the process groups it recorded (pid and start time must match).
leftover=()
for pidfile in "$PIDDIR"/*.pid; do
    [[ -s "$pidfile" ]] || continue
    if lite_pidfile_alive "$pidfile"; then
        read -r pid _ < "$pidfile"
        echo "stopping $(basename "$pidfile" .pid) (pid $pid), left running" \
            "by an interrupted run"
        kill -TERM -- "-$pid" 2>/dev/null || true
        leftover+=("$pid")
    fi
done
if [[ ${#leftover[@]} -gt 0 ]]; then
    sleep 10
    for pid in "${leftover[@]}"; do
        kill -KILL -- "-$pid" 2>/dev/null || true
    done
fi
rm -rf "$LOGDIR" "$PIDDIR" "$ETC" "$WORK/data" "$WORK/tempest" \
    "$WORK/tempest-workspace.yaml" "$WORK/bin" "$WORK/redis" "$FAULTS_DIR"
mkdir -p "$LOGDIR" "$PIDDIR" "$ETC" "$WORK/bin" "$WORK/redis" "$FAULTS_DIR"

# -- teardown, whatever happens ---------------------------------------------

PLUGIN_CONFIGURED=false
SUPERVISOR_PID=
DATABASES_CREATED=false
VHOST_CREATED=false


function teardown {
    local status=$?
    trap - EXIT
    set +o errexit
    step "teardown"
    if [[ -n "$SUPERVISOR_PID" ]]; then
        kill "$SUPERVISOR_PID" 2>/dev/null
        wait "$SUPERVISOR_PID" 2>/dev/null
    fi
    stop_background_jobs
    stop_all_services
    if $PLUGIN_CONFIGURED; then
        ( source "$REPO/devstack/plugin.sh" unstack ) \
            >> "$LOGDIR/unstack.log" 2>&1 \
            || echo "plugin.sh unstack failed; see $LOGDIR/unstack.log"
        # Options left in the package's sections, or naming the package.
        if awk '/^\[/ { section = $0; next }
                NF && !/^[#;]/ && (section ~ /nova_sched_ext/ ||
                                   /nova_sched_ext/) {
                    print FILENAME ": " section " " $0; found = 1 }
                END { exit !found }' "$NOVA_CONF" "$NOVA_FAKE_CONF"-* \
                2>/dev/null; then
            echo "plugin.sh unstack left the nova-sched-ext settings above"
            [[ $status -eq 0 ]] && status=1
        else
            echo "plugin.sh unstack removed every nova-sched-ext setting"
        fi
        local file
        for file in "$NOVA_SCHED_EXT_CAPACITY_CONF" \
                "$NOVA_SCHED_EXT_CAPACITY_UWSGI_CONF"; do
            if [[ -e "$file" ]]; then
                echo "plugin.sh unstack left $file"
                [[ $status -eq 0 ]] && status=1
            fi
        done
    fi
    if $DATABASES_CREATED && [[ "${NSE_LITE_KEEP_DBS:-0}" != 1 ]]; then
        local statements=() db
        for db in $DATABASES; do
            statements+=("DROP DATABASE IF EXISTS $db")
        done
        sql "${statements[@]}" || echo "could not drop the databases"
    fi
    if $VHOST_CREATED; then
        rabbitmqctl -q delete_vhost "$RABBIT_VHOST" > /dev/null 2>&1
    fi
    if [[ $status -ne 0 ]]; then
        show_logs
        echo
        echo "devstack-lite FAILED (status $status); logs in $LOGDIR"
    fi
    echo "devstack-lite wall time: $(elapsed) (limit $((RUN_TIMEOUT / 60)) min)"
    exit $status
}
trap teardown EXIT
trap 'echo "interrupted"; exit 130' INT TERM

function remaining {
    echo $((RUN_TIMEOUT - (SECONDS - STARTED)))
}


# -- preflight ----------------------------------------------------------------

step "preflight"
PYTHON=${NSE_LITE_PYTHON:-python3}
"$PYTHON" - <<'PY' || die $LINENO "devstack-lite needs Python 3.11 or newer"
import sys
sys.exit(sys.version_info < (3, 11))
PY
require_ports_free "set NSE_LITE_PORT_BASE to a free range of eight ports" \
    $KEYSTONE_PORT $PLACEMENT_PORT $NOVA_API_PORT $STUB_PORT \
    $CAPACITY_PORT $REDIS_PORT $PLACEMENT_PROXY_PORT $COMPUTE_PROXY_PORT
if ! port_in_use "${RABBIT##*:}"; then
    die $LINENO "RabbitMQ does not answer on $RABBIT"
fi
# The release: its services' versions, and what its devstack branch does
# differently (NSE_LITE_RELEASE, NSE_LITE_DEVSTACK, NSE_LITE_FAKE_*).
release_info=$(NSE_LITE_NOVA_VERSION=${NSE_LITE_NOVA_VERSION:-} \
    "$PYTHON" "$LITE_DIR/lite.py" release-info) || exit 1
eval "$release_info"
NOVA_VERSION=$("$PYTHON" -c 'import sys; print(int(sys.argv[1] or 34))' \
    "${NSE_LITE_NOVA_VERSION:-}")
echo "Nova $NOVA_VERSION ($NSE_LITE_RELEASE), configured as devstack's" \
    "$NSE_LITE_DEVSTACK configures it"
command -v setsid > /dev/null || die $LINENO "setsid (util-linux) is missing"
command -v redis-server > /dev/null ||
    die $LINENO "redis-server is missing (apt-get install redis-server)"
echo "ports $KEYSTONE_PORT-$COMPUTE_PROXY_PORT, work directory $WORK"

# -- virtualenv -------------------------------------------------------------

step "virtualenv with keystone, placement, nova and tempest from PyPI" \
    "(Nova $NOVA_VERSION, $NSE_LITE_RELEASE)"
# The requirements of the release, which also constrain the package's own
# install in the plugin's install phase (setup_develop).
LITE_CONSTRAINTS=$WORK/requirements.txt
"$PYTHON" "$LITE_DIR/lite.py" requirements --nova-version "$NOVA_VERSION" \
    > "$LITE_CONSTRAINTS"
if [[ -n "${NSE_LITE_CONSTRAINTS:-}" ]]; then
    [[ -f "$NSE_LITE_CONSTRAINTS" ]] ||
        die $LINENO "NSE_LITE_CONSTRAINTS: no file $NSE_LITE_CONSTRAINTS"
    echo "-c $(realpath "$NSE_LITE_CONSTRAINTS")" >> "$LITE_CONSTRAINTS"
fi
grep '^-c ' "$LITE_CONSTRAINTS" ||
    echo "no tools/constraints/nova-$NOVA_VERSION.txt: the release's" \
        "services pinned, their libraries not"
# What the virtualenv was built with: the requirements and the constraints.
venv_key=$(cat "$LITE_CONSTRAINTS" $(sed -n 's/^-c //p' "$LITE_CONSTRAINTS") |
    sha256sum | cut -c1-16)
if [[ "${NSE_LITE_REUSE_VENV:-0}" == 1 && -x "$VENV/bin/tempest" &&
      "$(cat "$VENV/nse-lite-requirements" 2>/dev/null)" == "$venv_key" ]]; then
    echo "reusing $VENV"
else
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    echo "$venv_key" > "$VENV/nse-lite-requirements"
    "$VENV/bin/python" -m pip install --quiet --no-input --upgrade pip \
        >> "$LOGDIR/pip.log" 2>&1
    # pip byte-compiles what it installs one file after the other; the
    # same compilation on every CPU, after it, is most of this step.
    if ! "$VENV/bin/python" -m pip install --no-input --no-compile \
            -r "$LITE_CONSTRAINTS" >> "$LOGDIR/pip.log" 2>&1; then
        tail -n 30 "$LOGDIR/pip.log"
        die $LINENO "pip install failed; see $LOGDIR/pip.log"
    fi
    compile_venv
fi
"$VENV/bin/python" -m pip list 2>/dev/null \
    | grep -Ei '^(keystone|openstack-placement|nova|tempest|gunicorn) ' \
    | tr -s ' ' | paste -sd ',' | sed 's/,/, /g'
# The plugin starts an API as devstack does, "$(which uwsgi) --ini FILE".
cat > "$WORK/bin/uwsgi" <<EOF
#!/bin/sh
exec "$VENV/bin/python" "$LITE_DIR/uwsgi.py" --gunicorn "$VENV/bin/gunicorn" "\$@"
EOF
chmod +x "$WORK/bin/uwsgi"
export PATH=$WORK/bin:$PATH

# -- devstack variables, localrc, lib/nova defaults, plugin settings --------

step "devstack variables and devstack/settings"
DEST=$WORK
DATA_DIR=$WORK/data
declare -A GITDIR
GITDIR[nova-sched-ext]=$REPO
ENABLED_SERVICES=key,placement-api,n-api,n-cond,n-sch,n-cpu,tempest
NOVA_BIN_DIR=$VENV/bin
NOVA_CONF_DIR=$ETC/nova
NOVA_CONF=$NOVA_CONF_DIR/nova.conf
NOVA_CPU_CONF=$NOVA_CONF_DIR/nova-cpu.conf
NOVA_FAKE_CONF=$NOVA_CONF_DIR/nova-fake.conf
NOVA_STATE_PATH=$DATA_DIR/nova
TEMPEST_DIR=$WORK/tempest
TEMPEST_CONFIG=$TEMPEST_DIR/etc/tempest.conf
# The fake computes are ${HOSTNAME}1, ${HOSTNAME}2, ... as in lib/nova.
HOSTNAME=nse-lite-cpu
# devstack's APIs sit behind Apache on $SERVICE_HOST at URL paths. Here only
# the APIs the plugin serves through write_uwsgi_config do (functions.sh),
# on a port of their own, so the address carries it.
SERVICE_PROTOCOL=http
SERVICE_HOST=127.0.0.1:$CAPACITY_PORT
REGION_NAME=RegionOne
# An API's first request imports Nova, which is slow on a loaded machine.
SERVICE_TIMEOUT=120
# shellcheck source=tools/devstack-lite/localrc
source "$LITE_DIR/localrc"
# lib/nova's filter list, which devstack/settings then extends.
NOVA_FILTERS="ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,SameHostFilter,DifferentHostFilter"
# shellcheck source=devstack/settings
source "$REPO/devstack/settings"
echo "NOVA_FILTERS=$NOVA_FILTERS"

step "plugin.sh stack install"
source "$REPO/devstack/plugin.sh" stack install
echo "n-sch runs: $( _nova_sched_ext_own_scheduler &&
    echo "nova-sched-ext-scheduler x $NOVA_SCHED_EXT_SCHEDULERS" ||
    echo nova-scheduler)"

# -- databases and message queue --------------------------------------------

step "databases ($DATABASES) and RabbitMQ vhost $RABBIT_VHOST"
statements=()
for db in $DATABASES; do
    statements+=("DROP DATABASE IF EXISTS $db"
                 "CREATE DATABASE $db CHARACTER SET utf8mb4")
done
DATABASES_CREATED=true
sql "${statements[@]}"
if command -v rabbitmqctl > /dev/null &&
        rabbitmqctl -q list_vhosts > /dev/null 2>&1; then
    # Each rabbitmqctl starts an Erlang node, seconds on a loaded machine:
    # the vhost is made in the background, waited for before Nova starts.
    VHOST_CREATED=true
    {
        rabbitmqctl -q delete_vhost "$RABBIT_VHOST" > /dev/null 2>&1 || true
        rabbitmqctl -q add_vhost "$RABBIT_VHOST" > /dev/null &&
            rabbitmqctl -q set_permissions -p "$RABBIT_VHOST" guest \
                '.*' '.*' '.*' > /dev/null
    } &
    VHOST_PID=$!
    TRANSPORT_URL=rabbit://guest:guest@$RABBIT/$RABBIT_VHOST
else
    echo "rabbitmqctl is not usable here: sharing RabbitMQ's default vhost"
    TRANSPORT_URL=rabbit://guest:guest@$RABBIT/
    VHOST_PID=
fi

# The schedulers' redis: no persistence, nothing shared with the machine's.
ENABLED_SERVICES+=",nse-redis"
function start_redis {
    run_process nse-redis "redis-server --port $REDIS_PORT --bind 127.0.0.1 \
--save '' --appendonly no --dir $WORK/redis --protected-mode no"
    wait_log nse-redis "Ready to accept connections" 30
}
start_redis
echo "redis-server on 127.0.0.1:$REDIS_PORT"

# -- placement.conf, nova.conf, and their schemas beside keystone ------------

# Nothing below needs keystone until the plugin's post-config phase: the
# configuration files are written first, and the database schemas
# (placement-manage db sync; nova-manage's cells v2 steps) are built in the
# background while keystone builds its own and starts.

step "placement.conf and nova.conf (lib/nova)"
PLACEMENT_CONF=$ETC/placement/placement.conf
iniset "$PLACEMENT_CONF" placement_database connection \
    "$(db_url "${DB_PREFIX}_placement")"
iniset "$PLACEMENT_CONF" api auth_strategy keystone
configure_auth_token "$PLACEMENT_CONF" placement
write_nova_conf "${DB_PREFIX}_nova_api" "${DB_PREFIX}_nova" nse-lite
# A scheduler killed mid-request never answers: the conductor's call ends
# when its heartbeats stop (rpc_response_timeout), bounded by
# long_rpc_timeout, and the build goes to ERROR (faults.sh).
iniset "$NOVA_CONF" DEFAULT rpc_response_timeout 30
iniset "$NOVA_CONF" DEFAULT long_rpc_timeout 180

step "database schemas in the background: placement-manage db sync;" \
    "cells v2 (api_db sync, map_cell0, db sync, create_cell)"
# nova-manage reads a copy of nova.conf as it is now: the plugin's
# post-config phase rewrites nova.conf meanwhile, and none of its settings
# matter to the schemas or the cell mappings.
NOVA_MANAGE_CONF=$ETC/nova-manage.conf
cp "$NOVA_CONF" "$NOVA_MANAGE_CONF"
(
    "$VENV/bin/placement-manage" --config-file "$PLACEMENT_CONF" db sync
) >> "$LOGDIR/placement-manage.log" 2>&1 &
PLACEMENT_SYNC_PID=$!
(
    set -o errexit
    started=$SECONDS
    nova_manage=("$VENV/bin/nova-manage" --config-file "$NOVA_MANAGE_CONF")
    "${nova_manage[@]}" api_db sync
    "${nova_manage[@]}" cell_v2 map_cell0 \
        --database_connection "$(db_url "${DB_PREFIX}_nova_cell0")"
    "${nova_manage[@]}" db sync
    "${nova_manage[@]}" cell_v2 create_cell --name cell1 --verbose
    echo "cells v2 done in $((SECONDS - started)) s"
) >> "$LOGDIR/nova-manage.log" 2>&1 &
CELLS_PID=$!

# -- keystone ----------------------------------------------------------------

step "keystone"
start_keystone "${DB_PREFIX}_keystone"
"$VENV/bin/python" "$LITE_DIR/lite.py" keystone-setup

# -- placement and the image/network stand-ins --------------------------------

step "the image/network stand-ins"
ENABLED_SERVICES+=",stub"
# Nova asks for the ports of up to 150 servers in one URL when it lists
# them: no limit on the request line.
run_process stub "$(gunicorn_serve "$STUB_PORT" stub_services:application \
    --limit-request-line 0)" "" "" "NSE_LITE_IMAGE_ID=$IMAGE_ID"

# -- the plugin's post-config --------------------------------------------------

step "plugin.sh stack post-config"
# The schedulers' extra file (the launcher adds it): placement and the
# Compute API through the fault proxies.
SCHEDULER_FAULTS_CONF=$NOVA_CONF_DIR/scheduler-faults.conf
iniset "$SCHEDULER_FAULTS_CONF" placement endpoint_override \
    "http://127.0.0.1:$PLACEMENT_PROXY_PORT"
iniset "$SCHEDULER_FAULTS_CONF" nova_sched_ext_evictor endpoint_override \
    "http://127.0.0.1:$COMPUTE_PROXY_PORT/v2.1"
ENABLED_SERVICES+=",placement-proxy,compute-proxy"
run_process placement-proxy "$VENV/bin/python $LITE_DIR/fault_proxy.py \
--port $PLACEMENT_PROXY_PORT --target $PLACEMENT_URL \
--rules $FAULTS_DIR/placement-rules.json"
run_process compute-proxy "$VENV/bin/python $LITE_DIR/fault_proxy.py \
--port $COMPUTE_PROXY_PORT --target $NOVA_URL \
--rules $FAULTS_DIR/compute-rules.json"
source "$REPO/devstack/plugin.sh" stack post-config
PLUGIN_CONFIGURED=true

# -- placement ------------------------------------------------------------------

# As stack.sh does, after the plugins' post-config: the plugin writes
# placement.conf's allocation_conflict_retry_count.
step "placement"
wait "$PLACEMENT_SYNC_PID" || die $LINENO "placement-manage db sync failed"
[[ "$(iniget "$PLACEMENT_CONF" placement allocation_conflict_retry_count)" \
        == "$NOVA_SCHED_EXT_PLACEMENT_CONFLICT_RETRIES" ]] || \
    die $LINENO "the plugin's post-config did not write placement.conf's" \
        "allocation_conflict_retry_count"
run_process placement-api "$(gunicorn_command placement.wsgi.api \
    "$PLACEMENT_PORT")" "" "" "OS_PLACEMENT_CONFIG_DIR=$ETC/placement"
wait_http placement-api "$PLACEMENT_URL/"
wait_http stub "$STUB_URL/image/"

# -- cells v2 -----------------------------------------------------------------

step "cells v2: waiting for the background nova-manage steps"
wait "$CELLS_PID" ||
    die $LINENO "nova-manage failed; see $LOGDIR/nova-manage.log"
tail -n 1 "$LOGDIR/nova-manage.log"
rm -f "$NOVA_MANAGE_CONF"

# -- nova services ------------------------------------------------------------

if [[ -n "$VHOST_PID" ]]; then
    wait "$VHOST_PID" ||
        die $LINENO "could not make the RabbitMQ vhost $RABBIT_VHOST"
fi

step "nova-api, nova-conductor, the scheduler, $NUMBER_FAKE_NOVA_COMPUTE computes"
run_process n-api "$(gunicorn_command nova.wsgi.osapi_compute \
    "$NOVA_API_PORT")" "" "" \
    "OS_NOVA_CONFIG_DIR=$NOVA_CONF_DIR${NSE_LITE_API_ENV:+ $NSE_LITE_API_ENV}"
run_process n-cond "$NOVA_BIN_DIR/nova-conductor --config-file $NOVA_CONF"
run_process n-sch "$NOVA_BIN_DIR/nova-scheduler --config-file $NOVA_CONF"
# lib/nova start_nova_compute: nova-cpu.conf is nova.conf without database
# access; each fake compute adds its own file (host, state_path).
cp "$NOVA_CONF" "$NOVA_CPU_CONF"
inidelete "$NOVA_CPU_CONF" database connection
inidelete "$NOVA_CPU_CONF" api_database connection
for i in $(seq 1 "$NUMBER_FAKE_NOVA_COMPUTE"); do
    fake_conf="${NOVA_FAKE_CONF}-${i}"
    iniset "$fake_conf" DEFAULT host "${HOSTNAME}${i}"
    # devstack's stable/2025.1 and stable/2025.2 leave every fake compute
    # in nova.conf's state_path; from stable/2026.1 on each has its own.
    if [[ "$NSE_LITE_FAKE_STATE_PATHS" == 1 ]]; then
        iniset "$fake_conf" DEFAULT state_path \
            "$NOVA_STATE_PATH/${HOSTNAME}${i}"
        mkdir -p "$NOVA_STATE_PATH/${HOSTNAME}${i}"
    fi
    run_process "n-cpu-${i}" \
        "$NOVA_BIN_DIR/nova-compute --config-file $NOVA_CPU_CONF --config-file $fake_conf"
done

# The plugin's extra phase follows at once, as in stack.sh: it replaces
# n-sch with its schedulers and restarts the computes just started on the
# fake NUMA driver (stopping the running processes first), so there is
# nothing to wait for before it; the APIs and the computes' new processes
# are waited for, and the computes mapped to cell1, once it is done.
step "plugin.sh stack extra"
source "$REPO/devstack/plugin.sh" stack extra
wait_http n-api "$NOVA_URL/" 120
for service in $(_nova_sched_ext_scheduler_services); do
    wait_log "$service" "Starting scheduler node" 120
done
for i in $(seq 1 "$NUMBER_FAKE_NOVA_COMPUTE"); do
    wait_log "n-cpu-$i" "Starting compute node" 120
done
discover_computes
"$VENV/bin/python" "$LITE_DIR/lite.py" nova-setup \
    --computes "$NUMBER_FAKE_NOVA_COMPUTE"

if [[ -n "${NSE_LITE_READY_FILE:-}" ]]; then
    echo "cloud up at $(elapsed)" > "$NSE_LITE_READY_FILE"
fi

# -- tempest -------------------------------------------------------------------

step "tempest init, tempest.conf (lib/tempest) and plugin.sh stack test-config"
"$VENV/bin/tempest" init --workspace-path "$WORK/tempest-workspace.yaml" \
    "$TEMPEST_DIR" >> "$LOGDIR/tempest-init.log" 2>&1 \
    || die $LINENO "tempest init failed; see $LOGDIR/tempest-init.log"
iniset "$TEMPEST_CONFIG" DEFAULT log_file "$LOGDIR/tempest.log"
iniset "$TEMPEST_CONFIG" DEFAULT use_stderr False
iniset "$TEMPEST_CONFIG" auth use_dynamic_credentials True
iniset "$TEMPEST_CONFIG" auth create_isolated_networks False
iniset "$TEMPEST_CONFIG" auth admin_username admin
iniset "$TEMPEST_CONFIG" auth admin_password "$PASSWORD"
iniset "$TEMPEST_CONFIG" auth admin_project_name admin
iniset "$TEMPEST_CONFIG" auth admin_domain_name Default
iniset "$TEMPEST_CONFIG" identity uri_v3 "$KEYSTONE_URL/v3"
iniset "$TEMPEST_CONFIG" identity auth_version v3
iniset "$TEMPEST_CONFIG" identity region RegionOne
iniset "$TEMPEST_CONFIG" identity-feature-enabled api_v2 False
iniset "$TEMPEST_CONFIG" compute image_ref "$IMAGE_ID"
iniset "$TEMPEST_CONFIG" compute image_ref_alt "$IMAGE_ID"
iniset "$TEMPEST_CONFIG" compute flavor_ref 42
iniset "$TEMPEST_CONFIG" compute flavor_ref_alt 84
iniset "$TEMPEST_CONFIG" compute min_microversion 2.1
iniset "$TEMPEST_CONFIG" compute max_microversion latest
iniset "$TEMPEST_CONFIG" compute build_timeout 120
iniset "$TEMPEST_CONFIG" compute-feature-enabled scheduler_enabled_filters \
    "$NOVA_FILTERS"
iniset "$TEMPEST_CONFIG" placement min_microversion 1.0
iniset "$TEMPEST_CONFIG" placement max_microversion latest
iniset "$TEMPEST_CONFIG" validation run_validation False
iniset "$TEMPEST_CONFIG" service_available nova True
iniset "$TEMPEST_CONFIG" service_available glance True
iniset "$TEMPEST_CONFIG" service_available neutron False
iniset "$TEMPEST_CONFIG" service_available cinder False
iniset "$TEMPEST_CONFIG" service_available swift False
# The OpenStackClient of the virtualenv, with the package's plugin (the
# default is where devstack installs it).
iniset "$TEMPEST_CONFIG" nova_sched_ext cli_dir "$VENV/bin"
source "$REPO/devstack/plugin.sh" stack test-config

step "tempest run --regex '$TEST_REGEX'"
left=$(remaining)
[[ $left -gt 60 ]] || die $LINENO "no time left for tempest ($left s)"
tempest_status=0
(
    cd "$TEMPEST_DIR"
    timeout --kill-after 10 "$left" "$VENV/bin/tempest" run --serial \
        --regex "$TEST_REGEX"
) 2>&1 | tee "$LOGDIR/tempest-run.log" || tempest_status=$?

step "results"
scheduler_logs=()
for service in $(_nova_sched_ext_scheduler_services); do
    scheduler_logs+=("$LOGDIR/$service.log")
    echo "$service: passes through NUMAFitFilter:" \
        "$(grep -c 'Filter NUMAFitFilter returned' "$LOGDIR/$service.log" \
            || true)"
done
scheduler_evidence=$(cat "${scheduler_logs[@]}" \
    | grep -c 'Filter NUMAFitFilter returned' || true)
echo "scheduler passes through NUMAFitFilter: $scheduler_evidence"
cat "${scheduler_logs[@]}" \
    | grep -o 'NUMASlotWeigher reference flavors: .*' | tail -n 1 || true
evictions=$(cat "${scheduler_logs[@]}" \
    | grep -c 'Preemption: request .* evicts' || true)
echo "preemption driver evictions: $evictions"
if is_service_enabled nse-capacity-api; then
    counts=$(grep -c 'Capacity of .* flavor(s) on' \
        "$LOGDIR/nse-capacity-api.log" || true)
    echo "capacity API counts: $counts"
fi
function count {
    sed -n "s/^ - $1: *\([0-9]*\)$/\1/p" "$LOGDIR/tempest-run.log" | tail -n 1
}
passed=$(count Passed); failed=$(count Failed); skipped=$(count Skipped)
echo "tempest: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
if [[ $tempest_status -ne 0 || -z "$passed" || "${passed:-0}" -eq 0 ]]; then
    exit 1
fi

# -- several schedulers: the load burst and the fault rounds -----------------

# Start again what a fault round stopped: a killed scheduler at once, the
# redis once the round removes its hold file.
function supervise {
    local service
    while true; do
        for service in $(_nova_sched_ext_scheduler_services) nse-redis; do
            [[ -e "$FAULTS_DIR/hold-$service" ]] && continue
            is_process_running "$service" && continue
            : > "$FAULTS_DIR/restarting"
            echo_summary "supervisor: $service is gone; starting it again"
            if [[ "$service" == nse-redis ]]; then
                ( start_redis ) || true
            else
                run_process "$service" "$(nova_sched_ext_scheduler_command)"
                ( wait_log "$service" "Starting scheduler node" 120 ) || true
            fi
            rm -f "$FAULTS_DIR/restarting"
        done
        sleep 1
    done
}

MULTISCHED=${NSE_LITE_MULTISCHED-burst staleness faults}
if _nova_sched_ext_own_scheduler && [[ -n "$MULTISCHED" ]]; then
    export NSE_LITE_FAULTS_DIR=$FAULTS_DIR NSE_LITE_PIDDIR=$PIDDIR
    export NSE_LITE_REDIS_PORT=$REDIS_PORT
    NSE_LITE_SCHEDULERS=$(_nova_sched_ext_scheduler_services | paste -sd ' ')
    export NSE_LITE_SCHEDULERS
    export NSE_LITE_LOGDIR=$LOGDIR
    export NSE_LITE_MAX_PER_AZ=${NOVA_SCHED_EXT_PREEMPTIBLE_MAX_PER_AZ:--1}
    export NSE_LITE_MAX_PER_HOST=${NOVA_SCHED_EXT_PREEMPTIBLE_MAX_PER_HOST:--1}
    domain_key=$(iniget "$NOVA_CONF" nova_sched_ext deployment_set_domain_key)
    export NSE_LITE_DOMAIN_KEY=${domain_key:-failure_domain}
    # A dead scheduler's reservation is released within the record's TTL
    # plus one reconcile interval; twice that, for a loaded machine.
    export NSE_LITE_RECONCILE_PERIOD=$((2 * (
        ${NOVA_SCHED_EXT_PREEMPTION_EVICTION_TTL:-30} +
        ${NOVA_SCHED_EXT_PREEMPTION_RECONCILE_INTERVAL:-60})))
    supervise >> "$LOGDIR/supervisor.log" 2>&1 &
    SUPERVISOR_PID=$!
    multisched_status=0
    for command in $MULTISCHED; do
        step "several schedulers: multisched.py $command"
        case "$command" in
            soak) args=(soak --requests "${NSE_LITE_SOAK_REQUESTS:-300}") ;;
            *) args=("$command") ;;
        esac
        left=$(remaining)
        timeout --kill-after 10 "$left" "$VENV/bin/python" \
            "$LITE_DIR/multisched.py" "${args[@]}" 2>&1 \
            | tee -a "$LOGDIR/multisched.log" || multisched_status=1
    done
    echo "multisched ($MULTISCHED): $( [[ $multisched_status -eq 0 ]] &&
        echo "no violation" || echo FAILED)"
    if [[ $multisched_status -ne 0 ]]; then
        exit 1
    fi
fi

# -- opt-in: Watcher's audit, action plan and applier (watcher.sh) -----------

if [[ "$LITE_WATCHER" == 1 ]]; then
    # shellcheck source=tools/devstack-lite/watcher.sh
    source "$LITE_DIR/watcher.sh"
    watcher_stage
fi
