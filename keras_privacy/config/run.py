"""How and where a run goes: the method, folders, seeds, devices and precision."""

from __future__ import annotations

import dataclasses
from dataclasses import field

from keras_privacy.cli import refuse_a_file
from keras_privacy.config.setting import SettingError, at_least_one, described, one_of
from keras_privacy.distribute import DISTRIBUTIONS, JIT_COMPILE, PRECISIONS

METHODS = ("spact", "penalty", "vita", "meta")
MAX_SEED = 2**32 - 1
"""The largest seed NumPy's generators (`keras.utils.set_random_seed`) take."""


@dataclasses.dataclass
class RunSettings:
    """How and where a run goes: the method, folders, seeds, devices and precision."""

    method: str = field(
        default="spact",
        metadata=described(
            "Training method: spact (self-supervised adversary), penalty (SPAct with the RMS "
            "penalty), vita (supervised budget models), meta (meta generalisation).",
            "run",
        ),
    )
    run_dir: str = field(
        default="runs/synthetic", metadata=described("Checkpoints, logs, models, report.", "run")
    )
    seed: int = field(
        default=0, metadata=described("Seed of data order, augmentation, init.", "run")
    )
    seeds: int = field(
        default=1,
        metadata=described(
            "Runs of seeds seed..seed+N-1, each in run_dir/seed_K (evaluate.py: each evaluated "
            "into its own report, then a summary of mean +- std across seeds); 1 = one run in "
            "run_dir.",
            "run",
        ),
    )
    jit_compile: str = field(
        default="auto",
        metadata=described(
            "auto | true | false: XLA-compile the training steps. auto: XLA on JAX and on a "
            "TensorFlow GPU; on a TensorFlow CPU, XLA unless a trained model has 3-D "
            "convolutions (XLA:CPU runs those several times slower than TensorFlow's graph). "
            "TensorFlow's data-parallel step runs without XLA, whatever the setting.",
            "run",
        ),
    )
    compilation_cache: str = field(
        default="",
        metadata=described(
            "Folder of a persistent cache of compiled training steps (JAX only): a later run "
            "with the same models, sizes and flags on the same kind of machine loads its steps "
            "instead of compiling them (the eight-model meta step compiles for over 9 minutes "
            "on an H200). Empty: none.",
            "run",
        ),
    )
    distribution: str = field(
        default="none",
        metadata=described(
            "none | data_parallel: replicate the models on every local GPU (else CPU device) and "
            "split each batch; batch sizes are global (see the README).",
            "run",
        ),
    )
    num_processes: int = field(
        default=1,
        metadata=described(
            "Processes of a multi-process JAX job (with <distribution>=data_parallel): 1 = this "
            "process alone; N > 1 with <process_id> and <coordinator_address>; 0 = read from "
            "the cluster's environment (SLURM, Open MPI, Kubernetes).",
            "run",
        ),
    )
    process_id: int = field(
        default=0, metadata=described("This process's index in 0 .. <num_processes> - 1.", "run")
    )
    coordinator_address: str = field(
        default="",
        metadata=described("host:port where process 0 of a multi-process job listens.", "run"),
    )
    mixed_precision: str = field(
        default="float32",
        metadata=described(
            "float32 | mixed_bfloat16 | mixed_float16 (with dynamic loss scaling).", "run"
        ),
    )


def validate_run(config: RunSettings) -> None:
    """The devices, processes and precision of the run, and its seeds."""
    one_of("distribution", config.distribution, DISTRIBUTIONS)
    one_of("mixed_precision", config.mixed_precision, PRECISIONS)
    one_of("jit_compile", str(config.jit_compile).lower(), JIT_COMPILE)
    if config.compilation_cache:
        try:
            refuse_a_file(config.compilation_cache, "<compilation_cache>")
        except NotADirectoryError as error:
            raise SettingError(str(error)) from None
    if config.process_id < 0:
        raise SettingError(f"<process_id> must be 0 or more, got {config.process_id}")
    if config.num_processes in (0, 1) and (config.process_id or config.coordinator_address):
        given = "<process_id>" if config.process_id else "<coordinator_address>"
        raise SettingError(
            f"{given} is read only with <num_processes> N > 1, and <num_processes> is "
            f"{config.num_processes} (1: this process alone; 0: the cluster's environment gives "
            "all three): give <num_processes>"
        )
    if config.num_processes != 1:
        if config.distribution != "data_parallel":
            raise SettingError(
                f"<num_processes>={config.num_processes} trains one model across processes: "
                "it needs <distribution>=data_parallel"
            )
        if config.num_processes < 0:
            raise SettingError(f"<num_processes> must be 0 or more, got {config.num_processes}")
        if config.num_processes > 1 and not 0 <= config.process_id < config.num_processes:
            raise SettingError(
                f"<process_id>={config.process_id} is not in 0 .. {config.num_processes - 1}"
            )
        if config.num_processes > 1 and not config.coordinator_address:
            raise SettingError(
                f"<num_processes>={config.num_processes} needs <coordinator_address> "
                "(host:port of process 0)"
            )
        host, _, port = config.coordinator_address.rpartition(":")
        if config.num_processes > 1 and not (host and port.isdigit() and 0 < int(port) < 65536):
            raise SettingError(
                f"<coordinator_address>={config.coordinator_address} is not host:port (a port "
                "of 1 .. 65535) where process 0 listens"
            )
    if config.distribution == "data_parallel" and config.method == "meta":
        raise SettingError(
            "<distribution>=data_parallel does not support <method>=meta: its batches carry "
            "per-model masks that cannot be split across devices"
        )
    at_least_one(config, ("seeds",))
    last = config.seed + config.seeds - 1
    if config.seed < 0 or last > MAX_SEED:
        seeds = f" (with <seeds>={config.seeds}, {last} the last)" if config.seeds > 1 else ""
        raise SettingError(
            f"<seed>={config.seed}{seeds}: the seeds must lie in 0 .. {MAX_SEED} (2**32 - 1)"
        )
