"""Learning rates that change during training: a per-step linear warm-up (a Keras schedule) and
the authors' per-epoch rule (a warm-up, then a drop on each plateau of the training loss)."""

from __future__ import annotations

import math

import keras

from keras_privacy.types import Tensor


@keras.saving.register_keras_serializable(package="keras_privacy")
class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """Learning rate rising linearly from target / warmup_steps to `target`, then constant."""

    def __init__(self, target: float, warmup_steps: int):
        self.target = target
        self.warmup_steps = warmup_steps

    def __call__(self, step: Tensor) -> Tensor:
        fraction = (keras.ops.cast(step, "float32") + 1.0) / max(self.warmup_steps, 1)
        return self.target * keras.ops.minimum(fraction, 1.0)

    def get_config(self) -> dict:
        return {"target": self.target, "warmup_steps": self.warmup_steps}


class EpochRates:
    """The learning rate of each epoch as the authors' scripts set it at an epoch's start: a
    linear warm-up over the first `warmup_epochs` (epoch e from 0 at (e + 1) / warmup_epochs
    of `rate`), then `rate`, divided by `drop` whenever the epoch's training loss has not
    reached a new lowest for more than `patience` epochs in a row (TeD-SPAD's
    train_privacy.py; SPAct supp. C.3: "drops learning rate to its 1/10th value on the loss
    plateau"; the penalty code's identity initialisation, train_reconstruction.py:163-172). A
    drop decided during the warm-up is replaced by the next warm-up epoch's rate, as there; one
    decided at its last epoch holds. `drop=1` keeps the rate.

    With `cosine_epochs` N > 0, the epochs after the warm-up follow a half cosine instead of
    the plateau rule: epoch k of the K = N - warmup_epochs runs at (1 + cos(pi k / K)) / 2 of
    `rate`, the shape of TeD-SPAD's action target (params_anonymized_action.py:41).

    The rule reads nothing but the losses it is shown (`observe`), so a resumed run rebuilds
    it by showing it the losses of the epochs already run."""

    def __init__(
        self,
        rate: float,
        warmup_epochs: int = 0,
        drop: float = 1.0,
        patience: int = 0,
        cosine_epochs: int = 0,
    ):
        self.rate = rate
        self.warmup_epochs = warmup_epochs
        self.drop = drop
        self.patience = patience
        self.cosine_epochs = cosine_epochs
        self.lowest_loss = float("inf")
        self.epochs_without_lowest = 0

    def rate_at(self, epoch: int) -> float:
        """The rate of `epoch` (from 0), the drops decided so far included."""
        if epoch < self.warmup_epochs:
            return self.rate * (epoch + 1) / self.warmup_epochs
        if self.cosine_epochs:
            step, steps = epoch - self.warmup_epochs, self.cosine_epochs - self.warmup_epochs
            return self.rate * (1 + math.cos(math.pi * step / steps)) / 2
        return self.rate

    def observe(self, epoch: int, loss: float) -> bool:
        """Take `epoch`'s training loss into the plateau rule; whether it dropped the rate."""
        if self.drop == 1 or self.cosine_epochs:
            return False
        if loss < self.lowest_loss:
            self.lowest_loss, self.epochs_without_lowest = loss, 0
            return False
        self.epochs_without_lowest += 1
        if self.epochs_without_lowest <= self.patience:
            return False
        self.epochs_without_lowest = 0
        if epoch < self.warmup_epochs - 1:
            return False
        self.rate /= self.drop
        return True
