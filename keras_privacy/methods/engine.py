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

An update runs at every step unless it has a `condition`: a decision on the logs of the
*earlier* updates of the step (meta generalisation's choice of player, made on accuracies
measured first). The engine evaluates it before the update and, where a conditional pays
(`StatelessTrainer._skips_updates`: on an accelerator, or TensorFlow without XLA), runs the
update's loss, gradients, optimizer apply and BatchNorm-statistics update inside a real
conditional (`jax.lax.cond`, `tf.cond`), so a skipped update costs nothing. On a CPU under XLA
a convolution's gradient inside a conditional runs 30-80x slower than outside, so there the
update is computed and its result selected (`where`), as a gated one. A `gate` reads the
update's own logs, so a gated update is always computed and its result applied where the gate
holds (VITA's thresholds on the accuracy of the model being updated).

Every group has its own optimizer; they live together in one `keras.optimizers.MultiOptimizer`
so that `fit` on JAX carries (and checkpoints save) all of their state. Gradients are taken
only with respect to the groups an update names, so no weight gradient that nothing uses is
computed, and a group whose output an update only reads (a frozen anonymizer) is run outside
the differentiated function or with the values it had, never back-propagated into.

Data-parallel training (`keras_privacy.distribute`) runs the same step:
- JAX, `keras.distribution.DataParallel`: the step is one program over the global batch, which
  XLA splits across the devices; nothing here changes.
- TensorFlow, `tf.distribute.MirroredStrategy`: Keras runs the step once per replica on its part
  of the batch. Each replica differentiates its loss divided by the number of replicas and the
  optimizers sum the replicas' gradients, which gives the gradient of the global mean; the logs
  and new BatchNorm statistics are averaged over the replicas; BatchNorm layers normalise with
  the statistics of the global batch (Keras' synchronized BatchNorm, during the step only); and
  `gather_replicas` gives a loss over the whole batch (NT-Xent's negatives) every replica's rows.
  A `tf.cond` taken in a replica context cannot hold those all-reduces, so there an update with
  a `condition` is computed and its result selected, like a gated one (same results).
  So both backends take the step one device takes on the same global batch.

Under the `mixed_float16` policy every update's loss is multiplied by a dynamic loss scale before
differentiation and the gradients divided by it; an update whose gradients are not finite is
skipped and the scale halved, and the scale doubles after `LOSS_SCALE_GROWTH_STEPS` finite
updates in a row: the rule of `keras.optimizers.LossScaleOptimizer`, which `MultiOptimizer` does
not accept inside it. The scale lives with the MultiOptimizer's own variables, so `fit` carries
it and checkpoints save it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
from keras import ops

LOSS_SCALE_INITIAL = 2.0**15
"""Initial dynamic loss scale under `mixed_float16` (LossScaleOptimizer's default)."""
LOSS_SCALE_GROWTH_STEPS = 2000
"""Finite updates in a row after which the loss scale doubles (LossScaleOptimizer's default)."""

GroupValues = dict[str, tuple[list, list]]
"""Per group: (trainable values, non-trainable values), in the order of the group's model."""

LossFn = Callable[[GroupValues], tuple[Any, dict]]
"""A pure loss: values of every group -> (scalar loss, aux) where aux may hold
`"logs"` (name -> scalar) and `"non_trainable"` (group -> new non-trainable values)."""


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

    def optimizer_of(self, group: str) -> str:
        """The key of the optimizer that applies this update's gradients of `group`."""
        return self.optimizers.get(group, group)


class StatelessTrainer(keras.Model):
    """Base of every trainer: sub-models in named groups, one optimizer per group.

    Subclasses define `groups()` (name -> sub-model), `log_names` (the scalars a step logs) and
    `updates(data)`. They run sub-models only through `self.run(...)`, a stateless call on the
    values of a group, so the same code is differentiated by either backend. While `updates`
    is called inside a training step, `self.step_count` holds the number of earlier steps (a
    scalar tensor), for schedules decided in the step.
    """

    log_names: tuple[str, ...] = ()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._trackers = {name: keras.metrics.Mean(name=name) for name in self.log_names}
        self._group_optimizers: dict[str, keras.optimizers.Optimizer] = {}
        self.step_count = None

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

    def step_logs(self, logs: Mapping[str, Any]) -> dict[str, Any]:
        """Logs derived from those of a whole step (VITA: how many f_T updates ran)."""
        return {}

    def restart_groups(self) -> tuple[tuple[str, ...], int]:
        """Groups put back to their initial weights (optimizer slots zeroed) every N steps,
        before the step's updates; N = 0 never restarts."""
        return (), 0

    # ------------------------------------------------------------------------------ compile
    def compile(self, optimizers: Mapping[str, keras.optimizers.Optimizer], **kwargs) -> None:
        """Give each trained group its optimizer (groups without one are never updated)."""
        extras = self.optimizer_groups()
        unknown = set(optimizers) - set(self.groups()) - set(extras)
        if unknown:
            raise ValueError(
                f"optimizers given for unknown groups {sorted(unknown)}; "
                f"the groups of {type(self).__name__} are {sorted(self.groups())}"
                + (f", its extra optimizers {sorted(extras)}" if extras else "")
            )
        self._group_optimizers = dict(optimizers)
        if kwargs.get("jit_compile") and _tf_strategy():
            # XLA cannot compile a MirroredStrategy replica step that reads mirrored variables
            # (Keras' jit_compile="auto" turns it off there too).
            warnings.warn(
                "XLA compilation is off for data-parallel training on TensorFlow", stacklevel=2
            )
            kwargs["jit_compile"] = False
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
        # join in the order it meets them. A function, not an object, so that saving the
        # trainer serialises the compile config as before.
        select.values = lambda: list(extra_optimizers)
        multi = keras.optimizers.MultiOptimizer(select)
        # The engine scales the loss itself (Keras would wrap the MultiOptimizer instead).
        super().compile(optimizer=multi, auto_scale_loss=False, **kwargs)
        self.built = True  # every sub-model is a built Functional model
        # Built here: the step never calls `self.optimizer.apply`, and fit needs it built.
        multi.build(self.trainable_variables)
        for name, group in extras.items():
            if name in optimizers:
                optimizers[name].build(self.groups()[group].trainable_variables)
        self._loss_scale = None
        if keras.config.dtype_policy().name == "mixed_float16":
            self._loss_scale = multi.add_variable(
                (),
                initializer=keras.initializers.Constant(LOSS_SCALE_INITIAL),
                dtype="float32",
                aggregation="only_first_replica",
                name="loss_scale",
            )
            self._finite_updates = multi.add_variable(
                (), dtype="int32", aggregation="only_first_replica", name="finite_updates"
            )
        restarted, every = self.restart_groups()
        self._initial_weights = [
            keras.Variable(v.numpy(), trainable=False, name=f"initial_{group}_{i}")
            for group in (restarted if every > 0 else ())
            for i, v in enumerate(self.groups()[group].weights)
        ]

    @property
    def metrics(self):
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
        if keras.backend.backend() == "jax":
            import jax

            return jax.default_backend() != "cpu"
        import tensorflow as tf

        if tf.distribute.has_strategy():
            return False
        return not self.jit_compile or bool(tf.config.list_logical_devices("GPU"))

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

        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
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
        self.step_count = self.optimizer.iterations.value
        logs, counted = {}, {}
        with _synchronized_batch_norm(self.groups().values(), replicas > 1):
            for update in self.updates(data):
                if update.condition is None:
                    _record_logs(logs, counted, self._tf_update(update, logs), None)
                    continue
                ran = update.condition(logs)
                if self._skips_updates():
                    new_logs = self._tf_conditional_update(update, logs, ran)
                else:
                    new_logs = self._tf_update(update, logs, ran)
                _record_logs(logs, counted, new_logs, ran)
        logs.update(self.step_logs(logs))
        self.optimizer.iterations.assign_add(1)
        self._update_trackers(logs, counted)
        return {name: tracker.result() for name, tracker in self._trackers.items()}

    def _tf_update(self, update: Update, logs: dict, ran=None) -> dict:
        """Run `update` (loss, gradients, optimizer apply, BatchNorm statistics) on the
        variables' current values; returns its logs. Where `ran` (None: always) is False it
        leaves every variable, the loss scale included, as it was."""
        import tensorflow as tf

        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        values = self.current_values()
        params = {group: values[group][0] for group in update.groups}
        scale = 1.0 if self._loss_scale is None else self._loss_scale.value
        with tf.GradientTape() as tape:
            tape.watch(params)
            loss, aux = update.loss_fn(_with_params(values, params))
            # The optimizers sum the replicas' gradients of their local mean losses.
            scaled_loss = loss * (scale / replicas)
        grads = tape.gradient(scaled_loss, params)
        new_logs = _mean_over_replicas(aux.get("logs", {}))
        non_trainable = _mean_over_replicas(aux.get("non_trainable", {}))
        condition = ran
        if update.gate is not None:
            gate = update.gate({**logs, **new_logs})
            condition = gate if condition is None else condition & gate
        if self._loss_scale is not None:
            grads = {group: [g / scale for g in grads[group]] for group in grads}
            finite = _all_finite(grads)
            new_scale, new_count = _next_loss_scale(
                self._loss_scale.value, self._finite_updates.value, finite
            )
            if ran is not None:
                new_scale = ops.where(ran, new_scale, self._loss_scale.value)
                new_count = ops.where(ran, new_count, self._finite_updates.value)
            self._loss_scale.assign(new_scale)
            self._finite_updates.assign(new_count)
            condition = finite if condition is None else condition & finite
        self._tf_apply(update, grads, non_trainable, condition)
        return new_logs

    def _tf_conditional_update(self, update: Update, logs: dict, ran) -> dict:
        """`_tf_update` inside a `tf.cond` on `ran`; a skipped update returns zero logs."""
        import tensorflow as tf

        # The logs' structure, from a trace of the loss alone that is never run.
        structure = (
            tf.function(lambda: update.loss_fn(self.current_values())[1].get("logs", {}))
            .get_concrete_function()
            .structured_outputs
        )

        def run():
            return tf.constant(True), self._tf_update(update, logs)

        def skip():
            return tf.constant(False), tf.nest.map_structure(
                lambda t: tf.zeros(t.shape, t.dtype), structure
            )

        return tf.cond(ran, run, skip)[1]

    def _tf_apply(self, update: Update, grads, non_trainable, condition) -> None:
        """Apply `grads` to the groups of `update` and assign the new BatchNorm statistics,
        where `condition` (None: always; else a boolean, the same on every replica) holds."""
        import tensorflow as tf

        groups = update.groups

        def apply(grads, non_trainable):
            for group in groups:
                model = self.groups()[group]
                optimizer = self._group_optimizers[update.optimizer_of(group)]
                optimizer.apply(grads[group], model.trainable_variables)
            for group, new_values in non_trainable.items():
                for variable, value in zip(
                    self.groups()[group].non_trainable_variables, new_values
                ):
                    variable.assign(value)
            return tf.constant(True)

        if condition is None:
            apply(grads, non_trainable)
        elif self._skips_updates():
            tf.cond(condition, lambda: apply(grads, non_trainable), lambda: tf.constant(False))
        elif not tf.distribute.has_strategy():
            # XLA on a CPU: apply, then put back the old values where `condition` is False.
            variables = [
                variable
                for group in groups
                for variable in self.groups()[group].trainable_variables
                + self._group_optimizers[update.optimizer_of(group)].variables
            ]
            variables += [
                variable
                for group in non_trainable
                for variable in self.groups()[group].non_trainable_variables
            ]
            old = [tf.identity(variable.value) for variable in variables]
            apply(grads, non_trainable)
            for variable, value in zip(variables, old):
                variable.assign(ops.where(condition, variable.value, value))
        else:
            # A strategy cannot synchronise (sum gradients) inside a `tf.cond` taken in a
            # replica context: decide in the cross-replica context, then run every replica.
            def cross_replica(strategy, condition, grads, non_trainable):
                def run():
                    strategy.extended.call_for_each_replica(apply, args=(grads, non_trainable))
                    return tf.constant(True)

                decided = strategy.experimental_local_results(condition)[0]
                return tf.cond(decided, run, lambda: tf.constant(False))

            tf.distribute.get_replica_context().merge_call(
                cross_replica, args=(condition, grads, non_trainable)
            )

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
            iterations = optimizer_values[self._optimizer_index(self.optimizer.iterations)]
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
        if self._loss_scale is not None:
            scale_index = self._optimizer_index(self._loss_scale)
            count_index = self._optimizer_index(self._finite_updates)

        def run(update, logs, values, optimizer_values, ran=None):
            """`update` applied to `values` and `optimizer_values`: their new versions and
            the update's logs. Where `ran` (None: always) is False, the old versions."""
            optimizer_values = list(optimizer_values)
            params = {group: values[group][0] for group in update.groups}
            scale = 1.0 if self._loss_scale is None else optimizer_values[scale_index]

            def loss_of(params):
                loss, aux = update.loss_fn(_with_params(values, params))
                return loss * scale, aux

            (_, aux), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
            old_values, old_optimizer = values, list(optimizer_values)
            values = dict(values)
            if self._loss_scale is not None:
                grads = jax.tree.map(lambda g: g / scale, grads)
            for group in update.groups:
                key = update.optimizer_of(group)
                start, stop = optimizer_slices[key]
                new_trainable, new_optimizer = self._group_optimizers[key].stateless_apply(
                    optimizer_values[start:stop], grads[group], values[group][0]
                )
                optimizer_values[start:stop] = new_optimizer
                values[group] = (list(new_trainable), values[group][1])
            for group, new_values in aux.get("non_trainable", {}).items():
                values[group] = (values[group][0], list(new_values))
            new_logs = aux.get("logs", {})
            keep = ran
            if update.gate is not None:
                gate = update.gate({**logs, **new_logs})
                keep = gate if keep is None else keep & gate
            if self._loss_scale is not None:
                finite = _all_finite(grads)
                keep = finite if keep is None else keep & finite
            if keep is not None:
                select = functools.partial(_select, keep)
                values = jax.tree.map(select, values, old_values)
                optimizer_values = jax.tree.map(select, optimizer_values, old_optimizer)
            if self._loss_scale is not None:
                new_scale, new_count = _next_loss_scale(
                    optimizer_values[scale_index], optimizer_values[count_index], finite
                )
                if ran is not None:
                    new_scale = _select(ran, new_scale, optimizer_values[scale_index])
                    new_count = _select(ran, new_count, optimizer_values[count_index])
                optimizer_values[scale_index], optimizer_values[count_index] = new_scale, new_count
            return values, optimizer_values, new_logs

        self.step_count = optimizer_values[self._optimizer_index(self.optimizer.iterations)]
        logs, counted = {}, {}
        for update in self.updates(data):
            if update.condition is None:
                values, optimizer_values, new_logs = run(update, logs, values, optimizer_values)
                _record_logs(logs, counted, new_logs, None)
                continue
            ran = update.condition(logs)
            if not self._skips_updates():
                values, optimizer_values, new_logs = run(
                    update, logs, values, optimizer_values, ran
                )
                _record_logs(logs, counted, new_logs, ran)
                continue
            structure = jax.eval_shape(
                lambda values, update=update: update.loss_fn(values)[1].get("logs", {}), values
            )

            def skip(values, optimizer_values, structure=structure):
                zeros = jax.tree.map(lambda s: jax.numpy.zeros(s.shape, s.dtype), structure)
                return values, list(optimizer_values), zeros

            values, optimizer_values, new_logs = jax.lax.cond(
                ran,
                functools.partial(run, update, dict(logs)),
                skip,
                values,
                optimizer_values,
            )
            _record_logs(logs, counted, new_logs, ran)

        logs.update(self.step_logs(logs))
        trainable, non_trainable = list(trainable), list(non_trainable)
        for group, (train_idx, non_train_idx) in index.items():
            for i, value in zip(train_idx, values[group][0]):
                trainable[i] = value
            for i, value in zip(non_train_idx, values[group][1]):
                non_trainable[i] = value
        iterations = self._optimizer_index(self.optimizer.iterations)
        optimizer_values[iterations] = optimizer_values[iterations] + 1

        mapping = list(zip(self.metrics_variables, metrics_values))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            self._update_trackers(logs, counted)
            results = {name: tracker.result() for name, tracker in self._trackers.items()}
        metrics_values = [scope.get_current_value(v) for v in self.metrics_variables]
        return results, (trainable, non_trainable, optimizer_values, metrics_values)

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

    def _optimizer_index(self, variable) -> int:
        """Where `variable` (of the MultiOptimizer itself) lies in `self.optimizer.variables`."""
        for i, candidate in enumerate(self.optimizer.variables):
            if candidate is variable:
                return i
        raise RuntimeError(f"{variable.path} is not among the MultiOptimizer's variables")


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


def gather_replicas(x):
    """`x` concatenated (axis 0) over the replicas of a TensorFlow data-parallel step.

    A loss over the whole batch (NT-Xent, whose negatives are every other example) computed on
    the gathered rows is the global one on every replica; the gradient flows back to each
    replica's own rows. Elsewhere (one device; JAX, whose step is already global) `x` itself.
    """
    if keras.backend.backend() != "tensorflow":
        return x
    import tensorflow as tf

    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return x
    context = tf.distribute.get_replica_context()
    if context.num_replicas_in_sync == 1:
        return x
    return context.all_gather(x, axis=0)


def _tf_strategy() -> bool:
    """Whether a `tf.distribute` strategy (data-parallel training on TensorFlow) is active."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return tf.distribute.has_strategy()


def _mean_over_replicas(values):
    """The mean over the replicas of a TensorFlow data-parallel step of a nest of tensors."""
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if not values or context.num_replicas_in_sync == 1:
        return values
    return context.all_reduce(tf.distribute.ReduceOp.MEAN, values)


def _all_finite(grads: Mapping[str, list]):
    """Whether every gradient of every replica is finite (a boolean scalar; True for none)."""
    flags = [ops.all(ops.isfinite(g)) for group in grads.values() for g in group]
    finite = ops.all(ops.stack(flags)) if flags else ops.convert_to_tensor(True)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        if context.num_replicas_in_sync > 1:
            failed = context.all_reduce(
                tf.distribute.ReduceOp.SUM, 1.0 - ops.cast(finite, "float32")
            )
            finite = ops.equal(failed, 0.0)
    return finite


def _next_loss_scale(scale, finite_updates, finite):
    """LossScaleOptimizer's rule: halve the scale after non-finite gradients, double it after
    `LOSS_SCALE_GROWTH_STEPS` finite updates in a row."""
    grow = finite_updates + 1 >= LOSS_SCALE_GROWTH_STEPS
    new_scale = ops.where(finite, ops.where(grow, scale * 2.0, scale), scale * 0.5)
    new_count = ops.where(ops.logical_and(finite, ops.logical_not(grow)), finite_updates + 1, 0)
    return new_scale, ops.cast(new_count, "int32")


@contextlib.contextmanager
def _synchronized_batch_norm(models, enabled: bool):
    """While tracing a data-parallel TensorFlow step, BatchNorm layers take the statistics of
    the global batch (all-reduced), as on one device; saved configs keep `synchronized=False`
    so the models still load on JAX."""
    layers = []
    if enabled:
        layers = [
            layer
            for model in models
            for layer in _all_layers(model)
            if isinstance(layer, keras.layers.BatchNormalization) and not layer.synchronized
        ]
    for layer in layers:
        layer.synchronized = True
    try:
        yield
    finally:
        for layer in layers:
            layer.synchronized = False


def _all_layers(layer) -> list:
    """`layer` and every layer nested in it."""
    return [layer] + [
        inner for child in getattr(layer, "layers", []) for inner in _all_layers(child)
    ]


def _record_logs(logs: dict, counted: dict, new_logs: Mapping, ran) -> None:
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
