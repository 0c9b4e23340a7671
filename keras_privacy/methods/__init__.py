"""Trainers with a custom `train_step`, each trained by `fit`: the initialisation phases, SPAct,
VITA and meta generalisation. `trainer` is the backend-neutral `StatelessTrainer` (its step is
`keras_privacy.backend`'s); `steps` holds the helpers every method's step shares.

Importing this package registers every trainer (SPAct, VITA, MetaGeneralization and the
initialisation phases') with Keras, so that `keras.saving.load_model` rebuilds one saved whole
(`trainer.save`) in a fresh Python; `keras_privacy.models` does the same for the models'
layers."""

from keras_privacy.methods.init import (
    ActionInit,
    IdentityInit,
    PrivacyInit,
    SupervisedPrivacyInit,
)
from keras_privacy.methods.meta import MetaGeneralization
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.vita import VITA

__all__ = [
    "SPAct",
    "VITA",
    "MetaGeneralization",
    "IdentityInit",
    "ActionInit",
    "PrivacyInit",
    "SupervisedPrivacyInit",
]
