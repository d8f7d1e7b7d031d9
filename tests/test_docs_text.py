"""The documentation's text holds no ASCII control characters other than newline.

LaTeX written into a Python string without the r prefix turns \\t, \\b, \\a, \\v, \\f
and \\r into TAB, backspace, bell, vertical tab, form feed and carriage return
("$<TAB>heta$", "arepsilon"): such a file renders wrong and must not be committed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Suffixes of the text files under docs/ (the figures are binary).
TEXT_SUFFIXES = {".md", ".txt", ".rst", ".tex", ".csv", ".json", ".yaml", ".yml", ".svg"}
TEXT_FILES = sorted(
    [p for p in (REPO / "docs").rglob("*") if p.suffix in TEXT_SUFFIXES] + [REPO / "README.md"]
)
#: Every ASCII control character but newline (\x0a), and DEL.
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f]")


def test_there_are_docs_to_check():
    assert any(p.suffix == ".md" for p in TEXT_FILES if p.parent.name == "docs")


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_control_characters(path):
    text = path.read_text(encoding="utf-8")
    found = [(text.count("\n", 0, m.start()) + 1, repr(m.group())) for m in CONTROL.finditer(text)]
    assert not found, f"{path.name}: (line, character) {found[:10]}"


@pytest.mark.parametrize("model", ["sparse_mean", "one_hot_quantile_regression"])
def test_methods_doc_states_the_sparse_models_dimension_bound(model):
    # docs/methods.md stated d in [1, 10^5] after the models were capped at 5000.
    from ldpsim.tasks.validation import MAX_SPARSE_DIM

    text = (REPO / "docs" / "methods.md").read_text(encoding="utf-8")
    section = text.split(f"`{model}`: ", 1)[1].split("\n### ", 1)[0]
    stated = re.search(r"`d`[^$]*\$\[1, ([^\]]+)\]\$", section)
    assert stated is not None, f"no range of d in the {model} section"
    assert stated.group(1) == str(MAX_SPARSE_DIM)
