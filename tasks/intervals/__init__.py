"""Confidence-interval methods: bb, bm, sn, the oracle, and the competitors (SPEC 10, 12)."""

from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.intervals.batch_means import BatchMeans
from ldpsim.tasks.intervals.bootstrap import BlockBootstrap
from ldpsim.tasks.intervals.central_bootstrap import (
    CentralPercentileBootstrap,
    CentralVarianceBootstrap,
)
from ldpsim.tasks.intervals.nonprivate_bootstrap import NonprivateBootstrap
from ldpsim.tasks.intervals.nprr import NonparametricRandomizedResponse
from ldpsim.tasks.intervals.online_bootstrap import OnlineBootstrap
from ldpsim.tasks.intervals.oracle import Oracle
from ldpsim.tasks.intervals.self_normalized import SelfNormalized

REGISTRY: dict[str, type[IntervalMethod]] = {
    cls.name: cls
    for cls in (
        BlockBootstrap,
        BatchMeans,
        SelfNormalized,
        Oracle,
        OnlineBootstrap,
        NonprivateBootstrap,
        CentralVarianceBootstrap,
        CentralPercentileBootstrap,
        NonparametricRandomizedResponse,
    )
}

__all__ = [
    "REGISTRY",
    "BatchMeans",
    "BlockBootstrap",
    "CentralPercentileBootstrap",
    "CentralVarianceBootstrap",
    "IntervalMethod",
    "NonparametricRandomizedResponse",
    "NonprivateBootstrap",
    "OnlineBootstrap",
    "Oracle",
    "SelfNormalized",
]
