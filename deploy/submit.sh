#!/usr/bin/env bash
# Submit the demo workflows to a running Dask cluster, with data and run stores in S3.
# Used by deploy/local/demo.sh, the Compose `submit` service and the Kubernetes Job alike.
#
#   1. the data into $S3_BASE/data: the file $KDD_DATA (e.g. kddcup.data_10_percent.gz) or, without
#      one, the package's synthetic KDD table (synthetic:kdd99?n=$N) written in the same layout;
#      or $DATA_URL as it is, when the data is in the bucket already;
#   2. workflows/kdd99-pcc.yaml on $SCHEDULER, store $S3_BASE/runs/kdd99-pcc.zarr: its accuracy table;
#   3. the run's labels cut into one share per site ($S3_BASE/sites/NAME) and federated BCE across
#      the sites $SITES over TLS with secure aggregation (each site's share read, its memberships
#      written, by its own workers); the federation's accuracy against the reference classes.
# Exits non-zero as soon as a step fails.
#
# Environment:
#   SCHEDULER        address of the scheduler (tcp://... or tls://...)                    required
#   DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT, ..._CLIENT__KEY   for a tls:// scheduler
#   CERT_DIR         ca.pem, coordinator.pem, coordinator-key.pem and the sites' NAME-mask.pub
#                    (federated.certs of the federated workflow)    required with a tls:// scheduler
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_DEFAULT_REGION   the S3 service
#   STORAGE_OPTIONS  fsspec options as JSON (default: made from the AWS_* variables)
#   S3_BASE          bucket (and prefix) for data, runs and sites   default: s3://ensemble-dask
#   KDD_DATA | DATA_URL | N (default 4000), N_CLUSTERINGS (default 20, synthetic data only)
#   SITES            comma-separated; empty: no federated run        default: site-a,site-b,site-c
#   SITE_STATE_DIR   a directory on each site's workers for its checkpoints (NAME/ below it;
#                    relative to the workers' working directory)       default: site-state
#   MIN_WORKERS      workers to wait for                              default: 1 + one per site
#   WORKFLOWS        folder of the workflow files                     default: ../workflows
#   FEDERATED_ARGS   more arguments of `ensemble-dask federated`, e.g. "--set federated.tol=0.001"
#   Arguments given to this script go to `ensemble-dask run`, e.g. --set generate.n_clusterings=30.
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORKFLOWS="${WORKFLOWS:-$HERE/../workflows}"
PYTHON="${PYTHON:-python}"
HELPERS="$HERE/_helpers.py"
: "${SCHEDULER:?set SCHEDULER to the address of the Dask scheduler}"
S3_BASE="${S3_BASE:-s3://ensemble-dask}"
S3_BASE="${S3_BASE%/}"
SITES="${SITES-site-a,site-b,site-c}"
N="${N:-4000}"
SITE_STATE_DIR="${SITE_STATE_DIR:-site-state}"
N_CLUSTERINGS="${N_CLUSTERINGS:-20}"
STORAGE_OPTIONS="${STORAGE_OPTIONS:-$("$PYTHON" "$HELPERS" storage-options)}"
declare -a site_names=()
[[ -n "$SITES" ]] && IFS=, read -r -a site_names <<<"$SITES"
MIN_WORKERS="${MIN_WORKERS:-$((1 + ${#site_names[@]}))}"

step() { echo; echo "=== [${SECONDS} s] $*"; }

step "cluster at $SCHEDULER"
"$PYTHON" "$HELPERS" wait-workers "$SCHEDULER" "$MIN_WORKERS" "${TIMEOUT:-120}"

bucket="${S3_BASE#s3://}"
"$PYTHON" "$HELPERS" make-buckets "${bucket%%/*}" # if missing

declare -a small=()
if [[ -n "${DATA_URL:-}" ]]; then
    data="$DATA_URL"
elif [[ -n "${KDD_DATA:-}" ]]; then
    step "uploading $KDD_DATA"
    data="$S3_BASE/data/$(basename "$KDD_DATA")"
    "$PYTHON" "$HELPERS" put "$KDD_DATA" "$data"
else
    step "uploading the synthetic KDD table (n=$N)"
    tmp="$(mktemp -d)"
    "$PYTHON" "$HELPERS" synthetic-kdd "$N" "$tmp/synthetic-kdd99.csv.gz"
    data="$S3_BASE/data/synthetic-kdd99-n$N.csv.gz"
    "$PYTHON" "$HELPERS" put "$tmp/synthetic-kdd99.csv.gz" "$data"
    rm -rf "$tmp"
    # a small table: all its rows, fewer clusterings, more sampled pairs per point
    small=(--set data.subset=null --set "generate.n_clusterings=$N_CLUSTERINGS" --set coassoc.p=0.01)
fi

store="$S3_BASE/runs/kdd99-pcc.zarr"
step "KDD workflow: data $data, store $store"
ensemble-dask run "$WORKFLOWS/kdd99-pcc.yaml" --scheduler "$SCHEDULER" --no-progress \
    --data "$data" --set "data.storage_options=$STORAGE_OPTIONS" \
    --store "$store" --storage-options "$STORAGE_OPTIONS" "${small[@]}" "$@"

if ((${#site_names[@]})); then
    step "federated BCE across the sites $SITES"
    tmp="$(mktemp -d)"
    ensemble-dask split-sites --store "$store" --storage-options "$STORAGE_OPTIONS" \
        --out "$S3_BASE/sites" --names "$SITES" >"$tmp/sites.yaml"
    "$PYTHON" "$HELPERS" federated-workflow "$WORKFLOWS/federated-bce.yaml" "$tmp/sites.yaml" \
        "$tmp/federated.yaml" "$SITE_STATE_DIR"
    if [[ "$SCHEDULER" == tls://* ]]; then
        declare -a tls=(--set "federated.certs=${CERT_DIR:?CERT_DIR: the certificates}")
    else # plain TCP: allowed explicitly; the sites' pinned masking keys still come from CERT_DIR
        declare -a tls=(--set federated.insecure=true)
        [[ -n "${CERT_DIR:-}" ]] && tls+=(--set "federated.certs=$CERT_DIR")
    fi
    # shellcheck disable=SC2086
    ensemble-dask federated "$tmp/federated.yaml" --scheduler "$SCHEDULER" --no-progress \
        --store "$S3_BASE/runs/federated-bce.zarr" --storage-options "$STORAGE_OPTIONS" \
        --set federated.demo=false --set federated.n_clusters=3 "${tls[@]}" \
        --set "site_storage_options=$STORAGE_OPTIONS" ${FEDERATED_ARGS:-}
    rm -rf "$tmp"
fi
step "done"
