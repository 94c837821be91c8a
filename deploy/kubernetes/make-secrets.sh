#!/usr/bin/env bash
# The secrets and the pinned keys of deploy/kubernetes, made once per deployment:
#   ensemble-dask-coordinator   ca.pem, coordinator.pem, coordinator-key.pem (scheduler, plain workers, Job)
#   ensemble-dask-site-X        ca.pem, tls.pem, tls-key.pem, mask.key (site X's workers only)
#   ensemble-dask-pins          the sites' public masking keys NAME-mask.pub (a ConfigMap: public)
#   ensemble-dask-minio         MinIO's root user and password (a new random password)
#   ensemble-dask-s3            AWS_* variables of the S3 service (in-cluster MinIO by default)
#
#   deploy/kubernetes/make-secrets.sh [CERT_DIR]      (needs ensemble-dask, kubectl, openssl)
# With an existing bucket elsewhere set AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
# (and AWS_DEFAULT_REGION) before running it. In a real federation each site makes its own secret
# from the files the deployment's CA gave it; this script, holding every key, is for a demo cluster.
set -euo pipefail
NAMESPACE="${NAMESPACE:-ensemble-dask}"
SITES="${SITES:-site-a,site-b,site-c}"
CERT_DIR="${1:-certs}"
IFS=, read -r -a sites <<<"$SITES"

if [[ ! -e "$CERT_DIR/ca.pem" ]]; then
    ensemble-dask certs --out "$CERT_DIR" --names "coordinator,$SITES"
fi
apply() { kubectl -n "$NAMESPACE" create --dry-run=client -o yaml "$@" | kubectl apply -f -; }

kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
apply secret generic ensemble-dask-coordinator --from-file="$CERT_DIR/ca.pem" \
    --from-file="$CERT_DIR/coordinator.pem" --from-file="$CERT_DIR/coordinator-key.pem"
pins=()
for s in "${sites[@]}"; do
    apply secret generic "ensemble-dask-$s" --from-file=ca.pem="$CERT_DIR/ca.pem" \
        --from-file=tls.pem="$CERT_DIR/$s.pem" --from-file=tls-key.pem="$CERT_DIR/$s-key.pem" \
        --from-file=mask.key="$CERT_DIR/$s-mask.key"
    pins+=(--from-file="$CERT_DIR/$s-mask.pub")
done
apply configmap ensemble-dask-pins "${pins[@]}"

if [[ -z "${AWS_ENDPOINT_URL:-}" ]]; then
    user=ensemble
    password="$(openssl rand -hex 24)"
    apply secret generic ensemble-dask-minio --from-literal=MINIO_ROOT_USER="$user" \
        --from-literal=MINIO_ROOT_PASSWORD="$password"
    AWS_ENDPOINT_URL=http://minio:9000 AWS_ACCESS_KEY_ID="$user" AWS_SECRET_ACCESS_KEY="$password"
fi
apply secret generic ensemble-dask-s3 --from-literal=AWS_ENDPOINT_URL="$AWS_ENDPOINT_URL" \
    --from-literal=AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
    --from-literal=AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
    --from-literal=AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
echo "secrets in namespace $NAMESPACE; now: kubectl apply -k deploy/kubernetes"
