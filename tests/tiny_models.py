"""Tiny hand-built f_A, f_T, f_B and batches for fast trainer tests."""

import struct
import zipfile
from pathlib import Path

import keras
import numpy as np
from keras import layers

from keras_privacy.methods.spact import SPAct

TINY_RUN = dict(
    action_dataset="synthetic",
    privacy_dataset="synthetic",
    frame_size=32,
    image_size=16,
    clip_length=4,
    clip_stride=2,
    batch_size=4,
    privacy_batch_size=4,
    action_model="factorized_tiny",
    privacy_backbone="resnet_tiny",
    # XLA on JAX, where a step without it runs op by op (these runs take half as long
    # compiled); TensorFlow's graph without XLA, which these tiny runs need no compile for.
    jit_compile="true" if keras.backend.backend() == "jax" else "false",
)
"""ExperimentConfig settings of a run on the tiny `benchmark` fixture with tiny models."""


def anonymizer() -> keras.Model:
    """Conv, BatchNorm, then a float32 output convolution and sigmoid, as the registered f_As."""
    inputs = keras.Input((None, None, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Conv2D(3, 1, dtype="float32")(x)
    outputs = layers.Activation("sigmoid", dtype="float32")(x)
    return keras.Model(inputs, outputs, name="anonymizer")


def identity_anonymizer() -> keras.Model:
    """An f_A that starts as the identity (a 1 x 1 convolution): the frames' content reaches f_B,
    where the random `anonymizer`'s sigmoid flattens it (NT-Xent then sits at log(2N - 1))."""
    inputs = keras.Input((None, None, 3))
    convolution = layers.Conv2D(3, 1, name="identity")
    model = keras.Model(inputs, convolution(inputs), name="anonymizer")
    convolution.set_weights([np.eye(3, dtype="float32")[None, None], np.zeros(3, "float32")])
    return model


def action_model(num_classes: int = 3) -> keras.Model:
    inputs = keras.Input((None, None, None, 3))
    x = layers.Conv3D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.GlobalAveragePooling3D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x), name="action")


def video_privacy_encoder() -> keras.Model:
    """A spatio-temporal f_B: a one-layer 3D CNN, then the projection head and L2 norm."""
    from keras_privacy.models.resnet import privacy_encoder, projection_head

    inputs = keras.Input((None, None, None, 3))
    x = layers.Conv3D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    trunk = keras.Model(inputs, layers.GlobalAveragePooling3D()(x), name="trunk")
    return privacy_encoder(trunk, projection_head(4, hidden=16, output=8))


def privacy_encoder() -> keras.Model:
    inputs = keras.Input((None, None, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(8)(x), name="privacy")


def deterministic_weights(model: keras.Model, seed: int) -> None:
    """Give `model` weights drawn by NumPy, identical on every backend."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "moving_variance" in variable.path:
            value = np.ones(variable.shape)
        elif "moving_mean" in variable.path:
            value = np.zeros(variable.shape)
        else:
            value = rng.normal(0, 0.3, variable.shape)
        variable.assign(value.astype("float32"))


def batch(
    rng: np.random.Generator,
    clips=2,
    frames=4,
    size=8,
    images=3,
    classes=3,
    second_clips: bool = False,
    triplets: bool = False,
) -> dict:
    """A random batch; with `second_clips`, also a second clip per video (spatio-temporal f_B);
    with `triplets`, a second clip and a positive clip per video (the TeD-SPAD triplet)."""
    data = {
        "clips": rng.random((clips, frames, size, size, 3), dtype="float32"),
        "labels": rng.integers(0, classes, (clips,)).astype("int32"),
        "frame_pairs": rng.integers(0, frames, (clips, 2)).astype("int32"),
        "views": rng.random((images, 2, size, size, 3), dtype="float32"),
    }
    if second_clips or triplets:
        data["second_clips"] = rng.random((clips, frames, size, size, 3), dtype="float32")
    if triplets:
        data["positive_clips"] = rng.random((clips, frames, size, size, 3), dtype="float32")
    return data


def tinted(data: dict, rng: np.random.Generator) -> dict:
    """`data` with each video's clips and each image's views in a colour of their own: pooled
    embeddings of uniform noise are nearly the same vector, these tell the examples apart."""
    clip_colours = rng.uniform(0.1, 1.0, (len(data["clips"]), 1, 1, 1, 3)).astype("float32")
    image_colours = rng.uniform(0.1, 1.0, (len(data["views"]), 1, 1, 1, 3)).astype("float32")
    tinted = dict(data, clips=data["clips"] * clip_colours, views=data["views"] * image_colours)
    if "second_clips" in data:
        tinted["second_clips"] = data["second_clips"] * clip_colours
    return tinted


def single_dataset(num_batches: int, seed: int = 0, second_clips: bool = False):
    """A tf.data dataset of `num_batches` single batches, as the initialisation phases take them."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    batches = [batch(rng, second_clips=second_clips) for _ in range(num_batches)]
    stacked = {key: np.stack([b[key] for b in batches]) for key in batches[0]}
    return tf.data.Dataset.from_tensor_slices(stacked)


def paired_dataset(
    num_pairs: int, seed: int = 0, second_clips: bool = False, tint=False, triplets=False
):
    """A tf.data dataset of `num_pairs` pairs of batches, as the minimax trainer takes them;
    with `tint`, each example in a colour of its own (`tinted`); `second_clips` and
    `triplets` as `batch`."""
    import tensorflow as tf

    from keras_privacy.data.pairs import pair_batches

    rng = np.random.default_rng(seed)
    batches = [
        batch(rng, second_clips=second_clips, triplets=triplets) for _ in range(2 * num_pairs)
    ]
    if tint:
        batches = [tinted(b, rng) for b in batches]
    stacked = {key: np.stack([b[key] for b in batches]) for key in batches[0]}
    return pair_batches(tf.data.Dataset.from_tensor_slices(stacked))


def first_steps_history(num_pairs: int = 2) -> dict:
    """Losses of the first SPAct steps from NumPy-drawn weights (f_A from the identity, so that
    the examples' colours reach f_B and its NT-Xent is off log(2N - 1)), to compare backends."""
    import keras

    from keras_privacy.methods.spact import SPAct

    models = [identity_anonymizer(), action_model(), privacy_encoder()]
    for seed, model in enumerate(models[1:], start=1):
        deterministic_weights(model, seed)
    trainer = SPAct(*models, privacy_weight=0.5)
    trainer.compile({g: keras.optimizers.SGD(0.05) for g in ("anonymizer", "action", "privacy")})
    dataset = paired_dataset(num_pairs, tint=True)
    history = trainer.fit(dataset, epochs=2, verbose=0, shuffle=False)
    return {key: [float(v) for v in values] for key, values in history.history.items()}


def budget_model(num_attributes: int = 4, width: int = 4) -> keras.Model:
    inputs = keras.Input((None, None, 3))
    x = layers.Conv2D(width, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_attributes)(x))


def labelled_dataset(num_batches: int, seed: int = 0, attributes: int = 4):
    """Single batches with labelled privacy images, as VITA and the meta trainer take them."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_batches):
        b = batch(rng)
        views = b.pop("views")
        b["images"] = views[:, 0]
        b["privacy"] = rng.integers(0, 2, (len(views), attributes)).astype("float32")
        batches.append(b)
    stacked = {key: np.stack([b[key] for b in batches]) for key in batches[0]}
    return tf.data.Dataset.from_tensor_slices(stacked)


def vita_dataset(
    num_batches: int,
    image_batches: int = 1,
    seed: int = 0,
    attributes: int = 4,
    action_batches: int = 0,
):
    """Single batches as VITA's minimax takes them: clips, `image_batches` batches of 3
    labelled privacy images, a batch of validation clips with their labels and, for
    `action_fresh_clips`, `action_batches` batches of 2 training clips (`action_clips`) and as
    many batches of 2 validation clips."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_batches):
        b = batch(rng, images=3 * image_batches)
        b["images"] = b.pop("views")[:, 0]
        b["privacy"] = rng.integers(0, 2, (len(b["images"]), attributes)).astype("float32")
        validation = batch(rng, clips=2 * max(1, action_batches))
        b["validation_clips"], b["validation_labels"] = validation["clips"], validation["labels"]
        if action_batches:
            fresh = batch(rng, clips=2 * action_batches)
            b["action_clips"], b["action_labels"] = fresh["clips"], fresh["labels"]
        batches.append(b)
    stacked = {key: np.stack([b[key] for b in batches]) for key in batches[0]}
    return tf.data.Dataset.from_tensor_slices(stacked)


def meta_batch(seed: int = 0, attributes: int = 4, models: int = 3, **sizes) -> dict:
    """One labelled batch with the split inputs of its epoch (`meta.epoch_splits`); `sizes`
    as `batch` takes them."""
    from keras_privacy.methods.meta import epoch_splits

    rng = np.random.default_rng(seed)
    b = batch(rng, **sizes)
    views = b.pop("views")
    b["images"] = views[:, 0]
    b["privacy"] = rng.integers(0, 2, (len(views), attributes)).astype("float32")
    splits = epoch_splits(seed, 0, 1, len(views), attributes, models)
    b.update({key: value[0] for key, value in splits.items()})
    return b


def meta_trainer(alpha: float = 0.5, first_order: bool = False, blocks: bool = False, **kwargs):
    """Meta generalisation over tiny models; with `blocks`, f_A is a two-level UNet, which the
    meta update recomputes block by block."""
    from keras_privacy.methods.meta import MetaGeneralization
    from keras_privacy.models.unet import unet

    models = [
        unet(widths=(2, 4)) if blocks else anonymizer(),
        action_model(),
        budget_model(width=3),
        budget_model(width=4),
        budget_model(width=5),
    ]
    for seed, model in enumerate(models):
        deterministic_weights(model, seed)
    return MetaGeneralization(
        models[0], models[1], models[2:], alpha=alpha, first_order=first_order, **kwargs
    )


def meta_gradient(
    first_order: bool = False,
    iteration: int = 1,
    nested: bool = False,
    blocks: bool = False,
    recompute: bool = True,
) -> list:
    """The meta-gradient of the anonymizer's weights at NumPy-drawn weights, as lists, at the
    meta iteration `iteration` (odd: an attribute split): the one training applies
    (`meta_gradient`, in passes), or with `nested` the gradient of `meta_objective` by nested
    differentiation; with `blocks`, of a UNet f_A, recomputed block by block unless not
    `recompute`."""
    from keras_privacy.backend import value_and_gradient

    trainer = meta_trainer(first_order=first_order, blocks=blocks, recompute_anonymizer=recompute)
    values = trainer.current_values()
    values["meta_iteration"] = ([], [np.int32(iteration)])
    data = meta_batch()

    def objective(phi):
        replaced = dict(values)
        replaced["anonymizer"] = (phi, values["anonymizer"][1])
        return trainer.meta_objective(replaced, data)[0]

    if nested:
        _, grads = value_and_gradient(objective, values["anonymizer"][0])
    else:
        grads = trainer.meta_gradient(values, data)[0]
    return [np.asarray(g).tolist() for g in grads]


def snapshot(trainer) -> dict:
    """Copies of every group's trainable variables, by group and path (a forward pass in
    training mode moves the batch-norm statistics, not these)."""
    return {
        group: {v.path: np.array(v.numpy()) for v in model.trainable_variables}
        for group, model in trainer.groups().items()
    }


def changed_groups(before: dict, after: dict) -> set:
    """The groups whose trainable variables all differ between two snapshots (an update reached
    each of them); a group of which only some moved fails, naming those left as they were."""
    changed = set()
    for group, variables in before.items():
        same = [
            path for path, value in variables.items() if np.array_equal(value, after[group][path])
        ]
        assert not same or len(same) == len(variables), f"{group}: only some moved; not {same}"
        if not same:
            changed.add(group)
    return changed


def tiny_config(benchmark, tmp_path, **overrides):
    """A validated `ExperimentConfig` of TINY_RUN on the tiny benchmark, with one-epoch target
    models and two test clips per video (the evaluation tests)."""
    from keras_privacy.config import ExperimentConfig

    settings = dict(
        **TINY_RUN,
        synthetic_dir=str(benchmark),
        run_dir=str(tmp_path / "run"),
        eval_action_epochs=1,
        eval_privacy_epochs=1,
        eval_clips=2,
    )
    config = ExperimentConfig(**(settings | overrides))
    config.validate()
    return config


def variant_run_config(benchmark, tmp_path, **overrides):
    """`tiny_config` of a short SPAct-variant run: no identity or action init, one epoch of
    privacy init and of minimax, two steps each."""
    short_run = dict(
        anonymizer="unet_tiny",
        projection_hidden=16,
        projection_dim=8,
        identity_epochs=0,
        identity_warmup_epochs=0,
        action_init_epochs=0,
        privacy_init_epochs=1,
        minimax_epochs=1,
        steps_per_epoch=2,
    )
    return tiny_config(benchmark, tmp_path, **(short_run | overrides))


class AnonymizerHalfOnly(SPAct):
    """SPAct with the anonymizer half of the step only."""

    def updates(self, data):
        return super().updates(data)[:1]


class AdversaryHalfOnly(SPAct):
    """SPAct with the adversary half of the step only."""

    def updates(self, data):
        return super().updates(data)[1:]


def damaged_keras_file(path: Path, out: Path) -> Path:
    """A copy of the `.keras` file at `path` at `out` whose zip directory is whole but whose
    weights member has a byte flipped, so that reading it fails its CRC-32 check."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        member = archive.getinfo("model.weights.h5")
    name_length, extra_length = struct.unpack_from("<HH", data, member.header_offset + 26)
    data[member.header_offset + 30 + name_length + extra_length + member.compress_size // 2] ^= 1
    out.write_bytes(bytes(data))
    return out
