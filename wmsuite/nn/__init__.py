"""wmsuite.nn: building blocks shared by policies, world models and the language-model side."""

from .block import BlockConfig, SharedPrefixBlock

__all__ = ["BlockConfig", "SharedPrefixBlock"]
