"""Layering: ``tasks`` imports numpy, scipy and numba (with llvmlite) only, never the plumbing."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import ldpsim.tasks

FORBIDDEN = {"ldpsim.pipeline", "dask", "distributed", "xarray", "zarr"}
# llvmlite is numba's code generator (tasks.rng emits one 128-bit multiply with it).
ALLOWED_THIRD_PARTY = {"numpy", "scipy", "numba", "llvmlite"}
PACKAGE = Path(ldpsim.tasks.__file__).parent


def top_level(module: str) -> str:
    """The distribution-level name of a module: ``ldpsim.X`` for ldpsim's own layers."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "ldpsim" else parts[0]


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports (absolute imports)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {top_level(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(top_level(node.module))
    return names


def test_importing_tasks_pulls_in_no_plumbing():
    code = (
        "import sys, json, ldpsim.tasks, ldpsim.tasks.models, ldpsim.tasks.mechanisms,"
        " ldpsim.tasks.intervals;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(proc.stdout)
    assert "ldpsim.tasks" in loaded and "numba" in loaded
    bad = sorted(m for m in loaded if top_level(m) in FORBIDDEN)
    assert bad == []


def test_no_file_under_tasks_imports_plumbing():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10
    allowed = ALLOWED_THIRD_PARTY | set(sys.stdlib_module_names) | {"ldpsim.tasks"}
    for path in files:
        names = imported_modules(path)
        assert not names & FORBIDDEN, (path, names & FORBIDDEN)
        assert names <= allowed, (path, names - allowed)


def private_imports(path: Path) -> set[str]:
    """Third-party modules or names with a leading underscore that a file imports."""

    def private(name: str) -> bool:
        return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))

    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if private(a.name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "ldpsim":
                continue
            names = [f"{node.module}.{a.name}" for a in node.names]
            found |= {name for name in names if private(name)}
    return found


def test_no_private_modules_of_other_libraries():
    # Private modules change without notice between releases. The one exception is the
    # maintainers' generator of the shipped ziggurat tables, which reads numba's copy
    # of numpy's tables once (tasks/streams/ziggurat.py); ldpsim never runs it.
    allowed = {PACKAGE / "streams" / "ziggurat.py": {"numba.np.random._constants"}}
    for path in sorted(PACKAGE.rglob("*.py")):
        assert private_imports(path) == allowed.get(path, set()), path
