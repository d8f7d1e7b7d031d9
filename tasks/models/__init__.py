"""Models: data generators with gradient callbacks, truth and asymptotic covariance."""

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.models.huber_regression import HuberRegression
from ldpsim.tasks.models.logistic_regression import LogisticRegression
from ldpsim.tasks.models.mean import Mean
from ldpsim.tasks.models.quantile import Quantile
from ldpsim.tasks.models.quantile_regression import QuantileRegression

REGISTRY: dict[str, type[Model]] = {
    cls.name: cls
    for cls in (Quantile, QuantileRegression, Mean, HuberRegression, LogisticRegression)
}

__all__ = [
    "REGISTRY",
    "HuberRegression",
    "LogisticRegression",
    "Mean",
    "Model",
    "Quantile",
    "QuantileRegression",
]
