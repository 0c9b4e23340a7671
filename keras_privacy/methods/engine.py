"""The one place where a training step differs between the TensorFlow and JAX backends.

A method (SPAct, VITA, an initialisation phase, ...) describes its training step as a list of
`Update`s: pure functions of variable *values* that return a loss, each minimised over the
trainable variables of some *groups* of sub-models (the anonymizer; or the action model and
the privacy encoder together). `StatelessTrainer` turns that description into Keras'
`train_step`:

- TensorFlow: a `GradientTape` watching the values of the updated groups, then each group's
  optimizer `apply`, then the new BatchNorm statistics assigned back;
- JAX: `jax.value_and_grad` of the same function, each group's optimizer `stateless_apply` on its
  slice of the state that `fit` carries, the new state returned (Keras' own JAX trainer is the
  template).

Every group has its own optimizer; they live together in one `keras.optimizers.MultiOptimizer`
so that `fit` on JAX carries (and checkpoints save) all of their state. Gradients are taken
only with respect to the groups an update names, so no weight gradient that nothing uses is
computed, and a group whose output an update only reads (a frozen anonymizer) is run outside
the differentiated function or with the values it had, never back-propagated into.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
from keras import ops

GroupValues = dict[str, tuple[list, list]]
"""Per group: (trainable values, non-trainable values), in the order of the group's model."""

LossFn = Callable[[GroupValues], tuple[Any, dict]]
"""A pure loss: values of every group -> (scalar loss, aux) where aux may hold
`"logs"` (name -> scalar) and `"non_trainable"` (group -> new non-trainable values)."""


@dataclasses.dataclass(frozen=True)
class Update:
    """One gradient update of a training step: minimise `loss_fn` over the trainable variables
    of `groups`, each with its own optimizer.

    `gate`, when given, maps the step's logs so far (this update's included) to a boolean
    scalar; where it is False the update leaves the variables, BatchNorm statistics and
    optimizer state of its groups as they were (its logs are still recorded). Methods use it
    for the accuracy thresholds that decide which player updates (VITA, meta generalisation).
    """

    groups: tuple[str, ...]
    loss_fn: LossFn
    gate: Callable[[dict], Any] | None = None


class StatelessTrainer(keras.Model):
    """Base of every trainer: sub-models in named groups, one optimizer per group.

    Subclasses define `groups()` (name -> sub-model), `log_names` (the scalars a step logs) and
    `updates(data)`. They run sub-models only through `self.run(...)`, a stateless call on the
    values of a group, so the same code is differentiated by either backend.
    """

    log_names: tuple[str, ...] = ()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._trackers = {name: keras.metrics.Mean(name=name) for name in self.log_names}
        self._group_optimizers: dict[str, keras.optimizers.Optimizer] = {}

    # ----------------------------------------------------------------- to be defined by methods
    def groups(self) -> dict[str, keras.Model]:
        """The sub-models of this trainer by group name."""
        raise NotImplementedError

    def updates(self, data: Mapping[str, Any]) -> Sequence[Update]:
        """The updates one training step makes on the batch `data`, in order."""
        raise NotImplementedError

    def restart_groups(self) -> tuple[tuple[str, ...], int]:
        """Groups put back to their initial weights (optimizer slots zeroed) every N steps,
        before the step's updates; N = 0 never restarts."""
        return (), 0

    # ------------------------------------------------------------------------------ compile
    def compile(self, optimizers: Mapping[str, keras.optimizers.Optimizer], **kwargs) -> None:
        """Give each trained group its optimizer (groups without one are never updated)."""
        unknown = set(optimizers) - set(self.groups())
        if unknown:
            raise ValueError(
                f"optimizers given for unknown groups {sorted(unknown)}; "
                f"the groups of {type(self).__name__} are {sorted(self.groups())}"
            )
        self._group_optimizers = dict(optimizers)
        owner = {}
        for group, model in self.groups().items():
            for variable in model.trainable_variables:
                owner[id(variable)] = group
        frozen = keras.optimizers.SGD(learning_rate=0.0, name="frozen")

        def select(variable):
            group = owner.get(id(variable))
            return self._group_optimizers.get(group, frozen)

        multi = keras.optimizers.MultiOptimizer(select)
        super().compile(optimizer=multi, **kwargs)
        self.built = True  # every sub-model is a built Functional model
        # Built here: the step never calls `self.optimizer.apply`, and fit needs it built.
        multi.build(self.trainable_variables)
        restarted, every = self.restart_groups()
        self._initial_weights = [
            keras.Variable(
                ops.convert_to_numpy(v.value), trainable=False, name=f"initial_{group}_{i}"
            )
            for group in (restarted if every > 0 else ())
            for i, v in enumerate(self.groups()[group].weights)
        ]

    @property
    def metrics(self):
        return list(self._trackers.values())

    def group_optimizer(self, group: str) -> keras.optimizers.Optimizer:
        """The optimizer of `group` (its `iterations` counts the updates of that group)."""
        return self._group_optimizers[group]

    # ------------------------------------------------------------------------ running models
    def run(self, group: str, values: GroupValues, inputs, training: bool = False):
        """Call the model of `group` statelessly on `inputs`; returns (outputs, non-trainables)."""
        trainable, non_trainable = values[group]
        return self.groups()[group].stateless_call(
            trainable, non_trainable, inputs, training=training
        )

    def current_values(self) -> GroupValues:
        """The values of every group's variables now (outside a JAX `fit` step)."""
        return {
            group: (
                [v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
            )
            for group, model in self.groups().items()
        }

    # ------------------------------------------------------------------------- train steps
    def train_step(self, *args):
        if keras.backend.backend() == "jax":
            return self._jax_train_step(*args)
        if keras.backend.backend() == "tensorflow":
            return self._tf_train_step(*args)
        raise NotImplementedError(
            "keras-privacy trains on the tensorflow and jax backends, "
            f"not {keras.backend.backend()}"
        )

    def _tf_train_step(self, data):
        import tensorflow as tf

        restarted, every = self.restart_groups()
        if every > 0:
            iterations = self.optimizer.iterations

            def restart():
                snapshot = iter(self._initial_weights)
                for group in restarted:
                    for variable in self.groups()[group].weights:
                        variable.assign(next(snapshot).value)
                    for variable in _slot_variables(self._group_optimizers[group]):
                        variable.assign(ops.zeros_like(variable))
                return tf.constant(True)

            tf.cond(
                (iterations > 0) & (iterations % every == 0), restart, lambda: tf.constant(False)
            )
        logs = {}
        for update in self.updates(data):
            values = self.current_values()
            params = {group: values[group][0] for group in update.groups}
            with tf.GradientTape() as tape:
                tape.watch(params)
                loss, aux = update.loss_fn(_with_params(values, params))
            grads = tape.gradient(loss, params)

            def apply(update=update, grads=grads, aux=aux):
                for group in update.groups:
                    model = self.groups()[group]
                    self._group_optimizers[group].apply(grads[group], model.trainable_variables)
                for group, new_values in aux.get("non_trainable", {}).items():
                    for variable, value in zip(
                        self.groups()[group].non_trainable_variables, new_values
                    ):
                        variable.assign(value)
                return tf.constant(True)

            logs.update(aux.get("logs", {}))
            if update.gate is None:
                apply()
            else:
                tf.cond(update.gate(logs), apply, lambda: tf.constant(False))
        self.optimizer.iterations.assign_add(1)
        for name, tracker in self._trackers.items():
            if name in logs:
                tracker.update_state(logs[name])
        return {name: tracker.result() for name, tracker in self._trackers.items()}

    def _jax_train_step(self, state, data):
        import jax

        trainable, non_trainable, optimizer_values, metrics_values = state
        index = self._variable_index()
        values = {
            group: (
                [trainable[i] for i in index[group][0]],
                [non_trainable[i] for i in index[group][1]],
            )
            for group in self.groups()
        }
        optimizer_values = list(optimizer_values)
        optimizer_slices = self._optimizer_slices()
        restarted, every = self.restart_groups()
        if every > 0:
            iterations = optimizer_values[self._optimizer_iterations_index()]
            restart = (iterations > 0) & (iterations % every == 0)
            position = {id(v): i for i, v in enumerate(self.non_trainable_variables)}
            snapshot = iter([non_trainable[position[id(v)]] for v in self._initial_weights])
            for group in restarted:
                model = self.groups()[group]
                initial = {id(v): next(snapshot) for v in model.weights}
                values[group] = tuple(
                    [
                        jax.numpy.where(restart, initial[id(v)], value)
                        for v, value in zip(variables, group_values)
                    ]
                    for variables, group_values in zip(
                        (model.trainable_variables, model.non_trainable_variables), values[group]
                    )
                )
                start, _ = optimizer_slices[group]
                slots = {id(v) for v in _slot_variables(self._group_optimizers[group])}
                for i, variable in enumerate(self._group_optimizers[group].variables):
                    if id(variable) in slots:
                        value = optimizer_values[start + i]
                        optimizer_values[start + i] = jax.numpy.where(restart, 0 * value, value)
        logs = {}
        for update in self.updates(data):
            params = {group: values[group][0] for group in update.groups}

            def loss_of(params, values=values, update=update):
                return update.loss_fn(_with_params(values, params))

            (_, aux), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
            old_values, old_optimizer = dict(values), list(optimizer_values)
            for group in update.groups:
                start, stop = optimizer_slices[group]
                new_trainable, new_optimizer = self._group_optimizers[group].stateless_apply(
                    optimizer_values[start:stop], grads[group], values[group][0]
                )
                optimizer_values[start:stop] = new_optimizer
                values[group] = (list(new_trainable), values[group][1])
            for group, new_values in aux.get("non_trainable", {}).items():
                values[group] = (values[group][0], list(new_values))
            logs.update(aux.get("logs", {}))
            if update.gate is not None:
                select = functools.partial(_select, update.gate(logs))
                values = jax.tree.map(select, values, old_values)
                optimizer_values = jax.tree.map(select, optimizer_values, old_optimizer)

        trainable, non_trainable = list(trainable), list(non_trainable)
        for group, (train_idx, non_train_idx) in index.items():
            for i, value in zip(train_idx, values[group][0]):
                trainable[i] = value
            for i, value in zip(non_train_idx, values[group][1]):
                non_trainable[i] = value
        iterations = self._optimizer_iterations_index()
        optimizer_values[iterations] = optimizer_values[iterations] + 1

        mapping = list(zip(self.metrics_variables, metrics_values))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            for name, tracker in self._trackers.items():
                if name in logs:
                    tracker.update_state(logs[name])
            results = {name: tracker.result() for name, tracker in self._trackers.items()}
        metrics_values = [scope.get_current_value(v) for v in self.metrics_variables]
        return results, (trainable, non_trainable, optimizer_values, metrics_values)

    # ------------------------------------------------------------------- variable bookkeeping
    def _variable_index(self) -> dict[str, tuple[list[int], list[int]]]:
        """Positions of each group's variables in the trainer's variable lists."""
        trainable = {id(v): i for i, v in enumerate(self.trainable_variables)}
        non_trainable = {id(v): i for i, v in enumerate(self.non_trainable_variables)}
        return {
            group: (
                [trainable[id(v)] for v in model.trainable_variables],
                [non_trainable[id(v)] for v in model.non_trainable_variables],
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

    def _optimizer_iterations_index(self) -> int:
        for i, variable in enumerate(self.optimizer.variables):
            if variable is self.optimizer.iterations:
                return i
        raise RuntimeError("the MultiOptimizer's iteration counter is not among its variables")


def value_and_gradient(fn: Callable[[list], Any], params: list) -> tuple[Any, list]:
    """`fn(params)` and its gradient with respect to `params`, differentiable again.

    Called inside an update's loss function, this gives second-order (nested) gradients: on
    JAX a `jax.value_and_grad` inside the outer one, on TensorFlow a tape inside the outer tape.
    Used by the meta-generalisation update.
    """
    if keras.backend.backend() == "jax":
        import jax

        return jax.value_and_grad(fn)(params)
    import tensorflow as tf

    params = [tf.convert_to_tensor(p) for p in params]
    with tf.GradientTape() as tape:
        tape.watch(params)
        value = fn(params)
    return value, tape.gradient(value, params)


def _select(keep, new, old):
    """`new` where the gate `keep` is True, else `old`."""
    return ops.where(keep, new, old)


def _slot_variables(optimizer: keras.optimizers.Optimizer) -> list:
    """The per-variable state of an optimizer (moments), not its step count or learning rate."""
    return [
        v
        for v in optimizer.variables
        if v is not optimizer.iterations and not v.path.endswith("learning_rate")
    ]


def _with_params(values: GroupValues, params: Mapping[str, list]) -> GroupValues:
    """`values` with the trainable values of the groups in `params` replaced by those."""
    return {
        group: (params[group], non_trainable) if group in params else (trainable, non_trainable)
        for group, (trainable, non_trainable) in values.items()
    }


def fold_time(clips):
    """(B, T, H, W, C) -> (B * T, H, W, C): frames of a clip become images of a batch."""
    shape = ops.shape(clips)
    return ops.reshape(clips, (-1, shape[2], shape[3], shape[4]))


def unfold_time(frames, num_frames: int):
    """(B * T, H, W, C) -> (B, T, H, W, C), the inverse of `fold_time`."""
    shape = ops.shape(frames)
    return ops.reshape(frames, (-1, num_frames, shape[1], shape[2], shape[3]))
