"""Epoch checkpoints of a multi-phase run, for an exact resume after a kill.

A checkpoint is a folder `<run_dir>/checkpoints/<phase>-<epoch>/` holding the weights of every
model (`<name>.weights.h5`) and the state of the phase's optimizers (`optimizer.npz`). The file
`<run_dir>/checkpoints/latest.json` names the newest complete folder; it is replaced atomically
only once that folder is fully written, so a kill at any moment leaves the previous checkpoint
intact. Older folders are deleted after the pointer moves.

A checkpoint is only ever written from finite variables (`save_checkpoint` refuses others, see
`non_finite_variables`), so the checkpoint a diverged run keeps is always one to resume from.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import keras
import numpy as np


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or does not fit the models of this run."""


class NonFiniteWeightsError(CheckpointError):
    """Variables to be saved hold a NaN or an infinity; the previous checkpoint stays."""


def non_finite_variables(
    models: dict[str, keras.Model], optimizer: keras.optimizers.Optimizer | None = None
) -> list[str]:
    """The paths of the floating-point variables of `models` and `optimizer` that hold a NaN
    or an infinity, checked on their devices."""
    variables = [v for model in models.values() for v in model.weights]
    if optimizer is not None:
        variables += optimizer.variables
    return [
        variable.path
        for variable in variables
        if "float" in str(variable.dtype)
        and not bool(keras.ops.convert_to_numpy(keras.ops.all(keras.ops.isfinite(variable))))
    ]


def save_checkpoint(
    run_dir: str | os.PathLike,
    phase: str,
    epoch: int,
    models: dict[str, keras.Model],
    optimizer: keras.optimizers.Optimizer | None,
    history: dict,
) -> Path:
    """Write the checkpoint after `epoch` epochs of `phase` and point `latest.json` at it.

    Raises NonFiniteWeightsError, writing nothing, when a variable is not finite."""
    bad = non_finite_variables(models, optimizer)
    if bad:
        raise NonFiniteWeightsError(
            f"{len(bad)} non-finite variable(s) (e.g. {', '.join(bad[:3])}): no checkpoint "
            f"written for {phase} epoch {epoch}"
        )
    root = Path(run_dir) / "checkpoints"
    folder = root / f"{phase}-{epoch:04d}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, model in models.items():
        model.save_weights(folder / f"{name}.weights.h5")
    if optimizer is not None:
        np.savez(
            folder / "optimizer.npz",
            *[np.asarray(v.numpy()) for v in optimizer.variables],
        )
    state = {"phase": phase, "epoch": epoch, "folder": folder.name, "history": history}
    temporary = root / "latest.json.tmp"
    temporary.write_text(json.dumps(state, indent=1))
    os.replace(temporary, root / "latest.json")
    for old in root.iterdir():
        if old.is_dir() and old.name != folder.name:
            shutil.rmtree(old)
    return folder


def latest_checkpoint(run_dir: str | os.PathLike) -> dict | None:
    """The state written by the last `save_checkpoint` of this run, or None for a new run."""
    pointer = Path(run_dir) / "checkpoints" / "latest.json"
    if not pointer.exists():
        return None
    try:
        state = json.loads(pointer.read_text())
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{pointer} is not valid JSON ({error})") from error
    state["path"] = str(pointer.parent / state["folder"])
    return state


def restore_models(state: dict, models: dict[str, keras.Model]) -> None:
    """Load every model's weights from the checkpoint `state`."""
    for name, model in models.items():
        path = Path(state["path"]) / f"{name}.weights.h5"
        if not path.exists():
            raise CheckpointError(f"checkpoint {state['path']} has no weights for {name!r}")
        try:
            model.load_weights(path)
        except ValueError as error:
            raise CheckpointError(
                f"{path} does not fit the {name!r} model of this run (did a model flag change "
                f"since the run started?): {error}"
            ) from error
    bad = non_finite_variables(models)
    if bad:
        raise CheckpointError(
            f"checkpoint {state['path']} holds non-finite weights (e.g. {', '.join(bad[:3])}), "
            "written by a version that saved diverged runs: delete the run folder and restart"
        )


def restore_optimizer(state: dict, optimizer: keras.optimizers.Optimizer) -> None:
    """Load the optimizer state saved with the checkpoint `state` into a built `optimizer`."""
    path = Path(state["path"]) / "optimizer.npz"
    with np.load(path) as saved:
        values = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    if len(values) != len(optimizer.variables):
        raise CheckpointError(
            f"{path} holds {len(values)} optimizer variables, the optimizer has "
            f"{len(optimizer.variables)}"
        )
    for variable, value in zip(optimizer.variables, values):
        variable.assign(value)
