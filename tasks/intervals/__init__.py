"""Confidence-interval methods: bb, bm, sn and the oracle."""

from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.intervals.batch_means import BatchMeans
from ldpsim.tasks.intervals.bootstrap import BlockBootstrap
from ldpsim.tasks.intervals.oracle import Oracle
from ldpsim.tasks.intervals.self_normalized import SelfNormalized

REGISTRY: dict[str, type[IntervalMethod]] = {
    cls.name: cls for cls in (BlockBootstrap, BatchMeans, SelfNormalized, Oracle)
}

__all__ = [
    "REGISTRY",
    "BatchMeans",
    "BlockBootstrap",
    "IntervalMethod",
    "Oracle",
    "SelfNormalized",
]
