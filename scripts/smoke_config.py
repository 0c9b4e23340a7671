"""Run a paper config end to end in minutes on a CPU: its tiny twin, before a GPU run.

    python scripts/smoke_config.py configs/ucf101_vispr_vita.cfg
    python scripts/smoke_config.py configs/hmdb_vispr_meta.cfg --out runs/smoke --backend jax

`train.py` then `evaluate.py` with the config's own flag file and, after it, flags that keep
every setting of the method (losses, schedules, thresholds, augmentation presets, restarts,
the evaluation's methods and protocol; meta's thresholds are 0, so that its steps are meta
updates, which tiny models would otherwise never reach) but make the run small: a small
synthetic benchmark in the official UCF101 and VISPR formats (written under `--out` on first
use), 32 x 32 inputs, 8-frame clips, one epoch of 2-3 steps per phase, the registry's tiny
models in place of each model (at most two per list), no weight files. A twin that trains
every phase and writes its report has run the code paths its config's settings choose (a VITA
minimax that never trained f_A was found so); sizes, memory and speed it cannot show. HMDB51
configs read the synthetic files as UCF101 (the HMDB51 reader is tested on the real split
files in `tests/test_data.py`), and the evaluation's protocol runs on the same files
(`novel_attributes` on attributes the training did not see; a protocol of other datasets,
such as `cross_dataset` or `pa_hmdb51`, becomes `same`). Prints one JSON object last:
each command's exit status and seconds, and the report's path; the logs are in the run
folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TINY_IMAGE_MODELS = ("resnet_tiny_small_images", "resnet_tiny")
"""The image models that stand in for a list of them, in turn (at most two)."""
TRAINED_ATTRIBUTES = "s1_warm_actor,s2_striped_actor,s3_face_mark"
NOVEL_ATTRIBUTES = "s4_outdoor_scene,s5_object"
"""The synthetic attributes for the `novel_attributes` protocol: three to train on, two new."""
EPOCH_FIELDS = (
    "identity_epochs",
    "action_init_epochs",
    "privacy_init_epochs",
    "minimax_epochs",
    "eval_action_epochs",
    "eval_privacy_epochs",
)


def tiny_action_model(name: str, registered: set[str]) -> str:
    """The tiny twin of an action model: its own `_tiny` variant where the registry has one."""
    if name.endswith("_tiny") or name.startswith("factorized_"):
        return name
    if f"{name}_tiny" in registered:
        return f"{name}_tiny"
    return "r2plus1d_tiny" if name.startswith("r2plus1d") else "r3d_tiny"


def tiny_image_models(names: str) -> str:
    """At most two tiny image models in place of a comma-separated list of them."""
    count = min(len([n for n in names.split(",") if n]), len(TINY_IMAGE_MODELS))
    return ",".join(TINY_IMAGE_MODELS[:count])


def tiny_overrides(config, data: Path, run_dir: Path) -> dict[str, str]:
    """The flags (name -> value) after the config's flag file that make its run small.

    `config` is the config's `ExperimentConfig`; `data` a synthetic benchmark folder."""
    from keras_privacy.models import registry

    registered = set(registry.ANONYMIZERS) | set(registry.ACTION_MODELS)
    flags = {
        "run_dir": str(run_dir),
        "seeds": "1",
        "action_dataset": "ucf101",
        "action_annotations": str(data / "ucf_splits"),
        "action_root": str(data / "videos"),
        "action_split": "1",
        "action_cache": "",
        "privacy_dataset": "vispr",
        "privacy_annotations": str(data / "vispr"),
        "privacy_root": str(data / "vispr"),
        "privacy_cache": "",
        "privacy_attributes": "all",
        "frame_size": "40",
        "privacy_image_side": "48",
        "image_size": "32",
        "clip_length": "8",
        "batch_size": "4",
        "privacy_batch_size": "8",
        "steps_per_epoch": "2",
        "privacy_init_steps_per_epoch": "0",
        "minimax_steps_per_epoch": "0",
        "identity_warmup_epochs": "0",
        "eval_warmup_epochs": "0",
        "eval_clips": "2",
        "eval_bootstrap": "100",
        "eval_boxes": str(data / "person_boxes.json"),
        "anonymizer_path": "",
        "eval_dir": "",
        "anonymizer": (
            f"{config.anonymizer}_tiny"
            if f"{config.anonymizer}_tiny" in registered
            else "unet_tiny"
        ),
        "action_model": tiny_action_model(config.action_model, registered),
    }
    # Set only where the config sets them: a method that does not read a flag refuses it.
    defaults = {field.name: field.default for field in dataclasses.fields(config)}
    for field in ("privacy_backbone", "adversary_models"):
        if getattr(config, field) != defaults[field]:
            flags[field] = tiny_image_models(getattr(config, field))
    for field in EPOCH_FIELDS:
        flags[field] = "1" if getattr(config, field) > 0 else "0"
    for field in dataclasses.fields(config):
        if field.name.endswith("_weights"):
            flags[field.name] = ""
    # No weight file, so no BatchNorm of one to keep.
    flags["eval_action_frozen_batchnorm"] = "false"
    if config.eval_action_model:
        flags["eval_action_model"] = tiny_action_model(config.eval_action_model, registered)
    if config.eval_privacy_model:
        flags["eval_privacy_model"] = tiny_image_models(config.eval_privacy_model)
    if config.eval_action_batch_size:
        flags["eval_action_batch_size"] = "4"
    if config.eval_privacy_batch_size:
        flags["eval_privacy_batch_size"] = "8"
    for field in (
        "eval_action_dataset",
        "eval_action_annotations",
        "eval_action_root",
        "eval_privacy_dataset",
        "eval_privacy_annotations",
        "eval_privacy_root",
        "eval_privacy_attributes",
    ):
        flags[field] = ""
    if config.eval_protocol == "novel_attributes":
        flags["privacy_attributes"] = TRAINED_ATTRIBUTES
        flags["eval_privacy_attributes"] = NOVEL_ATTRIBUTES
    else:
        flags["eval_protocol"] = "same"
    if config.method == "meta":
        # Every step the meta update (second order where the config says so): with the paper's
        # thresholds, tiny models in two steps only ever reach Algorithm 1's f_T branch.
        flags["action_threshold"] = "0"
        flags["adversary_threshold"] = "0"
    if config.method == "vita" and config.budget_pretrain_updates:
        # One budget-only step, then minimax steps (and a restart where the config has them).
        flags["budget_pretrain_updates"] = str(config.adversary_updates_per_step)
        flags["minimax_steps_per_epoch"] = "3"
        if config.restart_every:
            flags["restart_every"] = "1"
    return flags


def _run(script: str, flagfile: Path, flags: dict[str, str], backend: str, log: Path) -> dict:
    command = [
        sys.executable,
        script,
        f"--flagfile={flagfile}",
        *(f"--{name}={value}" for name, value in flags.items()),
        f"--backend={backend}",
    ]
    start = time.perf_counter()
    with log.open("w") as out:
        status = subprocess.run(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT).returncode
    return {"status": status, "seconds": round(time.perf_counter() - start, 1), "log": str(log)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path, help="a flag file, e.g. configs/ucf101_vispr.cfg")
    parser.add_argument("--out", type=Path, default=Path("runs/smoke"))
    parser.add_argument("--backend", default="tensorflow", choices=("tensorflow", "jax"))
    args = parser.parse_args(argv)

    from keras_privacy.data.synthetic import write_synthetic_benchmark
    from keras_privacy.flags import parse_config

    # Not validated: the config's weight files need not exist here (the twin names none).
    config = parse_config([f"--flagfile={args.config}"])
    data = args.out / "data"
    if not (data / "person_boxes.json").is_file():
        write_synthetic_benchmark(data, videos_per_class=(8, 4), num_images=(48, 16, 24))
    run_dir = args.out / f"{args.config.stem}_{args.backend}"
    run_dir.mkdir(parents=True, exist_ok=True)
    flags = tiny_overrides(config, data.resolve(), run_dir.resolve())
    result = {"config": str(args.config), "backend": args.backend}
    flagfile = args.config.resolve()
    result["train"] = _run("train.py", flagfile, flags, args.backend, run_dir / "train.log")
    if result["train"]["status"] == 0:
        result["evaluate"] = _run(
            "evaluate.py", flagfile, flags, args.backend, run_dir / "evaluate.log"
        )
        report = run_dir / "evaluation" / "report.md"
        result["report"] = str(report) if report.is_file() else None
    print(json.dumps(result))
    return 0 if result.get("report") else 1


if __name__ == "__main__":
    sys.exit(main())
