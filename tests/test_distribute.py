"""Data-parallel training takes the steps one device takes (4 virtual CPU devices, both backends).

The device count must be fixed before the backend starts, so each check runs this file as a
script in a fresh process: `XLA_FLAGS=--xla_force_host_platform_device_count=4` on JAX, 4 logical
CPUs (`tf.config.set_logical_device_configuration`) on TensorFlow.
"""

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import types
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

DEVICES = 4
GROUPS = ("anonymizer", "action", "privacy")


AUGMENTED = dict(
    adversary_crop=0.25, adversary_jitter=0.5, ssl_adversary="moco", moco_queue_size=16
)
"""SPAct with the state a replica keeps as integers: the augmentations' call counters and
MoCo's queue pointer."""


def spact_run(distribution: str, jit_compile: bool, pairs: int = 2, **spact_args) -> dict:
    """Weights and logs after `pairs` SPAct steps (tiny models with BatchNorm, NumPy-drawn
    weights, SGD) on global batches of 16 clips and 8 privacy images; `spact_args` to
    `SPAct`."""
    import keras
    import tiny_models

    from keras_privacy.data.pairs import pair_batches
    from keras_privacy.distribute import process_position, training_scope
    from keras_privacy.methods.spact import SPAct

    rng = np.random.default_rng(0)
    batches = [tiny_models.batch(rng, clips=16, images=8) for _ in range(2 * pairs)]
    index, count = process_position()  # this process's rows of each global batch, as training's

    def rows(values: np.ndarray) -> np.ndarray:
        share = values.shape[1] // count
        return values[:, index * share : (index + 1) * share]

    stacked = {key: rows(np.stack([b[key] for b in batches])) for key in batches[0]}
    import tensorflow as tf

    dataset = pair_batches(tf.data.Dataset.from_tensor_slices(stacked))
    with training_scope(distribution) as replicas:
        models = [
            tiny_models.anonymizer(),
            tiny_models.action_model(),
            tiny_models.privacy_encoder(),
        ]
        for seed, model in enumerate(models):
            tiny_models.deterministic_weights(model, seed)
        initial = [np.asarray(w.numpy()) for m in models for w in m.weights]
        trainer = SPAct(*models, privacy_weight=0.5, **spact_args)
        trainer.compile({g: keras.optimizers.SGD(0.05) for g in GROUPS}, jit_compile=jit_compile)
        history = trainer.fit(dataset, epochs=1, verbose=0, shuffle=False).history
        return {
            "replicas": replicas,
            "weights": [np.asarray(w.numpy()).tolist() for m in models for w in m.weights],
            "logs": {k: float(v[-1]) for k, v in history.items()},
            "iterations": {g: int(trainer.group_optimizer(g).iterations.numpy()) for g in GROUPS},
            "moved": max(
                float(np.max(np.abs(np.asarray(w.numpy()) - w0)))
                for w, w0 in zip([w for m in models for w in m.weights], initial)
            ),
        }


def _run_script(backend: str, *args: str, devices: int = DEVICES) -> dict:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    env["XLA_FLAGS"] = (
        f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    )
    done = subprocess.run(
        [sys.executable, __file__, *args],
        cwd=Path(__file__).parent,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_data_parallel_trains_with_integer_state():
    """`AUGMENTED` keeps integer state, which TensorFlow's all-reduce refused at the first
    minimax step. JAX's step is one device's; TensorFlow's replicas draw crops and colours of
    their own (one device's rows are laid out otherwise), so there the action side is one
    device's and the privacy side trains."""
    import keras

    result = _run_script(keras.backend.backend(), "augmented")
    one, many = result["none"], result["data_parallel"]
    assert one["iterations"] == many["iterations"] == {g: 2 for g in GROUPS}
    assert all(np.isfinite(value) for value in many["logs"].values())
    equal = list(one["logs"]) if keras.backend.backend() == "jax" else ["action_loss"]
    for key in equal:
        np.testing.assert_allclose(one["logs"][key], many["logs"][key], rtol=1e-4, err_msg=key)


def test_data_parallel_steps_equal_one_device():
    import keras

    result = _run_script(keras.backend.backend(), "steps")
    one, many = result["none"], result["data_parallel"]
    assert (one["replicas"], many["replicas"]) == (1, DEVICES)
    assert one["iterations"] == many["iterations"] == {g: 2 for g in GROUPS}
    assert one["moved"] > 1e-2  # the steps changed the weights
    for a, b in zip(one["weights"], many["weights"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for key in one["logs"]:
        np.testing.assert_allclose(one["logs"][key], many["logs"][key], rtol=1e-4, err_msg=key)


@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") != "tensorflow",
    reason="TensorFlow's replica steps; JAX's data-parallel step is one program",
)
def test_each_replica_draws_dropout_masks_of_its_own():
    """Under a mirrored strategy every replica read the same seed state, so each drew the
    same Dropout mask for its rows: the replica's index is folded into the seed, and taken
    out of the new state, which stays the one every replica moved on to."""
    result = _run_script("tensorflow", "dropout")
    seed, draws = result["initial"]
    for kind in ("run", "triplet"):
        masks = [tuple(map(tuple, rows)) for rows in result[f"{kind}_masks"]]
        assert len(masks) == DEVICES
        assert len(set(masks)) == DEVICES, kind  # no two replicas draw alike
        assert all(0.3 < np.mean(mask) < 0.7 for mask in masks)
    assert result["run_states"] == [[seed, draws + 1]] * DEVICES
    assert result["triplet_states"] == [[seed, draws + 3]] * DEVICES  # three clips in turn


def test_global_batch_must_split_over_the_devices():
    from keras_privacy.distribute import check_batch_sizes

    check_batch_sizes(8, batch_size=16, privacy_batch_size=8)
    with pytest.raises(ValueError, match="--privacy_batch_size=12 is the global batch.*of 8"):
        check_batch_sizes(8, batch_size=16, privacy_batch_size=12)


def test_config_names_bad_distribution_settings():
    from keras_privacy.config import ExperimentConfig

    with pytest.raises(ValueError, match="--distribution='ddp'"):
        ExperimentConfig(distribution="ddp").validate()
    with pytest.raises(ValueError, match="--mixed_precision='float16'"):
        ExperimentConfig(mixed_precision="float16").validate()
    with pytest.raises(ValueError, match="does not support --method=meta"):
        ExperimentConfig(distribution="data_parallel", method="meta").validate()


def test_jit_compile_auto_picks_xla_by_backend_and_convolutions():
    import keras
    import tiny_models as tm

    from keras_privacy.distribute import choose_jit_compile

    frames, clips = tm.anonymizer(), tm.action_model()  # 2-D and 3-D convolutions
    nested = tm.video_privacy_encoder()  # a Conv3D inside a nested trunk
    if keras.backend.backend() == "jax":
        assert choose_jit_compile("auto", [frames, clips]) == (True, "auto: XLA on jax")
    else:
        on, why = choose_jit_compile("auto", [frames, clips])
        assert not on and "3-D convolutions in ['action']" in why
        assert choose_jit_compile("auto", [frames])[0]
        assert not choose_jit_compile("auto", [nested])[0]
    for setting, expected in (("true", True), ("False", False), (True, True), (False, False)):
        assert choose_jit_compile(setting, [clips]) == (
            expected,
            f"--jit_compile={expected}".lower(),
        )
    with pytest.raises(ValueError, match="--jit_compile='maybe' is not one of auto, true, false"):
        choose_jit_compile("maybe", [frames])


def test_config_refuses_an_unknown_jit_compile():
    from keras_privacy.config import ExperimentConfig

    with pytest.raises(ValueError, match="--jit_compile='sometimes' is not one of"):
        ExperimentConfig(jit_compile="sometimes").validate()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _two_processes(arguments) -> list[subprocess.Popen]:
    """Processes 0 and 1 of this file's script on JAX, with `arguments(index)`, their output
    piped."""
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    return [
        subprocess.Popen(
            [sys.executable, __file__, *arguments(index)],
            cwd=Path(__file__).parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(2)
    ]


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "jax", reason="multi-process training is JAX's")
def test_two_processes_take_the_steps_of_one():
    """Two JAX processes on localhost (one CPU device each, Gloo) fitting the same global
    batches end with the weights of one process fitting them alone."""
    port = str(_free_port())
    workers = _two_processes(lambda index: ["process", str(index), "2", port])
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    one = _run_script("jax", "single")["none"]
    assert [r["processes"] for r in results] == [2, 2]
    assert [r["replicas"] for r in results] == [2, 2]
    assert one["moved"] > 1e-2
    for result in results:
        assert result["iterations"] == one["iterations"] == {g: 2 for g in GROUPS}
        for a, b in zip(one["weights"], result["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        for key in one["logs"]:
            np.testing.assert_allclose(one["logs"][key], result["logs"][key], rtol=1e-4)


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "jax", reason="multi-process training is JAX's")
def test_two_processes_train_a_run_as_one_process_on_two_devices(benchmark, tmp_path):
    """`training.train` in two JAX processes, from a copy of the benchmark without its caches:
    process 0 writes the caches while process 1 waits, each decodes its own rows, and the
    run's losses are those of one process on two devices (the same global batches)."""
    data = tmp_path / "benchmark"
    shutil.copytree(benchmark, data, ignore=shutil.ignore_patterns("cache"))
    port = str(_free_port())
    run_dir = tmp_path / "two"
    workers = _two_processes(lambda index: ["train", str(data), str(run_dir), str(index), port])
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    one = _run_script("jax", "train", str(data), str(tmp_path / "one"), "0", "", devices=2)
    assert [r["devices"] for r in results] == [2, 2] and one["devices"] == 2
    for result in results:
        assert result["history"].keys() == one["history"].keys() == {"minimax"}
        for key, values in one["history"]["minimax"].items():
            np.testing.assert_allclose(result["history"]["minimax"][key], values, rtol=1e-4)
    assert "anonymizer.keras" in results[0]["written"]
    assert results[0]["written"] == one["written"]  # process 0's files: those of a lone run


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "jax", reason="multi-process training is JAX's")
@pytest.mark.parametrize("failing", [1, 0])
def test_a_failed_process_stops_the_other_at_once(failing):
    """Two JAX processes on localhost take a step together, then process `failing` raises
    (a damaged video) while the other waits in the next step's collective for its data: both
    end with status 1 within seconds, the failed one with its error, the other naming it (left
    to JAX, both waited at its exit barrier until its 5-minute timeout aborted them)."""
    port = str(_free_port())
    workers = _two_processes(lambda index: ["failing", str(index), port, str(failing)])
    deadline = time.monotonic() + 60
    errors = []
    try:
        for worker in workers:
            errors.append(worker.communicate(timeout=deadline - time.monotonic())[1])
    finally:
        for worker in workers:
            worker.kill()
    assert [worker.returncode for worker in workers] == [1, 1], errors
    other = 1 - failing
    assert f"error: damaged video in process {failing}\n" in errors[failing]
    assert (
        f"error: process {failing} of 2 failed (its own output says why); process {other} "
        "stops too\n"
    ) in errors[other]


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "jax", reason="multi-process training is JAX's")
def test_a_process_started_otherwise_than_process_0_is_named_with_what_differs(benchmark, tmp_path):
    """Processes started with other flags trained mixed settings in silence, and one that found
    another checkpoint (a run folder on a disk of its own) stopped in a collective with a
    misleading error: each is named before any step, here in process 1."""
    import tiny_models

    shared, own = tmp_path / "shared", tmp_path / "own"
    process_0 = tiny_models.tiny_config(benchmark, tmp_path, run_dir=str(shared))
    folder = shared / "checkpoints" / "identity-0001"  # a checkpoint process 0 alone sees
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({"phase": "identity", "epoch": 1}))
    pointer = {"folder": folder.name, "phase": "identity", "epoch": 1}
    (folder.parent / "latest.json").write_text(json.dumps(pointer))
    (shared / "config.json").write_text(json.dumps(dataclasses.asdict(process_0)))
    weight = process_0.privacy_weight
    cases = [
        (shared, 50.0, f"process 1 was started with --privacy_weight=50.0 (process 0: {weight})"),
        (own, weight, f"process 1 finds no checkpoint in {own}, process 0 identity epoch 1"),
    ]
    for run_dir_1, weight_1, message in cases:
        arguments = [str(benchmark), str(shared), str(run_dir_1)]
        more = [str(_free_port()), str(weight_1)]
        workers = _two_processes(
            lambda index, arguments=arguments, more=more: ["start", *arguments, str(index), *more]
        )
        errors = [worker.communicate(timeout=120)[1] for worker in workers]
        assert [worker.returncode for worker in workers] == [1, 1], errors
        assert f"error (process 1 of 2 on {socket.gethostname()}): {message}" in errors[1]
        assert "error: process 1 of 2 failed (its own output says why)" in errors[0]
    assert not (own / "config.json").exists()


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "jax", reason="multi-process training is JAX's")
def test_process_0_writes_first_and_the_others_find_its_files(tmp_path):
    """`chief_first`: process 1 runs only once process 0's run has written its file (the
    built-in benchmark and its caches, which two processes would otherwise write at once)."""
    port = str(_free_port())
    workers = _two_processes(lambda index: ["chief_first", str(index), port, str(tmp_path)])
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results == [{"found": False}, {"found": True}]
    assert (tmp_path / "written").read_text() == "by process 0"


def test_config_names_bad_process_settings():
    from keras_privacy.config import ExperimentConfig

    with pytest.raises(ValueError, match="--num_processes=2 .* needs --distribution=data_parallel"):
        ExperimentConfig(num_processes=2, coordinator_address="h:1").validate()
    with pytest.raises(ValueError, match="--process_id=2 is not in 0 .. 1"):
        ExperimentConfig(
            num_processes=2, process_id=2, distribution="data_parallel", coordinator_address="h:1"
        ).validate()
    with pytest.raises(ValueError, match="needs --coordinator_address"):
        ExperimentConfig(num_processes=2, distribution="data_parallel").validate()


def test_num_processes_0_off_a_cluster_names_the_flag():
    """JAX's own message ("coordinator_address should be defined.") names neither the flag
    nor the cause. In a fresh process: JAX refuses to join a job once its backend started."""
    cluster = ("SLURM_JOB_ID", "OMPI_MCA_orte_hnp_uri", "JOBSET_NAME")
    env = {k: v for k, v in os.environ.items() if k not in cluster} | {"KERAS_BACKEND": "jax"}
    join = "from keras_privacy.backend.jax_distribution import join_processes\n"
    join += "join_processes(0, 0, '')"
    done = subprocess.run(
        [sys.executable, "-c", join], env=env, capture_output=True, text=True, timeout=120
    )
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith(
        "ValueError: --num_processes=0 reads the job from the cluster's environment (SLURM, "
        "Open MPI, Kubernetes with jax[k8s]), and none was found ("
    )
    assert message.endswith("give --num_processes, --process_id and --coordinator_address")


@pytest.mark.parametrize(
    "refusal, hint",
    [
        (
            "(403) Forbidden: pods is forbidden",
            "; the pod's service account must be allowed to list pods and read jobs",
        ),
        ("jobs must be indexed (completionMode: Indexed)", ""),
    ],
)
def test_num_processes_0_with_a_cluster_it_cannot_read_names_the_flag(monkeypatch, refusal, hint):
    """JAX's Kubernetes detection raises a RuntimeError (no right to list the job's pods, a Job
    not indexed), which escaped the one-line error path as a traceback; the service account is
    named only where the cluster said forbidden."""
    import jax

    from keras_privacy.backend import jax_distribution

    def refuse():
        raise RuntimeError(refusal)

    monkeypatch.setattr(jax.config, "update", lambda *args: None)
    monkeypatch.setattr(jax.distributed, "initialize", refuse)
    with pytest.raises(ValueError) as raised:
        jax_distribution.join_processes(0, 0, "")
    assert str(raised.value) == (
        f"--num_processes=0: reading the job from the cluster's environment failed ({refusal})"
        + hint
    )


def test_processes_given_their_flags_keep_every_device_whatever_the_cluster(monkeypatch):
    """Given --num_processes, --process_id and --coordinator_address, JAX would still read
    SLURM's or Open MPI's environment and give the process the one GPU of its local rank (a
    process a node, launched by srun, trained on one of its GPUs): the three flags now turn the
    cluster's detection off."""
    import jax

    from keras_privacy.backend import jax_distribution

    calls = []
    monkeypatch.setattr(jax.config, "update", lambda *args: None)
    monkeypatch.setattr(jax.distributed, "initialize", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_LOCALID", "0")
    with socket.socket() as listening:  # process 0's coordinator, for process 1 to reach
        listening.bind(("localhost", 0))
        listening.listen()
        address = f"localhost:{listening.getsockname()[1]}"
        assert jax_distribution.join_processes(2, 1, address) == 2
    with socket.socket() as free:
        free.bind(("", 0))
        free_port = free.getsockname()[1]
    assert jax_distribution.join_processes(2, 0, f"node0:{free_port}") == 2
    for (args, kwargs), process in zip(calls, (1, 0)):
        assert args[1:] == (2, process) and kwargs["cluster_detection_method"] == "deactivate"
        assert "local_device_ids" not in kwargs


def test_a_coordinator_port_taken_or_unreachable_is_named_by_its_flag(monkeypatch):
    """JAX ends the process without a Python error where process 0 cannot listen on the port
    (a crash) or another process cannot reach it (an abort blaming another task, after 300 s):
    each is now a ValueError naming --coordinator_address."""
    import jax

    from keras_privacy.backend import jax_distribution

    monkeypatch.setattr(jax.config, "update", lambda *args: None)
    monkeypatch.setattr(jax.distributed, "initialize", mock.Mock(side_effect=AssertionError))
    monkeypatch.setattr(jax_distribution, "COORDINATOR_WAIT_SECONDS", 1)
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ValueError) as raised:
            jax_distribution.join_processes(2, 0, f"localhost:{port}")
    assert str(raised.value).startswith(
        f"--coordinator_address=localhost:{port}: process 0 cannot listen on port {port} ("
    )
    assert str(raised.value).endswith("give every process another port")
    with pytest.raises(ValueError) as raised:  # nothing listens there now
        jax_distribution.join_processes(2, 1, f"localhost:{port}")
    assert str(raised.value).startswith(
        f"--coordinator_address=localhost:{port}: process 0 did not answer there within 1 s ("
    )
    jax.distributed.initialize.assert_not_called()


@pytest.mark.backend_independent
def test_a_process_reading_other_data_than_process_0_is_refused_with_both_counts(
    monkeypatch, tmp_path
):
    """Each process shuffles and counts its own list of examples: a node's copy lacking a file
    would read other rows, or take other steps and stop in a collective, with no word."""
    from keras_privacy import distribute, training
    from keras_privacy.data import pipelines
    from keras_privacy.data.examples import Example, Split

    def split(root: str, names: list[str]) -> Split:
        return Split([Example(f"{root}/Fencing/{name}", label=0) for name in names], ["Fencing"])

    names = ["v_Fencing_g01_c01.avi", "v_Fencing_g01_c02.avi"]
    here, there = split("/data", names), split("/mnt/node7/ucf101", names)
    assert pipelines.examples_identity(here) == pipelines.examples_identity(there)
    lacking = split("/data", names[:1])
    assert pipelines.examples_identity(lacking).startswith("1 examples (digest ")
    images = split("/data", ["2017_10000.jpg"])
    data = types.SimpleNamespace(videos=lacking, images=images)
    process_0 = {
        "action videos": pipelines.examples_identity(here),
        "privacy images": pipelines.examples_identity(images),
    }
    monkeypatch.setattr(distribute, "process_0s_value", lambda name, value: json.dumps(process_0))
    monkeypatch.setattr(distribute, "process_position", lambda: (1, 2))
    with pytest.raises(training.SettingError) as raised:
        training._require_process_0s_data(data)
    assert str(raised.value).startswith(
        f"process 1 reads other data than process 0 (action videos: "
        f"{pipelines.examples_identity(lacking)} (process 0: {process_0['action videos']})): "
    )
    data.videos = here
    training._require_process_0s_data(data)  # the same data: no error


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "jax", reason="JAX's multi-process jobs")
def test_processes_with_unequal_devices_are_refused_by_their_counts():
    # Each process reads an equal share of a batch; JAX would want a share per device.
    from keras_privacy.backend import jax_distribution
    from keras_privacy.backend.jax_distribution import _check_equal_devices
    from keras_privacy.distribute import training_scope

    _check_equal_devices([0, 0, 1, 1])
    _check_equal_devices([0])
    with pytest.raises(ValueError, match=r"\(process 0 has 2, process 1 has 1\): each one"):
        _check_equal_devices([0, 0, 1])
    # Checked as data-parallel training starts: inside the command, its error one line.
    fake = [types.SimpleNamespace(process_index=index) for index in (0, 0, 1)]
    with mock.patch.object(jax_distribution.jax, "devices", lambda: fake):
        with pytest.raises(ValueError, match="process 0 has 2, process 1 has 1"):
            with training_scope("data_parallel"):
                pass


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "tensorflow", reason="TensorFlow's refusal")
@pytest.mark.parametrize("num_processes", [0, 2])
def test_tensorflow_refuses_training_across_processes_by_name(num_processes):
    from keras_privacy.distribute import initialize_processes
    from keras_privacy.spelling import SettingError

    assert initialize_processes(1) == 1
    with pytest.raises(SettingError, match=f"--num_processes={num_processes}: .*--backend=jax"):
        initialize_processes(num_processes, 0, "localhost:1")


def _main(mode: str, *args: str) -> dict:
    if mode == "process":
        # One process of a two-process job: one CPU device, joined before JAX starts.
        from keras_privacy.distribute import initialize_processes, run_stopping_together

        index, count, port = args
        processes = initialize_processes(int(count), int(index), f"127.0.0.1:{port}")
        import jax
        import keras

        jax.config.update("jax_threefry_partitionable", False)
        keras.utils.set_random_seed(0)  # the same initial values in both processes
        result = {"processes": processes}

        def fit() -> int:
            result.update(spact_run("data_parallel", jit_compile=True))
            return 0

        # As train.py runs: a process that ends well waits for the others at JAX's exit.
        assert run_stopping_together(fit) == 0
        return result
    if mode == "train":
        # A short SPAct run of the tiny benchmark at `data`, data-parallel over two devices:
        # one process of a two-process job (one CPU device each; `port` its coordinator's), or
        # one process alone on 2 virtual CPU devices (`port` empty).
        from keras_privacy.distribute import initialize_processes, is_chief, run_stopping_together

        data, run_dir, index, port = args
        if port:
            initialize_processes(2, int(index), f"127.0.0.1:{port}")
        import jax
        import tiny_models

        from keras_privacy import training

        jax.config.update("jax_threefry_partitionable", False)
        config = tiny_models.tiny_config(
            data,
            Path(run_dir).parent,
            run_dir=run_dir,
            distribution="data_parallel",
            identity_epochs=0,
            identity_warmup_epochs=0,
            action_init_epochs=0,
            privacy_init_epochs=0,
            minimax_epochs=1,
            steps_per_epoch=4,
        )
        result = {"devices": len(jax.devices())}

        def train() -> int:
            history = training.train(config).history
            result["history"] = history
            result["written"] = (
                sorted(p.name for p in Path(run_dir).iterdir()) if is_chief() else []
            )
            return 0

        assert run_stopping_together(train) == 0
        return result
    if mode == "start":
        # One process of a two-process job that starts `training.train`: process 1 with its
        # own run folder and privacy weight (for a run folder not shared, or another flag).
        from keras_privacy.cli import run_command
        from keras_privacy.distribute import (
            initialize_processes,
            process_name,
            run_stopping_together,
        )

        data, run_dir_0, run_dir_1, index, port, privacy_weight_1 = args
        initialize_processes(2, int(index), f"127.0.0.1:{port}")
        import tiny_models

        from keras_privacy import training

        own = {"run_dir": run_dir_1, "privacy_weight": float(privacy_weight_1)}
        config = tiny_models.tiny_config(
            data, Path(run_dir_0).parent, **({"run_dir": run_dir_0} if index == "0" else own)
        )

        def command() -> None:
            training.train(config)

        status = run_stopping_together(lambda: run_command(command, process=process_name()))
        return {"status": status}
    if mode == "chief_first":
        from keras_privacy.distribute import chief_first, initialize_processes

        index, port, folder = args
        initialize_processes(2, int(index), f"127.0.0.1:{port}")
        written = Path(folder) / "written"

        def write_once() -> bool:
            found = written.exists()
            if not found:
                time.sleep(2)  # a slow write: process 1 would find nothing yet
                written.write_text(f"by process {index}")
            return found

        return {"found": chief_first(write_once)}
    if mode == "dropout":
        return _dropout_masks_by_replica()
    if mode == "failing":
        # One process of a two-process job in which process `failing` raises after a step.
        from keras_privacy.cli import run_command
        from keras_privacy.distribute import initialize_processes, run_stopping_together

        index, port, failing = (int(arg) for arg in args)
        initialize_processes(2, index, f"127.0.0.1:{port}")
        import jax
        import jax.numpy as jnp

        sharding = jax.sharding.NamedSharding(
            jax.sharding.Mesh(np.array(jax.devices()), ("batch",)),
            jax.sharding.PartitionSpec("batch"),
        )

        def step() -> float:
            rows = np.full(4, index, np.float32)
            return float(jax.jit(jnp.sum)(jax.make_array_from_process_local_data(sharding, rows)))

        def command() -> None:
            step()
            if index == failing:
                raise RuntimeError(f"damaged video in process {index}")
            step()

        return {"status": run_stopping_together(lambda: run_command(command))}
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * DEVICES
        )
    else:
        import jax

        jax.config.update("jax_threefry_partitionable", False)  # as in conftest: faster init
    jit = keras.backend.backend() == "jax"
    out = {}
    spact_args = AUGMENTED if mode == "augmented" else {}
    for d in ("none",) if mode == "single" else ("none", "data_parallel"):
        t = time.time()
        out[d] = spact_run(d, jit_compile=jit, **spact_args)
        print(d, time.time() - t, file=sys.stderr)
    return out


def _dropout_masks_by_replica() -> dict:
    """The Dropout masks each replica of a TensorFlow data-parallel step draws for the same two
    rows through `StatelessTrainer.run` and through SPAct's f_T-with-features call (TeD-SPAD's
    triplet), and the seed states each returns; with the initial state."""
    import keras
    import tensorflow as tf
    import tiny_models

    from keras_privacy.distribute import training_scope
    from keras_privacy.methods.spact import SPAct, action_and_triplet
    from keras_privacy.methods.trainer import random_states

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * DEVICES
    )
    units = 64
    with training_scope("data_parallel"):
        inputs = keras.Input((None, None, None, 3))
        x = keras.layers.GlobalAveragePooling3D()(inputs)
        x = keras.layers.Dense(units, kernel_initializer="ones")(x)
        x = keras.layers.Dropout(0.5, seed=3)(x)
        logits = keras.layers.Dense(units, kernel_initializer="identity")(x)
        action = keras.Model(inputs, logits, name="action")
        trainer = SPAct(
            tiny_models.anonymizer(), action, tiny_models.privacy_encoder(), triplet_weight=1.0
        )
        (state,) = random_states(action)
        initial = state.numpy().tolist()
        clips = tf.ones((2, 2, 4, 4, 3))
        strategy = tf.distribute.get_strategy()

        def replica_step():
            values = trainer.current_values()
            outputs, new_states = trainer.run("action", values, clips, training=True)
            anchors, _, states = action_and_triplet(trainer, values, (clips,) * 3, 1.0, True)
            where = random_states(action)[0].path
            position = [v.path for v in action.non_trainable_variables].index(where)
            return (
                outputs != 0,
                new_states[position],
                anchors != 0,
                states["action"][position],
            )

        results = strategy.run(tf.function(replica_step))
        local = [
            [np.asarray(value).tolist() for value in strategy.experimental_local_results(part)]
            for part in results
        ]
    names = ("run_masks", "run_states", "triplet_masks", "triplet_states")
    return {"initial": initial, **dict(zip(names, local))}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(json.dumps(_main(*sys.argv[1:])))


@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") != "tensorflow",
    reason="TensorFlow's mirrored variables; JAX's data-parallel run: the two-process test",
)
def test_a_data_parallel_run_trains_through_train_and_keeps_its_checkpoints(
    benchmark, tmp_path, capsys
):
    """A whole run under `--distribution=data_parallel` (this machine's one device): every
    epoch's checkpoint and frame strip are written (TensorFlow's mirrored scalar optimizer
    variables failed NumPy's conversion at the first checkpoint), and it resumes from them.
    Its log says XLA is off, as it is under a mirrored strategy, even where asked for."""
    from tiny_models import tiny_config

    from keras_privacy import checkpoint, training

    config = tiny_config(
        benchmark,
        tmp_path,
        distribution="data_parallel",
        identity_epochs=1,
        identity_warmup_epochs=0,
        action_init_epochs=0,
        privacy_init_epochs=0,
        minimax_epochs=1,
        steps_per_epoch=2,
        jit_compile="auto",
    )
    result = training.train(config)
    assert checkpoint.latest_checkpoint(result.run_dir)["phase"] == "minimax"
    frames = sorted(path.name for path in (result.run_dir / "frames").iterdir())
    assert frames == ["identity_epoch001.png", "minimax_epoch001.png"]
    assert "phase minimax: XLA off (auto: TensorFlow graph without XLA under data parallelism)" in (
        capsys.readouterr().out
    )
    longer = dataclasses.replace(config, minimax_epochs=2, jit_compile="true")
    with pytest.warns(UserWarning, match="XLA compilation is off for data-parallel training"):
        resumed = training.train(longer)
    record = json.loads((result.run_dir / "environment.json").read_text())
    assert record["resumed_from"] == {"phase": "minimax", "epoch": 1}
    for name, values in result.history["minimax"].items():
        assert resumed.history["minimax"][name][:1] == values and len(values) == 1, name
        assert len(resumed.history["minimax"][name]) == 2, name
    assert (
        "phase minimax: XLA off (--jit_compile=true; XLA cannot compile a TensorFlow "
        "data-parallel step)"
    ) in capsys.readouterr().out
