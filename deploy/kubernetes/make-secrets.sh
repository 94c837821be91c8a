#!/usr/bin/env bash
# The secrets of deploy/kubernetes, each made by the party that owns it, from its own files:
#
#   make-secrets.sh site NAME DIR      by site NAME, in its namespace ensemble-dask-NAME: the secret
#                                      site-agent-keys from DIR, the files `ensemble-dask site init NAME
#                                      --out DIR` wrote there plus NAME.pem and ca.pem from the CA and
#                                      the peers' NAME-mask.pub (the site's own copies, which it pins):
#                                        ca.pem, tls.pem (NAME.pem), tls-key.pem (NAME-key.pem),
#                                        mask.key (NAME-mask.key), and every *-mask.pub of DIR
#   make-secrets.sh coordinator DIR    by the coordinator, in namespace ensemble-dask: the secret
#                                      ensemble-dask-federation (ca.pem, coordinator.pem,
#                                      coordinator-key.pem: its own `site init coordinator` files,
#                                      signed by the federation's CA)
#   make-secrets.sh cluster [CERT_DIR] by the coordinator, for its own Dask cluster and MinIO (namespace
#                                      ensemble-dask): ensemble-dask-coordinator (the cluster's TLS, made
#                                      with `ensemble-dask certs --names coordinator` when CERT_DIR has no
#                                      ca.pem), ensemble-dask-minio (a new random password) and
#                                      ensemble-dask-s3 (AWS_* variables of the S3 service)
#   make-secrets.sh demo [FED_DIR]     DEMO ONLY: plays every party (../make-federation.sh makes every
#                                      key and the sites' data in FED_DIR, default ./federation), then
#                                      runs the three commands above for every party
#
# Needs kubectl (and ensemble-dask, openssl for `cluster`). With an existing bucket elsewhere set
# AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_DEFAULT_REGION) before `cluster`.
# A site's private keys go into its own namespace only; nothing of a site reaches the coordinator's.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAMESPACE="${NAMESPACE:-ensemble-dask}"
SITES="${SITES:-site-a,site-b,site-c}"

# kubectl create ... in namespace $1, applied (so that a second run updates it)
apply() {
    local ns="$1"
    shift
    kubectl -n "$ns" create --dry-run=client -o yaml "$@" | kubectl apply -f -
}
namespace() { kubectl create namespace "$1" --dry-run=client -o yaml | kubectl apply -f -; }

need() {
    local f
    for f in "$@"; do
        [[ -r "$f" ]] || { echo "make-secrets.sh: missing $f" >&2; exit 2; }
    done
}

site() {
    local name="$1" dir="$2" ns="ensemble-dask-$1" pub
    need "$dir/ca.pem" "$dir/$name.pem" "$dir/$name-key.pem" "$dir/$name-mask.key" "$dir/$name-mask.pub"
    local -a pins=()
    for pub in "$dir"/*-mask.pub; do pins+=(--from-file="$pub"); done
    namespace "$ns"
    apply "$ns" secret generic site-agent-keys --from-file=ca.pem="$dir/ca.pem" \
        --from-file=tls.pem="$dir/$name.pem" --from-file=tls-key.pem="$dir/$name-key.pem" \
        --from-file=mask.key="$dir/$name-mask.key" "${pins[@]}"
    echo "site $name: secret site-agent-keys in namespace $ns (pins: ${#pins[@]} public keys)"
}

coordinator() {
    local dir="$1"
    need "$dir/ca.pem" "$dir/coordinator.pem" "$dir/coordinator-key.pem"
    namespace "$NAMESPACE"
    apply "$NAMESPACE" secret generic ensemble-dask-federation --from-file="$dir/ca.pem" \
        --from-file="$dir/coordinator.pem" --from-file="$dir/coordinator-key.pem"
    echo "coordinator: secret ensemble-dask-federation in namespace $NAMESPACE"
}

cluster() {
    local cert_dir="$1"
    if [[ ! -e "$cert_dir/ca.pem" ]]; then
        ensemble-dask certs --out "$cert_dir" --names coordinator
    fi
    namespace "$NAMESPACE"
    apply "$NAMESPACE" secret generic ensemble-dask-coordinator --from-file="$cert_dir/ca.pem" \
        --from-file="$cert_dir/coordinator.pem" --from-file="$cert_dir/coordinator-key.pem"
    if [[ -z "${AWS_ENDPOINT_URL:-}" ]]; then
        local user=ensemble password
        password="$(openssl rand -hex 24)"
        apply "$NAMESPACE" secret generic ensemble-dask-minio --from-literal=MINIO_ROOT_USER="$user" \
            --from-literal=MINIO_ROOT_PASSWORD="$password"
        AWS_ENDPOINT_URL=http://minio:9000 AWS_ACCESS_KEY_ID="$user" AWS_SECRET_ACCESS_KEY="$password"
    fi
    apply "$NAMESPACE" secret generic ensemble-dask-s3 --from-literal=AWS_ENDPOINT_URL="$AWS_ENDPOINT_URL" \
        --from-literal=AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
        --from-literal=AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
        --from-literal=AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
    echo "cluster: secrets ensemble-dask-coordinator, ensemble-dask-s3 in namespace $NAMESPACE"
}

demo() {
    local fed_dir="$1" s
    echo "DEMO: every party's keys are made in $fed_dir by whoever runs this (a real site makes its own)"
    SITES="$SITES" SITE_HOST="{name},site-agent.ensemble-dask-{name}.svc" COORDINATOR_HOST=coordinator \
        "$HERE/../make-federation.sh" "$fed_dir"
    IFS=, read -r -a sites <<<"$SITES"
    for s in "${sites[@]}"; do site "$s" "$fed_dir/sites/$s/keys"; done
    coordinator "$fed_dir/coordinator/keys"
    cluster "$fed_dir/cluster-certs"
}

case "${1:-}" in
site) site "${2:?make-secrets.sh site NAME DIR}" "${3:?make-secrets.sh site NAME DIR}" ;;
coordinator) coordinator "${2:?make-secrets.sh coordinator DIR}" ;;
cluster) cluster "${2:-certs}" ;;
demo) demo "${2:-federation}" ;;
*)
    sed -n '2,26p' "$0" >&2
    exit 2
    ;;
esac
