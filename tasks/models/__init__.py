"""Models: data generators with gradient callbacks, truth and asymptotic covariance."""

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.models.bounded_mean import BoundedMean
from ldpsim.tasks.models.huber_regression import HuberRegression
from ldpsim.tasks.models.logistic_regression import LogisticRegression
from ldpsim.tasks.models.mean import Mean
from ldpsim.tasks.models.one_hot_quantile_regression import OneHotQuantileRegression
from ldpsim.tasks.models.quantile import Quantile
from ldpsim.tasks.models.quantile_regression import QuantileRegression
from ldpsim.tasks.models.sparse_mean import SparseMean

REGISTRY: dict[str, type[Model]] = {
    cls.name: cls
    for cls in (
        Quantile,
        QuantileRegression,
        Mean,
        HuberRegression,
        LogisticRegression,
        SparseMean,
        OneHotQuantileRegression,
        BoundedMean,
    )
}

__all__ = [
    "REGISTRY",
    "BoundedMean",
    "HuberRegression",
    "LogisticRegression",
    "Mean",
    "Model",
    "OneHotQuantileRegression",
    "Quantile",
    "QuantileRegression",
    "SparseMean",
]
