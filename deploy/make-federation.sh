#!/usr/bin/env bash
# A DEMO federation in one directory: this script plays every party on one machine, so whoever runs it
# (or can read OUT) holds every private key and every site's rows. A real federation runs each step
# where it says, and only public material (CSRs, certificates, ca.pem, NAME-mask.pub) travels.
#
#   deploy/make-federation.sh OUT
#
#   OUT/ca/                     ca.pem, ca-key.pem: the federation's CA (offline, where CSRs are signed)
#   OUT/coordinator/keys/       coordinator-key.pem (0600), coordinator.pem, ca.pem: federated.certs
#   OUT/sites/NAME/keys/        NAME-key.pem, NAME-mask.key (0600, made by the site), NAME.csr,
#                               NAME.pem and ca.pem (back from the CA), and every site's NAME-mask.pub
#                               (the site's own copies, pinned in its site.yaml)
#   OUT/sites/NAME/data/        labels.zarr, reference.zarr: the site's rows (one share cut by
#                               `ensemble-dask split-sites` from a run store)
#
# The steps, each on the party named:
#   the CA           ensemble-dask certs ca --out OUT/ca
#   each party       ensemble-dask site init NAME --out OUT/.../keys --host HOST     (keys stay here)
#   the CA           ensemble-dask certs sign --ca OUT/ca NAME.csr                   (per request)
#   each site        receives NAME.pem, ca.pem and the other sites' NAME-mask.pub
# Nothing that exists is made again (a private key is never replaced): run it again to finish a
# directory, or to cut new data (DATA=1 with another STORE).
#
# Settings (environment variables):
#   SITES            comma-separated site names                         default: site-a,site-b,site-c
#   SITE_HOST        host name(s) in each site's certificate, {name} replaced by the site's name,
#                    comma-separated                                    default: {name},127.0.0.1
#   COORDINATOR_HOST host name(s) in the coordinator's certificate      default: coordinator,127.0.0.1
#   DATA             1: cut the sites' data; 0: keys only               default: 1
#   STORE            the run store to cut (its labels and y_true); without one, a synthetic store is
#                    made in OUT/demo-store.zarr (N rows of synthetic:kdd99, N_CLUSTERINGS clusterings)
#   STORAGE_OPTIONS  fsspec options of STORE, as JSON
#   N, N_CLUSTERINGS default: 4000, 20
set -Eeuo pipefail

OUT="${1:?usage: make-federation.sh OUT}"
SITES="${SITES-site-a,site-b,site-c}"
DEFAULT_SITE_HOST='{name},127.0.0.1'
SITE_HOST="${SITE_HOST-$DEFAULT_SITE_HOST}"
COORDINATOR_HOST="${COORDINATOR_HOST-coordinator,127.0.0.1}"
DATA="${DATA:-1}"
N="${N:-4000}"
N_CLUSTERINGS="${N_CLUSTERINGS:-20}"
IFS=, read -r -a sites <<<"$SITES"
((${#sites[@]} >= 2)) || { echo "make-federation.sh: SITES must name at least two sites" >&2; exit 2; }

log() { echo "[federation] $*" >&2; }
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
log "DEMO: every party's keys and data are made here, in $OUT (a real site makes its own)"

# run the commands given, one per line of $1 (a party's step each), in parallel: they are independent
parallel() {
    local -a pids=()
    local line pid rc=0
    while IFS= read -r line; do
        [[ -n "$line" ]] || continue
        bash -c "$line" &
        pids+=($!)
    done <<<"$1"
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    return "$rc"
}

# 1. the federation's CA
[[ -e "$OUT/ca/ca.pem" ]] || ensemble-dask certs ca --out "$OUT/ca" >/dev/null

# 2. on each party: its private keys, its certificate signing request and its public masking key
keys_dir() { if [[ "$1" == coordinator ]]; then echo "$OUT/coordinator/keys"; else echo "$OUT/sites/$1/keys"; fi; }
steps=""
for party in coordinator "${sites[@]}"; do
    dir="$(keys_dir "$party")"
    [[ -e "$dir/$party-key.pem" ]] && continue
    if [[ "$party" == coordinator ]]; then hosts="$COORDINATOR_HOST"; else hosts="${SITE_HOST//\{name\}/$party}"; fi
    steps+="ensemble-dask site init $(printf %q "$party") --out $(printf %q "$dir") --host $(printf %q "$hosts") >/dev/null"$'\n'
done
parallel "$steps"
# the coordinator takes no part in the sums: it holds no masking key
rm -f "$OUT/coordinator/keys/coordinator-mask.key" "$OUT/coordinator/keys/coordinator-mask.pub"

# 3. at the CA: sign each request (its operator checks the names printed); the certificate and
#    ca.pem go back to the party
steps=""
for party in coordinator "${sites[@]}"; do
    dir="$(keys_dir "$party")"
    [[ -e "$dir/$party.pem" ]] && continue
    steps+="ensemble-dask certs sign --ca $(printf %q "$OUT/ca") $(printf %q "$dir/$party.csr") >/dev/null"$'\n'
done
parallel "$steps"
for party in coordinator "${sites[@]}"; do
    cp "$OUT/ca/ca.pem" "$(keys_dir "$party")/ca.pem"
done

# 4. the sites exchange their public masking keys (each keeps its own copies, which it pins)
for site in "${sites[@]}"; do
    for peer in "${sites[@]}"; do
        [[ "$peer" == "$site" ]] || cp "$OUT/sites/$peer/keys/$peer-mask.pub" "$OUT/sites/$site/keys/"
    done
done
log "keys: CA in $OUT/ca, coordinator in $OUT/coordinator/keys, sites in $OUT/sites/NAME/keys"

# 5. the sites' rows: one share of a run store each
if [[ "$DATA" == 1 ]]; then
    declare -a opts=()
    [[ -n "${STORAGE_OPTIONS:-}" ]] && opts=(--storage-options "$STORAGE_OPTIONS")
    if [[ -z "${STORE:-}" ]]; then
        STORE="$OUT/demo-store.zarr"
        opts=()
        if [[ ! -e "$STORE/labels" ]]; then
            log "a synthetic store: $N rows of synthetic:kdd99, $N_CLUSTERINGS base clusterings"
            ensemble-dask ingest "synthetic:kdd99?n=$N" --store "$STORE" --overwrite >/dev/null
            ensemble-dask generate --store "$STORE" -N "$N_CLUSTERINGS" >/dev/null 2>&1
        fi
    fi
    rm -rf "$OUT/split"
    # split-sites writes OUT/split/NAME/labels.zarr (and reference.zarr from y_true)
    ensemble-dask split-sites --store "$STORE" "${opts[@]}" --out "$OUT/split" --names "$SITES" >/dev/null
    for site in "${sites[@]}"; do
        rm -rf "$OUT/sites/$site/data"
        mv "$OUT/split/$site" "$OUT/sites/$site/data"
    done
    rmdir "$OUT/split"
    log "data: $STORE cut into $OUT/sites/NAME/data"
fi
