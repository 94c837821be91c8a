"""``ensemble-dask coassoc``: sample point pairs and count their co-associations."""

from __future__ import annotations

from ._options import cluster_args, dask_options, progress, seed, stage_store, store_args


def add_parser(sub, common):
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
    p.add_argument(
        "--count-mode",
        default="auto",
        choices=["auto", "rows", "join"],
        help="rows: a task reads the label rows its pairs touch; join: pairs bucketed by their two row "
        "blocks (the same counts; auto: join when the labels are large)",
    )
    p.add_argument("--seed", type=seed, default=0, help="the seed of the pairs' draws")
    p.set_defaults(run=run)


def run(args):
    from .. import pipeline
    from ..runtime.progress import elapsed_line
    from ..stages.coassoc import coassoc_stage

    extra = {k: getattr(args, k) for k in ("p", "l", "fraction", "max_n") if getattr(args, k) is not None}
    with (
        stage_store(args, writes_report=True) as store,
        pipeline.client_for_store(store, args.scheduler, dask_options(args)) as client,
        client.running("coassoc"),
        elapsed_line("coassoc", progress=progress(args)),
    ):
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
    return 0
