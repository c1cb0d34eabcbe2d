# devstack-lite: the helpers of its runs (run.sh, two-clusters.sh).
#
# Sourced by the script that sets VENV, LITE_DIR, LOGDIR,
# PIDDIR, DB_URL, STARTED and, for keystone and the service users,
# KEYSTONE_URL, KEYSTONE_PORT, PASSWORD, ETC and REGION_NAME.

function elapsed {
    local s=$((SECONDS - STARTED))
    printf '%d:%02d' $((s / 60)) $((s % 60))
}
function step {
    printf '\n=== [%s] %s\n' "$(elapsed)" "$*"
}

function sql {
    "$VENV/bin/python" - "$DB_URL" "$@" <<'PY'
import sys
from urllib.parse import urlsplit

import pymysql

url = urlsplit(sys.argv[1].replace('mysql+pymysql://', 'mysql://'))
connection = pymysql.connect(host=url.hostname or '127.0.0.1',
                             port=url.port or 3306,
                             user=url.username or 'root',
                             password=url.password or '')
with connection.cursor() as cursor:
    for statement in sys.argv[2:]:
        cursor.execute(statement)
connection.commit()
PY
}

# Stop every service at once (stop_process one by one would wait for each
# graceful shutdown in turn), then kill what is left after 15 s.
function stop_all_services {
    local pidfile pids=() pid waited
    for pidfile in "$PIDDIR"/*.pid; do
        [[ -s "$pidfile" ]] || continue
        lite_pidfile_alive "$pidfile" && pids+=("$(cut -d' ' -f1 "$pidfile")")
        rm -f "$pidfile"
    done
    for pid in "${pids[@]}"; do
        kill -TERM -- "-$pid" 2>/dev/null || true
    done
    local alive=true
    for waited in $(seq 1 75); do
        alive=false
        for pid in "${pids[@]}"; do
            if kill -0 -- "-$pid" 2>/dev/null; then
                alive=true
                break
            fi
        done
        $alive || break
        sleep 0.2
    done
    for pid in "${pids[@]}"; do
        if kill -0 -- "-$pid" 2>/dev/null; then
            echo "process group $pid did not stop in 15 s; killing it"
            kill -KILL -- "-$pid" 2>/dev/null
        fi
    done
}

# Stop this shell's background jobs (the schema builds of a run that ends
# early) and the commands they run, before the databases are dropped.
function stop_background_jobs {
    local pid
    for pid in $(jobs -p); do
        pkill -TERM -P "$pid" 2>/dev/null
        kill -TERM "$pid" 2>/dev/null
    done
    wait 2>/dev/null
}

function show_logs {
    local log
    for log in "$LOGDIR"/*.log; do
        [[ -s "$log" ]] || continue
        printf '\n----- last lines of %s\n' "$log"
        tail -n 25 "$log"
    done
}

# Wait until a service answers HTTP; stop early if its process is gone.
function wait_http {
    local service=$1 url=$2 timeout=${3:-90} started=$SECONDS
    until "$VENV/bin/python" "$LITE_DIR/lite.py" wait-http "$url" \
            --timeout 3 > /dev/null 2>&1; do
        if ! is_process_running "$service"; then
            die $LINENO "$service exited; see $LOGDIR/$service.log"
        fi
        if [[ $((SECONDS - started)) -ge $timeout ]]; then
            die $LINENO "$service did not answer on $url in $timeout s"
        fi
    done
    echo "$service answers on $url"
}

# Wait for a line of the service's current run (run_process marks each start).
function wait_log {
    local service=$1 pattern=$2 timeout=${3:-90} waited=0
    until awk '/^==== / { run = "" } { run = run $0 "\n" }
               END { printf "%s", run }' "$LOGDIR/$service.log" 2>/dev/null \
            | grep -q "$pattern"; do
        if ! is_process_running "$service"; then
            die $LINENO "$service exited; see $LOGDIR/$service.log"
        fi
        if [[ $waited -ge $((timeout * 2)) ]]; then
            die $LINENO "$service did not log '$pattern' in $timeout s"
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
}

# True if something answers on 127.0.0.1:PORT (RabbitMQ is up, say).
function port_in_use {
    (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null
}

# Die unless every PORT can be bound as the services will bind it.  A
# connect test is not enough: a client socket whose local port is PORT
# (an outgoing connection given PORT from the ephemeral range) answers no
# connect, yet the service's bind fails with "Address already in use".
# Warn for a port inside the kernel's ephemeral range: an outgoing
# connection can take it between this check and the service's start.
function require_ports_free {
    local hint=$1
    shift
    "${PYTHON:-python3}" - "$hint" "$@" <<'PY' || exit 1
import socket
import sys

hint, ports = sys.argv[1], [int(port) for port in sys.argv[2:]]
try:
    with open('/proc/sys/net/ipv4/ip_local_port_range') as ranges:
        low, high = (int(value) for value in ranges.read().split())
except (OSError, ValueError):
    low, high = 0, -1
for port in ports:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(('127.0.0.1', port))
        except OSError as error:
            sys.exit('[ERROR] port %d cannot be bound (%s); %s'
                     % (port, error.strerror, hint))
inside = [port for port in ports if low <= port <= high]
if inside:
    print('[WARNING] %s in the ephemeral range %d-%d '
          '(net.ipv4.ip_local_port_range): an outgoing connection may take '
          'it before its service binds it; %s'
          % (', '.join(map(str, inside)), low, high, hint), file=sys.stderr)
PY
}

# Byte-compile the virtualenv's packages with one worker per CPU (what pip
# does file by file unless told --no-compile). The services run with
# PYTHONDONTWRITEBYTECODE, so without this every start of every service
# would compile Nova again.
function compile_venv {
    "$VENV/bin/python" -m compileall -q -j 0 \
        "$("$VENV/bin/python" -c 'import sysconfig
print(sysconfig.get_paths()["purelib"])')" >> "$LOGDIR/pip.log" 2>&1 ||
        true
}

function db_url {
    echo "$DB_URL/$1?charset=utf8"
}

# gunicorn serving APP (a "module:callable" of tools/devstack-lite) on
# 127.0.0.1:PORT, with the settings every API here shares
# (gunicorn_conf.py); further arguments go before APP.
function gunicorn_serve {
    local port=$1 app=$2
    shift 2
    echo "$VENV/bin/gunicorn -c $LITE_DIR/gunicorn_conf.py" \
        "--bind 127.0.0.1:$port $* '$app'"
}

# gunicorn serving a WSGI module's "application" (wsgi_app.py says why the
# indirection).
function gunicorn_command {
    local module=$1 port=$2
    gunicorn_serve "$port" "wsgi_app:load(\"$module\")"
}

# Written like lib/keystone, lib/placement and lib/nova configure auth.
function configure_auth_token {
    local conf=$1 user=$2
    iniset "$conf" keystone_authtoken www_authenticate_uri "$KEYSTONE_URL"
    iniset "$conf" keystone_authtoken auth_url "$KEYSTONE_URL"
    iniset "$conf" keystone_authtoken auth_type password
    iniset "$conf" keystone_authtoken username "$user"
    iniset "$conf" keystone_authtoken password "$PASSWORD"
    iniset "$conf" keystone_authtoken project_name service
    iniset "$conf" keystone_authtoken user_domain_name Default
    iniset "$conf" keystone_authtoken project_domain_name Default
    iniset "$conf" keystone_authtoken service_token_roles_required True
}

function configure_service_client {
    local conf=$1 section=$2 user=$3
    iniset "$conf" "$section" auth_type password
    iniset "$conf" "$section" auth_url "$KEYSTONE_URL"
    iniset "$conf" "$section" username "$user"
    iniset "$conf" "$section" password "$PASSWORD"
    iniset "$conf" "$section" project_name service
    iniset "$conf" "$section" user_domain_name Default
    iniset "$conf" "$section" project_domain_name Default
    iniset "$conf" "$section" region_name "${REGION_NAME:-RegionOne}"
}

# keystone-manage db_sync, fernet and credential keys, bootstrap (admin,
# RegionOne), then keystone under gunicorn on $KEYSTONE_PORT, as
# lib/keystone does; $1 is its database.
function start_keystone {
    local database=$1
    KEYSTONE_CONF=$ETC/keystone/keystone.conf
    iniset "$KEYSTONE_CONF" database connection "$(db_url "$database")"
    iniset "$KEYSTONE_CONF" token provider fernet
    iniset "$KEYSTONE_CONF" fernet_tokens key_repository \
        "$ETC/keystone/fernet-keys"
    iniset "$KEYSTONE_CONF" credential key_repository \
        "$ETC/keystone/credential-keys"
    mkdir -p "$ETC/keystone/fernet-keys" "$ETC/keystone/credential-keys"
    local keystone_manage=("$VENV/bin/keystone-manage" --config-file
                           "$KEYSTONE_CONF")
    # The key repositories need no database: made while db_sync runs.
    {
        "${keystone_manage[@]}" fernet_setup --keystone-user "$(id -un)" \
            --keystone-group "$(id -gn)"
        "${keystone_manage[@]}" credential_setup --keystone-user "$(id -un)" \
            --keystone-group "$(id -gn)"
    } >> "$LOGDIR/keystone-keys.log" 2>&1 &
    local keys=$!
    {
        "${keystone_manage[@]}" db_sync
        wait "$keys" || { cat "$LOGDIR/keystone-keys.log"; false; }
        "${keystone_manage[@]}" bootstrap --bootstrap-password "$PASSWORD" \
            --bootstrap-admin-url "$KEYSTONE_URL" \
            --bootstrap-public-url "$KEYSTONE_URL" \
            --bootstrap-internal-url "$KEYSTONE_URL" \
            --bootstrap-region-id RegionOne
    } >> "$LOGDIR/keystone-manage.log" 2>&1 \
        || die $LINENO "keystone-manage failed; see" \
            "$LOGDIR/keystone-manage.log"
    run_process key "$(gunicorn_command keystone.wsgi.api "$KEYSTONE_PORT")" \
        "" "" "OS_KEYSTONE_CONFIG_DIR=$ETC/keystone"
    wait_http key "$KEYSTONE_URL/v3"
}

# nova.conf as lib/nova's create_nova_conf writes it for this cloud: $1 the
# API database, $2 the cell database, $3 the host of the control services
# (NOVA_CONF, NOVA_CONF_DIR, NOVA_STATE_PATH, DATA_DIR, TRANSPORT_URL,
# NOVA_FILTERS set).
function write_nova_conf {
    mkdir -p "$NOVA_CONF_DIR" "$NOVA_STATE_PATH"
    cp "$VENV/etc/nova/api-paste.ini" "$NOVA_CONF_DIR/"
    iniset "$NOVA_CONF" DEFAULT debug True
    iniset "$NOVA_CONF" DEFAULT transport_url "$TRANSPORT_URL"
    iniset "$NOVA_CONF" DEFAULT state_path "$NOVA_STATE_PATH"
    iniset "$NOVA_CONF" DEFAULT my_ip 127.0.0.1
    iniset "$NOVA_CONF" DEFAULT host "$3"
    # lib/nova_plugins/hypervisor-fake (fake.FakeDriver up to devstack's
    # stable/2025.2)
    iniset "$NOVA_CONF" DEFAULT compute_driver \
        "${NSE_LITE_FAKE_DRIVER:-fake.FakeDriverWithoutFakeNodes}"
    iniset "$NOVA_CONF" quota driver nova.quota.NoopQuotaDriver
    iniset "$NOVA_CONF" wsgi api_paste_config "$NOVA_CONF_DIR/api-paste.ini"
    iniset "$NOVA_CONF" api auth_strategy keystone
    iniset "$NOVA_CONF" api_database connection "$(db_url "$1")"
    iniset "$NOVA_CONF" database connection "$(db_url "$2")"
    iniset "$NOVA_CONF" oslo_concurrency lock_path "$DATA_DIR/lock"
    iniset "$NOVA_CONF" filter_scheduler enabled_filters "$NOVA_FILTERS"
    iniset "$NOVA_CONF" scheduler workers 1
    iniset "$NOVA_CONF" scheduler discover_hosts_in_cells_interval -1
    # The computes' resource update every 10 s, not devstack's 60: a
    # scenario that deletes a live-migrated server waits for it before the
    # host's cells count as free (the defrag tempest tests poll for it),
    # and the fake driver makes each update cheap.
    iniset "$NOVA_CONF" DEFAULT update_resources_interval \
        "${NSE_LITE_RESOURCES_INTERVAL:-10}"
    iniset "$NOVA_CONF" conductor workers 1
    iniset "$NOVA_CONF" vnc enabled False
    iniset "$NOVA_CONF" os_vif_ovs ovsdb_connection tcp:127.0.0.1:6640
    configure_auth_token "$NOVA_CONF" nova
    configure_service_client "$NOVA_CONF" placement placement
    configure_service_client "$NOVA_CONF" neutron nova
    configure_service_client "$NOVA_CONF" service_user nova
    iniset "$NOVA_CONF" service_user send_service_user_token True
    iniset "$NOVA_CONF" glance region_name "${REGION_NAME:-RegionOne}"
}

# lib/nova's discover_hosts, until every compute ${HOSTNAME}N is mapped.
function discover_computes {
    local nova_manage=("$VENV/bin/nova-manage" --config-file "$NOVA_CONF")
    local attempt mapped=0
    for attempt in $(seq 1 30); do
        "${nova_manage[@]}" cell_v2 discover_hosts --verbose \
            >> "$LOGDIR/nova-manage.log" 2>&1
        mapped=$("${nova_manage[@]}" cell_v2 list_hosts 2>/dev/null \
            | grep -c "${HOSTNAME}[0-9]" || true)
        [[ $mapped -ge $NUMBER_FAKE_NOVA_COMPUTE ]] && break
        sleep 2
    done
    echo "$mapped of $NUMBER_FAKE_NOVA_COMPUTE computes mapped to cell1"
}
