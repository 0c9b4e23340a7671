"""The training phases: their lengths in epochs and steps, and their learning rates."""

from __future__ import annotations

import dataclasses
from dataclasses import field

from keras_privacy.config.setting import SettingError, described, not_negative

LEARNING_RATES = (
    "identity_lr",
    "action_init_lr",
    "privacy_init_lr",
    "anonymizer_lr",
    "action_lr",
    "privacy_lr",
)
"""The learning-rate settings, one per phase and model."""


@dataclasses.dataclass
class ScheduleSettings:
    """The training phases: their lengths in epochs and steps, and their learning rates."""

    identity_epochs: int = field(
        default=2, metadata=described("Epochs of f_A identity initialisation.", "train")
    )
    identity_lr: float = field(
        default=1e-3, metadata=described("Identity-init learning rate.", "train")
    )
    identity_warmup_epochs: int = field(
        default=1, metadata=described("Linear warm-up epochs of the identity init.", "train")
    )
    identity_lr_drop: float = field(
        default=1.0,
        metadata=described(
            "Divide the identity init's learning rate by this after each epoch whose "
            "reconstruction loss is no new lowest (1: constant after the warm-up). Above 1 the "
            "rate is set per epoch, as the authors' scripts set it: the warm-up rises by epoch "
            "((e + 1) / <identity_warmup_epochs> of the rate), not by step.",
            "train",
        ),
    )
    action_init_epochs: int = field(
        default=4, metadata=described("Epochs of f_T on f_A(x) before the minimax.", "train")
    )
    action_init_lr: float = field(
        default=1e-3, metadata=described("f_T init learning rate.", "train")
    )
    privacy_init_epochs: int = field(
        default=2, metadata=described("Epochs of self-supervised f_B before the minimax.", "train")
    )
    privacy_init_lr: float = field(
        default=1e-3, metadata=described("f_B init learning rate.", "train")
    )
    init_lr_drop: float = field(
        default=1.0,
        metadata=described(
            "Divide the f_T and f_B initialisations' learning rates by this after each epoch "
            "whose training loss is no new lowest (SPAct supp. C.3: to 1/10 on a loss plateau; "
            "1: constant).",
            "train",
        ),
    )
    init_lr_patience: int = field(
        default=0,
        metadata=described(
            "Epochs in a row without a new lowest training loss that the f_T and f_B "
            "initialisations take before each <init_lr_drop> (0: the authors' lr_patience, a "
            "drop after every such epoch; the rate has no floor, each drop is printed).",
            "train",
        ),
    )
    minimax_epochs: int = field(default=4, metadata=described("Epochs of the minimax.", "train"))
    anonymizer_lr: float = field(
        default=1e-4, metadata=described("f_A minimax learning rate.", "train")
    )
    action_lr: float = field(
        default=1e-4, metadata=described("f_T minimax learning rate.", "train")
    )
    privacy_lr: float = field(
        default=1e-4, metadata=described("f_B minimax learning rate.", "train")
    )
    steps_per_epoch: int = field(
        default=0,
        metadata=described(
            "Batches per epoch of training and of the target action models f'_T; 0 = one pass "
            "over the action set. A target privacy model's epoch is one pass over its "
            "training images.",
            "train",
        ),
    )
    privacy_init_steps_per_epoch: int = field(
        default=0,
        metadata=described(
            "Batches per epoch of f_B's initialisation, which reads only privacy images (e.g. "
            "one pass over them); 0 = <steps_per_epoch>.",
            "train",
        ),
    )
    minimax_steps_per_epoch: int = field(
        default=0,
        metadata=described(
            "Batches per epoch of the minimax (a length in steps, as VITA's authors give it: "
            "<minimax_epochs> x this); 0 = <steps_per_epoch>.",
            "train",
        ),
    )


def validate_schedule(config: ScheduleSettings) -> None:
    """Phase lengths are not negative, the warm-up fits the identity init, and every learning
    rate is positive."""
    not_negative(
        config,
        (
            "identity_epochs",
            "identity_warmup_epochs",
            "init_lr_patience",
            "action_init_epochs",
            "privacy_init_epochs",
            "minimax_epochs",
            "steps_per_epoch",
            "privacy_init_steps_per_epoch",
            "minimax_steps_per_epoch",
        ),
    )
    if config.identity_warmup_epochs > config.identity_epochs:
        raise SettingError(
            f"<identity_warmup_epochs> ({config.identity_warmup_epochs}) exceeds "
            f"<identity_epochs> ({config.identity_epochs})"
        )
    for name in ("identity_lr_drop", "init_lr_drop"):
        if not getattr(config, name) >= 1:
            raise SettingError(f"<{name}> must be at least 1, got {getattr(config, name)}")
    for name in LEARNING_RATES:
        if not getattr(config, name) > 0:
            raise SettingError(f"<{name}> must be positive, got {getattr(config, name)}")
