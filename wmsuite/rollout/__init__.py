"""One rollout engine for real simulators, world models and token generation."""

from wmsuite.rollout.engine import RolloutConfig, make_vector_env, rollout
from wmsuite.rollout.intervene import Intervention
from wmsuite.rollout.ray_env import Backend, RayVectorEnv

__all__ = ["Backend", "Intervention", "RayVectorEnv", "RolloutConfig", "make_vector_env", "rollout"]
