"""Mixed precision: a few SPAct steps per policy stay finite, float32-variabled and close to
float32; `mixed_float16` scales the loss and skips overflowing updates; saved models reload."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tiny_models
from keras import ops

from keras_privacy.distribute import choose_jit_compile, training_scope
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.trainer import LOSS_SCALE_INITIAL, StatelessTrainer, Update
from keras_privacy.models import registry

GROUPS = ("anonymizer", "action", "privacy")
MIXED = ("mixed_bfloat16", "mixed_float16")


def spact_steps(precision: str, pairs: int = 2):
    """Logs, models and trainer after `pairs` SPAct steps from NumPy-drawn weights, compiled as
    `--jit_compile=auto` compiles them: XLA on JAX (as a GPU runs them), TensorFlow's graph on a
    CPU (the tiny action model is 3-D)."""
    with training_scope("none", precision):
        models = [
            tiny_models.anonymizer(),
            tiny_models.action_model(),
            tiny_models.privacy_encoder(),
        ]
        for seed, model in enumerate(models):
            tiny_models.deterministic_weights(model, seed)
        trainer = SPAct(*models, privacy_weight=0.5)
        jit_compile = choose_jit_compile("auto", models)[0]
        trainer.compile({g: keras.optimizers.Adam(1e-3) for g in GROUPS}, jit_compile=jit_compile)
        history = trainer.fit(tiny_models.paired_dataset(pairs), epochs=1, verbose=0).history
    return {key: values[-1] for key, values in history.items()}, models, trainer


def _moves(models) -> np.ndarray:
    """How far the models' trainable variables moved from their NumPy-drawn start (drawn again
    into a copy of each model), flat."""
    moved = []
    for seed, model in enumerate(models):
        start = keras.models.clone_model(model)
        tiny_models.deterministic_weights(start, seed)
        moved += [
            (v.numpy() - s.numpy()).ravel()
            for v, s in zip(model.trainable_variables, start.trainable_variables)
        ]
    return np.concatenate(moved)


@pytest.fixture(scope="module")
def float32_run():
    logs, models, _ = spact_steps("float32")
    return logs, _moves(models)


@pytest.mark.parametrize("precision", MIXED)
def test_mixed_steps_are_finite_float32_and_close_to_float32(precision, float32_run):
    float32_logs, float32_moves = float32_run
    logs, models, trainer = spact_steps(precision)
    compute = precision.split("_")[1]
    assert models[0].layers[1].compute_dtype == compute  # the policy reached the layers
    assert all(w.dtype == "float32" for model in models for w in model.weights)
    for group in GROUPS:
        assert int(trainer.group_optimizer(group).iterations) == 2
    tolerance = 3e-2 if precision == "mixed_bfloat16" else 5e-3
    for key, value in logs.items():
        assert np.isfinite(value), key
        np.testing.assert_allclose(value, float32_logs[key], rtol=tolerance, atol=2e-3, err_msg=key)
    # the updates themselves: as far as float32's and the same way (Adam's steps are sign-like)
    moves = _moves(models)
    assert np.linalg.norm(moves) == pytest.approx(np.linalg.norm(float32_moves), rel=0.1)
    assert moves @ float32_moves > 0.8 * np.linalg.norm(moves) * np.linalg.norm(float32_moves)
    loss_scale = [v for v in trainer.optimizer.variables if v.path.endswith("loss_scale")]
    if precision == "mixed_float16":
        assert float(loss_scale[0].numpy()) == LOSS_SCALE_INITIAL
    else:
        assert loss_scale == []


@pytest.mark.parametrize("precision", ["float32", *MIXED])
def test_every_trainer_holds_each_variable_of_its_state_once(precision):
    """Keras' JAX `fit` gives the jitted step, which donates them, the values of the
    trainable, non-trainable, optimizer and metric variables: a variable in two of those lists
    fails there (as the loss scale's did under mixed_float16)."""
    import no_tensorflow_fit

    with training_scope("none", precision):
        for name, (trainer, _, trained) in no_tensorflow_fit.trainers().items():
            no_tensorflow_fit.compile_trainer(name, trainer, trained)
            state = [
                *trainer.trainable_variables,
                *trainer.non_trainable_variables,
                *trainer.optimizer.variables,
                *trainer.metrics_variables,
            ]
            twice = [v.path for v in state if sum(w is v for w in state) > 1]
            assert twice == [], (name, twice)


class _Square(StatelessTrainer):
    """Minimises mean(f(x)^2): with large x, its scaled float16 gradient overflows."""

    log_names = ("loss",)

    def __init__(self, net: keras.Model, **kwargs):
        super().__init__(**kwargs)
        self.net = net

    def groups(self):
        return {"net": self.net}

    def updates(self, data):
        return [Update(("net",), lambda values: self._loss(values, data))]

    def _loss(self, values, data):
        outputs, _ = self.run("net", values, data["x"])
        loss = ops.mean(ops.square(ops.cast(outputs, "float32")))
        return loss, {"logs": {"loss": loss}}


@pytest.mark.parametrize("jit_compile", [False, True])
def test_float16_loss_scale_skips_overflowing_updates(jit_compile):
    x = np.ones((48, 4), "float32")
    with training_scope("none", "mixed_float16"):
        inputs = keras.Input((4,))
        net = keras.Model(
            inputs,
            keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(100.0))(inputs),
        )
        trainer = _Square(net)
        trainer.compile({"net": keras.optimizers.SGD(1e-6)}, jit_compile=jit_compile)
        dataset = tf.data.Dataset.from_tensor_slices({"x": x}).batch(4)
        history = trainer.fit(dataset, epochs=1, verbose=0).history
    scale = [v for v in trainer.optimizer.variables if v.path.endswith("loss_scale")][0]
    # Outputs 400 in batches of 4: the float16 kernel gradient, 4 * (2 * 400 / 4) * scale,
    # overflows (> 65504) until 9 halvings bring the scale from 2^15 to 2^6.
    assert float(scale.numpy()) == 2.0**6
    assert int(trainer.group_optimizer("net").iterations) == 12 - 9
    assert np.all(np.isfinite(net.get_weights()[0]))
    assert np.isfinite(history["loss"][-1])


@pytest.mark.parametrize("precision", MIXED)
def test_models_under_mixed_policy_output_float32_and_reload(precision, tmp_path):
    with training_scope("none", precision):
        anonymizer = registry.build_anonymizer("unet_tiny")
        actions = [
            registry.build_action_model(name, num_classes=3, input_shape=(4, 16, 16, 3))
            for name in ("r3d_tiny", "factorized_tiny")
        ]
        spact = SPAct(
            anonymizer,
            actions[0],
            tiny_models.privacy_encoder(),
            ssl_adversary="rotnet",
            triplet_weight=1.0,
        )
        heads = (spact.rotation_head, spact.embedding_head)
        frames = np.random.default_rng(0).random((2, 16, 16, 3), dtype="float32")
        expected = np.asarray(anonymizer(frames))
        anonymizer.save(tmp_path / "anonymizer.keras")
    outputs = [model.outputs[0].dtype for model in (anonymizer, *actions, *heads)]
    assert outputs == ["float32"] * 5
    reloaded = keras.saving.load_model(tmp_path / "anonymizer.keras")
    assert reloaded.layers[1].compute_dtype == precision.split("_")[1]
    np.testing.assert_allclose(np.asarray(reloaded(frames)), expected, atol=1e-6)


def test_a_float16_trainer_reloaded_under_float32_keeps_its_loss_scale_and_state(tmp_path):
    """The loss scale follows the models' float16 layers, not the policy at load time: a
    trainer saved under `mixed_float16` and loaded in a fresh float32 session still scales its
    losses, and its optimizers' state (loss scale included) loads whole."""
    _, _, trainer = spact_steps("mixed_float16")
    trainer.save(tmp_path / "spact.keras")
    assert keras.config.dtype_policy().name == "float32"
    reloaded = keras.saving.load_model(tmp_path / "spact.keras")
    assert any(v.path.endswith("loss_scale") for v in reloaded.optimizer.variables)
    for kept, saved in zip(reloaded.optimizer.variables, trainer.optimizer.variables, strict=True):
        assert kept.name == saved.name
        np.testing.assert_array_equal(kept.numpy(), saved.numpy(), err_msg=saved.path)


def _compiled(fn):
    """`fn` compiled as a training step is: `jax.jit` on JAX, a `tf.function` graph on
    TensorFlow."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    return tf.function(fn)


def _anonymizer_gradients(name: str, precision: str, weights: list) -> list[np.ndarray]:
    """The gradient of mean(w * f_A(x)) with respect to every trainable variable of the
    anonymizer `name` built under `precision` with `weights`, on 64 frames of 32 x 32: sums
    over 64 x 32 x 32 positions, where 16-bit accumulators lose the small terms."""
    from keras_privacy.backend import value_and_gradient

    rng = np.random.default_rng(0)
    frames = rng.random((64, 32, 32, 3), dtype="float32")
    weighting = (rng.uniform(-1, 1, frames.shape) + 0.2).astype("float32")
    with training_scope("none", precision):
        anonymizer = registry.build_anonymizer(name)
    anonymizer.set_weights(weights)
    state = [v.value for v in anonymizer.non_trainable_variables]

    scale = LOSS_SCALE_INITIAL if precision == "mixed_float16" else 1.0

    def loss(trainable):
        outputs, _ = anonymizer.stateless_call(trainable, state, frames, training=True)
        return ops.mean(ops.cast(outputs, "float32") * weighting) * scale

    gradients = _compiled(lambda trainable: value_and_gradient(loss, trainable)[1])
    trainable = [v.value for v in anonymizer.trainable_variables]
    return [np.asarray(g, np.float64) / scale for g in gradients(trainable)]


@pytest.mark.parametrize("name", ["unet_tiny", "unetpp_tiny", "vita_tiny"])
def test_every_anonymizer_variable_gets_its_float32_gradient_under_mixed_policies(name):
    """Each variable's gradient under a mixed policy has float32's size within 16-bit noise
    (each one that matters: at least 1 % of the largest): a bias added in 16 bits after the last
    normalisation (f_A's output convolution) had its gradient summed in 16 bits on JAX, 15x too
    small in bfloat16 and 2x in float16; the noise moves these norms by under 12 %."""
    with training_scope("none", "float32"):
        anonymizer = registry.build_anonymizer(name)
    weights = anonymizer.get_weights()
    expected = _anonymizer_gradients(name, "float32", weights)
    largest = max(np.linalg.norm(e) for e in expected)
    for precision in MIXED:
        got = _anonymizer_gradients(name, precision, weights)
        for variable, g, e in zip(anonymizer.trainable_variables, got, expected, strict=True):
            if np.linalg.norm(e) > 1e-2 * largest:
                ratio = np.linalg.norm(g) / np.linalg.norm(e)
                assert 0.8 < ratio < 1.25, (precision, variable.path, ratio)


def _meta_gradient(precision: str, loss_scale=None) -> np.ndarray:
    """Meta's gradient of f_A (its update's passes, compiled) at NumPy-drawn weights under
    `precision`, on 4 clips of 16 x 64 x 64, where float16 gradients inside f_A underflow."""
    with training_scope("none", precision):
        trainer = tiny_models.meta_trainer()
        values = trainer.current_values()
        values["meta_iteration"] = ([], [np.int32(1)])
        data = tiny_models.meta_batch(clips=4, frames=16, size=64, images=4)
        grads = _compiled(lambda values: trainer.meta_gradient(values, data, loss_scale)[0])(values)
    return np.concatenate([np.asarray(g, np.float64).ravel() for g in grads])


def test_meta_inner_gradients_take_the_loss_scale():
    """Meta differentiates inside its loss (g_S, g_Q, the Hessian-vector product), which the
    step's scaling of the outer loss does not reach: given the scale, each inner pass scales
    its loss, and the float16 meta-gradient is float32's (unscaled it was 19 % off)."""
    expected = _meta_gradient("float32")
    for precision, loss_scale in (("mixed_float16", LOSS_SCALE_INITIAL), ("mixed_bfloat16", None)):
        got = _meta_gradient(precision, loss_scale)
        error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
        assert error < 0.05, (precision, error)


def test_a_meta_step_passes_its_loss_scale_to_the_meta_gradient():
    """The compiled step gives the meta gradient its dynamic loss scale, by value (its initial
    one at the first step): the wrapped gradient logs the scale it got as meta_train_loss."""
    with training_scope("none", "mixed_float16"):
        trainer = tiny_models.meta_trainer(action_threshold=-1.0, attack_threshold=-1.0)
        trainer.compile({g: keras.optimizers.SGD(1e-2) for g in trainer.groups()})
        meta_gradient = trainer.meta_gradient

        def logging_the_scale(values, data, loss_scale=None):
            grads, _, test_loss, state = meta_gradient(values, data, loss_scale)
            return grads, ops.cast(loss_scale, "float32"), test_loss, state

        trainer.meta_gradient = logging_the_scale
        batches = tf.data.Dataset.from_tensors(tiny_models.meta_batch())
        history = trainer.fit(batches, epochs=1, verbose=0).history
    assert history["meta_train_loss"] == [LOSS_SCALE_INITIAL]
