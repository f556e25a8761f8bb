"""wmsuite.train: the one trainer every component trains with (see trainer.py).

    from wmsuite.train import Trainer, TrainerConfig, Objective
"""

from wmsuite.train.config import RESUMABLE, TrainerConfig
from wmsuite.train.state import WeightAverage
from wmsuite.train.trainer import BatchSource, FitResult, Objective, Trainer, TrainingDivergedError, lr_at

__all__ = ["RESUMABLE", "BatchSource", "FitResult", "Objective", "Trainer", "TrainerConfig", "TrainingDivergedError", "WeightAverage", "lr_at"]
