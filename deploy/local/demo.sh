#!/usr/bin/env bash
# The demo on real processes of one machine:
#   1. cluster.sh start: S3 (moto), a TLS Dask scheduler and workers (the coordinator's own cluster);
#   2. ../submit.sh: the KDD file (or the package's synthetic KDD table) uploaded to S3 and the KDD
#      workflow run on the cluster, its store in S3, its accuracy table printed;
#   3. sites.sh start: the federation: a CA, each site's keys made in its own directory
#      (`ensemble-dask site init`, signed with `ensemble-dask certs sign`), each site's share of the
#      KDD run's labels (`ensemble-dask split-sites`), its site.yaml, and one agent process per site
#      (`ensemble-dask site serve site.yaml`) on 127.0.0.1;
#   4. the coordinator: `ensemble-dask federated` with the sites' names and addresses only, its store
#      in S3: federated BCE with secure aggregation over mutual TLS, and the federation's accuracy;
#   5. everything stopped (also on failure or Ctrl-C); the exit status is non-zero if a step failed.
#
#   deploy/local/demo.sh [KDD_FILE] [-- ARGS FOR ensemble-dask run]
#
#   KDD_FILE    e.g. kddcup.data_10_percent.gz (or $KDD_DATA); without one: synthetic:kdd99?n=$N
#   RUN_DIR     pid files, logs, keys, the sites' directories    default: a new temporary directory
#               (removed after a successful run)
#   SITES       the federation's sites (empty: no federated run)  default: site-a,site-b,site-c
#   FEDERATED_ARGS  more arguments of `ensemble-dask federated`, e.g. "--set federated.tol=0.001"
#   and every setting of cluster.sh (N_WORKERS, ...), sites.sh (MIN_SITES, PORT_BASE, ...) and of
#   ../submit.sh (N, N_CLUSTERINGS, ...).
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
export FED_DIR="${FED_DIR:-$RUN_DIR/federation}"

cleanup() {
    local rc=$?
    echo
    echo "=== stopping the site agents and the cluster"
    "$HERE/sites.sh" stop || rc=1
    "$HERE/cluster.sh" stop || rc=1
    if ((rc)); then
        echo "demo FAILED (exit $rc); logs in $RUN_DIR/logs and $FED_DIR/logs" >&2
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
S3_BASE="${S3_BASE:-s3://ensemble-dask}"
export S3_BASE
MIN_WORKERS="${N_WORKERS:-2}" "$HERE/../submit.sh" "$@"

if [[ -n "$SITES" ]]; then
    echo
    echo "=== [${SECONDS} s] the federation: keys, data and one agent per site ($FED_DIR)"
    STORE="$S3_BASE/runs/kdd99-pcc.zarr" "$HERE/sites.sh" start
    echo
    echo "=== [${SECONDS} s] the coordinator: federated BCE across the sites $SITES"
    # shellcheck disable=SC2086
    ensemble-dask federated "$FED_DIR/coordinator/federated.yaml" --no-progress \
        --store "$S3_BASE/runs/federated-bce.zarr" --storage-options "$STORAGE_OPTIONS" \
        --set federated.n_clusters=3 ${FEDERATED_ARGS:-}
fi
echo
echo "=== [${SECONDS} s] done"
