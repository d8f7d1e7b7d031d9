"""Text, Markdown and LaTeX layouts of a table: caption, column names, headers, rows."""

from __future__ import annotations

from collections.abc import Sequence

from ldpsim.pipeline.formatting import latex_escape

#: A table's rows: each the labels of its levels and its cells (``tables.table_rows``).
Rows = list[tuple[list[str], list[str]]]


def blank_repeats(rows: Rows) -> list[list[str]]:
    """Row labels with a level left blank where it repeats the row above (paper style)."""
    out, previous = [], None
    for labels, _ in rows:
        shown = list(labels)
        if previous is not None:
            for i in range(len(labels)):
                if labels[: i + 1] == previous[: i + 1]:
                    shown[i] = ""
                else:
                    break
        out.append(shown)
        previous = labels
    return out


def text_table(
    caption: str, names: Sequence[str], headers: Sequence[str], rows: Rows, note: str = ""
) -> str:
    """A plain-text table: caption, rules, labels left and cells right aligned; ``note``
    (a footnote) under it."""
    labels = blank_repeats(rows)
    table = [
        [*names, *headers],
        *[[*lab, *cells] for lab, (_, cells) in zip(labels, rows, strict=True)],
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    n_labels = len(names)

    def line(r: Sequence[str]) -> str:
        parts = [
            r[i].ljust(widths[i]) if i < n_labels else r[i].rjust(widths[i]) for i in range(len(r))
        ]
        return "  ".join(parts).rstrip()

    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    body = [line(table[0]), rule, *(line(r) for r in table[1:])]
    return "\n".join([caption, rule, *body, rule, *([note] if note else [])]) + "\n"


def markdown_table(
    caption: str, names: Sequence[str], headers: Sequence[str], rows: Rows, note: str = ""
) -> str:
    """A Markdown (GitHub) table under its caption in bold; ``note`` (a footnote) under it."""
    labels = blank_repeats(rows)

    def row(texts: Sequence[str]) -> str:
        # A '|' in a cell (a method label 'a|b') would end it: escaped, as GitHub reads it.
        return "| " + " | ".join(t.replace("|", "\\|") for t in texts) + " |"

    head = row([*names, *headers])
    align = "|" + "|".join([":--"] * len(names) + ["--:"] * len(headers)) + "|"
    body = [row([*lab, *cells]) for lab, (_, cells) in zip(labels, rows, strict=True)]
    foot = ["", note] if note else []
    return "\n".join([f"**{caption}**", "", head, align, *body, *foot]) + "\n"


def latex_table(
    caption: str, names: Sequence[str], headers: Sequence[str], rows: Rows, note: str = ""
) -> str:
    """A LaTeX ``table`` with a ``tabular``, a rule between groups of the first label;
    ``note`` (a footnote, LaTeX already) under the tabular."""
    labels = blank_repeats(rows)
    spec = "l" * len(names) + "r" * len(headers)
    lines = [
        r"\begin{table}",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\hline",
        " & ".join([*names, *headers]) + r" \\",
        r"\hline",
    ]
    for i, (lab, (_, cells)) in enumerate(zip(labels, rows, strict=True)):
        # A rule between groups of the outermost row level, as in the paper.
        if i > 0 and lab[0] != "" and len(names) > 2:
            lines.append(r"\hline")
        lines.append(" & ".join([*lab, *cells]) + r" \\")
    lines += [r"\hline", r"\end{tabular}"]
    if note:
        lines += [r"\par\footnotesize " + note]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
