"""wmsuite.nn: building blocks shared by policies, world models and the language-model side."""

from .block import BlockConfig, SharedPrefixBlock
from .keypoints import keypoint_grid, spatial_softmax_xy

__all__ = ["BlockConfig", "SharedPrefixBlock", "keypoint_grid", "spatial_softmax_xy"]
