"""The record of where a run or an evaluation ran: packages, backend, CPU, devices."""

import json
from types import SimpleNamespace

import keras

from keras_privacy import environment

AMD_CPUINFO = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
flags		: fpu sse2 avx2 fma avx512f avx512_vnni avx512_bf16

processor	: 1
model name	: Another CPU
flags		: fpu
"""


def test_describe_names_the_running_keras_its_backend_and_devices():
    record = environment.describe()
    assert record["packages"]["keras"] == keras.version()
    assert record["backend"] == keras.backend.backend()
    assert record["devices"] == [str(d) for d in keras.distribution.list_devices()]
    assert record["cpus"] >= 1
    assert json.loads(json.dumps(record)) == record


def test_cpu_name_and_flags_come_from_the_first_processor(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AMD_CPUINFO)
    assert environment.cpu_name(cpuinfo) == "AMD EPYC (family 25, model 17)"
    flags = ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"]
    assert environment.cpu_flags(cpuinfo) == flags


def test_an_unreadable_cpuinfo_still_names_a_cpu(tmp_path):
    assert environment.cpu_name(tmp_path / "missing") != ""
    assert environment.cpu_flags(tmp_path / "missing") == []


def test_summary_is_one_line_with_backend_versions_and_machine():
    record = environment.describe()
    line = environment.summary(record)
    assert "\n" not in line
    assert f"Keras backend {record['backend']}" in line
    assert f"keras {record['packages']['keras']}" in line
    assert record["cpu"] in line


def test_the_kernel_settings_that_are_set_are_kept_and_named(monkeypatch):
    for name in environment.KERNEL_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    plain = environment.describe()
    assert plain["settings"] == {}
    assert environment.summary(plain).endswith(f"devices {', '.join(plain['devices'])}.")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    record = environment.describe()
    assert record["settings"] == {"TF_ENABLE_ONEDNN_OPTS": "0", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert environment.summary(record).endswith(
        "; TF_ENABLE_ONEDNN_OPTS=0 ONEDNN_MAX_CPU_ISA=AVX2."
    )
    # A record kept before the settings were still reads as one line.
    del record["settings"]
    assert environment.summary(record).endswith(f"devices {', '.join(record['devices'])}.")


def test_accelerators_are_named_by_their_kind(monkeypatch):
    from keras_privacy import backend

    assert environment.describe()["accelerators"] == []  # this machine has no GPU
    if keras.backend.backend() == "jax":
        import jax

        devices = [
            SimpleNamespace(platform="gpu", device_kind="NVIDIA H200"),
            SimpleNamespace(platform="cpu", device_kind="cpu"),
        ]
        monkeypatch.setattr(jax, "local_devices", lambda: devices)
    else:
        import tensorflow as tf

        gpu = SimpleNamespace(name="/physical_device:GPU:0", device_type="GPU")
        monkeypatch.setattr(
            tf.config, "list_physical_devices", lambda kind=None: [gpu] if kind == "GPU" else []
        )
        monkeypatch.setattr(
            tf.config.experimental,
            "get_device_details",
            lambda device: {"device_name": "NVIDIA H200"},
        )
    assert backend.distribution().accelerator_names() == ["NVIDIA H200"]
    record = {**environment.describe(), "devices": ["gpu:0"], "accelerators": ["NVIDIA H200"]}
    assert "devices gpu:0 (NVIDIA H200)" in environment.summary(record)
