"""The backend-neutral trainer: a training step described as updates of groups of sub-models.

A method (SPAct, VITA, an initialisation phase, ...) describes its training step as a list of
`Update`s: pure functions of variable *values* that return a loss, each minimised over the
trainable variables of some *groups* of sub-models (the anonymizer; or the action model and
the privacy encoder together). `StatelessTrainer` turns that description into Keras'
`train_step` through the step of the running backend, chosen once when the trainer is built
(`keras_privacy.backend`: `tensorflow_step`, a `GradientTape` and in-place optimizer `apply`;
`jax_step`, `jax.value_and_grad` and `stateless_apply` on the state `fit` carries), as Keras
picks its JAX or TensorFlow trainer.

An update runs at every step unless it has a `condition`: a decision on the logs of the
*earlier* updates of the step (meta generalisation's choice of player, made on accuracies
measured first). The step evaluates it before the update and, where a conditional pays
(`StatelessTrainer._skips_updates`: on an accelerator, or TensorFlow without XLA), runs the
update's loss, gradients, optimizer apply and BatchNorm-statistics update inside a real
conditional (`jax.lax.cond`, `tf.cond`), so a skipped update costs nothing; on a CPU under XLA,
where a convolution's gradient inside a conditional runs 30-80x slower than outside, it
computes the update and selects its result (`where`), as a gated one. Where every conditional
update names a branch (`Update.branch`), JAX decides the conditions on the host and compiles a
step per set of branches that run, so a player that does not move is neither compiled nor
computed, and no program holds every player (meta generalisation's, on a GPU). A
`gate` reads the update's own logs, so a gated update is always computed and its result applied
where the gate holds (VITA's thresholds on the accuracy of the model being updated).

Every group has its own optimizer; they live together in one `keras.optimizers.MultiOptimizer`
so that `fit` on JAX carries (and checkpoints save) all of their state. Gradients are taken
only with respect to the groups an update names, so no weight gradient that nothing uses is
computed, and a group whose output an update only reads (a frozen anonymizer) is run outside
the differentiated function or with the values it had, never back-propagated into.

Data-parallel training (`keras_privacy.distribute`) runs the same step: one program over the
global batch on JAX; on TensorFlow a replica step whose gradients, logs and BatchNorm statistics
sum to the global step (`keras_privacy.backend.tensorflow_step`). So both backends take the
step one device takes on the same global batch.

When a model computes in float16 (built under the `mixed_float16` policy) every update's loss
is multiplied by a dynamic loss scale before differentiation and the gradients divided by it; an
update whose gradients are not finite is skipped and the scale halved, and the scale doubles
after `LOSS_SCALE_GROWTH_STEPS` finite updates in a row: the rule of
`keras.optimizers.LossScaleOptimizer`, which `MultiOptimizer` does not accept inside it. The
scale lives with the MultiOptimizer's own variables, and only there (`DynamicLossScale`), so
`fit` carries it and checkpoints save it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_privacy import backend
from keras_privacy.methods.batches import (
    FRAME_KEYS,
    BatchList,
    check_frames,
    check_privacy_width,
)
from keras_privacy.types import Tensor

ACTION_LABEL_KEYS = ("labels", "action_labels", "validation_labels")
"""Batch keys holding action class ids, in [0, classes of the action model)."""

BATCH_KEYS = frozenset(
    {
        *FRAME_KEYS,
        *ACTION_LABEL_KEYS,
        "privacy",
        "frame_pairs",
        "attribute_split",
        "sample_keys",
        "support_models",
        "query_models",
    }
)
"""Every key a trainer's step may read from a batch: a KeyError of one is a batch without it."""

LOSS_SCALE_INITIAL = 2.0**15
"""Initial dynamic loss scale under `mixed_float16` (LossScaleOptimizer's default)."""
LOSS_SCALE_GROWTH_STEPS = 2000
"""Finite updates in a row after which the loss scale doubles (LossScaleOptimizer's default)."""

REPLICA_SEED_STRIDE = 7_919_993
"""What a replica's index adds to the seed of a random state (`fold_replica_into_seeds`): a
prime, so the replicas' seeds differ modulo TensorFlow's 2**31 - 2 (`tf.random.stateless_*`)."""

GroupValues = dict[str, tuple[list, list]]
"""Per group: (trainable values, non-trainable values), in the order of the group's model."""

LossFn = Callable[[GroupValues], tuple[Any, dict]]
"""A pure loss: values of every group -> (scalar loss, aux) where aux may hold
`"logs"` (name -> scalar) and `"non_trainable"` (group -> new non-trainable values)."""


@dataclasses.dataclass(frozen=True)
class DynamicLossScale:
    """The `mixed_float16` loss scale and its count of finite updates in a row: variables of
    the MultiOptimizer, so that `fit` carries them and checkpoints save them. They are held in
    this plain object, not as attributes of the trainer, because Keras would then track them as
    the trainer's variables as well, and JAX's jitted step, which donates its state, refuses a
    buffer passed twice."""

    scale: keras.Variable
    finite_updates: keras.Variable


@dataclasses.dataclass(frozen=True)
class Update:
    """One gradient update of a training step: minimise `loss_fn` over the trainable variables
    of `groups`, each with its own optimizer.

    `condition`, when given, maps the logs of the *earlier* updates of the step to a boolean
    scalar, decided before this update runs; where it is False the update is skipped: its
    groups' variables, BatchNorm statistics and optimizer state (`iterations` included) and
    the loss scale stay as they were, and where a conditional pays (see the module docstring)
    its loss, gradients and optimizer apply are not computed at all. A skipped update logs
    zeros (or, for a name an earlier update of the step logged, that value), and the
    trainer's metrics (means over steps) leave a name out of the steps where no update that
    logs it ran. Meta generalisation chooses its player with it.

    `gate`, when given, maps the step's logs so far (this update's included) to a boolean
    scalar; where it is False the update, computed all the same, leaves the variables,
    BatchNorm statistics and optimizer state of its groups as they were (its logs are still
    recorded). VITA uses it for thresholds on the accuracy of the model being updated.

    `branch` names the updates that a step compiled per choice holds together. On JAX the
    choice is then made on the host: the step's updates before its first conditional one run
    first, every `condition` is decided on their logs, and a step compiled for the branches
    that run (each conditional update in one of them run by its decision, as
    `_skips_updates` says) applies it; the other branches' updates are not in that program at
    all (`JaxStep.host_chosen_step`). Naming a branch promises that
    the condition reads only the logs of those first, unconditional updates; a step decides on
    the host only where every conditional update names one (VITA's validation loop, whose
    conditions read the logs of conditional updates, names none and is decided in the step).

    `optimizers` names, for some of `groups`, the optimizer (a key of `compile`'s optimizers
    that `optimizer_groups` declares) that applies their gradients in place of the group's
    own: VITA's f_T update also moves f_A, with f_T's Adam (its own moments, f_T's rate).
    An update with no groups changes nothing and only logs (VITA's validation accuracy).
    """

    groups: tuple[str, ...]
    loss_fn: LossFn
    gate: Callable[[dict], Any] | None = None
    condition: Callable[[dict], Any] | None = None
    optimizers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    branch: str | None = None

    def optimizer_of(self, group: str) -> str:
        """The key of the optimizer that applies this update's gradients of `group`."""
        return self.optimizers.get(group, group)


class StatelessTrainer(keras.Model):
    """Base of every trainer: sub-models in named groups, one optimizer per group.

    Subclasses define `groups()` (name -> sub-model), `log_names` (the scalars a step logs),
    `updates(data)` and, where a step takes a pair of batches, `paired_batches`. They run
    sub-models only through `self.run(...)`, a stateless call on the values of a group, so the
    same code is differentiated by either backend. While `updates`
    is called inside a training step, `self.step_count` holds the number of earlier steps (a
    scalar tensor), for schedules decided in the step; and while an update's loss is computed,
    `self.loss_scale` holds the dynamic loss scale the step multiplies it by (`mixed_float16`;
    None without one), for a loss that differentiates inside itself (meta's inner passes).
    """

    log_names: tuple[str, ...] = ()
    paired_batches: bool = False
    """Whether a step takes a pair of batches, every key (batch, 2, ...), as
    `keras_privacy.data.pairs` lays them out (SPAct's alternating halves)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.built = True  # its sub-models are built Functional models: nothing to build
        self._trackers = {name: keras.metrics.Mean(name=name) for name in self.log_names}
        self._group_optimizers: dict[str, keras.optimizers.Optimizer] = {}
        self.step_count = None
        self.loss_scale = None
        self.restart_snapshot: list[keras.Variable] = []
        self._backend_step = backend.training_step(self)

    def _make_restart_snapshot(self) -> None:
        """Make the variables (saved with the trainer) that keep the weights the groups of
        `restart_groups` are put back to; `compile` sets them to the weights then. A trainer
        that restarts calls this at the end of its `__init__`: made there, a trainer loaded
        without compiling holds the variables its file holds."""
        restarted, every = self.restart_groups()
        self.restart_snapshot = [
            keras.Variable(v.numpy(), trainable=False, name=f"initial_{group}_{i}")
            for group in (restarted if every > 0 else ())
            for i, v in enumerate(self.groups()[group].weights)
        ]

    def _stop_logging(self, *names: str) -> None:
        """Log `names` no more: terms the trainer's settings turn off, whose zeros would read
        as measurements."""
        for name in names:
            self._trackers.pop(name)

    # ----------------------------------------------------------------- to be defined by methods
    def groups(self) -> dict[str, keras.Model]:
        """The sub-models of this trainer by group name."""
        raise NotImplementedError

    def updates(self, data: Mapping[str, Any]) -> Sequence[Update]:
        """The updates one training step makes on the batch `data`, in order."""
        raise NotImplementedError

    def optimizer_groups(self) -> dict[str, str]:
        """Extra optimizers (name -> the group whose variables they update) that an `Update`
        may name in `optimizers`; each keeps its own state, built on the group's variables."""
        return {}

    def privacy_classifiers(self) -> dict[str, keras.Model]:
        """The groups whose models predict the batch's privacy labels, one logit per attribute
        (VITA's budget models, meta's attack models): `fit` checks the labels' width on them."""
        return {}

    def step_logs(self, logs: Mapping[str, Any]) -> dict[str, Any]:
        """Logs derived from those of a whole step (VITA: how many f_T updates ran)."""
        return {}

    def epoch_warnings(self, before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
        """What the update counts of an epoch (`update_counts` before and after it) say the
        user should know, one warning each (VITA: an f_T loop that always ran to its bound)."""
        return []

    def restart_groups(self) -> tuple[tuple[str, ...], int]:
        """Groups put back to their initial weights every N steps, before the step's updates;
        N = 0 never restarts. Their optimizers' state goes on (moments, step count), as VITA's
        authors restore the weights alone (`tf.train.Saver(varlist_fb)`, adv_training.py:89,
        371): zeroed moments under a step count that goes on would make Adam's first steps
        after a restart several times its learning rate."""
        return (), 0

    # ------------------------------------------------------------------------------ compile
    def compile(
        self, optimizers: Mapping[str, keras.optimizers.Optimizer] | None = None, **kwargs: Any
    ) -> None:
        """Give each trained group its optimizer (groups without one are never updated): an
        optimizer, or a name `keras.optimizers.get` knows ("adam"), one instance per group.
        The losses and logged metrics are the method's own: `loss` and `metrics` are refused."""
        ignored = sorted(set(kwargs) & {"loss", "loss_weights", "metrics", "weighted_metrics"})
        if ignored:
            raise TypeError(
                f"{type(self).__name__}.compile takes no {', '.join(ignored)}: the method's "
                f"step computes its own losses and logs {sorted(self._trackers)}"
            )
        if not isinstance(optimizers, Mapping):
            given = kwargs.get("optimizer") if optimizers is None else optimizers
            raise TypeError(
                f"{type(self).__name__}.compile takes one optimizer per group, as a dict "
                f"{{group: optimizer}} over its groups {sorted(self.groups())}; got {given!r}"
            )
        extras = self.optimizer_groups()
        unknown = set(optimizers) - set(self.groups()) - set(extras)
        if unknown:
            raise ValueError(
                f"optimizers given for unknown groups {sorted(unknown)}; "
                f"the groups of {type(self).__name__} are {sorted(self.groups())}"
                + (f", its extra optimizers {sorted(extras)}" if extras else "")
            )
        optimizers = {name: keras.optimizers.get(value) for name, value in optimizers.items()}
        shared = {}
        for name, optimizer in optimizers.items():
            shared.setdefault(id(optimizer), []).append(name)
        for names in shared.values():
            if len(names) > 1:
                raise ValueError(
                    f"one optimizer instance given to {', '.join(names)}: give each its own "
                    "(an optimizer's state and step count belong to the variables it updates)"
                )
        self._group_optimizers = dict(optimizers)
        kwargs = self._backend_step.compile_kwargs(kwargs)
        owner = {}
        for group, model in self.groups().items():
            for variable in model.trainable_variables:
                owner[id(variable)] = group
        frozen = keras.optimizers.SGD(learning_rate=0.0, name="frozen")

        extra_optimizers = [optimizers[name] for name in extras if name in optimizers]

        def select(variable):
            """A variable's optimizer: its group's (the frozen SGD for a group without one)."""
            return self._group_optimizers.get(owner.get(id(variable)), frozen)

        # The MultiOptimizer holds the state of the optimizers its map's `values()` lists: the
        # extra optimizers (`optimizer_groups`) own no variable, so they are listed there (their
        # state is then carried by `fit` on JAX and saved in checkpoints); the group optimizers
        # join in the order it meets them.
        select.values = lambda: list(extra_optimizers)
        multi = keras.optimizers.MultiOptimizer(select)
        # The step scales the loss itself (Keras would wrap the MultiOptimizer instead).
        super().compile(optimizer=multi, auto_scale_loss=False, **kwargs)
        # Built here: the step never calls `self.optimizer.apply`, and fit needs it built.
        multi.build(self.trainable_variables)
        for name, group in extras.items():
            if name in optimizers:
                optimizers[name].build(self.groups()[group].trainable_variables)
        restarted, _ = self.restart_groups()
        current = [v for group in restarted for v in self.groups()[group].weights]
        for snapshot, variable in zip(self.restart_snapshot, current):
            snapshot.assign(np.array(variable.numpy()))  # its own buffer: JAX donates both
        self._loss_scale = None
        if computes_in_float16(self.groups().values()):
            self._loss_scale = DynamicLossScale(
                scale=multi.add_variable(
                    (),
                    initializer=keras.initializers.Constant(LOSS_SCALE_INITIAL),
                    dtype="float32",
                    aggregation="only_first_replica",
                    name="loss_scale",
                ),
                finite_updates=multi.add_variable(
                    (), dtype="int32", aggregation="only_first_replica", name="finite_updates"
                ),
            )

    def get_compile_config(self) -> dict:
        """The group optimizers' configs, which `trainer.save` writes beside their state, so
        that `keras.saving.load_model` returns the trainer compiled and its optimizers' state
        restored ({} before `compile`)."""
        if not self.compiled:
            return {}
        return {
            "optimizers": {
                name: keras.optimizers.serialize(optimizer)
                for name, optimizer in self._group_optimizers.items()
            }
        }

    def compile_from_config(self, config: dict) -> None:
        """`compile` with the optimizers of `get_compile_config` and the default `jit_compile`
        (Keras then loads the optimizers' state)."""
        self.compile(
            {
                name: keras.optimizers.deserialize(optimizer)
                for name, optimizer in config["optimizers"].items()
            }
        )

    @property
    def metrics(self) -> list[keras.metrics.Metric]:
        return list(self._trackers.values())

    def group_optimizer(self, group: str) -> keras.optimizers.Optimizer:
        """The optimizer of `group` (its `iterations` counts the updates of that group)."""
        return self._group_optimizers[group]

    def update_counts(self) -> dict[str, int]:
        """The updates each optimizer (of a group, or an extra one) has made, by name."""
        return {
            name: int(ops.convert_to_numpy(optimizer.iterations))
            for name, optimizer in self._group_optimizers.items()
        }

    # ------------------------------------------------------------------------ running models
    def run(
        self, group: str, values: GroupValues, inputs: Tensor, training: bool = False
    ) -> tuple[Tensor, list]:
        """Call the model of `group` statelessly on `inputs`; returns (outputs, non-trainables)."""
        trainable, non_trainable = values[group]
        outputs, new_non_trainable = self.groups()[group].stateless_call(
            trainable, self.fold_replica_into_seeds(group, non_trainable), inputs, training=training
        )
        return outputs, self.fold_replica_into_seeds(group, new_non_trainable, unfold=True)

    def fold_replica_into_seeds(
        self, group: str, non_trainable: list, unfold: bool = False
    ) -> list:
        """The non-trainable values of `group` with this replica's index added to the seed of
        each random state (Dropout's `[seed, draws]`), so each replica of a TensorFlow
        data-parallel step draws its own masks for its rows, not the same as every other;
        `unfold` takes it back out of the new states a call returns, which then stay the same
        on every replica. `non_trainable` itself outside a replicated step (one device; JAX's
        step, one program over the global batch)."""
        replica, replicas = backend.replica_position()
        if replicas == 1:
            return non_trainable
        positions = self._random_state_positions(group)
        values = list(non_trainable)
        for position in positions:
            state = values[position]
            offset = ops.cast(replica, state.dtype) * REPLICA_SEED_STRIDE
            offset = ops.stack([-offset if unfold else offset, ops.zeros_like(offset)])
            values[position] = state + offset
        return values

    def _random_state_positions(self, group: str) -> list[int]:
        model = self.groups()[group]
        return variable_positions(model.non_trainable_variables, random_states(model))

    def current_values(self) -> GroupValues:
        """The values of every group's variables now (outside a JAX `fit` step)."""
        return {
            group: (
                [v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
            )
            for group, model in self.groups().items()
        }

    def _skips_updates(self) -> bool:
        """Whether a conditional update runs inside a real conditional (`jax.lax.cond`,
        `tf.cond`), which computes only the branch taken, and, on TensorFlow, a gated update's
        apply inside a `tf.cond`; else both are computed and their results selected (`where`).

        Not on a CPU under XLA: XLA:CPU puts a convolution in the form its fast (Eigen)
        kernels take only in the entry computation (`cpu::ConvCanonicalization`), so backward
        convolutions inside a conditional run as naive loops, 30-80x slower; XLA even moves
        a gated update's weight-gradient convolutions into the `tf.cond` of its apply (the
        TensorFlow meta step took 3.5 s there, 0.3 s with `where`). Not under a
        `tf.distribute` strategy either, where a `tf.cond` taken in a replica context cannot
        hold the update's all-reduces (gradients, logs, synchronized BatchNorm).
        """
        return self._backend_step.skips_updates()

    def step_updates(self, data: Mapping[str, Any]) -> Sequence[Update]:
        """`updates(data)`, once `data`'s frames are checked against the models
        (`batches.check_frames`): what the backends' steps call, when they are traced.
        `train_on_batch` hands the batch in as Keras does, `(x, None, None)`."""
        if isinstance(data, tuple) and data and isinstance(data[0], Mapping):
            data, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
            if y is not None or sample_weight is not None:
                raise TypeError(self._batches_are_dicts("a y or sample_weight beside them"))
        if not isinstance(data, Mapping):
            raise TypeError(self._batches_are_dicts(f"a {type(data).__name__}"))
        check_frames(
            type(self).__name__,
            data,
            self.groups(),
            self.paired_batches,
            self.privacy_classifiers(),
        )
        return self.updates(data)

    def _batches_are_dicts(self, given: str) -> str:
        return (
            f"{type(self).__name__} takes each batch as one dict of named arrays, labels "
            f"included (clips, labels, ...: the docstring of {type(self).__module__} names "
            f"them), but was given {given}"
        )

    # ---------------------------------------------------------------------- fit and predict
    def fit(self, *args: Any, **kwargs: Any) -> keras.callbacks.History:
        """Keras' `fit`, without validation (a minimax trainer has no evaluation step). A fit
        that fails leaves the models' weights as they were before it, on JAX too."""
        if kwargs.get("validation_data") is not None or kwargs.get("validation_split"):
            raise ValueError(self._no_evaluation("fit's validation_data / validation_split"))
        if (args[1] if len(args) > 1 else kwargs.get("y")) is not None:
            raise ValueError(self._batches_are_dicts("fit's y"))
        for unused in ("sample_weight", "class_weight"):
            if kwargs.get(unused) is not None:
                raise ValueError(
                    f"{type(self).__name__}.fit takes no {unused}: the method's losses weigh "
                    "every example of a batch alike"
                )
        x = args[0] if args else kwargs.get("x")
        if isinstance(x, np.ndarray):
            raise ValueError(self._batches_are_dicts("fit's x as one array"))
        self._check_arrays(x)
        self._check_frame_shapes(x)
        with backend.weights_kept_on_failure(self):
            try:
                return super().fit(*args, **kwargs)
            except KeyError as error:
                raise self._missing_key(error) from error

    def train_on_batch(self, *args: Any, **kwargs: Any) -> Any:
        """Keras' `train_on_batch` on one batch dict; a key the step reads that the batch
        lacks is named, as in `fit`."""
        try:
            return super().train_on_batch(*args, **kwargs)
        except KeyError as error:
            raise self._missing_key(error) from error

    def _missing_key(self, error: KeyError) -> Exception:
        """A ValueError naming the batch key of `error` that the batch lacks (Python's is a
        bare "KeyError: 'labels'" from deep in the step); `error` itself where its key is
        not a batch key (`BATCH_KEYS`)."""
        key = error.args[0] if len(error.args) == 1 else None
        if not (isinstance(key, str) and key in BATCH_KEYS):
            return error
        return ValueError(
            f"{type(self).__name__}'s step reads batch[{key!r}], which the batch has not: the "
            f"docstring of {type(self).__module__} names a batch's keys (some chosen by the "
            "trainer's settings, e.g. SPAct's contrastive_views)"
        )

    def _check_arrays(self, x: Any) -> None:
        """Refuse, naming the key, mistakes in NumPy arrays that a step would not name (on JAX
        it trains on them silently), in `x` or in every batch of a `BatchList`: uint8 frames
        (0-255, as a video decodes), action labels outside the action model's classes
        (UCF101's class list counts from 1), and privacy labels of another width than the
        privacy classifiers'; and arrays of `x` of unequal rows, which Keras' slicing refuses
        with an error naming none. Datasets are left to their pipelines."""
        if isinstance(x, BatchList):
            for index, batch in enumerate(x.batches):
                if isinstance(batch, Mapping):
                    self._check_values(batch, f"batch {index} of the BatchList: ")
            return
        if not isinstance(x, Mapping):
            return
        rows = {key: len(value) for key, value in x.items() if isinstance(value, np.ndarray)}
        if len(set(rows.values())) > 1:
            raise ValueError(
                f"fit slices the arrays of x by rows, but they hold different numbers of rows "
                f"({', '.join(f'{key} {count}' for key, count in rows.items())}): give whole "
                "batches instead, fit(keras_privacy.methods.batches.BatchList([batch, ...]))"
            )
        self._check_values(x, "")

    def _check_frame_shapes(self, x: Any) -> None:
        """`batches.check_frames` on the static shapes of `x` (arrays, every batch of a
        `BatchList`, a `tf.data` dataset's element spec) before the step is traced: a step
        traced again on TensorFlow relaxes a changed dimension to unknown, so a second fit
        with clips of another length would pass its check there."""
        if isinstance(x, BatchList):
            batches = [batch for batch in x.batches if isinstance(batch, Mapping)]
        else:
            spec = getattr(x, "element_spec", x)
            batches = [spec] if isinstance(spec, Mapping) else []
        for batch in batches:
            check_frames(
                type(self).__name__,
                batch,
                self.groups(),
                self.paired_batches,
                self.privacy_classifiers(),
            )

    def _check_values(self, x: Mapping[str, Any], where: str) -> None:
        """`_check_arrays`' checks of the values of one mapping of arrays; `where` begins the
        message (which batch)."""
        for key in FRAME_KEYS:
            if isinstance(x.get(key), np.ndarray) and x[key].dtype == np.uint8:
                raise ValueError(
                    f"{where}x[{key!r}] holds uint8 frames (0-255); the trainers take float "
                    "frames in [0, 1]: divide by 255 (keras_privacy.data.frames.frames_as_floats)"
                )
        if isinstance(x.get("privacy"), np.ndarray):
            check_privacy_width(x["privacy"], self.privacy_classifiers(), f"{where}x['privacy']")
        action = self.groups().get("action")
        shape = getattr(action, "output_shape", None)
        if not (isinstance(shape, tuple) and isinstance(shape[-1], int)):
            return
        for key in ACTION_LABEL_KEYS:
            labels = x.get(key)
            if isinstance(labels, np.ndarray) and labels.size:
                low, high = labels.min(), labels.max()
                if low < 0 or high >= shape[-1]:
                    raise ValueError(
                        f"{where}x[{key!r}] holds action labels from {low} to {high}, outside "
                        f"the action model's {shape[-1]} classes (0 to {shape[-1] - 1})"
                    )

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        """Keras' `predict`; one that fails leaves the models' weights as they were."""
        with backend.weights_kept_on_failure(self):
            return super().predict(*args, **kwargs)

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: a minimax trainer has no evaluation step (what to use instead is said)."""
        raise NotImplementedError(self._no_evaluation("evaluate"))

    def test_step(self, *args: Any) -> Any:
        """Refused, as `evaluate` (Keras' `test_on_batch` calls it)."""
        raise NotImplementedError(self._no_evaluation("test_step"))

    def _no_evaluation(self, what: str) -> str:
        return (
            f"{type(self).__name__} has no evaluation step, so no {what}: evaluate the "
            "anonymizer with fresh target models (evaluate.py, or "
            "keras_privacy.evaluation.protocol.evaluate), or one of its models alone, "
            "compiled with its own loss"
        )

    # ------------------------------------------------------------------------- train step
    def make_train_function(self, force: bool = False) -> None:
        """Keras' train function; on a backend that decides conditional updates on the host
        (JAX, for a trainer whose conditional updates name a `Update.branch`), one around
        that step; on JAX, one that runs at most `STEPS_IN_FLIGHT` steps ahead of the host."""
        if self.train_function is not None and not force:
            return
        step = self._backend_step.host_chosen_step()
        if step is None:
            super().make_train_function(force)
        else:
            self.train_function = self._make_function(step)
        self.train_function = self._backend_step.bounded(self.train_function)

    def train_step(self, *args):
        """The backend's step (`keras_privacy.backend`): `(data)` on TensorFlow, `(state,
        data)` on JAX, as Keras calls it."""
        return self._backend_step.train_step(*args)

    def _update_trackers(self, logs: dict, counted: dict) -> None:
        """Add the step's logs to the metrics, a name in `counted` only where it says so."""
        for name, tracker in self._trackers.items():
            if name in counted:
                tracker.update_state(logs[name], sample_weight=ops.cast(counted[name], "float32"))
            elif name in logs:
                tracker.update_state(logs[name])

    # ------------------------------------------------------------------- variable bookkeeping
    def _variable_index(self) -> dict[str, tuple[list[int], list[int]]]:
        """Positions of each group's variables in the trainer's variable lists."""
        trainable, non_trainable = self.trainable_variables, self.non_trainable_variables
        return {
            group: (
                variable_positions(trainable, model.trainable_variables),
                variable_positions(non_trainable, model.non_trainable_variables),
            )
            for group, model in self.groups().items()
        }

    def _optimizer_slices(self) -> dict[str, tuple[int, int]]:
        """Where each group's optimizer state lies in `self.optimizer.variables`."""
        start = len(self.optimizer._variables)
        slices = {}
        for optimizer in self.optimizer.optimizers:
            stop = start + len(optimizer.variables)
            for group, group_optimizer in self._group_optimizers.items():
                if group_optimizer is optimizer:
                    slices[group] = (start, stop)
            start = stop
        return slices

    def _optimizer_index(self, variable) -> int:
        """Where `variable` (of the MultiOptimizer itself) lies in `self.optimizer.variables`."""
        for i, candidate in enumerate(self.optimizer.variables):
            if candidate is variable:
                return i
        raise RuntimeError(f"{variable.path} is not among the MultiOptimizer's variables")


def variable_positions(variables: Sequence, part: Sequence) -> list[int]:
    """Where each variable of `part` lies in `variables` (by identity): to take a model's
    values out of a larger model's, or a trainer's."""
    index = {id(variable): i for i, variable in enumerate(variables)}
    return [index[id(variable)] for variable in part]


def random_states(model: keras.Model) -> list[keras.Variable]:
    """The model's random-number states (its layers' seed generators: Dropout's), the
    variables that are not among its weights: Keras' weight files leave them out, so a
    checkpoint keeps them beside (`<name>.random.npz`) and a resumed run draws the masks an
    uninterrupted one draws."""
    weights = {id(variable) for variable in model.weights}
    return [variable for variable in model.variables if id(variable) not in weights]


def computes_in_float16(models: Iterable[keras.Model]) -> bool:
    """Whether a layer of `models` computes in float16: their gradients need a loss scale.
    Read from the layers, which keep the policy they were built under (a trainer saved under
    `mixed_float16` and loaded under float32 still needs the scale, and its saved state has it)."""

    def layers(layer: keras.layers.Layer) -> Iterator[keras.layers.Layer]:
        yield layer
        for inner in getattr(layer, "layers", ()):
            yield from layers(inner)

    return any(layer.compute_dtype == "float16" for model in models for layer in layers(model))


def all_finite(grads: Mapping[str, list]) -> Tensor:
    """Whether every gradient is finite (a boolean scalar; True for none)."""
    flags = [ops.all(ops.isfinite(g)) for group in grads.values() for g in group]
    return ops.all(ops.stack(flags)) if flags else ops.convert_to_tensor(True)


def next_loss_scale(scale: Tensor, finite_updates: Tensor, finite: Tensor) -> tuple[Tensor, Tensor]:
    """LossScaleOptimizer's rule: halve the scale after non-finite gradients, double it after
    `LOSS_SCALE_GROWTH_STEPS` finite updates in a row."""
    grow = finite_updates + 1 >= LOSS_SCALE_GROWTH_STEPS
    new_scale = ops.where(finite, ops.where(grow, scale * 2.0, scale), scale * 0.5)
    new_count = ops.where(ops.logical_and(finite, ops.logical_not(grow)), finite_updates + 1, 0)
    return new_scale, ops.cast(new_count, "int32")


def record_logs(logs: dict, counted: dict, new_logs: Mapping, ran: Tensor | None) -> None:
    """Add an update's logs to the step's `logs`. `ran` is None for an update without a
    condition, else its condition: where it is False a name keeps the value an earlier update
    logged, or zero, and `counted[name]` (whether an update that logs `name` ran) stays
    False; a name absent from `counted` was logged by an update without a condition."""
    for name, value in new_logs.items():
        if ran is None:
            logs[name] = value
            counted.pop(name, None)
        elif name not in logs:
            logs[name] = ops.where(ran, value, ops.zeros_like(value))
            counted[name] = ran
        else:
            logs[name] = ops.where(ran, value, logs[name])
            if name in counted:
                counted[name] = ops.logical_or(ran, counted[name])


def choose(keep: Tensor, new: Tensor, old: Tensor) -> Tensor:
    """`new` where the gate `keep` is True, else `old`."""
    return ops.where(keep, new, old)


def with_params(values: GroupValues, params: Mapping[str, list]) -> GroupValues:
    """`values` with the trainable values of the groups in `params` replaced by those."""
    return {
        group: (params[group], non_trainable) if group in params else (trainable, non_trainable)
        for group, (trainable, non_trainable) in values.items()
    }


def serialize_models(
    models: keras.Model | Sequence[keras.Model],
) -> dict[str, Any] | list[dict[str, Any]]:
    """The Keras config of a sub-model, or the list of configs of a list of sub-models, for a
    trainer's `get_config`."""
    if isinstance(models, (list, tuple)):
        return [keras.saving.serialize_keras_object(model) for model in models]
    return keras.saving.serialize_keras_object(models)


def deserialize_models(config: Mapping[str, Any], *keys: str) -> dict:
    """A copy of `config` with the sub-models under `keys` (a config, or a list of configs, as
    `serialize_models` wrote them) rebuilt, for a trainer's `from_config`. Keras' deserializing
    empties the configs it reads, so `config` itself is left as it was."""
    config = copy.deepcopy(dict(config))
    for key in keys:
        value = config[key]
        config[key] = (
            [keras.saving.deserialize_keras_object(item) for item in value]
            if isinstance(value, list)
            else keras.saving.deserialize_keras_object(value)
        )
    return config
