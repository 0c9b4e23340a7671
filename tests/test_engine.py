"""Conditional updates: a skipped update changes nothing, a taken one equals the plain update,
both as a real conditional and computed-and-selected (the backend step picks one by platform)."""

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
import tiny_models
from keras import ops

from keras_privacy.distribute import training_scope
from keras_privacy.methods.trainer import StatelessTrainer, Update


def net(seed: int) -> keras.Model:
    """Dense + BatchNorm (non-trainable statistics) + Dense, with NumPy-drawn weights. (A bias
    before BatchNorm would get a gradient of rounding noise, which Adam blows up to its step.)"""
    inputs = keras.Input((3,))
    hidden = keras.layers.BatchNormalization()(keras.layers.Dense(4, use_bias=False)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(size=w.shape).astype("float32") for w in model.get_weights()])
    model.layers[2].moving_variance.assign(np.ones(4, "float32"))
    return model


class Switched(StatelessTrainer):
    """`first` always updates; `second` updates where the batch's `switch` (logged by a first,
    parameter-free update) is positive, as a condition, or always (`conditional=False`).
    `skips` forces a real conditional (True) or compute-and-select (False)."""

    log_names = ("first_loss", "second_loss")

    def __init__(self, conditional: bool = True, skips: bool | None = None, **kwargs):
        super().__init__(**kwargs)
        self.first, self.second = net(0), net(1)
        self.conditional = conditional
        self.skips = skips

    def _skips_updates(self) -> bool:
        return super()._skips_updates() if self.skips is None else self.skips

    def groups(self):
        return {"first": self.first, "second": self.second}

    def updates(self, data):
        condition = (lambda logs: logs["switch"] > 0) if self.conditional else None
        return [
            Update((), lambda values: (ops.zeros(()), {"logs": {"switch": data["switch"][0]}})),
            Update(("first",), lambda values: self._loss(values, data, "first")),
            Update(
                ("second",), lambda values: self._loss(values, data, "second"), condition=condition
            ),
        ]

    def _loss(self, values, data, group):
        outputs, state = self.run(group, values, data["x"], training=True)
        loss = ops.mean(ops.square(ops.cast(outputs, "float32") - data["y"]))
        return loss, {"logs": {f"{group}_loss": loss}, "non_trainable": {group: state}}


def dataset(switches: list[float]) -> tf.data.Dataset:
    rng = np.random.default_rng(7)
    steps = len(switches)
    return tf.data.Dataset.from_tensor_slices(
        {
            "x": rng.normal(size=(steps, 8, 3)).astype("float32"),
            "y": rng.normal(size=(steps, 8, 1)).astype("float32"),
            "switch": np.repeat(np.asarray(switches, "float32")[:, None], 8, axis=1),
        }
    )


def compiled(
    conditional: bool = True, jit_compile: bool = False, skips=None, run_eagerly: bool = False
) -> Switched:
    trainer = Switched(conditional, skips)
    trainer.compile(
        {g: keras.optimizers.Adam(1e-2) for g in ("first", "second")},
        jit_compile=jit_compile,
        run_eagerly=run_eagerly,
    )
    return trainer


def trained(switches: list[float], conditional=True, jit_compile=False, skips=None, eager=False):
    """A `Switched` trainer after one epoch on `dataset(switches)`, and its history."""
    trainer = compiled(conditional, jit_compile, skips, eager)
    history = trainer.fit(dataset(switches), epochs=1, verbose=0, shuffle=False).history
    return trainer, history


def assert_trained_alike(trained_pair, reference_pair, rtol: float, atol: float) -> None:
    """Two (trainer, history) pairs with the same weights, optimizer states and metrics."""
    (trainer, history), (reference, reference_history) = trained_pair, reference_pair
    for group in ("first", "second"):
        for a, b in zip(state(trainer, group), state(reference, group)):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    for key in reference_history:
        np.testing.assert_allclose(history[key], reference_history[key], rtol=rtol)


def state(trainer: Switched, group: str) -> list[np.ndarray]:
    """Weights (BatchNorm statistics included) and optimizer variables of `group`."""
    model, optimizer = trainer.groups()[group], trainer.group_optimizer(group)
    return [np.array(v.numpy()) for v in model.weights + optimizer.variables]


MODES = pytest.mark.parametrize(
    "jit_compile, skips", [(jit, skips) for jit in (False, True) for skips in (True, False)]
)


@MODES
def test_a_false_condition_leaves_its_group_unchanged(jit_compile, skips):
    untouched = state(compiled(), "second")
    trainer, history = trained([0.0, 0.0], jit_compile=jit_compile, skips=skips)
    for before, after in zip(untouched, state(trainer, "second")):
        np.testing.assert_array_equal(before, after)
    assert int(trainer.group_optimizer("second").iterations) == 0
    assert int(trainer.group_optimizer("first").iterations) == 2
    assert history["second_loss"][-1] == 0.0  # never ran: not counted


@MODES
def test_a_true_condition_equals_the_unconditional_update(jit_compile, skips):
    conditional = trained([1.0, 1.0], True, jit_compile, skips)
    assert_trained_alike(conditional, trained([1.0, 1.0], False, jit_compile), 1e-6, 1e-7)
    assert int(conditional[0].group_optimizer("second").iterations) == 2


@pytest.mark.parametrize("skips", [True, False])
def test_conditional_updates_run_eagerly_equal_the_compiled_step(skips):
    """A step run eagerly (no trace: a real conditional runs one branch) skips and runs the
    conditional update as the compiled step does."""
    eager = trained([1.0, 0.0, 1.0], skips=skips, eager=True)
    assert_trained_alike(eager, trained([1.0, 0.0, 1.0], skips=skips), 1e-5, 1e-6)
    assert int(eager[0].group_optimizer("second").iterations) == 2


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX decides on the host")
@pytest.mark.parametrize("skips", [False, True], ids=["cpu", "accelerator"])
def test_a_jax_step_decided_on_the_host_computes_a_branch_only_where_it_runs(skips):
    """Decided on the host, the branch of `second` (its update, and a second update of
    `first` taken where the switch is above 1) is in the program of the steps that take it
    only; the unconditional update of `first` is computed once a step (a callback inside each
    loss counts the times it is computed). Inside the branch, the update whose decision is
    False is computed and discarded on a CPU, skipped in `jax.lax.cond` on an accelerator.
    The training equals that of the step that holds every update in a real conditional."""
    import jax

    computed = {"first": [], "second": []}

    class TwoConditional(Switched):
        def updates(self, data):
            first, second, third = super().updates(data)
            again = Update(
                ("first",),
                lambda values: self._loss(values, data, "first"),
                condition=lambda logs: logs["switch"] > 1,
            )
            return [first, second, third, again]

    class Counted(TwoConditional):
        def updates(self, data):
            *updates, third, again = super().updates(data)
            branched = [dataclasses.replace(u, branch="second") for u in (third, again)]
            return [*updates, *branched]

        def _loss(self, values, data, group):
            jax.debug.callback(lambda: computed[group].append(1))
            return super()._loss(values, data, group)

    def fit(trainer):
        trainer.compile(
            {g: keras.optimizers.Adam(1e-2) for g in ("first", "second")}, jit_compile=True
        )
        history = trainer.fit(dataset([1.0, 0.0, 0.0, 2.0]), epochs=1, verbose=0, shuffle=False)
        return trainer, history.history

    assert Counted(skips=skips)._backend_step.host_chosen_step() is not None
    host = fit(Counted(skips=skips))
    again = 1 if skips else 2  # the step with switch 2; and, computed, the one with switch 1
    assert (len(computed["first"]), len(computed["second"])) == (4 + again, 2)
    assert_trained_alike(host, fit(TwoConditional(skips=True)), 1e-5, 1e-6)
    assert int(host[0].group_optimizer("second").iterations) == 2


class BatchLogs(keras.callbacks.Callback):
    """The running metrics after every batch."""

    def __init__(self):
        super().__init__()
        self.logs: list[dict] = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append({key: float(value) for key, value in logs.items()})


@pytest.mark.parametrize("skips", [True, False])
def test_metrics_of_a_conditional_update_leave_out_the_steps_that_skipped_it(skips):
    trainer = compiled(skips=skips)
    batches = BatchLogs()
    trainer.fit(dataset([1.0, 0.0, 1.0]), epochs=1, verbose=0, shuffle=False, callbacks=[batches])
    second = [logs["second_loss"] for logs in batches.logs]
    first = [logs["first_loss"] for logs in batches.logs]
    assert second[1] == second[0] != second[2]  # step 1 skipped `second`: its mean stands
    assert len(set(first)) == 3
    assert int(trainer.group_optimizer("second").iterations) == 2


class FirstOnly(Switched):
    """`Switched` without its conditional update."""

    def updates(self, data):
        return super().updates(data)[:2]


@pytest.mark.parametrize("skips", [True, False])
def test_a_skipped_update_leaves_the_float16_loss_scale_alone(skips):
    def loss_scale(trainer):
        return [
            float(v.numpy())
            for v in trainer.optimizer.variables
            if v.path.endswith(("loss_scale", "finite_updates"))
        ]

    with training_scope("none", "mixed_float16"):
        skipped, _ = trained([0.0, 0.0, 0.0], skips=skips)
        reference = FirstOnly()
        reference.compile(
            {g: keras.optimizers.Adam(1e-2) for g in ("first", "second")}, jit_compile=False
        )
        reference.fit(dataset([0.0, 0.0, 0.0]), epochs=1, verbose=0, shuffle=False)
    assert len(loss_scale(skipped)) == 2
    assert loss_scale(skipped) == loss_scale(reference)
    for a, b in zip(state(skipped, "first"), state(reference, "first")):
        np.testing.assert_array_equal(a, b)


def test_the_trainer_takes_the_step_of_the_running_backend():
    trainer = Switched()
    assert type(trainer._backend_step).__name__ == {
        "jax": "JaxStep", "tensorflow": "TensorFlowStep"
    }[keras.backend.backend()]  # fmt: skip
    assert trainer._backend_step.trainer is trainer


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX's steps run behind the host")
def test_a_jax_train_function_waits_for_the_step_two_calls_before(monkeypatch):
    import jax

    from keras_privacy.backend.jax_step import STEPS_IN_FLIGHT

    waited = []
    monkeypatch.setattr(jax, "block_until_ready", lambda logs: waited.append(int(logs["step"])))

    def train_function(state, iterator):
        return {"step": jax.numpy.asarray(next(iterator))}, state + 1

    bounded = Switched()._backend_step.bounded(train_function)
    steps = iter(range(6))
    states = [bounded(state, steps)[1] for state in range(6)]
    assert states == [1, 2, 3, 4, 5, 6]  # the outputs pass through
    assert STEPS_IN_FLIGHT == 2 and waited == [0, 1, 2, 3]  # step k waits for step k - 2


def test_conditional_updates_under_data_parallel_equal_one_device():
    """Run as a script with 2 CPU devices (fixed before the backend starts): the same steps
    with and without data parallelism (on TensorFlow, the step's compute-and-discard)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    done = subprocess.run(
        [sys.executable, __file__],
        cwd=Path(__file__).parent,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    one, many = result["none"], result["data_parallel"]
    assert many["replicas"] == 2
    assert one["iterations"] == many["iterations"] == [2, 1]
    for a, b in zip(one["state"], many["state"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _data_parallel_main() -> dict:
    if keras.backend.backend() == "tensorflow":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    out = {}
    for distribution in ("none", "data_parallel"):
        with training_scope(distribution) as replicas:
            trainer, _ = trained([1.0, 0.0], jit_compile=keras.backend.backend() == "jax")
        out[distribution] = {
            "replicas": replicas,
            "iterations": [
                int(trainer.group_optimizer(g).iterations.numpy()) for g in ("first", "second")
            ],
            "state": [a.tolist() for g in ("first", "second") for a in state(trainer, g)],
        }
    return out


if __name__ == "__main__":
    print(json.dumps(_data_parallel_main()))


def _named_trainer(method: str, name: str) -> keras.Model:
    from keras_privacy.methods import init
    from keras_privacy.methods.spact import SPAct
    from keras_privacy.methods.vita import VITA

    anonymizer = tiny_models.anonymizer()
    phases = {
        "identity_init": lambda: init.IdentityInit(anonymizer, name=name),
        "action_init": lambda: init.ActionInit(anonymizer, tiny_models.action_model(), name=name),
        "privacy_init": lambda: init.PrivacyInit(
            anonymizer,
            [tiny_models.privacy_encoder(), tiny_models.privacy_encoder()],
            temperature=0.2,
            contrastive_views="both",
            name=name,
        ),
        "supervised_privacy_init": lambda: init.SupervisedPrivacyInit(
            anonymizer,
            {"adversary_1": tiny_models.budget_model(), "adversary_0": tiny_models.budget_model()},
            name=name,
        ),
    }
    if method in phases:
        return phases[method]()
    if method == "meta":
        return tiny_models.meta_trainer(name=name)
    models = (tiny_models.anonymizer(), tiny_models.action_model())
    if method == "vita":
        return VITA(*models, [tiny_models.budget_model()], name=name)
    return SPAct(*models, tiny_models.privacy_encoder(), name=name)


@pytest.mark.parametrize(
    "method",
    [
        "spact",
        "vita",
        "meta",
        "identity_init",
        "action_init",
        "privacy_init",
        "supervised_privacy_init",
    ],
)
def test_a_trainers_config_rebuilds_it_named_and_is_left_as_it_was(method):
    trainer = _named_trainer(method, "my_run")
    config = trainer.get_config()
    kept = copy.deepcopy(config)
    restored = type(trainer).from_config(config)
    assert config == kept  # Keras' deserializing empties what it reads: a copy is read
    assert restored.name == "my_run"
    assert restored.get_config() == config
    assert keras.saving.get_registered_name(type(trainer)).startswith("keras_privacy>")
    assert list(restored.groups()) == list(trainer.groups())
