"""Confidence-interval methods: bb, bm, sn and the oracle."""

from tasks.intervals.base import IntervalMethod
from tasks.intervals.batch_means import BatchMeans
from tasks.intervals.bootstrap import BlockBootstrap
from tasks.intervals.oracle import Oracle
from tasks.intervals.self_normalized import SelfNormalized

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
