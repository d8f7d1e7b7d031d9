"""The compute layer: running a sweep on Dask. What is left to do and its tasks (``plan``),
the run itself (``runner``: submit, collect, write, progress), the workers' side
(``worker``, ``worker_setup``, ``worker_start``), clusters (``clusters``), the watchdog
and signals, methods added to a finished store (``added_methods``), units registered at
run time (``registration``), failure records (``failures``) and replaying one replicate
(``replay``).

It may import the store layer, the bottom layer (``sweep``, ``cost``, ``formatting``,
``errors``) and ``ldpsim.tasks``; never the summaries or the report.
"""
