"""Where a run or an evaluation was measured: the packages, the Keras backend and the machine
(its CPU, and its GPUs by name).

The same code, seed and data give repeatable numbers on one machine but not across machines
(the quick start's seed 0 gave two different reports, each repeatable, on two machines of one
workplace), so a training run writes this next to its `config.json` (`environment.json`, of
its latest start, with its earlier starts' under `earlier_starts`) and an evaluation into its
`report.json`: a figure that differs from someone else's can then be told apart from a change
of code.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
"""The CPU flags (of /proc/cpuinfo) by which oneDNN and XLA choose their kernels."""

KERNEL_SETTINGS = (
    "TF_ENABLE_ONEDNN_OPTS",
    "ONEDNN_MAX_CPU_ISA",
    "TF_DETERMINISTIC_OPS",
    "XLA_FLAGS",
    "JAX_DEFAULT_MATMUL_PRECISION",
    "OMP_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)
"""The environment variables that change which kernels run, or how they sum: on one machine,
seed 0 of the quick start gave a raw row of 52.2 / 87.1 (action / cMAP) with oneDNN's
defaults, 55.0 / 88.1 with ONEDNN_MAX_CPU_ISA=AVX2 and 54.4 / 86.5 with
TF_ENABLE_ONEDNN_OPTS=0 (README, "Version 5")."""

PACKAGES = (
    ("keras", ("keras",)),
    ("tensorflow", ("tensorflow", "tensorflow-cpu")),
    ("jax", ("jax",)),
    ("jaxlib", ("jaxlib",)),
    ("numpy", ("numpy",)),
)
"""The packages whose versions decide the numbers: a name, and the distributions it ships as."""


def describe() -> dict[str, Any]:
    """The Python, the versions of `PACKAGES` that are installed, the Keras backend, the
    machine's CPU, its devices as Keras lists them and its accelerators by name, and the
    `KERNEL_SETTINGS` that are set."""
    import keras  # here, so that a report is written and read without a backend

    from keras_privacy import backend

    versions = {}
    for name, distributions in PACKAGES:
        for distribution in distributions:
            try:
                versions[name] = metadata.version(distribution)
                break
            except metadata.PackageNotFoundError:
                continue
    return {
        "python": platform.python_version(),
        "packages": versions,
        "backend": keras.backend.backend(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "cpus": os.cpu_count(),
        "devices": [str(device) for device in keras.distribution.list_devices()],
        "accelerators": backend.distribution().accelerator_names(),
        "settings": {name: os.environ[name] for name in KERNEL_SETTINGS if name in os.environ},
    }


def _first_processor(cpuinfo: str | os.PathLike) -> dict[str, str]:
    """The fields of the first processor in `cpuinfo` ({} where it cannot be read)."""
    fields: dict[str, str] = {}
    try:
        lines = Path(cpuinfo).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return fields
    for line in lines:
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_name(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> str:
    """The CPU's model name with its family and model numbers (one machine type's name, such
    as "AMD EPYC", covers several generations), read from `cpuinfo`; elsewhere what
    `platform.processor()` says."""
    fields = _first_processor(cpuinfo)
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def cpu_flags(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> list[str]:
    """Which of `ISA_FLAGS` the CPU has, read from `cpuinfo` ([] where it cannot be read)."""
    flags = set(_first_processor(cpuinfo).get("flags", "").split())
    return [flag for flag in ISA_FLAGS if flag in flags]


def summary(record: dict[str, Any]) -> str:
    """One line of a `describe()` record, for a report: backend, packages, machine and the
    kernel settings that were set (a record written before they were kept has none)."""
    packages = ", ".join(f"{name} {version}" for name, version in record["packages"].items())
    devices = ", ".join(record["devices"])
    if record.get("accelerators"):
        devices += f" ({', '.join(record['accelerators'])})"
    settings = " ".join(f"{name}={value}" for name, value in record.get("settings", {}).items())
    return (
        f"Keras backend {record['backend']}; {packages}; Python {record['python']}; "
        f"{record['cpu']}, {record['cpus']} CPUs ({' '.join(record['cpu_flags'])}); "
        f"devices {devices}" + (f"; {settings}." if settings else ".")
    )
