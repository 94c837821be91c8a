#!/usr/bin/env bash
# The demo on real processes of one machine, over TLS, with data and run stores in S3:
#   1. cluster.sh start: S3 (moto), a TLS scheduler, plain workers and one worker group per site;
#   2. the KDD Cup 99 file (or, without one, the package's synthetic KDD table) uploaded to s3://data;
#   3. workflows/kdd99-pcc.yaml on the cluster, store s3://runs/kdd99-pcc.zarr: its accuracy table;
#   4. its labels cut into three sites' shares (s3://sites/kdd99/NAME) and federated BCE across the
#      sites (each site's rows read and its memberships written by that site's workers only):
#      the federation's accuracy against the reference classes;
#   5. everything stopped (also on failure or Ctrl-C); the exit status is non-zero if a step failed.
#
#   deploy/local/demo.sh [KDD_FILE] [-- ARGS FOR ensemble-dask run]
#
#   KDD_FILE    kddcup.data_10_percent.gz (or $KDD_DATA); without one: synthetic:kdd99?n=$N
#   N           rows of the synthetic table                       default: 4000
#   N_CLUSTERINGS  base clusterings of the synthetic run          default: 20
#   FEDERATED_ARGS  more arguments of `ensemble-dask federated`, e.g. "--set federated.tol=0.001"
#   RUN_DIR     pid files, logs, certificates                     default: a new temporary directory
#   and every setting of cluster.sh (TLS, SITES, N_WORKERS, ...).
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORKFLOWS="${WORKFLOWS:-$REPO/workflows}"
PYTHON="${PYTHON:-python}"

DATA_FILE="${KDD_DATA:-}"
if [[ $# -gt 0 && "$1" != "--" ]]; then
    DATA_FILE="$1"
    shift
fi
[[ "${1:-}" == "--" ]] && shift
EXTRA=("$@")
if [[ -n "$DATA_FILE" && ! -f "$DATA_FILE" ]]; then
    echo "demo.sh: no such file: $DATA_FILE" >&2
    exit 2
fi

N="${N:-4000}"
N_CLUSTERINGS="${N_CLUSTERINGS:-20}"
export SITES="${SITES-site-a,site-b,site-c}"
TEMP_RUN_DIR=0
if [[ -z "${RUN_DIR:-}" ]]; then
    RUN_DIR="$(mktemp -d -t ensemble-dask-demo.XXXXXX)"
    TEMP_RUN_DIR=1
fi
export RUN_DIR
mkdir -p "$RUN_DIR"

step() { echo; echo "=== [${SECONDS} s] $*"; }

cleanup() {
    local rc=$?
    step "stopping the cluster"
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

step "starting S3, the scheduler and the workers (run directory $RUN_DIR)"
"$HERE/cluster.sh" start
# shellcheck disable=SC1091
source "$RUN_DIR/env.sh"

step "uploading the data to s3://data"
declare -a data_sets=()
if [[ -n "$DATA_FILE" ]]; then
    name="$(basename "$DATA_FILE")"
    "$PYTHON" "$HERE/_helpers.py" put "$DATA_FILE" "s3://data/$name"
else
    # the package's synthetic table of the KDD schema, as a file in the layout of the real one
    name="synthetic-kdd99-n$N.csv.gz"
    "$PYTHON" "$HERE/_helpers.py" synthetic-kdd "$N" "$RUN_DIR/$name"
    "$PYTHON" "$HERE/_helpers.py" put "$RUN_DIR/$name" "s3://data/$name"
    # a small table: keep all its rows, fewer clusterings, more sampled pairs per point
    data_sets=(--set data.subset=null --set "generate.n_clusterings=$N_CLUSTERINGS" --set coassoc.p=0.01)
fi
echo "s3://data/$name"

step "KDD workflow on $SCHEDULER (data s3://data/$name, store s3://runs/kdd99-pcc.zarr)"
ensemble-dask run "$WORKFLOWS/kdd99-pcc.yaml" --scheduler "$SCHEDULER" --no-progress \
    --data "s3://data/$name" --set "data.storage_options=$STORAGE_OPTIONS" \
    --store s3://runs/kdd99-pcc.zarr --storage-options "$STORAGE_OPTIONS" \
    "${data_sets[@]}" "${EXTRA[@]}"

if [[ -n "$SITES" ]]; then
    step "federated BCE across the sites $SITES"
    ensemble-dask split-sites --store s3://runs/kdd99-pcc.zarr --storage-options "$STORAGE_OPTIONS" \
        --out s3://sites/kdd99 --names "$SITES" >/dev/null
    sites=""
    IFS=, read -r -a names <<<"$SITES"
    for s in "${names[@]}"; do
        sites+="{name: $s, resource: $s, url: 's3://sites/kdd99/$s/labels.zarr',"
        sites+=" output: 's3://sites/kdd99/$s/memberships.zarr'},"
    done
    ensemble-dask federated "$WORKFLOWS/federated-bce.yaml" --scheduler "$SCHEDULER" \
        --store s3://runs/federated-bce.zarr --storage-options "$STORAGE_OPTIONS" \
        --set "federated.sites=[${sites%,}]" --set federated.n_clusters=3 \
        --set "site_storage_options=$STORAGE_OPTIONS" ${FEDERATED_ARGS:-}
    # the demo can see every site's output; a real coordinator cannot
    "$PYTHON" "$HERE/_helpers.py" federated-accuracy s3://runs/kdd99-pcc.zarr s3://sites/kdd99 "$SITES"
fi
