"""HTML of the run report: plain strings in, one self-contained page out (no store, no figures)."""

from __future__ import annotations

import datetime as _dt
import html
import re

import numpy as np

__all__ = [
    "slug",
    "fmt",
    "facts_html",
    "accuracy_html",
    "method_caption",
    "figure_html",
    "federated_html",
    "page",
]


def slug(name):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def fmt(v, spec=".4f"):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return "" if not np.isfinite(v) else format(float(v), spec)
    return str(v)


def _esc(v):
    return html.escape(fmt(v) if not isinstance(v, str) else v)


def _kv_table(rows):
    body = "".join(f"<tr><th>{_esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def facts_html(rows, records):
    """The run facts (``[(label, text)]``) and the stage records (``{stage: record}``, listed in
    the dict's order: :meth:`~ensemble_dask.io.store.RunStore.records` gives the order they ran) as HTML."""
    stage_rows = "".join(
        f"<tr><td>{_esc(name)}</td><td class='num'>{_esc(fmt(rec.get('seconds'), '.2f'))}</td>"
        f"<td>{'yes' if rec.get('complete') else '<b>no</b>'}</td>"
        f"<td>{_esc(rec.get('finished') or '')}</td></tr>"
        for name, rec in records.items()
    )
    stages = (
        "<h3>Stages</h3><table class='grid'><tr><th>stage</th><th>seconds</th><th>complete</th>"
        f"<th>finished (UTC)</th></tr>{stage_rows}</table>"
        "<p class='note'>Seconds of a consensus stage here are those of writing its result; "
        "the fit's seconds are in the accuracy table.</p>"
        if stage_rows
        else "<p>No stage records in this store.</p>"
    )
    table = _kv_table([(k, _esc(v)) for k, v in rows])
    return f"<section id='facts'><h2>Data set and run</h2>{table}{stages}</section>"


_HIGHER = {"H", "ARI", "NMI", "MP", "R_n"}


def accuracy_html(table_rows, base, base_note=None):
    """The accuracy table: ``table_rows`` of ``(name, metrics, attrs, figure)``, the base partitions'
    scores."""
    cols = ["H", "ARI", "NMI", "MP", "R_n", "effective_k", "seconds", "n_iter", "converged"]
    heads = [
        "H",
        "ARI",
        "NMI",
        "micro-precision",
        "R<sub>n</sub>",
        "effective K",
        "seconds",
        "iterations",
        "converged",
    ]
    best = {}
    for c in ("H", "ARI", "NMI", "MP", "R_n", "seconds"):
        vals = [m.get(c) for _, m, _, _ in table_rows if isinstance(m.get(c), (int, float))]
        vals = [v for v in vals if np.isfinite(v)]
        if vals:
            best[c] = max(vals) if c in _HIGHER else min(vals)
    body = []
    for name, m, attrs, _ in table_rows:
        vals = {**m, "n_iter": attrs.get("n_iter"), "converged": attrs.get("converged")}
        cells = []
        for c in cols:
            v = vals.get(c)
            text = _esc(fmt(v, ".2f" if c == "seconds" else ".4f"))
            if c in best and isinstance(v, (int, float)) and np.isfinite(v) and np.isclose(v, best[c]):
                text = f"<strong class='best'>{text}&#9733;</strong>"
            if c == "converged" and v is False:
                text = "<span class='warn'>no (iteration cap)</span>"
            cells.append(f"<td class='num'>{text}</td>")
        body.append(
            f"<tr><th class='method'><a href='#{slug(name)}'>{_esc(name)}</a></th>{''.join(cells)}</tr>"
        )
    if base is not None and any(len(v) for v in base["scores"].values()):
        cells = []
        for c in cols:
            v = base["scores"].get(c)
            if v is not None and len(v):
                cells.append(
                    f"<td class='num'>{np.mean(v):.4f}<br><span class='range'>"
                    f"{np.min(v):.4f}&ndash;{np.max(v):.4f}</span></td>"
                )
            elif c == "effective_k" and base["k_found"]:
                cells.append(f"<td class='num'>{np.mean(base['k_found']):.1f}</td>")
            else:
                cells.append("<td></td>")
        body.append(
            f"<tr class='base'><th>base partitions<br><span class='range'>mean, min&ndash;max</span></th>"
            f"{''.join(cells)}</tr>"
        )
    none = "" if table_rows else "<p>No consensus result in this store yet.</p>"
    if not body:
        return f"<section id='accuracy'><h2>Accuracy</h2>{none}</section>"
    head = "".join(f"<th>{h}</th>" for h in heads)
    note = (
        "&#9733; best among the consensus methods. Methods: exact, over all points with a reference label. "
        + (
            f"Base partitions: on {_esc(base_note)}."
            if base_note
            else "Base partitions: over the points each one clustered."
        )
        + " H is the accuracy with the clusters matched one to one to the classes (the best matching); "
        "micro-precision gives each cluster its majority class; R<sub>n</sub> is the normalised Rand "
        "index of Li & Liu 2018 (equal to ARI); effective K counts the non-empty clusters."
    )
    return (
        f"<section id='accuracy'><h2>Accuracy</h2>{none}<table class='grid' id='accuracy-table'>"
        f"<tr><th>method</th>{head}</tr>{''.join(body)}</table><p class='note'>{note}</p>"
        f"{_choices(table_rows)}{_fit_warnings(table_rows)}</section>"
    )


def _choices(table_rows):
    """What ``auto`` chose and GKCC kept, with every candidate's ANMI with the ensemble; or nothing."""
    items = []
    for name, _, attrs, _ in table_rows:
        m = attrs.get("metrics") or {}
        picked = m.get("chosen") or m.get("kept")
        if picked and isinstance(m.get("anmi"), dict):
            scores = ", ".join(
                f"{_esc(k)} {v:.4f}" for k, v in sorted(m["anmi"].items(), key=lambda kv: -kv[1])
            )
            verb = "chose" if m.get("chosen") else "kept"
            items.append(f"<li><strong>{_esc(name)}</strong> {verb} {_esc(picked)} (ANMI: {scores})</li>")
    return (
        f"<div id='choices'><p>Choices by ANMI with the ensemble:</p><ul>{''.join(items)}</ul></div>"
        if items
        else ""
    )


def _fit_warnings(table_rows):
    """The warnings each fit issued (recorded with its result), as a list under the table; or nothing."""
    items = [
        f"<li><strong>{_esc(name)}</strong>: {_esc(w)}</li>"
        for name, _, attrs, _ in table_rows
        for w in attrs.get("warnings") or []
    ]
    return (
        f"<div class='warn' id='fit-warnings'><p>Warnings of the fits:</p><ul>{''.join(items)}</ul></div>"
        if items
        else ""
    )


def method_caption(name, attrs, panels=True):
    """The method and its parameters, and (``panels``) what its figure's panels show."""
    params = ", ".join(f"{k}={v}" for k, v in (attrs.get("params") or {}).items())
    head = f"{_esc(attrs.get('method', name))} ({_esc(params)})."
    if not panels:
        return head
    return (
        f"{head} Top: co-association of a sample ordered by "
        "this method's clusters (VAT-style), the stored pairs' fractions inside and across its clusters, "
        "and the memberships of a sample. Bottom: per-point uncertainty, the cluster-overlap graph "
        "m<sub>ij</sub>"
        " and the soft centroids of Lourenço et al. 2015 Sect. 7.4, and the objective or bound over"
        " iterations."
    )


#: what a page drawn without figures says where a figure would be
FIGURES_OFF = "Figures are off (the dask config <code>ensemble-dask.report.figures</code> is false)."


def figure_html(title, fname, caption, anchor=None):
    """A section with the figure ``fname`` and its caption; ``fname=None``: the caption and a note that
    figures are off."""
    aid = f" id='{anchor}'" if anchor else ""
    if fname is None:
        return f"<section{aid}><h2>{_esc(title)}</h2><p class='note'>{FIGURES_OFF} {caption}</p></section>"
    return (
        f"<section{aid}><h2>{_esc(title)}</h2><figure><img src='{fname}' alt='{_esc(title)}'>"
        f"<figcaption>{caption}</figcaption></figure></section>"
    )


def federated_html(fed, fname):
    tls = {True: "on", False: "<span class='warn'>off</span>", None: "not recorded"}[fed["tls"]]
    rows = "".join(
        f"<tr><td>{_esc(s)}</td><td class='num'>{_esc(r) if r is not None else 'not recorded'}</td>"
        f"<td class='num'>{_esc(i)}</td></tr>"
        for s, r, i in zip(fed["names"], fed["rows"], fed["iterations"], strict=True)
    )
    msgs = ", ".join(f"{k}: {v}" for k, v in sorted(fed["messages"].items()))
    kcc = fed.get("method") == "kcc"
    facts = [
        ("method", _esc("KCC (Lloyd)" if kcc else "BCE (EM)")),
        ("mode", _esc(fed["mode"])),
        ("TLS", tls),
        ("clusters K", _esc(fed["n_clusters"])),
        ("Lloyd iterations" if kcc else "EM iterations", _esc(fed["n_iter"])),
        ("converged", _esc(fed["converged"])),
        (
            "objective" if kcc else "lower bound",
            _esc(fmt(fed.get("objective"), ".6g") if kcc else fed["lower_bound"]),
        ),
        ("seconds", _esc(fmt(fed["seconds"], ".2f"))),
    ]
    if fed["scores"]:
        scores = ", ".join(f"{k} {v:.4f}" for k, v in fed["scores"].items())
        facts.append(("accuracy (by secure sums)", _esc(scores)))
    if msgs:
        facts.append(("messages", _esc(msgs)))
    facts = _kv_table(facts)
    table = (
        f"<section id='federated'><h2>Federated run</h2>{facts}<table class='grid'><tr><th>site</th>"
        f"<th>rows</th><th>iterations</th></tr>{rows}</table>"
    )
    if fname is None:  # figures off
        return f"{table}<p class='note'>{FIGURES_OFF}</p></section>"
    return (
        f"{table}<figure><img src='{fname}' alt='federated'>"
        "<figcaption>Rows per site (counts only: no site's data leaves it) and the "
        + ("KCC objective over Lloyd" if kcc else "lower bound over EM")
        + " iterations.</figcaption></figure></section>"
    )


_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;max-width:1400px;
padding:0 24px 48px;color:#222;background:#fff}
h1{font-size:26px;margin:24px 0 4px}h2{font-size:20px;border-bottom:2px solid #e4e4e4;padding-bottom:4px;
margin-top:36px}h3{font-size:15px}
table{border-collapse:collapse;font-size:14px;margin:8px 0}
table.kv th{text-align:left;padding:3px 16px 3px 0;color:#555;font-weight:600;vertical-align:top}
table.kv td{padding:3px 0}
table.grid th,table.grid td{border:1px solid #ddd;padding:5px 10px}
table.grid tr:nth-child(even){background:#f7f7f9}table.grid th{background:#eef1f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
th.method{text-align:left}tr.base{background:#fff8e6 !important}
.best{color:#0a6b2b}.warn{color:#b00020;font-weight:600}.range{color:#777;font-size:12px}
.note{color:#666;font-size:13px}figure{margin:8px 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:13px;margin-top:4px}nav a{margin-right:14px}
"""


def page(url, sections, seconds, performance=None):
    """The report page; ``performance``: the file name of the Dask performance report beside it, linked."""
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    anchors = re.findall(r"<section id='([^']+)'><h2>([^<]+)</h2>", "".join(sections))
    nav = "".join(f"<a href='#{a}'>{t.removeprefix('Method ')}</a>" for a, t in anchors)
    if performance:
        nav += f"<a href='{_esc(performance)}'>Dask performance report</a>"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>ensemble_dask report: {_esc(url)}</title><style>{_CSS}</style></head><body>"
        f"<h1>Consensus clustering report</h1><p class='note'>{_esc(url)} &middot; written {now} "
        f"&middot; figures drawn in {seconds:.1f} s</p><nav>{nav}</nav>{''.join(sections)}</body></html>\n"
    )
