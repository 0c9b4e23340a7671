"""The training step of a `StatelessTrainer` on TensorFlow, and the TensorFlow forms of the
backend-specific operations a loss calls.

Each update runs under a `GradientTape` watching the values of the groups it updates; each
group's optimizer `apply`s its gradients to the variables and the new BatchNorm statistics are
assigned back. A conditional update runs inside a `tf.cond` where that pays
(`StatelessTrainer._skips_updates`), else it is computed and its result selected.

Under `tf.distribute.MirroredStrategy` Keras runs the step once per replica on its part of the
batch. Each replica differentiates its loss divided by the number of replicas and the
optimizers sum the replicas' gradients, which gives the gradient of the global mean; the logs
and new BatchNorm statistics are averaged over the replicas; BatchNorm layers normalise with the
statistics of the global batch (Keras' synchronized BatchNorm, during the step only); and
`gather_replicas` gives a loss over the whole batch (NT-Xent's negatives) every replica's rows. A
`tf.cond` taken in a replica context cannot hold those all-reduces, so there an update with a
`condition` is computed and its result selected, like a gated one (same results), and a gated
apply is decided in the cross-replica context.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_privacy.methods.trainer import (
    StatelessTrainer,
    Update,
    all_finite,
    next_loss_scale,
    record_logs,
    with_params,
)
from keras_privacy.types import Tensor


class TensorFlowStep:
    """The TensorFlow `train_step(data)` of `trainer`: the variables are assigned in place."""

    def __init__(self, trainer: StatelessTrainer):
        self.trainer = trainer

    def compile_kwargs(self, kwargs: dict) -> dict:
        """`compile`'s keyword arguments, XLA off under a `tf.distribute` strategy: XLA cannot
        compile a MirroredStrategy replica step that reads mirrored variables (Keras'
        `jit_compile="auto"` turns it off there too)."""
        if kwargs.get("jit_compile") and tf.distribute.has_strategy():
            warnings.warn(
                "XLA compilation is off for data-parallel training on TensorFlow", stacklevel=3
            )
            kwargs = {**kwargs, "jit_compile": False}
        return kwargs

    def skips_updates(self) -> bool:
        """A real conditional without XLA or on a GPU, never under a `tf.distribute` strategy
        (see `StatelessTrainer._skips_updates`)."""
        if tf.distribute.has_strategy():
            return False
        return not self.trainer.jit_compile or bool(tf.config.list_logical_devices("GPU"))

    def host_chosen_step(self) -> None:
        """None: TensorFlow decides conditional updates in its step (`tf.cond`, or computed
        and selected under XLA on a CPU), and Keras builds the train function."""
        return None

    def bounded(self, train_function: Callable) -> Callable:
        """`train_function` itself: Keras' TensorFlow fit runs its callbacks on the host's
        thread (its backend is not marked thread-safe), which reads every step's logs before
        the next batch is taken, and the `tf.function` stays visible to TensorBoard's graph."""
        return train_function

    def train_step(self, data: Mapping[str, Tensor]) -> dict[str, Tensor]:
        trainer = self.trainer
        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        self._restart_groups()
        trainer.step_count = trainer.optimizer.iterations.value
        logs, counted = {}, {}
        with _synchronized_batch_norm(trainer.groups().values(), replicas > 1):
            for update in trainer.step_updates(data):
                if update.condition is None:
                    record_logs(logs, counted, self._update(update, logs), None)
                    continue
                ran = update.condition(logs)
                if trainer._skips_updates():
                    new_logs = self._conditional_update(update, logs, ran)
                else:
                    new_logs = self._update(update, logs, ran)
                record_logs(logs, counted, new_logs, ran)
        logs.update(trainer.step_logs(logs))
        trainer.optimizer.iterations.assign_add(1)
        trainer._update_trackers(logs, counted)
        return {name: tracker.result() for name, tracker in trainer._trackers.items()}

    def _restart_groups(self) -> None:
        """Put the groups of `restart_groups` back to their initial weights on every N-th
        step; their optimizers' state goes on (`StatelessTrainer.restart_groups`)."""
        trainer = self.trainer
        restarted, every = trainer.restart_groups()
        if every <= 0:
            return
        iterations = trainer.optimizer.iterations

        def restart():
            snapshot = iter(trainer.restart_snapshot)
            for group in restarted:
                for variable in trainer.groups()[group].weights:
                    variable.assign(next(snapshot).value)
            return tf.constant(True)

        tf.cond((iterations > 0) & (iterations % every == 0), restart, lambda: tf.constant(False))

    def _update(self, update: Update, logs: dict, ran=None) -> dict:
        """Run `update` (loss, gradients, optimizer apply, BatchNorm statistics) on the
        variables' current values; returns its logs. Where `ran` (None: always) is False it
        leaves every variable, the loss scale included, as it was."""
        trainer = self.trainer
        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        values = trainer.current_values()
        params = {group: values[group][0] for group in update.groups}
        scale = 1.0 if trainer._loss_scale is None else trainer._loss_scale.scale.value
        trainer.loss_scale = None if trainer._loss_scale is None else scale
        with tf.GradientTape() as tape:
            tape.watch(params)
            loss, aux = update.loss_fn(with_params(values, params))
            # The optimizers sum the replicas' gradients of their local mean losses.
            scaled_loss = loss * (scale / replicas)
        grads = tape.gradient(scaled_loss, params)
        new_logs = _mean_over_replicas(aux.get("logs", {}))
        non_trainable = _mean_over_replicas(aux.get("non_trainable", {}))
        condition = ran
        if update.gate is not None:
            gate = update.gate({**logs, **new_logs})
            condition = gate if condition is None else condition & gate
        if trainer._loss_scale is not None:
            grads = {group: [g / scale for g in grads[group]] for group in grads}
            finite = _all_finite_on_every_replica(grads)
            self._advance_loss_scale(finite, ran)
            condition = finite if condition is None else condition & finite
        self._apply(update, grads, non_trainable, condition)
        return new_logs

    def _advance_loss_scale(self, finite, ran) -> None:
        """Move the loss scale by the rule of `next_loss_scale`, where `ran` (None: always)."""
        loss_scale = self.trainer._loss_scale
        scale, count = loss_scale.scale.value, loss_scale.finite_updates.value
        new_scale, new_count = next_loss_scale(scale, count, finite)
        if ran is not None:
            new_scale = ops.where(ran, new_scale, scale)
            new_count = ops.where(ran, new_count, count)
        loss_scale.scale.assign(new_scale)
        loss_scale.finite_updates.assign(new_count)

    def _conditional_update(self, update: Update, logs: dict, ran) -> dict:
        """`_update` inside a `tf.cond` on `ran`; a skipped update returns zero logs.

        The zeros take the structure of the update's own logs from the trace of the branch
        that runs it, which `tf.cond` traces first; run eagerly, where `tf.cond` runs one branch
        only, a skip reads it from a forward pass of the loss."""
        traced = []

        def run():
            new_logs = self._update(update, logs)
            traced.append(new_logs)
            return tf.constant(True), new_logs

        def skip():
            if traced:
                structure = traced[0]
            else:
                structure = update.loss_fn(self.trainer.current_values())[1].get("logs", {})
            return tf.constant(False), tf.nest.map_structure(
                lambda t: tf.zeros(t.shape, t.dtype), structure
            )

        return tf.cond(ran, run, skip)[1]

    def _apply(self, update: Update, grads, non_trainable, condition) -> None:
        """Apply `grads` to the groups of `update` and assign the new BatchNorm statistics,
        where `condition` (None: always; else a boolean, the same on every replica) holds."""
        apply = self._applier(update)
        if condition is None:
            apply(grads, non_trainable)
        elif self.trainer._skips_updates():
            tf.cond(condition, lambda: apply(grads, non_trainable), lambda: tf.constant(False))
        elif not tf.distribute.has_strategy():
            self._apply_where(update, apply, grads, non_trainable, condition)
        else:
            _apply_across_replicas(apply, grads, non_trainable, condition)

    def _applier(self, update: Update) -> Callable[[Any, Any], Any]:
        """A function of (grads, non_trainable) that applies them to the groups of `update`."""
        trainer = self.trainer

        def apply(grads, non_trainable):
            for group in update.groups:
                model = trainer.groups()[group]
                optimizer = trainer._group_optimizers[update.optimizer_of(group)]
                optimizer.apply(grads[group], model.trainable_variables)
            for group, new_values in non_trainable.items():
                for variable, value in zip(
                    trainer.groups()[group].non_trainable_variables, new_values
                ):
                    variable.assign(value)
            return tf.constant(True)

        return apply

    def _apply_where(self, update: Update, apply, grads, non_trainable, condition) -> None:
        """XLA on a CPU: apply, then put back the old values where `condition` is False."""
        trainer = self.trainer
        variables = [
            variable
            for group in update.groups
            for variable in trainer.groups()[group].trainable_variables
            + trainer._group_optimizers[update.optimizer_of(group)].variables
        ]
        variables += [
            variable
            for group in non_trainable
            for variable in trainer.groups()[group].non_trainable_variables
        ]
        old = [tf.identity(variable.value) for variable in variables]
        apply(grads, non_trainable)
        for variable, value in zip(variables, old):
            variable.assign(ops.where(condition, variable.value, value))


def _apply_across_replicas(apply, grads, non_trainable, condition) -> None:
    """`apply` where `condition` holds, in a data-parallel step: a strategy cannot synchronise
    (sum gradients) inside a `tf.cond` taken in a replica context, so decide in the
    cross-replica context, then run every replica."""

    def cross_replica(strategy, condition, grads, non_trainable):
        def run():
            strategy.extended.call_for_each_replica(apply, args=(grads, non_trainable))
            return tf.constant(True)

        decided = strategy.experimental_local_results(condition)[0]
        return tf.cond(decided, run, lambda: tf.constant(False))

    tf.distribute.get_replica_context().merge_call(
        cross_replica, args=(condition, grads, non_trainable)
    )


def training_step(trainer: StatelessTrainer) -> TensorFlowStep:
    """The TensorFlowStep of `trainer`."""
    return TensorFlowStep(trainer)


@contextlib.contextmanager
def weights_kept_on_failure(model: keras.Model) -> Iterator[None]:
    """Nothing to keep: TensorFlow's loops update the variables in place and never empty
    them (`jax_step.weights_kept_on_failure` says why JAX's do)."""
    yield


def value_and_gradient(
    fn: Callable[[list], Any], params: list, has_aux: bool = False
) -> tuple[Any, list]:
    """`fn(params)` and its gradient, differentiable again: a tape inside the outer tape."""
    params = [tf.convert_to_tensor(p) for p in params]
    with tf.GradientTape() as tape:
        tape.watch(params)
        result = fn(params)
    value = result[0] if has_aux else result
    return result, tape.gradient(value, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)


def hessian_vector_product(fn: Callable[[list], Any], params: list, vector: list) -> list:
    """H(fn)(params) @ vector as the gradient of <grad fn(params), vector> (reverse over
    reverse: on TensorFlow it needs less memory than a `ForwardAccumulator`, whose forward
    derivatives go through each operation's gradient twice). `params` pass through identities
    that depend on `vector`, so the graph neither merges this pass with an earlier one of `fn`
    at `params` (Grappler's common subexpressions) nor runs it before `vector` exists."""
    vector = [tf.stop_gradient(tf.convert_to_tensor(v)) for v in vector]
    with tf.control_dependencies(vector):
        params = [tf.identity(p) for p in params]
    with tf.GradientTape() as tape:
        tape.watch(params)
        _, grads = value_and_gradient(fn, params)
        directional = tf.add_n([tf.reduce_sum(g * v) for g, v in zip(grads, vector)])
    return tape.gradient(directional, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)


def checkpoint(fn: Callable) -> Callable:
    """`fn` itself: TensorFlow's `tf.recompute_grad` does not shrink the passes that differentiate
    their own backward (the meta step's Hessian-vector product), so nothing is recomputed."""
    return fn


def recomputes_checkpoints() -> bool:
    """False: `checkpoint` is `fn` itself."""
    return False


def max_pool_dtype() -> str:
    """Float32: TensorFlow's XLA bridge has a max pool's second derivative (`MaxPoolGradGrad`,
    `MaxPool3DGradGrad`) in float32 only, so a 16-bit pool stops the meta step's
    Hessian-vector pass under XLA (`--jit_compile=auto` on a GPU)."""
    return "float32"


def replica_position() -> tuple[Tensor | int, int]:
    """(this replica's index, the number of replicas) inside a data-parallel step; (0, 1)
    outside one."""
    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return 0, 1
    context = tf.distribute.get_replica_context()
    return context.replica_id_in_sync_group, context.num_replicas_in_sync


def gather_replicas(x: Tensor) -> Tensor:
    """`x` concatenated (axis 0) over the replicas of a data-parallel step; `x` itself
    outside one."""
    if replica_position()[1] == 1:
        return x
    return tf.distribute.get_replica_context().all_gather(x, axis=0)


def _mean_over_replicas(values):
    """The mean over the replicas of a data-parallel step of a nest of tensors: of its floats;
    its integers (counters: the augmentations' calls, MoCo's pointer), equal on every replica,
    as they are (an all-reduce takes no mix of the host's integers and the devices' floats)."""
    context = tf.distribute.get_replica_context()
    if not values or context.num_replicas_in_sync == 1:
        return values
    leaves = tf.nest.flatten(values)
    floats = [i for i, leaf in enumerate(leaves) if leaf.dtype.is_floating]
    means = context.all_reduce(tf.distribute.ReduceOp.MEAN, [leaves[i] for i in floats])
    for i, mean in zip(floats, means):
        leaves[i] = mean
    return tf.nest.pack_sequence_as(values, leaves)


def _all_finite_on_every_replica(grads: Mapping[str, list]):
    """Whether every gradient of every replica is finite (a boolean scalar)."""
    finite = all_finite(grads)
    context = tf.distribute.get_replica_context()
    if context.num_replicas_in_sync > 1:
        failed = context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - ops.cast(finite, "float32"))
        finite = ops.equal(failed, 0.0)
    return finite


@contextlib.contextmanager
def _synchronized_batch_norm(models, enabled: bool):
    """While tracing a data-parallel step, BatchNorm layers take the statistics of the global
    batch (all-reduced), as on one device; saved configs keep `synchronized=False` so the
    models still load on JAX."""
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
