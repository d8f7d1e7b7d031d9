"""The store layer: a sweep's Zarr store and everything about it that no run needs to
know. Its layout (``layout``), creation, extension and writes (``store``), reading
(``reading``), the checks of its metadata and determined arrays (``integrity``), of its
data files (``damage``) and their digests (``digests``), the run lock (``lock``), the
identity of a requested sweep and of the code that computed the replicates
(``identity``, ``code_identity``), run records (``provenance``), the methods added to it
and still pending (``pending``) and the check of a --store path (``store_path``).

It may import the bottom layer of ``ldpsim.pipeline`` (``sweep``, ``cost``,
``formatting``, ``errors``) and ``ldpsim.tasks``; never the compute layer, the summaries
or the report (the import-linter contract in pyproject.toml).
"""

from ldpsim.pipeline.moved import moved_names

# ``ldpsim.pipeline.store`` was a module before its layer became a folder: its public
# names stay importable from here for one release (docs/changelog.md).
__getattr__ = moved_names("ldpsim.pipeline.store", "ldpsim.pipeline.store.store")
