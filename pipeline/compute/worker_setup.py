"""Preload of the local cluster's workers (distributed's dask_setup): Ctrl-C is the driver's."""

from __future__ import annotations

from typing import Any

from ldpsim.pipeline.compute.signals import worker_ignores_sigint


def dask_setup(worker: Any) -> None:
    """Called by distributed in each worker process as it starts (``preload=[__name__]``).

    The local cluster's workers share the driver's process group, so Ctrl-C in a
    terminal signals them too; they ignore it and the driver, once it has written the
    finished results, closes them (see
    :func:`ldpsim.pipeline.compute.signals.worker_ignores_sigint`).
    """
    worker_ignores_sigint()
