# devstack-lite: the opt-in Watcher stage (NSE_LITE_WATCHER=1, tox -e
# e2e-watcher). Not part of CI.
#
# Sourced by run.sh once its cloud is up and tempest has passed; uses
# run.sh's variables (VENV, LITE_DIR, ETC, LOGDIR, DB_PREFIX, PORT_BASE,
# TRANSPORT_URL, NOVA_CONF, KEYSTONE_URL, PASSWORD, ...). watcher_stage:
#
# * installs python-watcher (the package's [watcher] extra) in the
#   virtualenv when it is missing;
# * the database ${DB_PREFIX}_watcher (run.sh creates and drops it with its
#   own, see its DATABASES), the keystone user "watcher" (admin and service
#   in the service project) and the infra-optim service and endpoints;
# * watcher.conf: database, run.sh's RabbitMQ vhost, keystone_authtoken,
#   [watcher_clients_auth], the nova and placement clients, the package's
#   workflow engine and planner, and [watcher_strategies.
#   nova_sched_ext_defrag] pointing at this cloud's nova.conf and the
#   virtualenv's nova-sched-ext-defrag;
# * watcher-db-manage upgrade, watcher-sync, then watcher-api (gunicorn, on
#   port PORT_BASE + 8), watcher-decision-engine and watcher-applier, started
#   with run_process so that run.sh's teardown stops them;
# * watcher_e2e.py run: the scenario (see its docstring), which prints
#   "watcher-e2e: N passed, N failed".

WATCHER_PORT=$((PORT_BASE + 8))
WATCHER_URL=http://127.0.0.1:$WATCHER_PORT
WATCHER_CONF_DIR=$ETC/watcher
WATCHER_CONF=$WATCHER_CONF_DIR/watcher.conf
WATCHER_DATABASE=${DB_PREFIX}_watcher
# How often the decision engine rebuilds its model of the cloud from Nova
# (Watcher's default is an hour; nova here sends no versioned
# notifications that would update it in between).
WATCHER_MODEL_PERIOD=${NSE_LITE_WATCHER_MODEL_PERIOD:-10}

function watcher_install {
    if [[ -x "$VENV/bin/watcher-decision-engine" ]]; then
        echo "python-watcher is installed:" \
            "$("$VENV/bin/python" -m pip list 2>/dev/null \
                | awk '$1 == "python-watcher" { print $2 }')"
        return 0
    fi
    echo_summary "pip install -e $REPO[watcher]"
    "$VENV/bin/python" -m pip install --no-input -e "$REPO[watcher]" \
        >> "$LOGDIR/pip-watcher.log" 2>&1 || {
        tail -n 30 "$LOGDIR/pip-watcher.log"
        die $LINENO "pip install of the [watcher] extra failed; see" \
            "$LOGDIR/pip-watcher.log"
    }
}

function watcher_write_conf {
    mkdir -p "$WATCHER_CONF_DIR" "$DATA_DIR/watcher/lock"
    rm -f "$WATCHER_CONF"
    iniset "$WATCHER_CONF" DEFAULT debug True
    iniset "$WATCHER_CONF" DEFAULT transport_url "$TRANSPORT_URL"
    iniset "$WATCHER_CONF" DEFAULT host nse-lite-watcher
    # Teardown stops every service at once and kills what is left after
    # 15 s; the decision engine's model refresh, retrying a keystone that is
    # gone, would hold it for the default 60 s.
    iniset "$WATCHER_CONF" DEFAULT graceful_shutdown_timeout 5
    iniset "$WATCHER_CONF" database connection "$(db_url "$WATCHER_DATABASE")"
    iniset "$WATCHER_CONF" api host 127.0.0.1
    iniset "$WATCHER_CONF" api port "$WATCHER_PORT"
    iniset "$WATCHER_CONF" oslo_concurrency lock_path "$DATA_DIR/watcher/lock"
    iniset "$WATCHER_CONF" oslo_messaging_notifications driver noop
    configure_auth_token "$WATCHER_CONF" watcher
    configure_service_client "$WATCHER_CONF" watcher_clients_auth watcher
    # Watcher 17 reaches Nova and placement with openstacksdk, from these
    # groups (a request context's token is checked against [nova]
    # auth_url).
    configure_service_client "$WATCHER_CONF" nova watcher
    configure_service_client "$WATCHER_CONF" placement watcher
    iniset "$WATCHER_CONF" watcher_cluster_data_model_collectors.compute \
        period "$WATCHER_MODEL_PERIOD"
    # The package's plugins (doc/source/defrag.rst, "Through Watcher").
    iniset "$WATCHER_CONF" watcher_applier workflow_engine \
        nova_sched_ext_taskflow
    iniset "$WATCHER_CONF" watcher_planner planner nova_sched_ext_sequential
    local section=watcher_strategies.nova_sched_ext_defrag
    iniset "$WATCHER_CONF" "$section" planner_command \
        "$VENV/bin/nova-sched-ext-defrag"
    iniset "$WATCHER_CONF" "$section" nova_config_files "$NOVA_CONF"
    iniset "$WATCHER_CONF" "$section" planner_timeout 300
}

function watcher_stage {
    step "Watcher: python-watcher, database, keystone, watcher.conf"
    require_ports_free "Watcher's API needs port PORT_BASE + 8" "$WATCHER_PORT"
    watcher_install
    "$VENV/bin/python" "$LITE_DIR/watcher_e2e.py" keystone-setup
    get_or_create_service watcher infra-optim "Watcher Infrastructure Optimization" \
        > /dev/null
    get_or_create_endpoint infra-optim "$REGION_NAME" "$WATCHER_URL" \
        "$WATCHER_URL" "$WATCHER_URL" > /dev/null
    watcher_write_conf
    {
        "$VENV/bin/watcher-db-manage" --config-file "$WATCHER_CONF" upgrade
    } >> "$LOGDIR/watcher-db-manage.log" 2>&1 \
        || die $LINENO "watcher-db-manage upgrade failed; see" \
            "$LOGDIR/watcher-db-manage.log"
    "$VENV/bin/watcher-sync" --config-file "$WATCHER_CONF" \
        >> "$LOGDIR/watcher-sync.log" 2>&1 \
        || die $LINENO "watcher-sync failed; see $LOGDIR/watcher-sync.log"
    grep -o 'numa_defragmentation\|nova_sched_ext_defrag' \
        "$LOGDIR/watcher-sync.log" | sort -u | paste -sd ' ' \
        | sed 's/^/watcher-sync registered: /' || true

    step "Watcher: watcher-api, watcher-decision-engine, watcher-applier"
    ENABLED_SERVICES+=",watcher-api,watcher-decision-engine,watcher-applier"
    run_process watcher-api "$(gunicorn_serve "$WATCHER_PORT" \
        "watcher_e2e:api_application(\"$WATCHER_CONF\")")"
    run_process watcher-decision-engine \
        "$VENV/bin/watcher-decision-engine --config-file $WATCHER_CONF"
    run_process watcher-applier \
        "$VENV/bin/watcher-applier --config-file $WATCHER_CONF"
    wait_http watcher-api "$WATCHER_URL/" 120

    step "Watcher: fragment, audit, action plan, applier (watcher_e2e.py)"
    local left reference
    left=$(remaining)
    reference=$(iniget "$NOVA_CONF" nova_sched_ext numa_slot_reference_flavors)
    reference=${reference%%,*}
    timeout --kill-after 10 "$left" "$VENV/bin/python" \
        "$LITE_DIR/watcher_e2e.py" run \
        --hosts "$NUMBER_FAKE_NOVA_COMPUTE" --host-prefix "$HOSTNAME" \
        --layouts "$NOVA_SCHED_EXT_FAKE_NUMA_TOPOLOGIES" \
        --reference-flavor "${reference:-nse-slot-reference}" \
        --model-period "$WATCHER_MODEL_PERIOD" --nova-conf "$NOVA_CONF" 2>&1 \
        | tee "$LOGDIR/watcher-e2e.log"
}
