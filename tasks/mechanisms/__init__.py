"""Local differential privacy mechanisms applied to each user's gradient."""

from tasks.mechanisms.base import Mechanism
from tasks.mechanisms.laplace import Laplace
from tasks.mechanisms.none import NoPrivacy
from tasks.mechanisms.randomized_response import RandomizedResponse

REGISTRY: dict[str, type[Mechanism]] = {
    cls.name: cls for cls in (RandomizedResponse, Laplace, NoPrivacy)
}

__all__ = ["REGISTRY", "Laplace", "Mechanism", "NoPrivacy", "RandomizedResponse"]
