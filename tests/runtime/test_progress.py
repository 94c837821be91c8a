"""The line that counts an in-process fit's time (runtime/progress.py): on a terminal only."""

from __future__ import annotations

import io
import time

import numpy as np

from ensemble_dask.io.store import RunStore
from ensemble_dask.runtime.progress import elapsed_line
from ensemble_dask.stages.consensus import consensus_stage
from ensemble_dask.stages.generate import import_labels


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_line_counts_the_time_on_a_terminal_and_says_nothing_elsewhere():
    tty, pipe = _Terminal(), io.StringIO()
    with elapsed_line("consensus x", file=tty, every=0.05):
        time.sleep(0.3)
    drawn = tty.getvalue()
    assert drawn.count("consensus x: 00:0") >= 3, drawn  # redrawn while the block runs, not only at its start
    with elapsed_line("consensus x", file=pipe, every=0.05), elapsed_line("y", file=tty, progress=False):
        time.sleep(0.1)
    assert pipe.getvalue() == "" and tty.getvalue() == drawn


def test_an_in_process_fit_shows_the_line(tmp_path, monkeypatch):
    """A consensus fit in this process said nothing while it ran (10-20 s at KDD's size); with progress on a
    terminal it shows its time, and clears the line when it is done."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 300)
    noisy = [np.where(rng.random(300) < 0.9, truth, rng.integers(0, 3, 300)) for _ in range(6)]
    labels = np.column_stack(noisy)
    store = RunStore(tmp_path / "s.zarr")
    import_labels(store, "labels-table", labels=labels.astype(np.int32))
    tty = _Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    consensus_stage(store, "bce", n_clusters=3, progress=True)
    assert "consensus bce: 00:0" in tty.getvalue()
    before = tty.getvalue()
    consensus_stage(store, "kcc", n_clusters=3)  # progress off: the library's default
    assert tty.getvalue() == before


def test_the_report_shows_the_line_and_quiet_turns_progress_and_the_log_down(tmp_path, monkeypatch):
    """The report's figures took about 10 s with nothing on the screen, and there was no ``--quiet``."""
    import logging

    from ensemble_dask import pipeline
    from ensemble_dask.cli._options import progress
    from ensemble_dask.cli._parser import parser

    rng = np.random.default_rng(0)
    store = RunStore(tmp_path / "s.zarr")
    import_labels(store, "labels-table", labels=rng.integers(0, 3, (200, 4)).astype(np.int32))
    tty = _Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    pipeline.write_report(store, progress=True)
    assert "report: 00:0" in tty.getvalue()
    args = parser().parse_args(["report", "--store", "s.zarr", "--quiet"])
    assert args.quiet and not progress(args)
    assert progress(parser().parse_args(["report", "--store", "s.zarr"]))  # (drawn on a terminal only)
    assert not progress(parser().parse_args(["generate", "--store", "s.zarr", "--no-progress"]))
    from ensemble_dask.cli import main

    monkeypatch.setattr(logging.root, "handlers", [])  # main's basicConfig sets the level afresh
    monkeypatch.setattr(logging.root, "level", logging.root.level)  # (and the test puts it back)
    main(["report", "--store", str(tmp_path / "s.zarr"), "-q"])
    assert logging.getLogger().level == logging.ERROR
