"""wmsuite: learned simulators for robot policies."""

__version__ = "0.1.0"
