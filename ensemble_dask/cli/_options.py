"""What the commands share: option types, the store and cluster options, how a stage command holds its
store, and the summary table."""

from __future__ import annotations

import argparse
import contextlib
import json

from .._validation import EnsembleDaskError


def csv_list(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def storage_options(text):
    if text is None:
        return None
    try:
        opts = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EnsembleDaskError(f"--storage-options must be a JSON object; got {text!r}") from exc
    if not isinstance(opts, dict):
        raise EnsembleDaskError(f"--storage-options must be a JSON object; got {text!r}")
    return opts


def positive(text):
    """A count of at least one, checked where it is given (``--n-workers -1`` hung the cluster's start)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def seed(text):
    """``--seed``: checked where it is given (argparse turns the error into one line and exit 2)."""
    from .._validation import InputError, check_seed

    try:
        return check_seed(int(text))
    except (ValueError, InputError) as exc:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {text!r}") from exc


def store_args(p, required=True):
    p.add_argument("--store", required=required, help="run store URL (path, file://, memory://, s3://)")
    p.add_argument("--storage-options", help="fsspec options of the store, as JSON")
    p.add_argument(
        "--take-over", action="store_true", help="replace the store's stale lease (its writer died)"
    )


def sep_arg(p):
    """``--sep`` of a command that reads a CSV (``ingest``, ``import-labels``)."""
    p.add_argument(
        "--sep",
        help="a CSV's field separator: one character, 'tab' or 'whitespace' "
        "(default: guessed from its first lines among , tab ; | and whitespace)",
    )


def cluster_args(p):
    p.add_argument("--scheduler", help="address of an existing Dask scheduler (default: a LocalCluster)")
    p.add_argument("--n-workers", type=positive, help="workers of the embedded LocalCluster")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def set_args(p, help="override a workflow key"):
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help)


def progress(args):
    """Progress bars and lines (on a terminal only) unless ``--no-progress`` or ``--quiet``."""
    return not (getattr(args, "no_progress", False) or getattr(args, "quiet", False))


def dask_options(args):
    return {"n_workers": args.n_workers} if getattr(args, "n_workers", None) else None


@contextlib.contextmanager
def stage_store(args, *, mode="r+", new=False, lease=True, writes_report=False):
    """The store a stage command works on, held under its lease while the command writes (``lease``).

    ``mode="r+"``: a store that exists, opened before its lease is taken; ``"a"``: created if need be.
    ``new`` (``ingest``): created under its lease, and removed again if the command leaves it empty.
    ``writes_report``: a report folder that could not be written is refused before the stage runs.
    """
    from .. import pipeline

    options = storage_options(args.storage_options)
    with contextlib.ExitStack() as stack:
        if new:  # a failed ingest leaves no new, empty store behind
            stack.enter_context(pipeline.removed_if_left_empty(args.store, options))
            stack.enter_context(pipeline.store_lease(args.store, options, take_over=args.take_over))
            yield pipeline.open_store(args.store, options)
            return
        store = pipeline.open_store(args.store, options, mode=mode)
        if lease:
            stack.enter_context(pipeline.store_lease(args.store, options, take_over=args.take_over))
        if writes_report:
            pipeline.check_report_settings(store)  # they write under report/: stop before the stage
        yield store


def print_summary(report, out=None):
    ds = report.get("dataset", {})
    d = "" if ds.get("d") is None else f" d={ds.get('d')}"  # none: labels brought without features
    print(f"data set: n={ds.get('n')}{d} clusterings={ds.get('n_clusterings')}", file=out)
    rows = []
    if report.get("base_partitions"):
        bp = report["base_partitions"]
        rows.append(("base partitions (mean)", bp["H"]["mean"], bp["ARI"]["mean"], bp["NMI"]["mean"], "", ""))
    for name, m in (report.get("methods") or {}).items():
        kept = m.get("chosen") or m.get("candidate")  # auto's method, graph's candidate: the one kept
        name = f"{name} ({kept})" if kept else name
        rows.append((name, m.get("H"), m.get("ARI"), m.get("NMI"), m.get("effective_k"), m.get("seconds")))
    if not rows:
        return

    def fmt(v, width, spec=""):
        """``v`` in its column: a number as ``spec`` says, anything else (nothing: no score) right-aligned."""
        return (
            format(v, f">{width}{spec}") if isinstance(v, (int, float)) else format(str(v or ""), f">{width}")
        )

    print(f"{'':26s} {'H':>7s} {'ARI':>7s} {'NMI':>7s} {'k_eff':>6s} {'secs':>8s}", file=out)
    for name, h, a, nm, k, s in rows:
        scores = " ".join(fmt(v, 7, ".4f") for v in (h, a, nm))
        print(f"{name:26s} {scores} {fmt(k, 6)} {fmt(s, 8, '.2f')}", file=out)
    for name, m in (report.get("methods") or {}).items():
        if m.get("k_scores"):  # K chosen from a range: which, and why
            ks = sorted(int(k) for k in m["k_scores"])
            print(f"{name}: K={m['n_clusters']} chosen in [{ks[0]}, {ks[-1]}] by {m['k_reason']}", file=out)
