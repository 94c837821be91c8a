"""``ensemble-dask``: a thin command-line shell over :mod:`ensemble_dask.pipeline`.

Subcommands: ``run WORKFLOW`` (every stage of a workflow), and one per stage: ``ingest``,
``generate``, ``import-labels``, ``coassoc``, ``report``; ``verify`` (each stage's output against its
record); ``federated``, ``certs`` (a federation's CA,
signed site requests, or all keys at once for a demo) and ``site`` (``site init``: a site's own keys;
``site serve``: its agent). Errors on bad input print one line naming the file, parameter or value, and
exit with status 2. When the reader of stdout stops early
(``ensemble-dask report --format json | head``), the command ends quietly with status 141 (128 + SIGPIPE).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from . import __version__
from ._validation import EnsembleDaskError
from .parallel import INTERRUPTED, interrupt, interrupt_handled, workers_ignore_ctrl_c

__all__ = ["main"]


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
        help="z-score each feature column over the kept rows (the default); --no-standardize keeps the values",
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
    from .consensus import registry

    lines = ["methods (fitted on):"]
    for name in registry.names():
        m = registry.get(name)
        lines.append(f"  {name:8s} {m.summary} ({m.fits_on})")
    return "\n".join(lines)


def _verify(store, repair):
    """Print each complete stage's verdict; status 1 when some disagree and were not repaired."""
    records = {name: rec for name, rec in store.records().items() if rec.get("complete")}
    found = store.repair() if repair else {name: p for name in records if (p := store.verify(name))}
    for name in records:
        problems = found.get(name)
        print(f"{name}: {'ok' if not problems else '; '.join(problems)}")
    if found and repair:
        print(
            f"verify: unmarked {', '.join(found)} (and the stages that read them): run the same command again"
        )
    return 1 if found and not repair else 0


def _print_summary(report, out=None):
    ds = report.get("dataset", {})
    print(f"data set: n={ds.get('n')} d={ds.get('d')} clusterings={ds.get('n_clusterings')}", file=out)
    rows = []
    if report.get("base_partitions"):
        bp = report["base_partitions"]
        rows.append(("base partitions (mean)", bp["H"]["mean"], bp["ARI"]["mean"], bp["NMI"]["mean"], "", ""))
    for name, m in (report.get("methods") or {}).items():
        rows.append((name, m.get("H"), m.get("ARI"), m.get("NMI"), m.get("effective_k"), m.get("seconds")))
    if not rows:
        return

    def fmt(v, spec):
        return format(v, spec) if isinstance(v, (int, float)) else str(v if v is not None else "")

    print(f"{'':26s} {'H':>7s} {'ARI':>7s} {'NMI':>7s} {'k_eff':>6s} {'secs':>8s}", file=out)
    for name, h, a, nm, k, s in rows:
        print(
            f"{name:26s} {fmt(h, '7.4f')} {fmt(a, '7.4f')} {fmt(nm, '7.4f')} {fmt(k, '>6')} {fmt(s, '8.2f')}",
            file=out,
        )


def _dask_options(args):
    return {"n_workers": args.n_workers} if getattr(args, "n_workers", None) else None


def _run(args):
    from . import pipeline

    progress = not getattr(args, "no_progress", True)
    if args.command == "run":
        spec = pipeline.load_workflow(args.workflow)
        spec = pipeline.apply_overrides(
            spec, args.set, data=args.data, store=args.store, scheduler=args.scheduler
        )
        if args.storage_options is not None:
            spec["storage_options"] = _storage_options(args.storage_options)
        if args.n_workers:
            spec.setdefault("dask", {})["n_workers"] = args.n_workers
        store_url = spec.get("store") or f"runs/{spec.get('name', 'run')}.zarr"
        with pipeline.removed_if_left_empty(store_url, spec.get("storage_options")):
            report = pipeline.run_workflow(spec, progress=progress, take_over=args.take_over)
        _print_summary(report)
        if report.get("html"):
            print(f"report: {report['html']}")
        return 0

    if args.command == "federated":
        spec = pipeline.load_workflow(args.workflow)
        spec = pipeline.apply_overrides(spec, args.set, store=args.store)
        if "federated" not in spec:
            raise EnsembleDaskError(f"workflow {args.workflow!r} has no 'federated' section")
        if args.storage_options is not None:
            spec["storage_options"] = _storage_options(args.storage_options)
        return _federated(spec, args, progress)

    if args.command == "certs":
        return _certs(args)

    if args.command == "site":
        return _site(args)

    labels = None
    if args.command == "import-labels":  # checked before a store is opened (or created)
        from .stages.generate import read_labels_table

        labels = read_labels_table(args.labels)
    # only ingest and import-labels create a store; the other stages need one that exists
    mode = "a" if args.command in ("ingest", "import-labels") else "r+"
    options = _storage_options(args.storage_options)
    if args.command == "ingest":  # a failed ingest leaves no new, empty store behind
        with (
            pipeline.removed_if_left_empty(args.store, options),
            pipeline.store_lease(args.store, options, take_over=args.take_over),
        ):
            return _stage(args, pipeline, pipeline.open_store(args.store, options))
    store = pipeline.open_store(args.store, options, mode=mode)
    if args.command == "split-sites":  # it only reads the store
        return _stage(args, pipeline, store, labels)
    if args.command == "verify" and not args.repair:
        return _verify(store, repair=False)
    with pipeline.store_lease(args.store, options, take_over=args.take_over):
        if args.command in ("generate", "coassoc", "consensus", "report"):
            store.check_report_folder()  # they write under report/: stop before the stage, not after it
        return _stage(args, pipeline, store, labels)


def _stage(args, pipeline, store, labels=None):
    """Run the stage command ``args.command`` on ``store``."""
    progress = not getattr(args, "no_progress", True)
    if args.command == "split-sites":
        import yaml

        from .stages.federated import split_sites

        sites = split_sites(store, args.out, args.names)
        print("# each site's data section, for its own site.yaml (ensemble-dask site serve)")
        print(yaml.safe_dump({s["name"]: {"data": s["data"]} for s in sites}, sort_keys=False), end="")
    elif args.command == "ingest":
        from .stages.ingest import ingest

        info = ingest(
            store,
            args.data,
            seed=args.seed,
            storage_options=_storage_options(args.data_storage_options),
            overwrite=args.overwrite,
            format=args.format,
            schema=args.schema,
            label_column=args.label_column,
            categorical=args.categorical,
            drop=args.drop,
            header=args.header,
            sep=args.sep,
            classes=args.classes,
            subset=args.subset,
            standardize=args.standardize,
            impute=args.impute,
        )
        const = [str(c) for c in info.get("constant_columns") or []]
        note = f" (constant over the rows kept: {', '.join(const[:5])}{', ...' if len(const) > 5 else ''})"
        print(
            f"ingest: n={info['n']} d={info['d']}"
            + (note if const else "")
            + (" (up to date)" if info["skipped"] else "")
        )
    elif args.command == "generate":
        from .stages.generate import generate

        with pipeline.client_for_store(store, args.scheduler, _dask_options(args)) as client:
            info = generate(
                store,
                client,
                progress=progress,
                n_clusterings=args.n_clusterings,
                ensemble=args.ensemble,
                k_min=args.k_min,
                k_max=args.k_max,
                n_clusters=args.n_clusters,
                rate=args.rate,
                algorithms=args.algorithms,
                seed=args.seed,
            )
        from .stages.generate import default_k_range

        lo, hi = default_k_range(args.n_clusters)
        lo, hi = lo if args.k_min is None else args.k_min, hi if args.k_max is None else args.k_max
        print(
            f"generate: {info['n_clusterings']} clusterings (k in [{lo}, {hi}]), {info['computed']} computed"
        )
        if args.n_clusters is None and args.k_min is None and args.k_max is None:
            print(
                "generate: a range for consensus of up to 5 clusters; for K clusters, "
                "generate --n-clusters K draws k in [K/2, 2K] (a consensus splits only what base partitions split)"
            )
    elif args.command == "coassoc":
        from .stages.coassoc import coassoc_stage

        extra = {k: getattr(args, k) for k in ("p", "l", "fraction", "max_n") if getattr(args, k) is not None}
        with pipeline.client_for_store(store, args.scheduler, _dask_options(args)) as client:
            info = coassoc_stage(
                store,
                client,
                strategy=args.strategy,
                n_clusters=args.n_clusters,
                seed=args.seed,
                block_size=args.block_size,
                count_mode=args.count_mode,
                **extra,
            )
        state = " (up to date)" if info["skipped"] else " (updated)" if info["updated"] else ""
        print(f"coassoc: {info['n_pairs']} pairs over {info['n_clusterings']} clusterings{state}")
    elif args.command == "consensus":
        from .stages.consensus import consensus_stage

        metrics = consensus_stage(
            store, args.name, seed=args.seed, **dict(map(pipeline.parse_assignment, args.set))
        )
        report = pipeline.write_report(store)
        _print_summary({"dataset": report["dataset"], "methods": {args.name: metrics}})
    elif args.command == "import-labels":
        from .stages.generate import import_labels

        info = import_labels(store, args.labels, labels=labels)
        print(f"import-labels: {info['n_clusterings']} clusterings")
    elif args.command == "report":
        return _report(pipeline.write_report(store), args.format)
    elif args.command == "verify":
        return _verify(store, repair=True)
    return 0


def _report(report, fmt):
    """Print the report as ``fmt``; status 0 only when the page was written."""
    html = report.get("html")
    if fmt == "json":
        print(json.dumps(report, indent=2, default=float))
    elif fmt == "table":
        _print_summary(report)
    if not html:
        print("ensemble-dask: error: report/index.html was not written", file=sys.stderr)
        return 1
    if fmt != "json":
        print(f"report: {html}" if fmt == "table" else html)
    return 0


def _federated(spec, args, progress):
    from . import pipeline
    from .federated import SiteLostError, SiteRefusedError
    from .stages.federated import StoreCheckpoint

    pipeline.check_workflow(spec)
    if args.restart:
        from .io.store import RunStore

        store = spec.get("store") or f"runs/{spec.get('name', 'federated')}.zarr"
        StoreCheckpoint(RunStore(store, spec.get("storage_options"))).clear()
    try:
        # the federated run, then its report page
        result = pipeline.run_workflow(spec, progress=progress, take_over=args.take_over)
        summary = result["federated"]
    except SiteRefusedError as exc:
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        print("ensemble-dask: (the site's own policy refused; its audit log says why)", file=sys.stderr)
        return 3
    except SiteLostError as exc:
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        if (spec.get("federated") or {}).get("method") == "kcc":
            print(
                "ensemble-dask: (KCC runs are not checkpointed) bring the site back and run again",
                file=sys.stderr,
            )
            return 3
        print(
            "ensemble-dask: (alpha, beta) of the last complete iteration are checkpointed; bring the site "
            "back and run the same command to resume",
            file=sys.stderr,
        )
        return 3
    tls = "mutual TLS"
    if summary.get("method") == "kcc":
        print(
            f"federated KCC ({summary['mode']}, {tls}) over {len(summary['sites'])} sites "
            f"({summary['n_rows']} rows): {summary['iterations']} Lloyd iterations, objective "
            f"{summary['objective']:.6f}, {summary['seconds']:.1f} s"
            + (f", without {summary['dropped']} (dropped out)" if summary.get("dropped") else "")
        )
    else:
        print(
            f"federated BCE ({summary['mode']}, {tls}) over {len(summary['sites'])} sites "
            f"({summary['n_rows']} rows): {summary['iterations']} EM iterations, lower bound "
            f"{summary['lower_bound']:.4f}, {summary['seconds']:.1f} s"
            + (f", without {summary['dropped']} (dropped out)" if summary.get("dropped") else "")
            + (
                f", resumed at iteration {summary['resumed_from_iteration']}"
                if summary["resumed_from_iteration"]
                else ""
            )
        )
    if "H" in summary:
        print(
            f"whole federation vs reference: H={summary['H']:.4f} ARI={summary['ARI']:.4f} NMI={summary['NMI']:.4f}"
        )
    print(f"report: {result['html']}")
    return 0


def _certs(args):
    from .federated.certs import make_ca, make_certs, sign_csr

    if args.certs_command and (args.names or args.overwrite):
        raise EnsembleDaskError(
            f"--names and --overwrite are for `certs` alone, not `certs {args.certs_command}`"
        )
    if args.certs_command == "ca":
        ca_pem, ca_key = make_ca(args.ca_out)
        print(f"certs: CA {ca_pem}: send it to every party")
        print(f"certs: CA key {ca_key}: keep it offline, where requests are signed:")
        print(f"certs: next, per site: ensemble-dask certs sign --ca {args.ca_out} NAME.csr")
        return 0
    if args.certs_command == "sign":
        from cryptography import x509

        path = sign_csr(args.ca, args.csr, out=args.sign_out or args.out)
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        hosts = ", ".join(str(getattr(n, "value", n)) for n in names)
        print(f"certs: signed {path} for {hosts}: check that these are the site's names")
        print(f"certs: send {path} and {Path(args.ca) / 'ca.pem'} back to the site")
        return 0
    if args.out is None or args.names is None:
        raise EnsembleDaskError(
            "certs needs --out DIR --names A,B,... (the local demo), or a subcommand: "
            "`certs ca --out DIR`, `certs sign --ca DIR NAME.csr`"
        )
    info = make_certs(args.out, args.names, overwrite=args.overwrite)
    for name in info["created"]:
        print(f"certs: {name}: {args.out}/{name}.pem, {name}-key.pem, {name}-mask.key, {name}-mask.pub")
    for name in info["kept"]:
        print(f"certs: {name}: kept (files exist; --overwrite replaces them)")
    print(f"certs: CA {info['ca']} (keep {args.out}/ca-key.pem offline)")
    return 0


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
    from ._validation import InputError, check_seed

    try:
        return check_seed(int(text))
    except (ValueError, InputError) as exc:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {text!r}") from exc


def _site(args):
    if args.site_command == "serve":
        from .federated.agent import serve_main

        return serve_main(args.config)
    from .federated.certs import init_site

    paths = init_site(args.out, args.name, hosts=args.hosts)
    for path in paths:
        print(f"site: wrote {path}")
    key, csr, mask, pub = paths
    print(f"site: keep {key} and {mask} here (never send them)")
    print(f"site: next, send {csr} to the federation's CA (`ensemble-dask certs sign --ca DIR {csr.name}`)")
    print(f"site: and {pub} to the other sites, each of which pins it in its own site.yaml (federation:)")
    return 0


def _on_sigint(signum, frame):
    """Ctrl-C: remember it (whatever error it then causes is reported as the interrupt) and raise
    ``KeyboardInterrupt``; a second one while the run closes ends the process at once."""
    if INTERRUPTED.is_set():
        print(f"ensemble-dask: {_INTERRUPTED_LINE}", file=sys.stderr)
        os._exit(130)
    quiet = logging.getLogger().level > logging.DEBUG
    interrupt(quiet=quiet)
    if quiet:  # the callbacks and finalisers the interrupt cuts short would each say so at exit
        sys.unraisablehook = _unraisable_after_interrupt
    raise KeyboardInterrupt


def _unraisable_after_interrupt(unraisable):
    """Nothing: after Ctrl-C, what a cut-short callback or finaliser raises is the interrupt itself."""


_INTERRUPTED_LINE = "interrupted; run the same command to resume"


def main(argv=None):
    """Entry point of the ``ensemble-dask`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.verbose < 2:
        # read by dask's config when distributed is first imported (its own loggers say INFO)
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    INTERRUPTED.clear()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        with workers_ignore_ctrl_c():  # the command owns its process: it handles Ctrl-C, closes its workers
            status = _run(args)
        sys.stdout.flush()  # here, not at exit: a reader that has gone is then caught below
        if INTERRUPTED.is_set():  # an interrupt swallowed on the way (by a library)
            raise KeyboardInterrupt
        return status
    except BaseException as exc:  # noqa: BLE001 - each kind mapped to one line and a status
        return _failure(exc, args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if INTERRUPTED.is_set():
            interrupt_handled()


def _failure(exc, args):
    """The one line a failed command prints, and its exit status (re-raises what is not ours)."""
    if INTERRUPTED.is_set() or isinstance(exc, KeyboardInterrupt):
        # after Ctrl-C, the error it caused (a cancelled future, numba's SystemError) is the interrupt
        print(f"ensemble-dask: {_INTERRUPTED_LINE}", file=sys.stderr)
        return 130
    if isinstance(exc, EnsembleDaskError):
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, BrokenPipeError):
        # the reader of stdout stopped early (``report --format json | head``): end quietly, as
        # Python's docs advise: stdout points at devnull so that flushing it at exit cannot raise again
        with contextlib.suppress(AttributeError, OSError, ValueError):  # not a real file (tests)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE (13): the status a shell reports for a command SIGPIPE ended
    if isinstance(exc, OSError):  # a full disk, a file-size limit, a permission: the path and the cause
        where = getattr(exc, "filename", None) or getattr(args, "store", None)
        where = f" {where}" if where else ""
        print(
            f"ensemble-dask: error: I/O error on{where}: {exc.strerror or exc}; the stage is not marked "
            "complete: fix the cause (free space, permissions) and run the same command again",
            file=sys.stderr,
        )
        return 1
    raise exc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
