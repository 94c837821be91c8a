"""The command line's parser: every subcommand, its options and their types."""

from __future__ import annotations

import argparse
import json

from .. import __version__
from .._validation import EnsembleDaskError


def _csv_list(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def _storage_options(text):
    if text is None:
        return None
    try:
        opts = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EnsembleDaskError(f"--storage-options must be a JSON object; got {text!r}") from exc
    if not isinstance(opts, dict):
        raise EnsembleDaskError(f"--storage-options must be a JSON object; got {text!r}")
    return opts


def _positive(text):
    """A count of at least one, checked where it is given (``--n-workers -1`` hung the cluster's start)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def _seed(text):
    """``--seed``: checked where it is given (argparse turns the error into one line and exit 2)."""
    from .._validation import InputError, check_seed

    try:
        return check_seed(int(text))
    except (ValueError, InputError) as exc:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {text!r}") from exc


def _parser():
    ap = argparse.ArgumentParser(prog="ensemble-dask", description="Consensus clustering at scale on Dask.")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = ap.add_subparsers(dest="command", required=True)

    def store_args(p, required=True):
        p.add_argument("--store", required=required, help="run store URL (path, file://, memory://, s3://)")
        p.add_argument("--storage-options", help="fsspec options of the store, as JSON")
        p.add_argument(
            "--take-over", action="store_true", help="replace the store's stale lease (its writer died)"
        )

    def cluster_args(p):
        p.add_argument("--scheduler", help="address of an existing Dask scheduler (default: a LocalCluster)")
        p.add_argument("--n-workers", type=_positive, help="workers of the embedded LocalCluster")
        p.add_argument("--no-progress", action="store_true", help="no progress bars")

    p = sub.add_parser("run", parents=[common], help="run every stage of a workflow YAML file")
    p.add_argument("workflow")
    p.add_argument("--data", help="input URL, replacing the workflow's data.url")
    store_args(p, required=False)
    cluster_args(p)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a workflow key")

    p = sub.add_parser(
        "federated", parents=[common], help="row-distributed BCE or KCC over the sites of a workflow"
    )
    p.add_argument("workflow")
    store_args(p, required=False)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a workflow key")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--restart", action="store_true", help="discard the checkpoint instead of resuming from it"
    )

    p = sub.add_parser(
        "certs",
        parents=[common],
        help="keys of a federation: a CA (ca), signed site requests (sign), or all at once for a demo",
        description="With --out and --names (no subcommand): the one-command local demo, which makes the "
        "CA and every party's private keys in one directory (whoever holds it can impersonate any party "
        "and unmask every site). A real federation runs `ensemble-dask site init` on each site, "
        "`certs ca` once and `certs sign` per request.",
    )
    p.add_argument(
        "--out", help="demo: directory for ca.pem, NAME.pem, NAME-key.pem, NAME-mask.* (all private keys)"
    )
    p.add_argument("--names", type=_csv_list, help="demo: parties, e.g. coordinator,site-a,site-b")
    p.add_argument("--overwrite", action="store_true", help="demo: replace existing files (and the CA)")
    certs_sub = p.add_subparsers(dest="certs_command", metavar="{ca,sign}")
    q = certs_sub.add_parser(
        "ca", parents=[common], help="make the federation's CA (ca.pem, ca-key.pem); keep it offline"
    )
    q.add_argument("--out", dest="ca_out", metavar="DIR", required=True, help="directory of the CA")
    q = certs_sub.add_parser(
        "sign", parents=[common], help="sign a site's request NAME.csr with the CA: write NAME.pem"
    )
    q.add_argument("--ca", metavar="DIR", required=True, help="directory of ca.pem and ca-key.pem")
    q.add_argument("csr", help="the request, NAME.csr (from `ensemble-dask site init NAME`)")
    q.add_argument(
        "--out", dest="sign_out", metavar="DIR", help="directory of NAME.pem (default: the request's)"
    )

    p = sub.add_parser("site", help="a site's own keys (init) and its agent (serve)")
    site_sub = p.add_subparsers(dest="site_command", required=True, metavar="{init,serve}")
    q = site_sub.add_parser(
        "init",
        parents=[common],
        help="make the site's private keys here, and the request and public key it sends out",
    )
    q.add_argument("name", help="the site's name (its certificate's common name)")
    q.add_argument("--out", default=".", metavar="DIR", help="directory of the files (default: .)")
    q.add_argument(
        "--host",
        dest="hosts",
        action="extend",
        type=_csv_list,
        default=[],
        metavar="H",
        help="a DNS name or IP address the site is reached by (repeatable, or comma-separated)",
    )
    q = site_sub.add_parser("serve", parents=[common], help="run the site's agent from its config file")
    q.add_argument("config", help="the agent's configuration file")

    p = sub.add_parser(
        "split-sites",
        parents=[common],
        help="cut a store's labels into per-site arrays (to try federated runs)",
    )
    store_args(p)
    p.add_argument(
        "--out", required=True, help="directory or URL under which each site gets NAME/labels.zarr"
    )
    p.add_argument("--names", type=_csv_list, required=True, help="site names, comma-separated")

    p = sub.add_parser("ingest", parents=[common], help="read a table into the store's X (and y_true)")
    p.add_argument("data", help="input URL (CSV[.gz], Parquet, zarr, npy, synthetic:kdd99?n=...)")
    store_args(p)
    p.add_argument("--data-storage-options", help="fsspec options of the input, as JSON")
    p.add_argument("--format", choices=["csv", "parquet", "zarr", "npy"])
    p.add_argument("--schema", choices=["kdd99"])
    p.add_argument("--label-column")
    p.add_argument("--categorical", type=_csv_list, default=[])
    p.add_argument("--drop", type=_csv_list, default=[])
    p.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the CSV's first line holds column names (default: guessed from its first two lines)",
    )
    p.add_argument(
        "--sep",
        help="a CSV's field separator: one character, 'tab' or 'whitespace' "
        "(default: guessed from its first lines among , tab ; | and whitespace)",
    )
    p.add_argument("--classes", type=_csv_list)
    p.add_argument("--subset", type=int)
    p.add_argument(
        "--standardize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "z-score each feature column over the kept rows (the default); --no-standardize keeps the values"
        ),
    )
    p.add_argument("--impute", choices=["mean"])
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--overwrite", action="store_true")

    p = sub.add_parser("generate", parents=[common], help="generate base clusterings as a Dask graph")
    store_args(p)
    cluster_args(p)
    p.add_argument("-N", "--n-clusterings", type=int, default=100)
    p.add_argument("--ensemble", default="type1", help="type1 (k-means) or type2 (mixed algorithms)")
    p.add_argument("--k-min", type=int, help="fewest clusters of a base clustering (default 2, or K // 2)")
    p.add_argument("--k-max", type=int, help="most clusters of a base clustering (default 10, or 2K)")
    p.add_argument(
        "--n-clusters",
        type=int,
        help="the largest K you will ask of the consensus (sets the k range's default)",
    )
    p.add_argument("--rate", type=float, default=1.0)
    p.add_argument("--algorithms", type=_csv_list)
    p.add_argument("--seed", type=_seed, default=0)

    p = sub.add_parser("coassoc", parents=[common], help="sample point pairs and count their co-associations")
    store_args(p)
    cluster_args(p)
    p.add_argument(
        "--strategy",
        default="auto",
        choices=["auto", "full", "uniform", "per-point", "cocluster"],
        help="auto: cocluster (co-clustered partners and random ones, any n)",
    )
    p.add_argument("--p", type=float, help="uniform: share of pairs kept (default 0.00025)")
    p.add_argument(
        "--l",
        type=int,
        help="per-point / cocluster: partners drawn per point (default per-point max(30, 2K), cocluster 10)",
    )
    p.add_argument(
        "--n-clusters", type=int, help="the largest K you will ask of the pair methods (sets l's default)"
    )
    p.add_argument("--fraction", type=float, help="cocluster: share of draws from shared clusters")
    p.add_argument("--max-n", type=int, help="full: largest n accepted (default 5000)")
    p.add_argument("--block-size", type=int, default=4096, help="rows per seed block")
    p.add_argument("--count-mode", default="auto", choices=["auto", "rows", "join"])
    p.add_argument("--seed", type=_seed, default=0)

    p = sub.add_parser(
        "consensus",
        parents=[common],
        help="run a consensus method on the store",
        epilog=_methods_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "name",
        help="result name: a method (below), pcc-kl or pcc-l2 (PCC with that divergence), or any plain name "
        "with --set method=METHOD",
    )
    store_args(p)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a method parameter")
    p.add_argument("--seed", type=_seed, default=0)

    p = sub.add_parser(
        "import-labels", parents=[common], help="bring precomputed partitions (n x N table, -1 = absent)"
    )
    p.add_argument("labels", help="URL of the labels table")
    store_args(p)

    p = sub.add_parser(
        "report", parents=[common], help="write report/metrics.json and report/index.html, print the summary"
    )
    store_args(p)
    p.add_argument(
        "--format",
        choices=["table", "json", "html"],
        default="table",
        help="print the summary table and the page's path (table), metrics.json's document with the "
        "page's path (json), or only the page's path (html)",
    )

    p = sub.add_parser(
        "verify", parents=[common], help="check that each complete stage's output is what its record says"
    )
    store_args(p)
    p.add_argument(
        "--repair",
        action="store_true",
        help="unmark the stages whose output disagrees with their record (and the stages that read it), so "
        "that the next run recomputes them",
    )
    return ap


def _methods_help():
    """The consensus methods of the registry, a line each, for ``consensus --help``."""
    from ..consensus import registry

    lines = ["methods (fitted on):"]
    for name in registry.names():
        m = registry.get(name)
        lines.append(f"  {name:8s} {m.summary} ({m.fits_on})")
    return "\n".join(lines)
