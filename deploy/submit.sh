#!/usr/bin/env bash
# Submit the KDD workflow to a running Dask cluster (the coordinator's own), with data and run store in S3.
# Used by deploy/local/demo.sh, the Compose `submit` service and the Kubernetes Job alike. The
# federation's sites are not workers of this cluster: they run their own agents (deploy/README.md).
#
#   1. the data into $S3_BASE/data: the file $KDD_DATA (e.g. kddcup.data_10_percent.gz) or, without
#      one, the package's synthetic KDD table (synthetic:kdd99?n=$N) written in the same layout;
#      or $DATA_URL as it is, when the data is in the bucket already;
#   2. workflows/kdd99-pcc.yaml on $SCHEDULER, store $S3_BASE/runs/kdd99-pcc.zarr: its accuracy table.
# Exits non-zero as soon as a step fails.
#
# Environment:
#   SCHEDULER        address of the scheduler (tcp://... or tls://...)                    required
#   DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT, ..._CLIENT__KEY   for a tls:// scheduler
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_DEFAULT_REGION   the S3 service
#   STORAGE_OPTIONS  fsspec options as JSON (default: made from the AWS_* variables)
#   S3_BASE          bucket (and prefix) for data and runs             default: s3://ensemble-dask
#   KDD_DATA | DATA_URL | N (default 4000), N_CLUSTERINGS (default 20, synthetic data only)
#   MIN_WORKERS      workers to wait for                              default: 1
#   WORKFLOWS        folder of the workflow files                     default: ../workflows
#   Arguments given to this script go to `ensemble-dask run`, e.g. --set generate.n_clusterings=30.
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORKFLOWS="${WORKFLOWS:-$HERE/../workflows}"
PYTHON="${PYTHON:-python}"
HELPERS="$HERE/_helpers.py"
: "${SCHEDULER:?set SCHEDULER to the address of the Dask scheduler}"
S3_BASE="${S3_BASE:-s3://ensemble-dask}"
S3_BASE="${S3_BASE%/}"
N="${N:-4000}"
N_CLUSTERINGS="${N_CLUSTERINGS:-20}"
STORAGE_OPTIONS="${STORAGE_OPTIONS:-$("$PYTHON" "$HELPERS" storage-options)}"
MIN_WORKERS="${MIN_WORKERS:-1}"

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

step "done"
