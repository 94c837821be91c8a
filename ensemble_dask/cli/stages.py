"""The stage commands (``ingest``, ``generate``, ``import-labels``, ``coassoc``, ``consensus``, ``report``,
``split-sites``, ``verify``) and what they print."""

from __future__ import annotations

import json
import sys

from ._args import _storage_options


def _dask_options(args):
    return {"n_workers": args.n_workers} if getattr(args, "n_workers", None) else None


def _stage(args, pipeline, store, labels=None):
    """Run the stage command ``args.command`` on ``store``."""
    progress = not getattr(args, "no_progress", True)
    if args.command == "split-sites":
        import yaml

        from ..stages.sites import split_sites

        sites = split_sites(store, args.out, args.names)
        print("# each site's data section, for its own site.yaml (ensemble-dask site serve)")
        print(yaml.safe_dump({s["name"]: {"data": s["data"]} for s in sites}, sort_keys=False), end="")
    elif args.command == "ingest":
        from ..stages.ingest import ingest

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
        from ..stages.generate import generate

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
        from ..stages.generate import default_k_range

        lo, hi = default_k_range(args.n_clusters)
        lo, hi = lo if args.k_min is None else args.k_min, hi if args.k_max is None else args.k_max
        print(
            f"generate: {info['n_clusterings']} clusterings (k in [{lo}, {hi}]), {info['computed']} computed"
        )
        if args.n_clusters is None and args.k_min is None and args.k_max is None:
            print(
                "generate: a range for consensus of up to 5 clusters; for K clusters, "
                "generate --n-clusters K draws k in [K/2, 2K] "
                "(a consensus splits only what base partitions split)"
            )
    elif args.command == "coassoc":
        from ..stages.coassoc import coassoc_stage

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
        from ..stages.consensus import consensus_stage

        metrics = consensus_stage(
            store, args.name, seed=args.seed, **dict(map(pipeline.parse_assignment, args.set))
        )
        report = pipeline.write_report(store)
        _print_summary({"dataset": report["dataset"], "methods": {args.name: metrics}})
    elif args.command == "import-labels":
        from ..stages.generate import import_labels

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
