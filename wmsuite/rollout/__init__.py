"""One rollout engine for real simulators, world models and token generation."""

from wmsuite.rollout.engine import RolloutConfig, make_vector_env, rollout

__all__ = ["RolloutConfig", "make_vector_env", "rollout"]
