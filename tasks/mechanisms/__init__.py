"""Local differential privacy mechanisms applied to each user's gradient."""

from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.mechanisms.gaussian import Gaussian, GaussianDP
from ldpsim.tasks.mechanisms.laplace import Laplace
from ldpsim.tasks.mechanisms.none import NoPrivacy
from ldpsim.tasks.mechanisms.randomized_response import RandomizedResponse

REGISTRY: dict[str, type[Mechanism]] = {
    cls.name: cls for cls in (RandomizedResponse, Laplace, Gaussian, GaussianDP, NoPrivacy)
}

__all__ = [
    "REGISTRY",
    "Gaussian",
    "GaussianDP",
    "Laplace",
    "Mechanism",
    "NoPrivacy",
    "RandomizedResponse",
]
