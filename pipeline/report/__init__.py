"""The report layer: figures (``plots``, ``zip_plot``, ``narrow_layout`` for a phone) and
the one-page HTML report (``report``, its template in ``templates/``).

It may import every layer below it (summaries, compute, store, the bottom layer) and
``ldpsim.tasks``; only the API and the command line import it.
"""

from ldpsim.pipeline.moved import moved_names

# ``ldpsim.pipeline.report`` was a module before its layer became a folder: its public
# names stay importable from here for one release (docs/changelog.md).
__getattr__ = moved_names("ldpsim.pipeline.report", "ldpsim.pipeline.report.report")
