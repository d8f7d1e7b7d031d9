"""Models: data generators with gradient callbacks, truth and asymptotic covariance."""

from tasks.models.base import Model
from tasks.models.mean import Mean
from tasks.models.quantile import Quantile
from tasks.models.quantile_regression import QuantileRegression

REGISTRY: dict[str, type[Model]] = {cls.name: cls for cls in (Quantile, QuantileRegression, Mean)}

__all__ = ["REGISTRY", "Mean", "Model", "Quantile", "QuantileRegression"]
