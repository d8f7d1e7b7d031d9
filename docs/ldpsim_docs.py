"""Sphinx extension: the pages written from the code at every build (docs/generated/).

The built-in models, mechanisms and interval methods come from the registries, so a new
built-in appears without editing the docs (each documented by autodoc from its class, its
parameters in numpydoc); the CLI's exit codes from its parser's epilog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: (title, registry module, what the ``name`` selects) of each kind of unit.
KINDS = (
    ("Models", "ldpsim.tasks.models", "``model = NAME`` in a sweep's ``[spec]``"),
    ("Mechanisms", "ldpsim.tasks.mechanisms", "``mechanism = NAME`` in ``[spec]``"),
    (
        "Interval methods",
        "ldpsim.tasks.intervals",
        "a ``[methods.NAME]`` table (or ``[methods.LABEL]`` with ``method = NAME``)",
    ),
)
PAGE = "units.rst"


def units_text() -> str:
    """The reStructuredText of the page: one autoclass per registry entry."""
    import importlib

    lines = [
        "Built-in models, mechanisms and interval methods",
        "=================================================",
        "",
        "Each unit is a frozen, keyword-only dataclass; its parameters are the keys a sweep "
        "sets (``ldpsim list`` also shows the installed plugins). This page is generated "
        "from the registries.",
        "",
    ]
    for title, module, how in KINDS:
        registry = importlib.import_module(module).REGISTRY
        lines += [title, "-" * len(title), "", f"Selected by {how}.", ""]
        for name, cls in registry.items():
            lines += [
                f"``{name}``",
                "~" * (len(name) + 4),
                "",
                f".. autoclass:: {cls.__module__}.{cls.__qualname__}",
                "   :no-members:",
                "",
            ]
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(exist_ok=True)
    if not path.is_file() or path.read_text() != text:  # unchanged: no rebuild
        path.write_text(text)


def write_pages(app: Any) -> None:
    from ldpsim.pipeline.cli import EXIT_CODES_HELP

    folder = Path(app.srcdir) / "generated"
    _write(folder / PAGE, units_text())
    _write(folder / "exit-codes.txt", EXIT_CODES_HELP)


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", write_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
