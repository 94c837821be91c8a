"""Parameter checks shared by the estimators and stages."""

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask._validation import check_choice


@pytest.mark.parametrize("choices", [{"kl", "l2"}, ("kl", "l2")])
@pytest.mark.parametrize(
    "value, shape",
    [(np.array(["kl", "l2"]), r"\(2,\)"), (np.array(["kl"]), r"\(1,\)"), (np.array("kl"), r"\(\)")],
)
def test_check_choice_names_an_array_by_its_shape(choices, value, shape):
    """An array is not a name, even one holding a valid name: not compared element-wise (numpy's
    'truth value is ambiguous' against a tuple), not hashed (against a set), and not let through."""
    with pytest.raises(
        InputError,
        match=rf"'divergence' parameter must be one of \['kl', 'l2'\]; got an array of shape {shape}",
    ):
        check_choice(value, "divergence", choices)


def test_check_choice_refuses_an_unhashable_value():
    with pytest.raises(InputError, match=r"got \['kl'\]"):
        check_choice(["kl"], "divergence", {"kl", "l2"})


def test_check_choice_keeps_the_repr_of_a_scalar():
    with pytest.raises(InputError, match=r"got 'hellinger'"):
        check_choice("hellinger", "divergence", {"kl", "l2"})
    assert check_choice("kl", "divergence", {"kl", "l2"}) == "kl"


@pytest.mark.parametrize("command", ["ingest x.npy", "generate", "coassoc", "consensus pcc-kl"])
def test_a_negative_seed_is_refused_where_it_is_given(command, capsys):
    """Issue 29: ``--seed -1`` ended in numpy's ValueError traceback after the stage had started."""
    from ensemble_dask.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*command.split(), "--store", "nowhere.zarr", "--seed", "-1"])
    assert exc.value.code == 2
    assert "argument --seed: must be a non-negative integer; got '-1'" in capsys.readouterr().err


def test_one_message_for_a_bad_seed_in_every_layer():
    from ensemble_dask._validation import check_random_state, stage_seed

    for call, name in (
        (lambda: stage_seed(-1, "generate"), "seed"),
        (lambda: check_random_state(-3), "random_state"),
    ):
        with pytest.raises(
            InputError, match=rf"The '{name}' parameter must be a non-negative integer; got -"
        ):
            call()
    assert check_random_state(0).integers(10) == np.random.default_rng(0).integers(10)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["generate", "--store", "s.zarr", "--n-workers", "-1"],
            "argument --n-workers: must be a positive integer",
        ),
        (
            ["ingest", "synthetic:kdd99?n=abc", "--store", "{tmp}/s.zarr"],
            "synthetic:kdd99: n must be an integer",
        ),
        (["ingest", "synthetic:kdd99?n=10", "--store", ""], "the run store URL is empty"),
        (
            ["consensus", "../../escape", "--store", "{tmp}/s.zarr"],
            "a consensus result's name is a plain name",
        ),
    ],
)
def test_bad_values_from_issue_29_are_one_line_and_exit_2(args, message, tmp_path, capsys):
    from ensemble_dask.cli import main

    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if args[0] == "consensus":  # a store that exists, so the name is what is refused
        assert main(["ingest", "synthetic:kdd99?n=50", "--store", args[-1]]) == 0
        capsys.readouterr()
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    from ensemble_dask import cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.report, "run", interrupted)  # the command's own function
    assert cli.main(["report", "--store", "x.zarr"]) == 130
    assert capsys.readouterr().err == "ensemble-dask: interrupted; run the same command to resume\n"


def test_an_error_that_ctrl_c_caused_is_the_interrupt(monkeypatch, capsys):
    """Ctrl-C inside a numba kernel surfaces as ``SystemError: ... returned a result with an exception set``
    (and inside Dask as a cancelled future): a run interrupted so printed that traceback. The handler notes
    the interrupt, and whatever error follows is reported as it."""
    import signal

    from ensemble_dask import cli

    def kernel_interrupted(args):
        try:
            signal.raise_signal(signal.SIGINT)  # the command's handler runs: noted, KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError(
                "CPUDispatcher(<function estep_block>) returned a result with an exception set"
            ) from exc

    monkeypatch.setattr(cli.report, "run", kernel_interrupted)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # a test process may ignore SIGINT
    try:
        assert cli.main(["report", "--store", "x.zarr"]) == 130
        assert capsys.readouterr().err == "ensemble-dask: interrupted; run the same command to resume\n"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back
    finally:
        signal.signal(signal.SIGINT, before)


async def _runner():
    pass


def _interrupted_report_is_one_line(monkeypatch, capsys, run):
    """``ensemble-dask report`` whose work is ``run`` (which raises SIGINT): exit 130, the interrupt's line
    alone on stderr and no warning, the coroutines it left collected."""
    import gc
    import signal
    import warnings

    from ensemble_dask import cli

    monkeypatch.setattr(cli.report, "run", run)
    monkeypatch.setattr(warnings, "_warn_unawaited_coroutine", warnings._warn_unawaited_coroutine)  # restored
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert cli.main(["report", "--store", "x.zarr"]) == 130
            gc.collect()
        assert capsys.readouterr().err == "ensemble-dask: interrupted; run the same command to resume\n"
        assert [str(w.message) for w in seen] == []
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_between_making_a_coroutine_and_scheduling_it_is_one_line(monkeypatch, capsys):
    """CI: Ctrl-C at the start of a stage printed the interrupt's line and then two RuntimeWarnings,
    "coroutine '_runner' was never awaited" and "coroutine 'AsyncArray._get_selection' ...": zarr's sync()
    makes the coroutines and hands them to its event loop's thread, and the interrupt fell in between. The
    coroutines, collected with the traceback, each warned. After Ctrl-C that warning is the interrupt too."""
    import signal

    def interrupted_in_sync(args):
        coro = _runner()  # made, not yet handed to a loop
        signal.raise_signal(signal.SIGINT)
        coro.send(None)  # not reached

    _interrupted_report_is_one_line(monkeypatch, capsys, interrupted_in_sync)


def test_ctrl_c_inside_a_catch_warnings_block_is_one_line(monkeypatch, capsys):
    """CI again: Ctrl-C 0.01 s into a consensus stage printed "coroutine '_runner' was never awaited" and
    "coroutine 'AsyncGroup.getitem' ..." after the interrupt's line. The interrupt fell inside a
    ``warnings.catch_warnings()`` block (as around zarr's writes), which dropped the filter the handler had
    added in it when the interrupt left it; the coroutines were collected after that."""
    import signal
    import warnings

    def interrupted_in_a_block(args):
        coro = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a block of the code that runs: a zarr write
            coro = _runner()  # made, not yet handed to a loop
            signal.raise_signal(signal.SIGINT)
        coro.send(None)  # not reached

    _interrupted_report_is_one_line(monkeypatch, capsys, interrupted_in_a_block)


@pytest.mark.slow
def test_ctrl_c_with_a_task_left_pending_in_an_event_loop_thread_is_one_line(tmp_path):
    """CI: Ctrl-C in the consensus stage printed the interrupt's line and then two "ERROR asyncio: Task was
    destroyed but it is pending!": zarr runs its reads as tasks in an event loop of its own thread, the
    interrupt left them pending, and they were collected after ``main`` had given asyncio's logger its level
    back (for a caller that goes on). The program does not go on: it stays quiet to the end."""
    import subprocess
    import sys

    script = tmp_path / "program.py"
    script.write_text(
        "import asyncio, gc, signal, sys, threading\n"
        "from ensemble_dask import __main__, cli\n"
        "loop = asyncio.new_event_loop()\n"
        "threading.Thread(target=loop.run_forever, daemon=True).start()\n"
        "def cut_short(args):\n"
        "    async def wait():\n"
        "        await loop.create_future()\n"
        "    asyncio.run_coroutine_threadsafe(wait(), loop)  # a task of the loop's, left pending\n"
        "    signal.raise_signal(signal.SIGINT)\n"
        "cli.report.run = cut_short\n"
        "sys.argv = ['ensemble-dask', 'report', '--store', 'x.zarr']\n"
        "status = __main__.console()  # what the entry point and python -m run\n"
        "gc.collect()  # the task, collected on the way out\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130
    assert done.stderr == "ensemble-dask: interrupted; run the same command to resume\n"
    from importlib.metadata import entry_points

    assert entry_points(group="console_scripts")["ensemble-dask"].value == "ensemble_dask.cli:console"


def test_imported_labels_with_no_evidence_are_refused_and_ids_are_dense(tmp_path):
    """Issue 29: a column labelling one point (or one cluster) passed import-labels; ids up to 10**9 made
    coassoc ask for 37 GiB. Now the column is named, and ids are renumbered 0 .. k-1."""
    from ensemble_dask.stages.generate import read_labels_table

    lab = np.array([[5, 1_000_000_000, 0], [5, 7, -1], [9, 7, -1], [9, 1_000_000_000, -1]])
    np.save(tmp_path / "l.npy", lab)
    with pytest.raises(InputError, match="column 2 labels one point"):
        read_labels_table(str(tmp_path / "l.npy"))
    np.save(tmp_path / "l.npy", np.column_stack([lab[:, :2], [3, 3, 3, -1]]))
    with pytest.raises(InputError, match="column 2 puts every labelled point in one cluster"):
        read_labels_table(str(tmp_path / "l.npy"))
    np.save(tmp_path / "l.npy", lab[:, :2])
    np.testing.assert_array_equal(
        read_labels_table(str(tmp_path / "l.npy")), [[0, 1], [0, 0], [1, 0], [1, 1]]
    )


def test_a_pairs_store_with_no_co_present_pair_is_an_error(tmp_path):
    """Issue 29: coassoc marked complete a pairs store in which no pair was ever co-present (sampled pairs
    whose points no clustering labels together). The check runs before the stage is marked."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.stages.coassoc import _check_evidence

    store = RunStore(tmp_path / "s.zarr")
    store.group.require_group("pairs").create_array("both", data=np.zeros(5, dtype=np.uint16))
    with pytest.raises(
        InputError, match="no pair of points was ever in the same base clustering's subsample"
    ):
        _check_evidence(store)
    store.group["pairs/both"][3] = 1
    _check_evidence(store)


_WRITE_CHAIN = (
    ("ingest", ["synthetic:kdd99?n=20000"], 20_000),  # X's chunks are larger than its record
    # one worker process: the writes fail in a worker all the same (not a test of the cluster's size)
    ("generate", ["--n-clusters", "4", "-N", "8", "--no-progress", "--n-workers", "1"], 4_096),
    ("coassoc", ["--n-clusters", "4", "--no-progress", "--n-workers", "1"], 4_096),
    ("consensus", ["pcc-kl", "--set", "n_clusters=4"], 4_096),
    ("report", [], 4_096),
)
_CLEAN_WORKFLOW = """
data: {url: "synthetic:kdd99?n=20000"}
generate: {n_clusterings: 8}
coassoc: {}
consensus: {pcc-kl: {n_clusters: 4}}
"""
_WRITTEN = ("X", "labels", "pairs/indptr", "pairs/indices", "pairs/co", "pairs/both", "consensus/pcc-kl/Y")


@pytest.mark.slow
def test_a_write_that_fails_in_any_stage_is_one_line_and_marks_nothing(tmp_path):
    """Issue 29: a full disk (a file-size limit as a stand-in) ended in an OSError traceback from the client
    and the workers. Each stage, its writes limited in size: one line naming the store and the cause,
    exit 1, the stage not marked; the same command then completes it, and the store equals a clean run."""
    import os
    import resource
    import shutil
    import signal
    import subprocess
    import sys

    from ensemble_dask.io.store import RunStore

    def command_line(store, command, args):
        return [sys.executable, "-m", "ensemble_dask", command, *args, "--store", str(store)]

    def run(store, command, args, limit=None):
        def preexec():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        return subprocess.run(
            command_line(store, command, args),
            capture_output=True, text=True, timeout=300, preexec_fn=preexec if limit else None,
        )  # fmt: skip

    store, clean = tmp_path / "s.zarr", tmp_path / "clean.zarr"
    # the same stages in one clean run (its workflow gives what the stage commands below give a clean store),
    # on a store of its own, no limit: started now, it runs beside the chain (each command of the chain waits
    # on its cluster's start for most of its time) and is compared at the end
    workflow = tmp_path / "clean.yaml"
    workflow.write_text(_CLEAN_WORKFLOW)
    clean_run = subprocess.Popen(
        command_line(clean, "run", [str(workflow), "--no-progress", "--n-workers", "1"]),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        for command, args, limit in _WRITE_CHAIN:
            if command == "report":  # a page to write again (the stages' commands drew none)
                shutil.rmtree(store / "report", ignore_errors=True)
            failed = run(store, command, args, limit)
            said = failed.stderr
            assert failed.returncode == 1, (command, said)
            assert said.count("\n") == 1 and "Traceback" not in said, (command, said)
            assert f"ensemble-dask: error: I/O error on {store}: File too large" in said, said
            stage = "consensus/pcc-kl" if command == "consensus" else command
            if store.exists():
                assert not (RunStore(store, mode="r").record(stage) or {}).get("complete"), command
            assert run(store, command, args).returncode == 0, command
        _, err = clean_run.communicate(timeout=300)
    finally:
        if clean_run.poll() is None:  # the chain failed: the clean run and its workers are not waited for
            os.killpg(clean_run.pid, signal.SIGKILL)
            clean_run.communicate()
    assert clean_run.returncode == 0, err
    a, b = RunStore(store, mode="r"), RunStore(clean, mode="r")
    for name in _WRITTEN:
        np.testing.assert_array_equal(a[name][:], b[name][:], err_msg=name)


def test_a_library_callers_ctrl_c_changes_nothing_global(caplog):
    """Review of issue 29: a KeyboardInterrupt inside a LazyClient (a notebook's run_workflow) left
    INTERRUPTED set and distributed's loggers silenced for the rest of the process; and the fork server that
    ignores Ctrl-C started for anyone whose dask config said forkserver, not only for the command."""
    import logging

    import dask

    from ensemble_dask.runtime import clients as parallel

    class Stack:
        closed = False

        def close(self):
            Stack.closed = parallel.INTERRUPTED.is_set()  # the nannies see it while the cluster closes

    level = logging.getLogger("distributed").level
    lazy = parallel.LazyClient(lambda: None)
    with pytest.raises(KeyboardInterrupt):
        with lazy:
            lazy._stack = Stack()
            raise KeyboardInterrupt
    assert Stack.closed and not parallel.INTERRUPTED.is_set()
    assert logging.getLogger("distributed").level == level
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        assert not parallel._fork_server_wanted()
        assert "multiprocessing-method" not in str(parallel._process_config())
    with parallel.workers_ignore_ctrl_c():
        assert parallel._fork_server_wanted()
    parallel.interrupt()
    parallel.interrupt()  # twice: the level kept is the one before the first
    parallel.interrupt_handled()
    assert logging.getLogger("distributed").level == level and not parallel.INTERRUPTED.is_set()


def test_consensus_takes_n_clusters_as_generate_and_coassoc_do(tmp_path, capsys):
    """A user's review: generate and coassoc take --n-clusters K, consensus only --set n_clusters=K (and
    --n-clusters there was 'unrecognized arguments'); K is required now, so it is one option everywhere."""
    from ensemble_dask.cli import main

    store = str(tmp_path / "s.zarr")
    np.save(tmp_path / "l.npy", np.random.default_rng(0).integers(0, 3, (50, 6)))
    assert main(["import-labels", str(tmp_path / "l.npy"), "--store", store]) == 0
    assert main(["consensus", "kcc", "--store", store, "--n-clusters", "3"]) == 0
    assert "data set: n=50 clusterings=6" in capsys.readouterr().out  # labels brought alone: no 'd=None'

    assert main(["consensus", "kcc", "--store", store, "--n-clusters", "3", "--set", "n_clusters=4"]) == 2
    assert "--n-clusters 3 and --set n_clusters=4 disagree" in capsys.readouterr().err
    assert main(["consensus", "kcc", "--store", store]) == 2
    assert "needs n_clusters" in capsys.readouterr().err
