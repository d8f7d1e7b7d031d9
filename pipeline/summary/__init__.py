"""The summary layer: a store's replicates as statistics. Coverage, length, their Monte-Carlo
errors and the diagnostics (``summary``, ``diagnostics``, the variables in
``variables``), your own statistics (``cell_statistics``), partial cells, the flags
against each method's nominal claim (``nominal_claims``), tables and records (``tables``,
``table_layouts``, ``records``), paired comparisons (``compare``), cases by their
parameters (``case_parameters``) and compute times (``timings``).

It may import the compute and store layers, the bottom layer and ``ldpsim.tasks``; never the
report.
"""

from ldpsim.pipeline.moved import moved_names

# ``ldpsim.pipeline.summary`` was a module before its layer became a folder: its public
# names stay importable from here for one release (docs/changelog.md).
__getattr__ = moved_names("ldpsim.pipeline.summary", "ldpsim.pipeline.summary.summary")
