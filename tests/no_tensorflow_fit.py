"""Fit every trainer for two steps with JAX in a Python where TensorFlow cannot be imported;
run by test_without_tensorflow.py, which blocks TensorFlow before this starts.

Each trainer gets NumPy data the way a notebook would give it: the minimax trainers a dict of
arrays paired by `pair_arrays` (`fit(x=..., batch_size=2)`), the others a `BatchList` of ready
batches (meta generalisation's support/query masks are per batch). Prints one JSON
object: per trainer, its last logs and the iterations of every trained group's optimizer; and
whether TensorFlow ended up in `sys.modules` (it must not).
"""

import json
import sys

import keras
import numpy as np
import tiny_models as tm

from keras_privacy.data.pairs import pair_arrays
from keras_privacy.methods.batches import BatchList
from keras_privacy.methods.init import (
    ActionInit,
    IdentityInit,
    PrivacyInit,
    SupervisedPrivacyInit,
)
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.vita import VITA

STEPS = 2


def labelled(seed: int) -> dict:
    """A batch with labelled privacy images, as VITA and SupervisedPrivacyInit take it."""
    rng = np.random.default_rng(seed)
    data = tm.batch(rng)
    data["images"] = data.pop("views")[:, 0]
    data["privacy"] = rng.integers(0, 2, (len(data["images"]), 4)).astype("float32")
    return data


def examples(seed: int, count: int) -> dict:
    """`count` examples in the batch format of tiny_models.batch."""
    return tm.batch(np.random.default_rng(seed), clips=count, images=count)


def trainers() -> dict:
    """name -> (trainer, its data, the groups it trains), on tiny models."""
    anonymizer = tm.anonymizer()
    budget = [tm.budget_model(width=3), tm.budget_model(width=4)]
    single = BatchList([tm.batch(np.random.default_rng(seed)) for seed in range(STEPS)])
    pairs = pair_arrays(examples(0, 2 * STEPS), examples(1, 2 * STEPS))
    meta = tm.meta_trainer(action_threshold=0.0, attack_threshold=0.0)
    return {
        "identity": (IdentityInit(anonymizer), single, ("anonymizer",)),
        "action": (ActionInit(anonymizer, tm.action_model()), single, ("action",)),
        "privacy": (PrivacyInit(anonymizer, tm.privacy_encoder()), single, ("privacy",)),
        "supervised_privacy": (
            SupervisedPrivacyInit(anonymizer, {"budget_0": budget[0]}),
            BatchList([labelled(seed) for seed in range(STEPS)]),
            ("budget_0",),
        ),
        "spact": (
            SPAct(anonymizer, tm.action_model(), tm.privacy_encoder()),
            pairs,
            ("anonymizer", "action", "privacy"),
        ),
        "penalty": (
            SPAct(anonymizer, tm.action_model(), tm.privacy_encoder(), penalty_weight=1.0),
            pairs,
            ("anonymizer", "action", "privacy"),
        ),
        "vita": (
            VITA(
                anonymizer,
                tm.action_model(),
                budget,
                action_schedule="batch_gate",
                action_threshold=1.1,
                action_moves_anonymizer=False,
                budget_updates=1,
                budget_threshold=1.1,
            ),
            BatchList([labelled(seed) for seed in range(STEPS)]),
            ("anonymizer", "action", "budget_0", "budget_1"),
        ),
        "meta": (
            meta,
            BatchList([tm.meta_batch(seed, models=3) for seed in range(STEPS)]),
            ("anonymizer",),
        ),
    }


def compile_trainer(name: str, trainer, trained) -> None:
    """Compile a trainer of `trainers()` with an Adam for each group it trains (meta
    generalisation: for every group, the attack models' inner updates included)."""
    optimizers = {g: keras.optimizers.Adam(1e-3) for g in trained}
    if name == "meta":
        optimizers.update({g: keras.optimizers.Adam(1e-3) for g in trainer.groups()})
    trainer.compile(optimizers)


def main() -> None:
    results = {}
    for name, (trainer, data, trained) in trainers().items():
        compile_trainer(name, trainer, trained)
        batch_size = 2 if isinstance(data, dict) else None
        history = trainer.fit(data, batch_size=batch_size, epochs=1, verbose=0, shuffle=False)
        results[name] = {
            "logs": {key: float(values[-1]) for key, values in history.history.items()},
            "iterations": {g: int(trainer.group_optimizer(g).iterations.numpy()) for g in trained},
        }
    results["tensorflow_imported"] = "tensorflow" in sys.modules
    print(json.dumps(results))


if __name__ == "__main__":
    main()
