"""MkDocs hook: the body of ``docs/cli-reference.md``, generated from the command line's own parser.

The page holds a marker line (:data:`MARKER`). At build time the marker is replaced by one heading per
command (``ensemble-dask`` itself, every subcommand, and the nested ones such as ``certs ca`` and
``site init``), each followed by that command's ``--help`` text in a code block. The help is formatted at a
fixed width (:data:`WIDTH`), whatever the terminal or ``COLUMNS`` of the build, so the page is the same on
every machine.

``tests/test_docs.py`` imports this file and checks that every subcommand of the parser is on the page.
"""

from __future__ import annotations

import argparse
import functools

#: the line of ``docs/cli-reference.md`` that the generated reference replaces
MARKER = "<!-- cli-reference: generated from ensemble_dask.cli._parser.parser() -->"
#: the width argparse formats the help at (its default follows the terminal)
WIDTH = 100
#: the page that holds the marker
PAGE = "cli-reference.md"


def subcommands(ap):
    """``[(name, parser, summary)]``: the subcommands directly below ``ap``, in the parser's order."""
    out, seen = [], set()
    for action in ap._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        summaries = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            if id(sub) not in seen:  # an alias names a parser seen already
                seen.add(id(sub))
                out.append((name, sub, summaries.get(name, "")))
    return out


def commands(ap, words=()):
    """``[(words, parser, summary)]`` of every command below ``ap``, depth first: ``("certs",)``, then
    ``("certs", "ca")``, ``("certs", "sign")``, then the next command."""
    found = []
    for name, sub, summary in subcommands(ap):
        found.append(((*words, name), sub, summary))
        found.extend(commands(sub, (*words, name)))
    return found


def fixed_width(ap, width=WIDTH):
    """Format the help of ``ap`` and of every parser below it at ``width`` columns."""
    ap.formatter_class = functools.partial(ap.formatter_class, width=width)
    for _, sub, _ in subcommands(ap):
        fixed_width(sub, width)
    return ap


def title(words, prog="ensemble-dask"):
    """A command's heading: ``ensemble-dask certs ca``."""
    return " ".join((prog, *words))


def _sentence(text):
    text = text.strip()
    return f"{text[:1].upper()}{text[1:]}" + ("" if text.endswith(".") else ".") if text else ""


def cli_reference_markdown(ap=None, width=WIDTH):
    """The generated reference, as Markdown.

    ``ap`` defaults to ``ensemble_dask.cli._parser.parser()``. The program is a level-2 heading, each
    command a level-2 heading too, a nested command (``certs ca``) a level-3 one; under each heading the
    command's one-line summary and its ``--help`` in a ``text`` code block.
    """
    if ap is None:
        from ensemble_dask.cli._parser import parser

        ap = parser()
    fixed_width(ap, width)
    parts = []
    for words, sub, summary in [((), ap, ""), *commands(ap)]:  # the program's description is in its help
        level = "#" * (3 if len(words) > 1 else 2)
        parts.append(f"{level} {title(words, ap.prog)}\n")
        if summary:
            parts.append(_sentence(summary) + "\n")
        parts.append("```text\n" + sub.format_help().rstrip() + "\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown, page, config, files, **kwargs):
    """Replace the marker line of ``cli-reference.md`` with the generated reference."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{PAGE}: the marker line {MARKER!r} is missing: the reference has nowhere to go")
    return markdown.replace(MARKER, cli_reference_markdown())
