"""Epoch checkpoints of a multi-phase run, for an exact resume after a kill.

A checkpoint is a folder `<run_dir>/checkpoints/<phase>-<epoch>/` holding the weights of every
model (`<name>.weights.h5`) and the state of its random numbers where it draws any (Dropout's:
`<name>.random.npz`), the state of the phase's optimizers (`optimizer.npz`) and, for a
trainer that restarts models (VITA's budget models), the weights they go back to
(`restart_snapshot.npz`, `StatelessTrainer.restart_snapshot`). The file
`<run_dir>/checkpoints/latest.json` names the newest complete folder; it is replaced atomically
only once that folder is fully written, so a kill at any moment leaves the previous checkpoint
intact. Older folders are deleted after the pointer moves. Each complete folder also holds the
pointer's content (`state.json`, written last, with the SHA-256 of each of its files, checked
when a run resumes): a run whose `latest.json` was lost is refused with the folder to resume
from, not started again over its checkpoint, and one stopped between writing the new pointer
whole (`latest.json.tmp`) and renaming it has the rename finished.

A checkpoint is only ever written from finite variables (`save_checkpoint` refuses others, see
`non_finite_variables`), so the checkpoint a diverged run keeps is always one to resume from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path

import h5py
import keras
import numpy as np

from keras_privacy.files import write_text_atomically
from keras_privacy.methods.trainer import random_states

STATE_FILE = "state.json"
"""In each complete checkpoint folder: the content `latest.json` had when it pointed there."""
SAVED_MODELS_FILE = "saved_models.json"
"""In a run folder: the checkpoint (phase, epoch) whose weights train.py last saved as the run's
models (`anonymizer.keras`, ...), written after them."""
_SAVED_MODELS_DAMAGED = "remove it: train.py writes it again"
"""What to do with a damaged SAVED_MODELS_FILE."""


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or does not fit the models of this run."""


class NonFiniteWeightsError(CheckpointError):
    """Variables to be saved hold a NaN or an infinity; the previous checkpoint stays."""


def read_record(
    path: str | os.PathLike, consequence: str, error: type[Exception] = CheckpointError
) -> dict | None:
    """The JSON object a run keeps at `path` (its `config.json`, `environment.json`), or None
    where there is no such file. A file that is not UTF-8 JSON holding one object raises `error`
    naming the file, what is wrong with it and `consequence` (what is unknown without it, and
    the remedy): every reader of a run's records reports a damaged one the same way."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise error(f"{path} is not valid JSON ({problem}): {consequence}") from problem
    if not isinstance(record, dict):
        raise error(f"{path} holds a {type(record).__name__}, not a JSON object: {consequence}")
    return record


def non_finite_variables(
    models: dict[str, keras.Model], optimizer: keras.optimizers.Optimizer | None = None
) -> list[str]:
    """The paths of the floating-point variables of `models` and `optimizer` that hold a NaN
    or an infinity, checked on host copies (as the checkpoint writes them): in a multi-process
    JAX job only process 0 checks, and a computation on the job's global arrays is one that
    every process must run."""
    variables = [v for model in models.values() for v in model.weights]
    if optimizer is not None:
        variables += optimizer.variables
    return [
        variable.path
        for variable in variables
        if "float" in str(variable.dtype)
        and not np.isfinite(keras.ops.convert_to_numpy(variable)).all()
    ]


def save_checkpoint(
    run_dir: str | os.PathLike,
    phase: str,
    epoch: int,
    models: dict[str, keras.Model],
    optimizer: keras.optimizers.Optimizer | None,
    history: dict,
    restart_snapshot: Sequence[keras.Variable] = (),
) -> Path:
    """Write the checkpoint after `epoch` epochs of `phase` and point `latest.json` at it,
    with the trainer's `restart_snapshot` where it has one; its files reach the disk before
    `latest.json` names it.

    Raises NonFiniteWeightsError, writing nothing, when a variable is not finite, and
    CheckpointError naming the file where one cannot be written (a full disk): the partial
    folder is removed, the last checkpoint kept."""
    bad = non_finite_variables(models, optimizer)
    if bad:
        raise NonFiniteWeightsError(
            f"{len(bad)} non-finite variable(s) (e.g. {', '.join(bad[:3])}): no checkpoint "
            f"written for {phase} epoch {epoch}"
        )
    root = Path(run_dir) / "checkpoints"
    folder = root / f"{phase}-{epoch:04d}"
    try:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, model in models.items():
            model.save_weights(folder / f"{name}.weights.h5")
            states = random_states(model)
            if states:
                _save_values(folder / f"{name}.random.npz", states)
        if optimizer is not None:
            _save_values(folder / "optimizer.npz", optimizer.variables)
        if restart_snapshot:
            _save_values(folder / "restart_snapshot.npz", restart_snapshot)
        files = {path.name: _sha256(path) for path in sorted(folder.iterdir())}
        state = json.dumps(
            {
                "phase": phase,
                "epoch": epoch,
                "folder": folder.name,
                "files": files,
                "history": history,
            }
        )
        (folder / STATE_FILE).write_text(state)
        for written in (*folder.iterdir(), folder):
            _sync(written)
        temporary = root / "latest.json.tmp"
        temporary.write_text(state)
        _sync(temporary)
    except OSError as error:
        shutil.rmtree(folder, ignore_errors=True)
        kept = "no checkpoint before it"
        try:
            last = json.loads((root / "latest.json").read_text())["folder"]
            kept = f"the last one, {root / last}, is kept"
        except (OSError, ValueError, KeyError, TypeError):
            pass
        raise CheckpointError(
            f"{error.filename or folder}: cannot be written ({error.strerror or error}); {kept}"
        ) from error
    os.replace(temporary, root / "latest.json")
    try:
        _sync(root)
    except OSError as error:
        raise CheckpointError(
            f"{root}: cannot be flushed to the disk ({error.strerror or error}); "
            f"{root / 'latest.json'} names {folder.name}, written whole"
        ) from error
    for old in root.iterdir():
        if old.is_dir() and old.name != folder.name:
            shutil.rmtree(old)
    return folder


def _sync(path: Path) -> None:
    """Flush a written file (or a folder's entries, where the system opens folders: POSIX) to
    the disk: a checkpoint is complete on the disk before `latest.json` names it, so that a
    power cut leaves the previous one."""
    if path.is_dir() and not hasattr(os, "O_DIRECTORY"):
        return
    descriptor = os.open(path, os.O_RDONLY if path.is_dir() else os.O_RDWR)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def latest_checkpoint(run_dir: str | os.PathLike) -> dict | None:
    """The state written by the last `save_checkpoint` of this run, or None for a new run.

    A run killed while its pointer was being replaced (`latest.json.tmp` written whole and
    naming a complete folder, `latest.json` not yet replaced by it) has the replacement
    finished. Raises CheckpointError naming the file and the remedy where `latest.json` is
    damaged or names a folder that is gone, and where it is missing beside complete
    checkpoints (a new run would delete them): the remedy names the newest complete folder's
    `state.json` to copy in its place."""
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest.json"
    complete = sorted(root.glob(f"*/{STATE_FILE}"))
    remedy = f"remove {root} to train the run again, or use a new --run_dir"
    if complete:
        newest = max(complete, key=lambda path: path.stat().st_mtime)
        remedy = f"copy {newest} to {pointer} to resume from {newest.parent.name}, or {remedy}"
    if not pointer.is_file() and _finish_pointer_replacement(root):
        logging.warning(
            "%s: renamed from latest.json.tmp, written whole before the run was stopped", pointer
        )
    if not pointer.is_file():
        if complete:
            raise CheckpointError(
                f"{pointer} is missing, but {root} holds complete checkpoints "
                f"({', '.join(path.parent.name for path in complete)}): {remedy}"
            )
        return None  # no checkpoint, or only a first one cut short before it was complete
    state = read_record(pointer, remedy)
    if not isinstance(state.get("folder"), str):
        raise CheckpointError(f'{pointer} names no checkpoint folder (no "folder" entry): {remedy}')
    folder = root / state["folder"]
    if not folder.is_dir():
        raise CheckpointError(
            f"{pointer} names {state['folder']}, which is not in {root}: {remedy}"
        )
    state["path"] = str(folder)
    return state


def _finish_pointer_replacement(root: Path) -> bool:
    """Rename `latest.json.tmp` to `latest.json` where it holds the state of a complete folder
    (`save_checkpoint` writes it once the folder is on the disk, then renames it): whether it
    did."""
    temporary = root / "latest.json.tmp"
    try:
        state = json.loads(temporary.read_text(encoding="utf-8"))
        written = (root / state["folder"] / STATE_FILE).read_text(encoding="utf-8")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if json.loads(written) != state:
        return False
    try:
        os.replace(temporary, root / "latest.json")
    except FileNotFoundError:
        pass  # another process of the run renamed it first
    return True


def record_saved_models(run_dir: str | os.PathLike, state: dict | None) -> None:
    """Record, once the run's models are saved in `run_dir`, the checkpoint `state` they hold
    the weights of (None: a run of no epoch), so that `saved_models_behind` can tell them from
    the models of a run that trained on and stopped before saving them."""
    kept = None if state is None else {key: state[key] for key in ("phase", "epoch", "folder")}
    write_text_atomically(
        Path(run_dir) / SAVED_MODELS_FILE, json.dumps({"checkpoint": kept}, indent=1)
    )


def mark_saved_models_behind(run_dir: str | os.PathLike) -> None:
    """Record, before a run with saved models trains on from its latest checkpoint (a finished
    run extended), that they are about to fall behind its weights: a kill before its next
    checkpoint leaves the checkpoint they hold as the latest, but `config.json` already
    describes the longer run. The caller has checked the checkpoint's files first
    (`check_readable`): a damaged one marks nothing, so the saved models stay evaluable."""
    path = Path(run_dir) / SAVED_MODELS_FILE
    record = read_record(path, _SAVED_MODELS_DAMAGED)
    if record is None:
        return
    write_text_atomically(path, json.dumps({**record, "training_on": True}, indent=1))


def check_readable(state: dict) -> None:
    """Check every file of the checkpoint `state` against the SHA-256 its `state.json` recorded
    (a checkpoint of an older version has none) and read it whole, raising CheckpointError
    naming the first that is missing, changed or cannot be read (`_damaged`): an overwritten
    block can leave an HDF5 file that reads, with other weights. Whether the files fit the
    models is `restore_*`'s."""
    folder = Path(state["path"])
    for name, digest in state.get("files", {}).items():
        path = folder / name
        if not path.is_file():
            raise _damaged(path, FileNotFoundError("missing"))
        if _sha256(path) != digest:
            changed = ValueError(f"its SHA-256 is not the one {STATE_FILE} recorded")
            raise _damaged(path, changed)
    for path in sorted(folder.iterdir()):
        if path.suffix == ".npz":
            _read_values(path)
        elif path.name.endswith(".weights.h5"):
            try:
                with h5py.File(path, "r") as file:
                    file.visititems(_read_dataset)
            except (OSError, ValueError, EOFError, KeyError, RuntimeError) as error:
                raise _damaged(path, error) from error


def _sha256(path: Path) -> str:
    """The SHA-256 of the file at `path`, in hexadecimal."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _read_dataset(name: str, item: object) -> None:
    """Read an HDF5 dataset's values (for `h5py.Group.visititems`), so that a file cut short
    fails here."""
    if isinstance(item, h5py.Dataset):
        item[()]


def saved_models_behind(run_dir: str | os.PathLike) -> str | None:
    """Why the models saved in `run_dir` are not the run's latest weights (its training went on
    past them, or stopped before it saved any), or None where they are, or where that cannot be
    told (a run folder without checkpoints, or saved by a version that kept no record)."""
    run_dir = Path(run_dir)
    try:
        state = latest_checkpoint(run_dir)
    except CheckpointError:
        return None  # the models may be fine; the checkpoint matters to train.py, not here
    if state is None:
        return None
    reached = f"{state['phase']} epoch {state['epoch']}"
    record = read_record(run_dir / SAVED_MODELS_FILE, _SAVED_MODELS_DAMAGED)
    if record is None:
        if any(run_dir.glob("*.keras")):
            return None  # saved by a version before the record
        return (
            f"the run in {run_dir} stopped at {reached} (its latest checkpoint) before saving "
            "its models"
        )
    saved = record.get("checkpoint") or {}
    if saved.get("folder") == state["folder"] and not record.get("training_on"):
        return None
    at = f"{saved['phase']} epoch {saved['epoch']}" if saved else "the start (no epoch)"
    return (
        f"the run in {run_dir} saved its models at {at}, then trained on (its latest "
        f"checkpoint: {reached}) and stopped before saving them again"
    )


def restore_models(state: dict, models: dict[str, keras.Model]) -> None:
    """Load every model's weights from the checkpoint `state`."""
    for name, model in models.items():
        path = Path(state["path"]) / f"{name}.weights.h5"
        if not path.exists():
            raise CheckpointError(f"checkpoint {state['path']} has no weights for {name!r}")
        try:
            model.load_weights(path)
        except ValueError as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else "no reason"
            raise CheckpointError(
                f"{path} does not fit the {name!r} model of this run (did a model flag change "
                f"since the run started?): {reason}"
            ) from error
        except (OSError, RuntimeError) as error:  # RuntimeError: h5py's, of a damaged file
            raise _damaged(path, error) from error
        states = Path(state["path"]) / f"{name}.random.npz"
        if states.exists():
            _restore_values(states, random_states(model), f"{name!r} random state")
    bad = non_finite_variables(models)
    if bad:
        raise CheckpointError(
            f"checkpoint {state['path']} holds non-finite weights (e.g. {', '.join(bad[:3])}), "
            "written by a version that saved diverged runs: delete the run folder and restart"
        )


def restore_optimizer(state: dict, optimizer: keras.optimizers.Optimizer) -> None:
    """Load the optimizer state saved with the checkpoint `state` into a built `optimizer`,
    but its learning rates: they stay those it was built with (the run's flags, which a resume
    may change, e.g. lowered after a divergence; a per-epoch rule sets its own each epoch)."""
    rates = [
        (variable, variable.numpy())
        for variable in optimizer.variables
        if variable.path.endswith("learning_rate")
    ]
    _restore_values(Path(state["path"]) / "optimizer.npz", optimizer.variables, "optimizer")
    for variable, value in rates:
        variable.assign(value)


def restore_restart_snapshot(state: dict, restart_snapshot: Sequence[keras.Variable]) -> None:
    """Load the restart snapshot saved with the checkpoint `state` into a compiled trainer's
    `restart_snapshot`, which compile took from the resumed weights: restarts then go back to
    the weights of the phase's start, as in an uninterrupted run. A checkpoint of an older
    version has none: a warning says that restarts go back to the resumed weights."""
    if not restart_snapshot:
        return
    path = Path(state["path"]) / "restart_snapshot.npz"
    if not path.exists():
        logging.warning(
            "%s has no restart snapshot (written by an older version): restarts go back to "
            "the weights of this resumed epoch, not to those of the phase's start",
            state["path"],
        )
        return
    _restore_values(path, restart_snapshot, "restart snapshot")


def _damaged(path: Path, error: Exception) -> CheckpointError:
    """The error of a checkpoint file that cannot be read (cut short or overwritten after it
    was written whole): its path, the reader's reason and what to do."""
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return CheckpointError(
        f"{path}: cannot be read ({reason}); the run's one checkpoint is damaged: remove "
        f"{path.parent.parent} to train the run again from its start, or use a new --run_dir"
    )


def _save_values(path: Path, variables: Sequence[keras.Variable]) -> None:
    """The values of `variables` in one `.npz` file, in order. Read by `numpy()`: NumPy cannot
    convert the value of a variable mirrored by `tf.distribute` (a scalar optimizer step)."""
    np.savez(path, *[np.asarray(v.numpy()) for v in variables])


def _read_values(path: Path) -> list[np.ndarray]:
    """The arrays of `path` (`_save_values`), in order, read whole; CheckpointError naming
    the file (`_damaged`) where it cannot be read."""
    try:
        with np.load(path) as saved:
            return [saved[f"arr_{i}"] for i in range(len(saved.files))]
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
        raise _damaged(path, error) from error


def _restore_values(path: Path, variables: Sequence[keras.Variable], what: str) -> None:
    """Assign the arrays of `path` (`_save_values`) to `variables`, one by one."""
    values = _read_values(path)
    if len(values) != len(variables):
        raise CheckpointError(
            f"{path} holds {len(values)} {what} variables, this run has {len(variables)}"
        )
    for variable, value in zip(variables, values):
        variable.assign(value)
