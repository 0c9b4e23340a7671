"""Export a run's SPAct minimax as NumPy arrays, to train it where TensorFlow is absent.

    python -m keras_privacy.data arrays --flagfile configs/synthetic.cfg --out DIR
        [--epochs 2] [--models_from runs/synthetic]

The folder gets what one SPAct (or penalty) minimax needs and nothing that needs TensorFlow to
read: `batches.npz` (the pipeline's paired batches of `epochs` epochs, each array
(epochs, steps, batch, 2, ...), as training would draw them, the frames rounded to uint8 so that
two epochs travel within a device machine's 64 MiB; `data.frames.frames_as_floats` reads them
back), the three models at the start (`anonymizer.keras`, `action_model.keras`,
`privacy_encoder.keras`: freshly built from the config's seed, or the trained models of a
finished run with `models_from`), and `minimax.json` (the trainer's settings and learning
rates). `benchmarks/gpu.py --learning_check DIR` trains it with JAX, on a CPU to record the
reference losses and on a GPU to compare with them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import keras
import numpy as np

from keras_privacy.data.frames import frames_as_uint8
from keras_privacy.files import load_keras_model
from keras_privacy.spelling import SettingError

if TYPE_CHECKING:
    from keras_privacy.config import ExperimentConfig

EXPORTED_MODELS = ("anonymizer", "action", "privacy")
"""The models of the export, saved under the names `training.MODEL_FILES` gives them."""

LARGEST_EXPORT_BYTES = 1 << 30
"""The most the batches may take in memory (uint8, before compression): the export carries a
small run to a device machine, whose 64 MiB the compressed file must fit; a paper config's two
epochs would take tens of GB."""


def export_minimax_arrays(
    config: ExperimentConfig, out: str | Path, epochs: int, models_from: str | None = None
) -> dict:
    """Write the minimax of `config` for `epochs` epochs into the folder `out`; returns the
    settings written to `minimax.json`."""
    from keras_privacy import training

    if config.method not in ("spact", "penalty") or len(config.privacy_backbone_names()) > 1:
        raise SettingError(
            f"<method>={config.method}: the array export holds a SPAct (or penalty) minimax "
            "with one privacy encoder"
        )
    if epochs < 1:
        raise SettingError(f"<epochs> must be at least 1, got {epochs}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    data = training.training_data(config)
    models = training.build_models(config, len(data.class_names), len(data.attribute_names))
    if models_from:
        for name in EXPORTED_MODELS:
            _start_from(models[name], Path(models_from) / training.MODEL_FILES[name])
    steps = config.steps_per_epoch or data.steps_per_epoch
    phases = training.training_phases(config, models, steps)
    training.check_paired_phase_lengths(config, phases, steps)
    minimax = phases[-1]
    epoch_batches = []
    for epoch in range(epochs):
        dataset = training.phase_dataset(
            minimax,
            data,
            training.global_epoch(phases, len(phases) - 1, epoch),
            minimax.steps_per_epoch or steps,
            len(models) - 2,
            config.meta_fraction,
        )
        batches = []
        for batch in dataset.as_numpy_iterator():
            batches.append({key: frames_as_uint8(value) for key, value in batch.items()})
            if not epoch_batches and len(batches) == 1:
                _require_small(batches[0], epochs * int(dataset.cardinality()))
        epoch_batches.append(batches)
    stacked = {
        key: np.stack([np.stack([b[key] for b in batches]) for batches in epoch_batches])
        for key in epoch_batches[0][0]
    }
    np.savez_compressed(out / "batches.npz", **stacked)
    for name in EXPORTED_MODELS:
        models[name].save(out / training.MODEL_FILES[name])
    trainer = minimax.make_trainer()
    settings = {
        "trainer": {
            key: value
            for key, value in trainer.get_config().items()
            if key not in ("anonymizer", "action_model", "privacy_encoder")
        },
        "learning_rates": {
            group: float(f"{float(keras.ops.convert_to_numpy(optimizer.learning_rate)):.6g}")
            for group, optimizer in minimax.optimizers().items()
        },
        "epochs": epochs,
        "steps_per_epoch": int(stacked["labels"].shape[1]),
        "source": {"seed": config.seed, "models_from": models_from or "fresh"},
    }
    (out / "minimax.json").write_text(json.dumps(settings, indent=1))
    return settings


def _require_small(batch: dict, count: int) -> None:
    """Raise SettingError where `count` batches like `batch` would pass LARGEST_EXPORT_BYTES,
    before the rest are read."""
    size = count * sum(value.nbytes for value in batch.values())
    if size > LARGEST_EXPORT_BYTES:
        raise SettingError(
            f"the export's {count} batches would take {size / 2**30:.1f} GiB (at most "
            f"{LARGEST_EXPORT_BYTES / 2**30:.0f} GiB): it is made to carry a small run to a "
            "device machine; lower --epochs, --minimax_steps_per_epoch or the batch sizes"
        )


def _start_from(model: keras.Model, path: Path) -> None:
    """Give `model` the weights of the saved model at `path`, a run's model of the same
    settings; a missing or damaged file, or a model of other settings, is named."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no trained model to start from")
    try:
        saved = load_keras_model(path)
    except ValueError as error:
        raise SettingError(str(error)) from error
    shapes = [tuple(weight.shape) for weight in model.weights]
    if [tuple(weight.shape) for weight in saved.weights] != shapes:
        raise SettingError(
            f"{path}: a model of other settings than this export's ({len(saved.weights)} "
            f"weights against {len(shapes)}, or of other shapes); give the flags its run was "
            f"trained with (its config.json)"
        )
    model.set_weights(saved.get_weights())
