"""One rollout engine for real simulators, world models and token generation."""

from wmsuite.rollout.engine import RolloutConfig, make_vector_env, rollout
from wmsuite.rollout.intervene import Intervention

__all__ = ["Intervention", "RolloutConfig", "make_vector_env", "rollout"]
