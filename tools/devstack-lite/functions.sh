# devstack-lite: the part of devstack that devstack/plugin.sh relies on.
#
# Sourced by run.sh. It provides, with devstack's names and meaning, the
# functions the plugin calls (the ini helpers, trueorfalse,
# is_service_enabled, run_process/stop_process, setup_develop, die, ...),
# so that run.sh can source devstack/settings and run the phases of
# devstack/plugin.sh exactly as stack.sh does. It is written for this
# purpose and implements only what the plugin uses.
#
# Services run as background processes in their own process group (setsid),
# with their output in $LOGDIR/<service>.log and their pid in
# $PIDDIR/<service>.pid, instead of systemd units.

: "${LITE_DIR:?}" "${VENV:?}" "${LOGDIR:?}" "${PIDDIR:?}"

LITE_INI="$LITE_DIR/ini.awk"

# -- ini helpers (devstack inc/ini-config) ---------------------------------

# _lite_ini COMMAND FILE SECTION OPTION [VALUE...]: ini.awk on FILE; the
# writing commands put its output in place through a temporary file, so a
# failed edit leaves the file as it was.
function _lite_ini {
    local command=$1 file=$2 tmp
    case "$command" in
        get|get-multi|has)
            awk -f "$LITE_INI" -- "$@"
            return
            ;;
        delete)
            [[ -f "$file" ]] || return 0
            ;;
    esac
    [[ "$file" != */* || -d "${file%/*}" ]] || mkdir -p "${file%/*}"
    tmp="$file.tmp$$"
    if awk -f "$LITE_INI" -- "$@" > "$tmp"; then
        mv -f "$tmp" "$file"
    else
        rm -f "$tmp"
        return 1
    fi
}

function iniset {
    [[ "$1" == "-sudo" ]] && shift
    _lite_ini set "$1" "$2" "$3" "$4"
}

function iniset_multiline {
    [[ "$1" == "-sudo" ]] && shift
    local file=$1 section=$2 option=$3
    shift 3
    _lite_ini set-multi "$file" "$section" "$option" "$@"
}

function iniadd {
    [[ "$1" == "-sudo" ]] && shift
    local file=$1 section=$2 option=$3
    shift 3
    _lite_ini add "$file" "$section" "$option" "$@"
}

function iniget {
    [[ -f "$1" ]] || return 0
    _lite_ini get "$1" "$2" "$3"
}

function iniget_multiline {
    [[ -f "$1" ]] || return 0
    _lite_ini get-multi "$1" "$2" "$3"
}

function ini_has_option {
    [[ "$1" == "-sudo" ]] && shift
    [[ -f "$1" ]] || return 1
    _lite_ini has "$1" "$2" "$3"
}

function inidelete {
    [[ "$1" == "-sudo" ]] && shift
    _lite_ini delete "$1" "$2" "$3"
}

# -- general helpers (devstack functions-common) ---------------------------

function trueorfalse {
    local default=$1 name=$2
    local value=${!name:-$default}
    case "${value,,}" in
        1|yes|true|on) echo True ;;
        0|no|false|off) echo False ;;
        *) echo "$default" ;;
    esac
}

function die {
    local line=""
    if [[ "$1" =~ ^[0-9]+$ ]]; then
        line=" (line $1)"
        shift
    fi
    echo "[ERROR]${line} $*" >&2
    exit 1
}

function warn {
    [[ "$1" =~ ^[0-9]+$ ]] && shift
    echo "[WARNING] $*" >&2
}

function echo_summary {
    printf '%s | %s\n' "$(date +%H:%M:%S)" "$*"
}

function enable_service {
    local service
    for service in "$@"; do
        if [[ ",$ENABLED_SERVICES," != *",$service,"* ]]; then
            ENABLED_SERVICES+=",$service"
        fi
    done
    ENABLED_SERVICES=${ENABLED_SERVICES#,}
}

function disable_service {
    local service list=",$ENABLED_SERVICES,"
    for service in "$@"; do
        list=${list//,$service,/,}
    done
    list=${list#,}
    ENABLED_SERVICES=${list%,}
}

function is_service_enabled {
    local service
    for service in "$@"; do
        if [[ ",$ENABLED_SERVICES," == *",$service,"* ]]; then
            return 0
        fi
        # devstack's special cases: the group "nova", and the fake
        # computes n-cpu-1, n-cpu-2, ... which n-cpu enables.
        if [[ "$service" == "nova" && ",$ENABLED_SERVICES," == *",n-"* ]]; then
            return 0
        fi
        if [[ "$service" == n-cpu-* && ",$ENABLED_SERVICES," == *",n-cpu,"* ]]; then
            return 0
        fi
    done
    return 1
}

# -- python (devstack inc/python) ------------------------------------------

function setup_develop {
    local project_dir=$1
    echo_summary "pip install -e $project_dir"
    # Under the release's requirements, as devstack installs under the
    # upper constraints of its branch.
    "$VENV/bin/python" -m pip install --quiet --no-input -e "$project_dir" \
        ${LITE_CONSTRAINTS:+-c "$LITE_CONSTRAINTS"} \
        >> "$LOGDIR/pip.log" 2>&1 || {
        tail -n 30 "$LOGDIR/pip.log" >&2
        die $LINENO "pip install -e $project_dir failed"
    }
}

function pip_uninstall {
    "$VENV/bin/python" -m pip uninstall --quiet --yes "$@" \
        >> "$LOGDIR/pip.log" 2>&1
}

# -- keystone catalog (devstack functions-common) --------------------------

# get_or_create_service name type description
function get_or_create_service {
    "$VENV/bin/python" "$LITE_DIR/lite.py" catalog-service "$@" \
        || die $LINENO "get_or_create_service $* failed"
}

# get_or_create_endpoint service region public_url [admin_url [internal_url]]
function get_or_create_endpoint {
    "$VENV/bin/python" "$LITE_DIR/lite.py" catalog-endpoint "$@" \
        || die $LINENO "get_or_create_endpoint $* failed"
}

# -- uWSGI (devstack lib/apache) -------------------------------------------

# The address each uWSGI application of this run listens on, by name.
declare -gA LITE_UWSGI_ADDRESSES

# write_uwsgi_config conf wsgi url http name
#
# devstack serves the application on a uWSGI socket and has Apache proxy
# the URL path to it; with an http address, uWSGI serves HTTP there
# itself. devstack-lite has no Apache: without an http address the file
# makes uWSGI serve HTTP on $SERVICE_HOST, with the application mounted at
# the URL path (SCRIPT_NAME), which is what a client sees behind devstack's
# Apache. Without a path-routing proxy, one such application per address.
# The "uwsgi" on devstack-lite's PATH (uwsgi.py) serves the file.
function write_uwsgi_config {
    local conf=$1 wsgi=$2 url=$3 http=$4 name=$5
    local address=${http:-$SERVICE_HOST} other
    if [[ ! "$wsgi" =~ ^[A-Za-z0-9_.]+:[A-Za-z0-9_]+$ ]]; then
        die $LINENO "write_uwsgi_config: devstack-lite serves a WSGI" \
            "module path (package.module:application), not '$wsgi'"
    fi
    for other in "${!LITE_UWSGI_ADDRESSES[@]}"; do
        if [[ "$other" != "$name" &&
              "${LITE_UWSGI_ADDRESSES[$other]}" == "$address" ]]; then
            die $LINENO "write_uwsgi_config: $name and $other would both" \
                "listen on $address (devstack-lite has no Apache to share" \
                "it by URL path)"
        fi
    done
    LITE_UWSGI_ADDRESSES[$name]=$address
    rm -f "$conf"
    iniset "$conf" uwsgi http-socket "$address"
    if [[ -n "$http" || -z "$url" || "$url" == / ]]; then
        iniset "$conf" uwsgi module "$wsgi"
    else
        iniset "$conf" uwsgi mount "$url=$wsgi"
        iniset "$conf" uwsgi manage-script-name true
    fi
    iniset "$conf" uwsgi processes "${API_WORKERS:-1}"
    iniset "$conf" uwsgi threads 4
    iniset "$conf" uwsgi enable-threads true
}

# remove_uwsgi_config conf name
function remove_uwsgi_config {
    rm -f "$1"
    if [[ -n "$2" ]]; then
        unset "LITE_UWSGI_ADDRESSES[$2]"
    fi
}

# wait_for_service timeout url: until the URL answers HTTP (status 1 if not
# within the timeout).
function wait_for_service {
    "$VENV/bin/python" "$LITE_DIR/lite.py" wait-http "$2" --timeout "$1" \
        > /dev/null
}

# -- processes (devstack functions-common run_process/stop_process) ---------

# A process's start time (clock ticks since boot), which together with its
# pid identifies it even after the pid is reused; empty if it is gone.
function lite_start_time {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat
    echo "${20}"
}

# Whether the pid file's process (pid and start time) still runs.
function lite_pidfile_alive {
    local pid started
    [[ -s "$1" ]] || return 1
    read -r pid started < "$1" || return 1
    [[ -n "$pid" && -n "$started" &&
       "$(lite_start_time "$pid")" == "$started" ]]
}

# run_process service "command" [group] [user] [env_vars]
function run_process {
    local service=$1 command=$2 env_vars=${5:-}
    is_service_enabled "$service" || return 0
    if [[ -s "$PIDDIR/$service.pid" ]]; then
        stop_process "$service"
    fi
    echo_summary "starting $service: $command"
    printf '\n==== %s starting: %s\n' "$(date '+%F %T')" "$command" \
        >> "$LOGDIR/$service.log"
    # The service must not inherit run.sh's lock (fd 9), or a service left
    # running would block the next run's clean-up of it.
    # shellcheck disable=SC2086
    setsid env $env_vars bash -c "exec $command" \
        >> "$LOGDIR/$service.log" 2>&1 < /dev/null 9>&- &
    echo "$! $(lite_start_time $!)" > "$PIDDIR/$service.pid"
    # Out of the shell's job table: a service that a fault round kills on
    # purpose would otherwise end in bash's own "line N: PID Killed setsid
    # env ..." in the log, which reads like a crash (the round prints its
    # own line). Nothing waits for a service: its pid file tracks it.
    disown $!
}

# The process group of a service started by run_process is its pid.
function stop_process {
    local service=$1 pid waited
    [[ -s "$PIDDIR/$service.pid" ]] || return 0
    read -r pid _ < "$PIDDIR/$service.pid"
    rm -f "$PIDDIR/$service.pid"
    kill -TERM -- "-$pid" 2>/dev/null || return 0
    for waited in $(seq 1 50); do
        kill -0 -- "-$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    echo_summary "$service (pid $pid) did not stop in 10 s; killing it"
    kill -KILL -- "-$pid" 2>/dev/null || true
}

function is_process_running {
    lite_pidfile_alive "$PIDDIR/$1.pid"
}
