#!/usr/bin/env bash
# The coordinator's own Dask cluster and an S3 server as plain processes on one machine, for
# `ensemble-dask run` (the federation's sites are not part of it: see sites.sh).
#
#   deploy/local/cluster.sh start     start S3 (moto), the TLS scheduler, the workers; write $RUN_DIR/env.sh
#   deploy/local/cluster.sh stop      stop everything this run directory started (pid files)
#   deploy/local/cluster.sh status    which of its processes are alive
#
# Settings (environment variables):
#   RUN_DIR        pid files, logs, certificates, env.sh       default: ./.deploy-local
#   HOST           address every process binds to              default: 127.0.0.1
#   CERT_DIR       the cluster's CA and certificates (scheduler, workers and client all hold
#                  `coordinator`; made with `ensemble-dask certs` when CERT_DIR/ca.pem is missing)
#                                                              default: $RUN_DIR/certs
#   N_WORKERS      workers                                     default: 2
#   NTHREADS       threads per worker                          default: 1
#   MEMORY_LIMIT   per worker, as `dask worker --memory-limit` default: auto
#   SCHEDULER_PORT default: 0 (a free port; the address is in $RUN_DIR/scheduler.json and env.sh)
#   S3             1: start moto's S3 server                   default: 1
#   S3_PORT        default: a free port
#   BUCKETS        buckets to create                           default: ensemble-dask
#   TIMEOUT        seconds to wait for each process            default: 60
#
# After `start`, `source $RUN_DIR/env.sh` gives: SCHEDULER (the address for --scheduler), the
# DASK_DISTRIBUTED__COMM__TLS__* variables a client needs to reach the TLS scheduler, the AWS_*
# variables of the S3 server and STORAGE_OPTIONS (the same as JSON for --storage-options).
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_DIR="${RUN_DIR:-$PWD/.deploy-local}"
HOST="${HOST:-127.0.0.1}"
CERT_DIR="${CERT_DIR:-$RUN_DIR/certs}"
N_WORKERS="${N_WORKERS:-2}"
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
STARTED="$RUN_DIR/started" # kept after stop: what ran here, for checks
# what a process writes to relative paths stays in RUN_DIR/work
WORKDIR="$RUN_DIR/work"

log() { echo "[cluster] $*" >&2; }
# shellcheck source=deploy/local/_procs.sh
source "$HERE/_procs.sh"

cmd_stop() {
    [[ -d "$PIDS" ]] || return 0
    # workers first (together), then the scheduler, then S3: the reverse order of start
    stop_group "$PIDS"/worker-*.pid
    stop_group "$PIDS"/scheduler.pid
    stop_group "$PIDS"/s3.pid
    rm -f "$RUN_DIR/scheduler.json"
    log "stopped"
}

# the TLS options of a process holding the certificate `coordinator`, in the array EXTRA
tls_args() {
    EXTRA=(--tls-ca-file "$CERT_DIR/ca.pem" --tls-cert "$CERT_DIR/coordinator.pem"
        --tls-key "$CERT_DIR/coordinator-key.pem")
}

cmd_start() {
    mkdir -p "$PIDS" "$LOGS" "$WORKDIR" "$CERT_DIR"
    check_not_running
    CERT_DIR="$(cd "$CERT_DIR" && pwd)"
    rm -f "$RUN_DIR/scheduler.json" "$RUN_DIR/env.sh"
    # from here on, a failure stops whatever did start
    trap 'trap - ERR; log "start failed; stopping what started (logs in $LOGS)"; cmd_stop' ERR

    # the cluster's TLS: one CA and the certificate `coordinator` (the coordinator's own machines)
    if [[ ! -e "$CERT_DIR/ca.pem" ]]; then
        ensemble-dask certs --out "$CERT_DIR" --names coordinator >/dev/null
        log "the cluster's CA and certificate in $CERT_DIR"
    fi

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

    tls_args
    launch scheduler dask scheduler --host "$HOST" --port "$SCHEDULER_PORT" --protocol tls \
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
    for ((i = 0; i < N_WORKERS; i++)); do
        launch "worker-$i" dask worker "$address" --host "$HOST" --nthreads "$NTHREADS" \
            --memory-limit "$MEMORY_LIMIT" --no-dashboard --name "worker-$i" "${EXTRA[@]}"
    done

    {
        echo '# the Dask scheduler: ensemble-dask run ... --scheduler "$SCHEDULER"'
        export_line SCHEDULER "$address"
        echo "# a client's TLS credentials, read by distributed itself (no option of ensemble-dask needed)"
        export_line DASK_DISTRIBUTED__COMM__TLS__CA_FILE "$CERT_DIR/ca.pem"
        export_line DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT "$CERT_DIR/coordinator.pem"
        export_line DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY "$CERT_DIR/coordinator-key.pem"
    } >>"$env_file"
    # wait for every worker and check the versions with the client's own credentials
    (
        # shellcheck disable=SC1090
        source "$env_file"
        "$PYTHON" "$HERE/../_helpers.py" wait-workers "$RUN_DIR/scheduler.json" "$N_WORKERS" "$TIMEOUT"
    )
    trap - ERR
    log "scheduler at $address; source $env_file"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) status_of ;;
*)
    sed -n '5,7p' "$0" >&2
    exit 2
    ;;
esac
