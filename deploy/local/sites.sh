#!/usr/bin/env bash
# The federation's site agents as processes on one machine, each the way a real site runs its own:
# its own directory with its own keys (made by `ensemble-dask site init`, signed by the CA), its own
# site.yaml (its policy), its own data, and `ensemble-dask site serve site.yaml` bound to 127.0.0.1.
#
#   deploy/local/sites.sh start     make what is missing (../make-federation.sh), write each site's
#                                   site.yaml, start one agent per site, write the coordinator's workflow
#   deploy/local/sites.sh stop      stop the agents this federation directory started (pid files)
#   deploy/local/sites.sh status    which agents are alive
#
# Then the coordinator, from its own directory (it holds only its own keys and the sites' addresses):
#   ensemble-dask federated $FED_DIR/coordinator/federated.yaml
#
# On one machine this is a simulation: every party's keys and data are made in FED_DIR by one person
# (make-federation.sh says so); the processes and the files they are given are kept apart as real
# sites would keep them.
#
# Settings (environment variables):
#   RUN_DIR      default: ./.deploy-local
#   FED_DIR      the federation: ca/, coordinator/, sites/NAME/ (see ../make-federation.sh), pid
#                files and logs                                        default: $RUN_DIR/federation
#   SITES        comma-separated site names                            default: site-a,site-b,site-c
#   HOST         the address every agent binds to                      default: 127.0.0.1
#   PORT_BASE    site i (from 0) listens on PORT_BASE+i; 0: each agent takes a free port and writes
#                its address to its ready file                         default: 0
#   MIN_SITES    each site's min_sites (least sites in any sum)         default: every site
#   WORKFLOW     the coordinator's base workflow           default: ../../workflows/federated-bce.yaml
#   STORE, STORAGE_OPTIONS, N, N_CLUSTERINGS   the data cut into the sites' shares, when they have
#                none yet (see ../make-federation.sh)
#   TIMEOUT      seconds to wait for each agent                        default: 60
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_DIR="${RUN_DIR:-$PWD/.deploy-local}"
FED_DIR="${FED_DIR:-$RUN_DIR/federation}"
SITES="${SITES-site-a,site-b,site-c}"
HOST="${HOST:-127.0.0.1}"
PORT_BASE="${PORT_BASE:-0}"
MIN_SITES="${MIN_SITES:-}"
WORKFLOW="${WORKFLOW:-$HERE/../../workflows/federated-bce.yaml}"
TIMEOUT="${TIMEOUT:-60}"
PYTHON="${PYTHON:-python}"

mkdir -p "$FED_DIR"
FED_DIR="$(cd "$FED_DIR" && pwd)"
PIDS="$FED_DIR/pids"
LOGS="$FED_DIR/logs"
STARTED="$FED_DIR/started" # kept after stop: what ran here, for checks
IFS=, read -r -a sites <<<"$SITES"

log() { echo "[sites] $*" >&2; }
# shellcheck source=deploy/local/_procs.sh
source "$HERE/_procs.sh"

cmd_stop() {
    [[ -d "$PIDS" ]] || return 0
    stop_group "$PIDS"/agent-*.pid
    log "stopped"
}

# what site $1 writes for itself: its policy, its keys, its data, where its outputs go
write_site_config() {
    local site="$1" port="$2" dir="$FED_DIR/sites/$1" peer
    {
        echo "# site $site: its own policy (ensemble_dask.federated.site.agent); paths relative to this file"
        echo "name: $site"
        echo "listen: $HOST:$port"
        echo "coordinator: coordinator       # the only certificate name allowed to call"
        echo "tls: {ca: keys/ca.pem, cert: keys/$site.pem, key: keys/$site-key.pem}"
        echo "mask_key: keys/$site-mask.key"
        echo "federation:                     # every member, with the public key this site pins"
        for peer in "${sites[@]}"; do echo "  $peer: keys/$peer-mask.pub"; done
        [[ -n "$MIN_SITES" ]] && echo "min_sites: $MIN_SITES"
        echo "allow_plain: false"
        echo "data: {labels: data/labels.zarr, reference: data/reference.zarr}"
        echo "output: memberships.zarr"
        echo "checkpoint: state/gamma"
        echo "state: state                    # audit.log and the sessions joined"
        echo "ready_file: address"
    } >"$dir/site.yaml"
}

cmd_start() {
    ((${#sites[@]} >= 2)) || { log "SITES must name at least two sites"; return 2; }
    mkdir -p "$PIDS" "$LOGS"
    check_not_running
    # from here on, a failure stops whatever did start
    trap 'trap - ERR; log "start failed; stopping what started (logs in $LOGS)"; cmd_stop' ERR

    local site i=0 port
    local -a missing=()
    for site in "${sites[@]}"; do
        [[ -e "$FED_DIR/sites/$site/keys/$site.pem" && -e "$FED_DIR/sites/$site/data/labels.zarr" ]] ||
            missing+=("$site")
    done
    if ((${#missing[@]})) || [[ ! -e "$FED_DIR/coordinator/keys/coordinator.pem" ]]; then
        SITES="$SITES" SITE_HOST="{name},$HOST" COORDINATOR_HOST="coordinator,$HOST" \
            "$HERE/../make-federation.sh" "$FED_DIR"
    fi

    for site in "${sites[@]}"; do
        port=0
        ((PORT_BASE > 0)) && port=$((PORT_BASE + i))
        i=$((i + 1))
        write_site_config "$site" "$port"
        rm -f "$FED_DIR/sites/$site/address"
        WORKDIR="$FED_DIR/sites/$site"
        launch "agent-$site" ensemble-dask site serve site.yaml
    done

    # wait for each agent's address (an agent that exits, e.g. refusing its config, fails the start)
    local -a addresses=()
    local pid deadline
    for site in "${sites[@]}"; do
        pid="$(cat "$PIDS/agent-$site.pid")"
        deadline=$((SECONDS + TIMEOUT))
        until [[ -s "$FED_DIR/sites/$site/address" ]]; do
            if ! alive "$pid"; then
                log "the agent of $site exited: $(tail -3 "$LOGS/agent-$site.log")"
                false
            fi
            ((SECONDS < deadline)) || { log "the agent of $site did not start in $TIMEOUT s"; false; }
            sleep 0.2
        done
        addresses+=("$site=$(cat "$FED_DIR/sites/$site/address")")
    done

    # the coordinator's workflow: each site's name and address, nothing else of theirs
    "$PYTHON" "$HERE/../_helpers.py" federated-workflow "$WORKFLOW" "$FED_DIR/coordinator/federated.yaml" \
        "$FED_DIR/coordinator/keys" "$FED_DIR/coordinator/federated-bce.zarr" "${addresses[@]}"
    trap - ERR
    log "agents: ${addresses[*]}"
    log "the coordinator's workflow: $FED_DIR/coordinator/federated.yaml"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) status_of ;;
*)
    sed -n '6,9p' "$0" >&2
    exit 2
    ;;
esac
