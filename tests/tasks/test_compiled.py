"""The package's compiled functions never run machine code of other code.

numba's own disk cache checks only the file of the function it caches; a function whose
callee lives in another module kept the callee's old machine code after that module
changed (numba 0.68). :func:`ldpsim.tasks.compiled.cached_njit` keys the cache by every
file of the folder. Each check runs in fresh processes on two modules of its own, whose
numbers it knows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ldpsim.tasks.compiled import cached_njit, machine_code_folder, source_digests, source_key

CALLEE = """
from pathlib import Path
from ldpsim.tasks.compiled import cached_njit

@cached_njit(Path(__file__).parent)
def step(x):
    return x + {step}
"""

CALLER = """
from pathlib import Path
from ldpsim.tasks.compiled import cached_njit
from callee import step

@cached_njit(Path(__file__).parent)
def scaled(x):
    return 10 * step(x)
"""

#: One process's first call: its value and whether numba loaded it from the cache.
CALL = """
import json, sys
sys.path.insert(0, sys.argv[1])
from caller import scaled
value = scaled(1)
print(json.dumps({"value": value, "hits": sum(scaled.stats.cache_hits.values())}))
"""


def call(folder: Path, cache: Path) -> dict:
    # No bytecode: the callee's two versions have the same size and may share a second.
    env = {**os.environ, "LDPSIM_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CALL, str(folder)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_changed_callee_module_is_compiled_again_never_loaded_stale(tmp_path):
    folder, cache = tmp_path / "modules", tmp_path / "cache"
    folder.mkdir()
    (folder / "callee.py").write_text(CALLEE.format(step=1))
    (folder / "caller.py").write_text(CALLER)
    assert call(folder, cache) == {"value": 20, "hits": 0}  # compiled, saved
    assert call(folder, cache) == {"value": 20, "hits": 1}  # loaded
    first_key = fresh_key(folder)
    # Only the callee's module changes; the caller's file stays as it was.
    (folder / "callee.py").write_text(CALLEE.format(step=2))
    assert call(folder, cache) == {"value": 30, "hits": 0}  # not the old 20
    assert call(folder, cache) == {"value": 30, "hits": 1}
    keys = sorted(path.name for path in (cache / "package").iterdir())
    assert keys == sorted([first_key, fresh_key(folder)])


def fresh_key(folder: Path) -> str:
    """The key of the folder's files as they are now (not the process's first reading)."""
    source_digests.cache_clear()
    source_key.cache_clear()
    return source_key(folder)


def test_an_unwritable_cache_folder_compiles_in_memory(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(blocked))
    assert machine_code_folder(tmp_path) is None

    @cached_njit(tmp_path)
    def twice(x):
        return 2.0 * x

    assert twice(1.5) == 3.0
    assert twice.stats.cache_path is None and not any(tmp_path.rglob("*.nbi"))


def test_the_key_covers_sources_and_data_files_only(tmp_path):
    (tmp_path / "unit.py").write_text("A = 1\n")
    (tmp_path / "table.npz").write_bytes(b"1")
    (tmp_path / "notes.txt").write_text("a")
    (tmp_path / ".#unit.py").symlink_to(tmp_path / "gone")  # an editor's lock: dangling
    before = fresh_key(tmp_path)
    (tmp_path / "notes.txt").write_text("b")
    assert fresh_key(tmp_path) == before
    (tmp_path / "table.npz").write_bytes(b"2")  # a table compiled code reads
    assert fresh_key(tmp_path) != before
    (tmp_path / "table.npz").write_bytes(b"1")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.py").write_text("")
    assert fresh_key(tmp_path) != before


def test_a_module_edited_after_the_key_was_made_compiles_in_memory(tmp_path, monkeypatch):
    # An edit during a long sweep: the process keyed the folder before it; the new code
    # must not land under the old key.
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "late.py").write_text(
        "from pathlib import Path\n"
        "from ldpsim.tasks.compiled import cached_njit\n\n"
        "@cached_njit(Path(__file__).parent)\n"
        "def three():\n    return 3\n"
    )
    fresh_key(folder)
    (folder / "late.py").write_text((folder / "late.py").read_text().replace("3", "4"))
    monkeypatch.syspath_prepend(str(folder))
    import late

    assert late.three() == 4 and late.three.stats.cache_path is None
    assert not any((tmp_path / "cache").rglob("*.nbi"))


def test_a_caller_of_a_module_edited_after_the_key_was_made_compiles_in_memory(
    tmp_path, monkeypatch
):
    # The caller's own file is as keyed, but it imports a callee edited since: its
    # machine code holds the new callee, which must not land under the old files' key
    # (where a process after the edit is undone would load it).
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "kc_edited_callee.py").write_text(CALLEE.format(step=1))
    (folder / "kc_unedited_caller.py").write_text(
        CALLER.replace("from callee import", "from kc_edited_callee import")
    )
    fresh_key(folder)
    (folder / "kc_edited_callee.py").write_text(CALLEE.format(step=2))
    monkeypatch.syspath_prepend(str(folder))
    import kc_unedited_caller

    assert kc_unedited_caller.scaled(1) == 30
    assert kc_unedited_caller.scaled.stats.cache_path is None
    assert not any((tmp_path / "cache").rglob("*.nbi"))


def test_the_key_covers_numbas_code_generation_settings(tmp_path, monkeypatch):
    # numba's own index leaves out settings such as bounds checking: machine code
    # compiled without checks must not be loaded by a process that asks for them.
    (tmp_path / "unit.py").write_text("A = 1\n")
    monkeypatch.delenv("NUMBA_BOUNDSCHECK", raising=False)
    plain = fresh_key(tmp_path)
    monkeypatch.setenv("NUMBA_BOUNDSCHECK", "1")
    checked = fresh_key(tmp_path)
    monkeypatch.delenv("NUMBA_BOUNDSCHECK")
    assert fresh_key(tmp_path) == plain != checked  # numba's settings read again, too
