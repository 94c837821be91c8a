#!/usr/bin/env bash
# The demo on real processes of one machine, over TLS, with data and run stores in S3:
#   1. cluster.sh start: S3 (moto), a TLS scheduler, plain workers and one worker group per site
#      (resource NAME=1, the site's certificate);
#   2. ../submit.sh: the KDD file (or the package's synthetic KDD table) uploaded to S3, the KDD
#      workflow and its accuracy table, federated BCE across the sites and the federation's accuracy;
#   3. everything stopped (also on failure or Ctrl-C); the exit status is non-zero if a step failed.
#
#   deploy/local/demo.sh [KDD_FILE] [-- ARGS FOR ensemble-dask run]
#
#   KDD_FILE    e.g. kddcup.data_10_percent.gz (or $KDD_DATA); without one: synthetic:kdd99?n=$N
#   RUN_DIR     pid files, logs, certificates          default: a new temporary directory (removed
#               after a successful run)
#   and every setting of cluster.sh (TLS, SITES, N_WORKERS, ...) and of ../submit.sh (N,
#   N_CLUSTERINGS, FEDERATED_ARGS, ...).
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ $# -gt 0 && "$1" != "--" ]]; then
    export KDD_DATA="$1"
    shift
fi
[[ "${1:-}" == "--" ]] && shift
if [[ -n "${KDD_DATA:-}" ]]; then
    [[ -f "$KDD_DATA" ]] || { echo "demo.sh: no such file: $KDD_DATA" >&2; exit 2; }
    KDD_DATA="$(cd "$(dirname "$KDD_DATA")" && pwd)/$(basename "$KDD_DATA")"
fi

export SITES="${SITES-site-a,site-b,site-c}"
TEMP_RUN_DIR=0
if [[ -z "${RUN_DIR:-}" ]]; then
    RUN_DIR="$(mktemp -d -t ensemble-dask-demo.XXXXXX)"
    TEMP_RUN_DIR=1
fi
export RUN_DIR
mkdir -p "$RUN_DIR"

cleanup() {
    local rc=$?
    echo
    echo "=== stopping the cluster"
    "$HERE/cluster.sh" stop || rc=1
    if ((rc)); then
        echo "demo FAILED (exit $rc); logs in $RUN_DIR/logs" >&2
    else
        ((TEMP_RUN_DIR)) && rm -rf "$RUN_DIR"
        echo "demo finished"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "=== starting S3, the scheduler and the workers (run directory $RUN_DIR)"
"$HERE/cluster.sh" start
# shellcheck disable=SC1091
source "$RUN_DIR/env.sh"
N_WORKERS="${N_WORKERS:-2}"
IFS=, read -r -a names <<<"$SITES"
MIN_WORKERS=$((N_WORKERS + ${#names[@]} * ${WORKERS_PER_SITE:-1})) "$HERE/../submit.sh" "$@"
