"""dynograph.optim: optimizers and learning-rate schedulers."""
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
