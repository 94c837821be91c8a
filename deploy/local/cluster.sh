#!/usr/bin/env bash
# A Dask cluster, an S3 server and the federated sites as plain processes on one machine.
#
#   deploy/local/cluster.sh start     start S3 (moto), the scheduler, the workers; write $RUN_DIR/env.sh
#   deploy/local/cluster.sh stop      stop everything this run directory started (pid files)
#   deploy/local/cluster.sh status    which of its processes are alive
#
# Settings (environment variables):
#   RUN_DIR        pid files, logs, certificates, env.sh       default: ./.deploy-local
#   HOST           address every process binds to              default: 127.0.0.1
#   TLS            1: tls:// with one certificate per process  default: 1
#   CERT_DIR       CA + certificates and the sites' masking keys (made with `ensemble-dask certs` when
#                  CERT_DIR/ca.pem is missing and TLS=1 or there are sites)
#                                                              default: $RUN_DIR/certs
#   SITES          comma-separated site names; one worker group per site, offering the Dask resource
#                  NAME=1 and holding the site's certificate   default: site-a,site-b,site-c
#   N_WORKERS      plain workers (no resource, the coordinator's certificate)   default: 2
#   WORKERS_PER_SITE                                           default: 1
#   NTHREADS       threads per worker                          default: 1
#   MEMORY_LIMIT   per worker, as `dask worker --memory-limit` default: auto
#   SCHEDULER_PORT default: 0 (a free port; the address is in $RUN_DIR/scheduler.json and env.sh)
#   S3             1: start moto's S3 server                   default: 1
#   S3_PORT        default: a free port
#   BUCKETS        buckets to create                           default: ensemble-dask
#   TIMEOUT        seconds to wait for each process            default: 60
#
# After `start`, `source $RUN_DIR/env.sh` gives: SCHEDULER (the address for --scheduler), the
# DASK_DISTRIBUTED__COMM__TLS__* variables a client needs to reach a TLS scheduler, the AWS_*
# variables of the S3 server, STORAGE_OPTIONS (the same as JSON for --storage-options) and CERT_DIR.
# Site workers load their masking key NAME-mask.key (when CERT_DIR has one) for secure aggregation.
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_DIR="${RUN_DIR:-$PWD/.deploy-local}"
HOST="${HOST:-127.0.0.1}"
TLS="${TLS:-1}"
CERT_DIR="${CERT_DIR:-$RUN_DIR/certs}"
SITES="${SITES-site-a,site-b,site-c}"
N_WORKERS="${N_WORKERS:-2}"
WORKERS_PER_SITE="${WORKERS_PER_SITE:-1}"
NTHREADS="${NTHREADS:-1}"
MEMORY_LIMIT="${MEMORY_LIMIT:-auto}"
SCHEDULER_PORT="${SCHEDULER_PORT:-0}"
S3="${S3:-1}"
BUCKETS="${BUCKETS:-ensemble-dask}"
TIMEOUT="${TIMEOUT:-60}"
PYTHON="${PYTHON:-python}"
S3_KEY="${S3_KEY:-testing}"
S3_SECRET="${S3_SECRET:-testing}"

mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
PIDS="$RUN_DIR/pids"
LOGS="$RUN_DIR/logs"

log() { echo "[cluster] $*" >&2; }

# Start "$@" in a session of its own (pid = process group id), so that stop ends it with every
# child it spawned (a worker's nanny and its worker process), and record the pid.
launch() {
    local name="$1"
    shift
    # in RUN_DIR/work: what a process writes to relative paths (e.g. a site's checkpoint) stays there
    (cd "$RUN_DIR/work" && exec setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null) &
    echo $! >"$PIDS/$name.pid"
    echo "$name $!" >>"$RUN_DIR/started" # kept after stop: what ran here, for checks
}

export_line() { printf 'export %s=%q\n' "$1" "$2"; }

# the process group, or the process itself: right after launch its setsid may not have run yet
alive() { kill -0 -- "-$1" 2>/dev/null || kill -0 "$1" 2>/dev/null; }

# Send TERM to the process groups in the pid files given, wait up to 20 s for them all, KILL what is left.
stop_group() {
    local f pid i left
    local -a pids=()
    for f in "$@"; do
        [[ -e "$f" ]] || continue
        pid="$(cat "$f")"
        alive "$pid" && kill -TERM -- "-$pid" 2>/dev/null && pids+=("$pid")
    done
    for ((i = 0; i < 100; i++)); do
        left=0
        for pid in "${pids[@]}"; do alive "$pid" && left=1; done
        ((left)) || break
        sleep 0.2
    done
    for pid in "${pids[@]}"; do
        if alive "$pid"; then
            log "process group $pid did not stop in 20 s: KILL"
            kill -KILL -- "-$pid" 2>/dev/null || true
            for ((i = 0; i < 25; i++)); do alive "$pid" || break; sleep 0.2; done
        fi
    done
    for f in "$@"; do rm -f "$f"; done
}

cmd_stop() {
    [[ -d "$PIDS" ]] || return 0
    # workers first (together), then the scheduler, then S3: the reverse order of start
    stop_group "$PIDS"/worker-*.pid
    stop_group "$PIDS"/scheduler.pid
    stop_group "$PIDS"/s3.pid
    rm -f "$RUN_DIR/scheduler.json"
    log "stopped"
}

cmd_status() {
    local f pid rc=0
    for f in "$PIDS"/*.pid; do
        [[ -e "$f" ]] || { log "nothing started in $RUN_DIR"; return 1; }
        pid="$(cat "$f")"
        if alive "$pid"; then echo "$(basename "$f" .pid) $pid running"; else echo "$(basename "$f" .pid) $pid dead"; rc=1; fi
    done
    return "$rc"
}

# the TLS options of a process holding certificate $1, in the array EXTRA
tls_args() {
    EXTRA=()
    if [[ "$TLS" == 1 ]]; then
        EXTRA=(--tls-ca-file "$CERT_DIR/ca.pem" --tls-cert "$CERT_DIR/$1.pem" --tls-key "$CERT_DIR/$1-key.pem")
    fi
}

# secure aggregation: the site's X25519 masking key and the pinned public keys of all sites, loaded
# by the site's workers themselves (ensemble_dask.federated.site); appended to EXTRA
site_args() {
    if [[ -e "$CERT_DIR/$1-mask.key" ]]; then
        EXTRA+=(--preload ensemble_dask.federated.site --mask-key "$CERT_DIR/$1-mask.key"
            --pins "$RUN_DIR/pins" --site-name "$1")
    fi
}

cmd_start() {
    local f
    for f in "$PIDS"/*.pid; do
        [[ -e "$f" ]] || continue
        if alive "$(cat "$f")"; then
            log "$RUN_DIR already has running processes (cluster.sh stop first)"
            return 1
        fi
        rm -f "$f" # left by a run that died
    done
    mkdir -p "$PIDS" "$LOGS" "$RUN_DIR/work" "$CERT_DIR"
    CERT_DIR="$(cd "$CERT_DIR" && pwd)"
    rm -f "$RUN_DIR/scheduler.json" "$RUN_DIR/env.sh"
    # from here on, a failure stops whatever did start
    trap 'trap - ERR; log "start failed; stopping what started (logs in $LOGS)"; cmd_stop' ERR

    local -a site_list=()
    [[ -n "$SITES" ]] && IFS=, read -r -a site_list <<<"$SITES"

    # certificates for TLS, and the sites' masking keys for secure aggregation (also over plain TCP)
    if [[ ( "$TLS" == 1 || ${#site_list[@]} -gt 0 ) && ! -e "$CERT_DIR/ca.pem" ]]; then
        local names="coordinator"
        [[ -n "$SITES" ]] && names="coordinator,$SITES"
        ensemble-dask certs --out "$CERT_DIR" --names "$names" >/dev/null
        log "certificates for $names in $CERT_DIR"
    fi

    # the pinned public masking keys of the sites (and only of the sites)
    rm -rf "$RUN_DIR/pins" && mkdir -p "$RUN_DIR/pins"
    local site
    for site in "${site_list[@]}"; do
        [[ -e "$CERT_DIR/$site-mask.pub" ]] && cp "$CERT_DIR/$site-mask.pub" "$RUN_DIR/pins/"
    done

    local env_file="$RUN_DIR/env.sh"
    : >"$env_file"
    if [[ "$S3" == 1 ]]; then
        S3_PORT="${S3_PORT:-$("$PYTHON" "$HERE/../_helpers.py" free-port)}"
        launch s3 moto_server -H "$HOST" -p "$S3_PORT"
        "$PYTHON" "$HERE/../_helpers.py" wait-port "$HOST" "$S3_PORT" "$TIMEOUT"
        export AWS_ACCESS_KEY_ID="$S3_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET"
        export AWS_ENDPOINT_URL="http://$HOST:$S3_PORT" AWS_DEFAULT_REGION=us-east-1
        # shellcheck disable=SC2086
        "$PYTHON" "$HERE/../_helpers.py" make-buckets $BUCKETS
        {
            echo "# S3 (moto) at $AWS_ENDPOINT_URL; s3fs reads these in every process"
            export_line AWS_ACCESS_KEY_ID "$S3_KEY"
            export_line AWS_SECRET_ACCESS_KEY "$S3_SECRET"
            export_line AWS_ENDPOINT_URL "$AWS_ENDPOINT_URL"
            export_line AWS_DEFAULT_REGION us-east-1
            export_line STORAGE_OPTIONS "$("$PYTHON" "$HERE/../_helpers.py" storage-options)"
        } >>"$env_file"
        log "S3 at $AWS_ENDPOINT_URL, buckets: $BUCKETS"
    fi

    local protocol=tcp
    [[ "$TLS" == 1 ]] && protocol=tls
    tls_args coordinator
    launch scheduler dask scheduler --host "$HOST" --port "$SCHEDULER_PORT" --protocol "$protocol" \
        --dashboard-address "$HOST:0" --scheduler-file "$RUN_DIR/scheduler.json" "${EXTRA[@]}"
    local i
    for ((i = 0; i < TIMEOUT * 5; i++)); do
        [[ -s "$RUN_DIR/scheduler.json" ]] && break
        alive "$(cat "$PIDS/scheduler.pid")" || { log "the scheduler exited: $(tail -5 "$LOGS/scheduler.log")"; false; }
        sleep 0.2
    done
    local address
    address="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["address"])' "$RUN_DIR/scheduler.json")"

    # DASK_DISTRIBUTED__WORKER__DAEMON=False: tasks may start processes of their own
    export DASK_DISTRIBUTED__WORKER__DAEMON=False
    # the address as the first argument: after it, options dask worker does not know go to the preload
    local -a common=("$address" --host "$HOST" --nthreads "$NTHREADS"
        --memory-limit "$MEMORY_LIMIT" --no-dashboard)
    local n_total=0
    for ((i = 0; i < N_WORKERS; i++)); do
        tls_args coordinator
        launch "worker-$i" dask worker "${common[@]}" --name "worker-$i" "${EXTRA[@]}"
        n_total=$((n_total + 1))
    done
    local j
    for site in "${site_list[@]}"; do
        for ((j = 0; j < WORKERS_PER_SITE; j++)); do
            tls_args "$site"
            site_args "$site"
            launch "worker-$site-$j" dask worker "${common[@]}" --name "$site-$j" --resources "$site=1" \
                "${EXTRA[@]}"
            n_total=$((n_total + 1))
        done
    done

    {
        echo '# the Dask scheduler: ensemble-dask run ... --scheduler "$SCHEDULER"'
        export_line SCHEDULER "$address"
        if [[ "$TLS" == 1 ]]; then
            echo "# a client's TLS credentials, read by distributed itself (no option of ensemble-dask needed)"
            export_line DASK_DISTRIBUTED__COMM__TLS__CA_FILE "$CERT_DIR/ca.pem"
            export_line DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT "$CERT_DIR/coordinator.pem"
            export_line DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY "$CERT_DIR/coordinator-key.pem"
        fi
        if [[ -e "$CERT_DIR/ca.pem" ]]; then
            echo "# the federated workflow's federated.certs (coordinator.pem, ca.pem, the sites' NAME-mask.pub)"
            export_line CERT_DIR "$CERT_DIR"
        fi
    } >>"$env_file"
    # wait for every worker and check the versions with the client's own credentials
    (
        # shellcheck disable=SC1090
        source "$env_file"
        "$PYTHON" "$HERE/../_helpers.py" wait-workers "$RUN_DIR/scheduler.json" "$n_total" "$TIMEOUT"
    )
    trap - ERR
    log "scheduler at $address; source $env_file"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
    sed -n '2,6p' "$0" >&2
    exit 2
    ;;
esac
