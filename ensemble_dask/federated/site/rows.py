"""A site's rows as row blocks on the site's own Dask cluster: BCE's E-step and KCC's Lloyd step there.

The site agent (:mod:`.agent`) opens its own cluster (:func:`~ensemble_dask.runtime.site.site_cluster`: an
embedded ``LocalCluster`` of threads by default, reached in-process only; worker processes with TLS
credentials made in the agent's process; or a scheduler the site names, with the site's own certificate),
scatters its rows in
blocks of fixed size, and runs the row-level work where the blocks are: per round only the blocks'
summed statistics come back to the agent, which masks them. Nothing here is reachable from the
coordinator: the agent calls these functions with arguments it has checked (:mod:`.ops`).

Functions take the session ``st`` (``st.name``, ``st.data``, ``st.client``).
"""

from __future__ import annotations

import contextlib
import logging
import operator
import re
from pathlib import Path

import numpy as np

from ..._validation import InputError
from ...consensus._common.encoding import Encoding
from ...io.readers import load_npy
from ...rowblocks.bce import DaskBlockEStep, expand_gamma, prepare_block
from ...rowblocks.blocks import DaskBlocks
from ..protocol.secure import ROW_TERM_LIMIT
from ..protocol.wire import CANNOT_RESUME
from .data import write_memberships

__all__ = [
    "scatter_rows",
    "bce_prepare",
    "bce_reset",
    "bce_estep",
    "bce_promote",
    "bce_finish",
    "kcc_prepare",
    "kcc_reset",
    "kcc_sizes",
    "kcc_cooccurrence",
    "kcc_step",
    "kcc_finish",
]

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_ROWS = 65536


def scatter_rows(st, labels, block_rows=None):
    """The site's labels in row blocks of fixed size on its cluster (``st.data["blocks"]``)."""
    rows = int(block_rows or DEFAULT_BLOCK_ROWS)
    bounds = [(a, min(a + rows, labels.shape[0])) for a in range(0, labels.shape[0], rows)] or [(0, 0)]
    st.data["blocks"] = [st.client.scatter(np.ascontiguousarray(labels[a:b]), hash=False) for a, b in bounds]


def _submit(st, func, *args):
    return st.client.submit(func, *args, pure=False)


# --------------------------------------------------------------------------- BCE


#: a checkpoint's history: ``<session>-<round>`` of the E-step round that made its ``gamma`` (round 0: the
#: session's fresh start; any round a site takes, up to msgpack's 2^64 - 1, has at most 20 digits)
TAG_RE = re.compile(r"[0-9a-f]{16,64}-[0-9]{1,20}")  # (fullmatch: "$" matched before a "\n")


def _ckpt(st, name, j):
    # the coordinator's run key, and the site's own fingerprint of what the file must fit (categories, k,
    # blocks): a run key the coordinator names cannot load a file made for other rows or another k
    return str(Path(st.data["checkpoint"]) / f"{st.data['ckpt_run']}-{name}-b{j}.npy")


def _fresh(st):
    """The session's rows start from fresh ``gamma`` (the same at every site): its history is round 0."""
    st.data["gamma_tag"], st.data["gamma_name"] = f"{st.session}-0", None


def _save(path, arr, keep):
    """Save ``arr`` at ``path``; remove the files of the same pattern not in ``keep`` (no pile-up)."""
    np.save(path, arr)
    p = Path(path)
    run, _, rest = p.name.partition("-gamma-") if "-gamma-" in p.name else p.name.partition("-best-")
    kind = "gamma" if "-gamma-" in p.name else "best"
    block = rest.rsplit("-", 1)[-1]
    for old in p.parent.glob(f"{run}-{kind}-*-{block}"):
        if old.name not in keep:
            old.unlink(missing_ok=True)


#: the checkpoint files this module writes (``_ckpt``): run key, fit key (a whole SHA-256; 12 digits in files
#: of earlier versions, pruned as any other run's), kind; nothing else is pruned
_CKPT_NAME = re.compile(r"([0-9a-f]{16}-(?:[0-9a-f]{64}|[0-9a-f]{12}))-(?:gamma|best)-.+\.npy")


def _prune_runs(directory, keep_keys, keep):
    """Remove the checkpoints of all but the ``keep`` runs written last and those of ``keep_keys`` (the runs
    of the sessions open now). A run is a run key with the site's fit key (``_ckpt``): the coordinator names
    a new run key whenever it likes, or another k or categories under one run key, and each run leaves a
    ``gamma`` per block behind. Files of other names are never touched."""
    runs, files = {}, []
    for f in Path(directory).glob("*.npy"):
        m = _CKPT_NAME.fullmatch(f.name)
        if m is None:
            continue
        with contextlib.suppress(OSError):
            runs[m.group(1)] = max(runs.get(m.group(1), 0.0), f.stat().st_mtime)
            files.append((m.group(1), f))
    others = sorted((r for r in runs if r not in keep_keys), key=runs.get, reverse=True)
    old = set(others[max(keep - len(set(keep_keys)), 0) :])  # the held runs count among the kept
    for run, f in files:
        if run in old:
            f.unlink(missing_ok=True)


class CannotResume(InputError):
    """This site cannot resume from the checkpoint named (the coordinator then fits afresh)."""

    code = CANNOT_RESUME


def _load(path, name, prepared, k):
    """A checkpointed ``gamma`` of a block, checked to fit its distinct rows and ``k``. The coordinator is
    told the checkpoint's ``name`` (its kind, start and tag) and no more: neither the site's paths, nor the
    file's name, whose fit key hashes the number of the site's row blocks (its ``block_rows``, a setting of
    its own config; a review read it back), nor its blocks' distinct rows."""
    missing = CannotResume(f"no checkpoint {name} at this site; cannot resume")
    if not Path(path).exists():
        raise missing
    gamma = load_npy(path, allow_pickle=False)
    want = (prepared["gidx"].shape[0], k)
    # a file is named by the site's rows and the layout (bce_prepare): one that does not fit them was altered
    # on the site's disk; told as a missing one, so that no answer tells which rows a site holds
    if gamma.shape != want or gamma.dtype != np.float64 or not np.isfinite(gamma).all():
        logger.warning("checkpoint %s (%s) does not fit the site's rows (altered?); not resumed", name, path)
        raise missing
    return gamma


def bce_prepare(st, categories, k, checkpoint, run_key, resume, e_step=(1e-4, 100), keep_runs=4, held=()):
    """Encode the blocks (identical rows merged), fresh ``gamma`` or the site's checkpointed one; the
    checkpoints of all but the last ``keep_runs`` runs are removed (never those of this run and of the
    runs ``held`` by the site's open sessions: their ``ckpt_run``).

    ``resume`` is ``[start, iteration, its tag, best start, its tag]`` (an iteration or a best start may be
    None, with its tag). A checkpoint is named by its tag, the session and round of the E-step that made it
    (:data:`TAG_RE`), and only loaded by it. Every site that computed one round of a session shares its
    transcript (the round's shares are bound to it, and each round takes more than half of the sites), so
    files of one tag hold the same history at every site; files of sessions that left one site apart (a
    round computed at that site alone, a start promoted there alone) carry tags of their own, and sites
    asked to resume from one tag that some of them lack refuse. Without it a coordinator could leave one
    site's checkpoint apart from the others' in one session and resume all of them in the next: the
    complete, consistent rounds that followed summed that site's statistics apart from the rest."""
    import hashlib
    import json

    blocks = st.data.pop("blocks")
    prepared = [_submit(st, prepare_block, b, categories) for b in blocks]
    layout = {"k": int(k), "categories": [c.tolist() for c in categories], "blocks": len(blocks)}
    layout["rows"] = st.data.get("rows_key")  # the site's own rows: changed rows find no file (never sent)
    # the whole SHA-256: a coordinator that finds two layouts of one key could resume a file of one under the
    # other, and a site's answer (the file fits its rows or not) would depend on its rows
    fit_key = hashlib.sha256(json.dumps(layout).encode()).hexdigest()
    ckpt_run = f"{run_key}-{fit_key}"
    st.data.update(
        k=int(k), checkpoint=checkpoint, run_key=run_key, ckpt_run=ckpt_run, best=None, best_name=None
    )
    _fresh(st)
    # each row's unbounded terms clipped: no parameters sent can push a sum out of the fixed-point range
    st.data["estep"] = DaskBlockEStep(st.client, prepared, int(k), *e_step, clip=ROW_TERM_LIMIT, exact=True)
    if checkpoint:
        Path(checkpoint).mkdir(parents=True, exist_ok=True)
        _prune_runs(checkpoint, {ckpt_run, *held}, keep_runs)
    if resume is None:
        return
    init, t, tag, best_init, best_tag = resume
    if not checkpoint:  # (the agent refuses such a prepare: fresh rows would sum apart from resumed ones)
        raise CannotResume("this site keeps no checkpoints; cannot resume")
    if t is not None:
        name = f"gamma-{init}-{t}-{tag}"
        st.data["estep"].gamma = [
            _submit(st, _load, _ckpt(st, name, j), name, p, int(k)) for j, p in enumerate(prepared)
        ]
        st.data["gamma_tag"], st.data["gamma_name"] = tag, name
    if best_init is not None:
        name = f"best-{best_init}-{best_tag}"
        st.data["best"] = [
            _submit(st, _load, _ckpt(st, name, j), name, p, int(k)) for j, p in enumerate(prepared)
        ]
        st.data["best_name"] = name
    st.client.gather(st.data["estep"].gamma + (st.data["best"] or []))  # a missing file is named now


def bce_reset(st):
    st.data["estep"].reset()
    _fresh(st)


def _checkpoint(st, name, last, blocks):
    """Save each block's ``gamma`` (futures on the site's cluster) as checkpoint ``name``, keeping the one
    before it (``last``, or None) and removing the other files of its kind; nothing without a checkpoint
    directory."""
    if not st.data["checkpoint"]:
        return
    saves = []
    for j, g in enumerate(blocks):
        keep = {Path(_ckpt(st, n, j)).name for n in (name, last) if n is not None}
        saves.append(_submit(st, _save, _ckpt(st, name, j), g, keep))
    st.client.gather(saves)


def bce_estep(st, params, init, t, tol, max_iter):
    """The E-step over the site's blocks (in the session's current round): the summed statistics vector;
    ``gamma`` stays on the workers, and is checkpointed under this round's tag (:func:`bce_prepare`)."""
    estep = st.data["estep"]
    estep.tol, estep.max_iter = tol, max_iter
    vec = estep(params, t)
    tag = f"{st.session}-{st.last_round}"
    name, last = f"gamma-{init}-{t}-{tag}", st.data["gamma_name"]
    st.data["gamma_tag"], st.data["gamma_name"] = tag, name
    # this iteration's and the last one's (the coordinator resumes from either)
    _checkpoint(st, name, last, estep.gamma)
    return vec


def bce_promote(st, init):
    """The current start is the best so far: keep its ``gamma`` (on the workers) for the memberships, and
    checkpoint it under the tag of the E-step that made it, beside the best before it (which the
    coordinator's checkpoint names until it saves the new one)."""
    st.data["best"] = list(st.data["estep"].gamma)
    name, last = f"best-{init}-{st.data['gamma_tag']}", st.data["best_name"]
    st.data["best_name"] = name
    _checkpoint(st, name, last, st.data["best"])


def _memberships(gamma, prepared):
    g = expand_gamma(gamma, prepared)
    return g / g.sum(axis=1, keepdims=True)


def bce_finish(st, output, storage_options):
    """Memberships and consensus labels of the site's rows, written to its own ``output``."""
    estep = st.data["estep"]
    parts = [_submit(st, _memberships, g, p) for g, p in zip(st.data["best"], estep.gidx, strict=True)]
    memb = np.concatenate(st.client.gather(parts), axis=0)
    st.data["labels_"] = np.argmax(memb, axis=1)
    if output:
        write_memberships(output, memb, storage_options)


# --------------------------------------------------------------------------- KCC


def _encode(block, categories):
    return Encoding.from_categories(categories).transform(block)


def kcc_prepare(st, categories):
    """Encode the blocks against the pooled categories; the assignment starts empty."""
    blocks = st.data.pop("blocks")
    gidx = [_submit(st, _encode, b, categories) for b in blocks]
    n_rows = st.client.gather([_submit(st, operator.attrgetter("shape"), b) for b in blocks])
    st.data["backend"] = DaskBlocks(st.client, gidx, [s[0] for s in n_rows])


def kcc_reset(st):
    st.data["backend"].reset()


def kcc_sizes(st, n_categories):
    """The site's count of each global category, then its row count."""
    counts, total = st.data["backend"].sizes(n_categories)
    return np.concatenate([counts, [total]])


def kcc_cooccurrence(st, chosen, n_categories):
    """Per chosen category, the label counts and the number of the site's rows carrying it."""
    counts, sizes = st.data["backend"].cooccurrence(chosen, n_categories)
    return np.concatenate([np.asarray(counts).ravel(), sizes])


def kcc_step(st, MT, sq):
    """The Lloyd assignment of the site's blocks: the summed counts, sizes and rows moved (integers: sums
    exact whatever the rows' split); the assignment stays there. Not its float sum of squared errors, whose
    roundings would tell its own rows apart: the coordinator has it from the counts
    (:func:`~ensemble_dask.federated.coordinator.kcc.pooled_sse`)."""
    stats = st.data["backend"].step(MT, sq, 0)
    return np.concatenate([stats["counts"].ravel(), stats["sizes"], [stats["changed"]]])


def kcc_finish(st, MT, sq, output, storage_options):
    """Memberships and consensus labels for the final centroids, written to the site's ``output``."""
    labels, memb = st.data["backend"].memberships(MT, sq)
    st.data["labels_"] = labels
    st.data["k"] = MT.shape[1]
    if output:
        write_memberships(output, memb, storage_options)
