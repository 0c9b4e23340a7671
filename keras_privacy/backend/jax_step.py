"""The training step of a `StatelessTrainer` on JAX, and the JAX forms of the backend-specific
operations a loss calls.

The step is a pure function of the state `fit` carries (trainable, non-trainable, optimizer and
metric values), as in Keras' own JAX trainer: each update is `jax.value_and_grad` of its loss,
each group's optimizer `stateless_apply` on its slice of the optimizer state, and the new state
is returned. Where every conditional update names a branch, the host decides which run and a
step is compiled per set of branches (`JaxStep.host_chosen_step`). A conditional update runs
inside `jax.lax.cond` where that pays (`StatelessTrainer._skips_updates`), else it is computed
and its result selected. Under data-parallel training (`keras.distribution.DataParallel`) the
step is one program over the global batch, every branch in it, which XLA splits across the
devices.
"""

from __future__ import annotations

import collections
import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import keras
import numpy

from keras_privacy.methods.trainer import (
    GroupValues,
    StatelessTrainer,
    Update,
    all_finite,
    choose,
    next_loss_scale,
    record_logs,
    with_params,
)
from keras_privacy.types import Tensor

STEPS_IN_FLIGHT = 2
"""Steps a JAX fit runs ahead of the host (`JaxStep.bounded`): one on the device while the next
batch is sent, one more to absorb a slow batch."""


class JaxStep:
    """The JAX `train_step(state, data)` of `trainer`: state in, new state out."""

    def __init__(self, trainer: StatelessTrainer):
        self.trainer = trainer

    def compile_kwargs(self, kwargs: dict) -> dict:
        """`compile`'s keyword arguments, unchanged."""
        return kwargs

    def skips_updates(self) -> bool:
        """A real conditional off a CPU (see `StatelessTrainer._skips_updates`)."""
        return jax.default_backend() != "cpu"

    def host_chosen_step(self) -> Callable | None:
        """A `train_step(state, data)` that decides the step's conditional updates on the host,
        where the step is compiled with no distribution; else None (Keras' jitted step).

        Each step runs `_decide` (compiled): the updates before the first conditional one, then
        every `condition` on their logs. The step compiled for the branches that run (one per
        set of branches, `Update.branch`) continues from `_decide`'s state and logs; the first
        updates are not run twice, and the other branches are not in that program, so no
        player that does not move is compiled or computed. Inside it a conditional update runs
        by its decision as `_skips_updates` says: computed and selected on a CPU, where a
        conditional does not pay, in `jax.lax.cond` on an accelerator. On an accelerator this
        keeps each program to one player: meta generalisation's step with all its branches is
        177 thousand StableHLO operations (eight attack models, paper sizes), which XLA did not
        compile within 563 s on an H200 (`docs/gpu.md`); its meta update alone is 75
        thousand, compiled when Algorithm 1 first picks it. The price is one read of the
        decisions by the host a step. A trainer with no conditional update, or with one that
        names no `branch`, gets the plain jitted step."""
        trainer = self.trainer
        if (
            trainer.run_eagerly
            or not trainer.jit_compile
            or keras.distribution.distribution() is not None
        ):
            return None
        decide = self.decide_program()
        compiled: dict[frozenset, Callable] = {}

        def step(state, data):
            if not compiled and not self.decides_on_host(state, data):
                compiled[None] = jax.jit(self.train_step, donate_argnums=0)
            if None in compiled:
                return compiled[None](state, data)
            decided, state, begun = decide(state, data)
            branches = self.chosen_branches(decided)
            if branches not in compiled:
                compiled[branches] = self.branch_program(branches)
            return compiled[branches](state, data, decided, begun=begun)

        return step

    def bounded(self, train_function: Callable) -> Callable:
        """Keras' `train_function(state, iterator)`, which waits for the logs of the step
        `STEPS_IN_FLIGHT` calls before it returns. JAX dispatches a step and returns at
        once, and `train`'s callbacks read the logs in Keras' worker threads, so the host
        prepares and sends the next batches while the device runs the steps already
        dispatched; the wait keeps the host from queueing more of them (each holds its batch in
        the device's memory)."""
        pending: collections.deque = collections.deque()

        def run(state, iterator):
            logs, state = train_function(state, iterator)
            pending.append(logs)
            if len(pending) > STEPS_IN_FLIGHT:
                jax.block_until_ready(pending.popleft())
            return logs, state

        return run

    def decides_on_host(
        self, state: tuple[list, list, list, list], data: Mapping[str, Tensor]
    ) -> tuple | None:
        """Whether every conditional update of the step names a branch, so that the host
        decides them: then `_decide`'s outputs as shapes (decisions, state, logs), from an
        abstract evaluation (nothing computed); else None."""
        shapes = jax.eval_shape(self._decide, state, data)
        return shapes if self._host_decides else None

    def decide_program(self) -> Callable:
        """`_decide` jitted, the state donated: (decisions, the state after the updates before
        the first conditional one, their logs and counts)."""
        return jax.jit(self._decide, donate_argnums=0)

    def branch_program(self, branches: frozenset) -> Callable:
        """The step holding `branches` only, jitted, the state donated: `(state, data,
        decided, begun=...)` from `decide_program`'s outputs."""
        return jax.jit(functools.partial(self.train_step, branches=branches), donate_argnums=0)

    def chosen_branches(self, decided: Tensor) -> frozenset:
        """The branches that `decide_program`'s decisions run, read on the host."""
        return frozenset(
            branch
            for branch, runs in zip(self._branches, numpy.asarray(decided))
            if branch is not None and runs
        )

    def train_step(
        self,
        state: tuple[list, list, list, list],
        data: Mapping[str, Tensor],
        decided: Tensor | None = None,
        branches: frozenset | None = None,
        begun: tuple[dict, dict] | None = None,
    ) -> tuple[dict[str, Tensor], tuple[list, list, list, list]]:
        """The step. From `host_chosen_step`: `decided`, every update's decision (a boolean
        vector); `branches`, the branches compiled in (a conditional update of another branch
        is left out); `begun`, the logs and counts of the updates before the first conditional
        one, which `_decide` ran and wrote into `state`, so they are not run again."""
        trainer = self.trainer
        values, optimizer_values = self._start(state, restart=begun is None)
        updates = trainer.step_updates(data)  # after `_start`, which sets `trainer.step_count`
        first = 0 if begun is None else _first_conditional(updates)
        logs, counted = ({}, {}) if begun is None else (dict(begun[0]), dict(begun[1]))
        for position, update in enumerate(updates[first:], start=first):
            choice = None
            if decided is not None and update.condition is not None:
                choice = (update.branch in branches, decided[position])
            values, optimizer_values = self._step_update(
                update, logs, counted, values, optimizer_values, choice
            )
        logs.update(trainer.step_logs(logs))
        iterations = trainer._optimizer_index(trainer.optimizer.iterations)
        optimizer_values[iterations] = optimizer_values[iterations] + 1
        trainable, non_trainable = self._written(state, values)
        results, metrics_values = self._track(logs, counted, state[3])
        return results, (trainable, non_trainable, optimizer_values, metrics_values)

    def _start(self, state, restart: bool = True) -> tuple[GroupValues, list]:
        """The values of every group and the optimizer values at the start of a step: with
        `restart`, the restarted groups put back (`_restart_groups`); `trainer.step_count`
        set."""
        trainer = self.trainer
        trainable, non_trainable, optimizer_values, _ = state
        values = {
            group: ([trainable[i] for i in train], [non_trainable[i] for i in non_train])
            for group, (train, non_train) in trainer._variable_index().items()
        }
        optimizer_values = list(optimizer_values)
        if restart:
            self._restart_groups(values, optimizer_values, non_trainable)
        iterations = trainer._optimizer_index(trainer.optimizer.iterations)
        trainer.step_count = optimizer_values[iterations]
        return values, optimizer_values

    def _written(self, state, values: GroupValues) -> tuple[list, list]:
        """`state`'s trainable and non-trainable values with every group's `values` written
        in."""
        trainable, non_trainable = list(state[0]), list(state[1])
        for group, (train, non_train) in self.trainer._variable_index().items():
            for i, value in zip(train, values[group][0]):
                trainable[i] = value
            for i, value in zip(non_train, values[group][1]):
                non_trainable[i] = value
        return trainable, non_trainable

    def _decide(self, state, data):
        """(every update's decision, a boolean vector; the state after the updates before the
        first conditional one; their (logs, counts)): those updates run, then each `condition`
        is taken on their logs (True for an unconditional update). Records each update's
        branch and whether the host decides (`_host_decides`); where it does not, all True,
        nothing run."""
        values, optimizer_values = self._start(state)
        updates = self.trainer.step_updates(data)  # after `_start`, which sets `trainer.step_count`
        self._branches = [update.branch for update in updates]
        conditional = [update for update in updates if update.condition is not None]
        self._host_decides = bool(conditional) and all(u.branch is not None for u in conditional)
        if not self._host_decides:
            return jax.numpy.ones(len(updates), bool), state, ({}, {})
        logs, counted = {}, {}
        for update in updates[: _first_conditional(updates)]:
            values, optimizer_values = self._step_update(
                update, logs, counted, values, optimizer_values
            )
        decisions = [True if u.condition is None else u.condition(logs) for u in updates]
        trainable, non_trainable = self._written(state, values)
        begun_state = (trainable, non_trainable, optimizer_values, state[3])
        decided = jax.numpy.stack([jax.numpy.asarray(d, bool) for d in decisions])
        return decided, begun_state, (logs, counted)

    def _restart_groups(self, values: GroupValues, optimizer_values: list, non_trainable) -> None:
        """Put the groups of `restart_groups` back to their initial weights (`non_trainable`
        holds the snapshot) on every N-th step, in `values`; their optimizers' state goes on
        (`StatelessTrainer.restart_groups`), and so does a random layer's seed state, which
        the snapshot of their weights does not hold."""
        trainer = self.trainer
        restarted, every = trainer.restart_groups()
        if every <= 0:
            return
        iterations = optimizer_values[trainer._optimizer_index(trainer.optimizer.iterations)]
        restart = (iterations > 0) & (iterations % every == 0)
        position = {id(v): i for i, v in enumerate(trainer.non_trainable_variables)}
        snapshot = iter([non_trainable[position[id(v)]] for v in trainer.restart_snapshot])
        for group in restarted:
            model = trainer.groups()[group]
            initial = {id(v): next(snapshot) for v in model.weights}
            values[group] = tuple(
                [
                    jax.numpy.where(restart, initial[id(v)], value) if id(v) in initial else value
                    for v, value in zip(variables, group_values)
                ]
                for variables, group_values in zip(
                    (model.trainable_variables, model.non_trainable_variables), values[group]
                )
            )

    def _step_update(self, update: Update, logs, counted, values, optimizer_values, choice=None):
        """Run `update` as its `condition` asks (always; computed and selected; or inside
        `jax.lax.cond`) and record its logs; returns the new values and optimizer values.
        `choice`, for a conditional update decided on the host: (whether its branch is
        compiled in, its decision); an update of a branch left out is not computed."""
        if update.condition is None:
            values, optimizer_values, new_logs = self._update(
                update, logs, values, optimizer_values
            )
            record_logs(logs, counted, new_logs, None)
            return values, optimizer_values
        compiled_in, ran = (True, update.condition(logs)) if choice is None else choice
        if not compiled_in:
            values, optimizer_values, new_logs = self._skipper(update, values)(
                values, optimizer_values
            )
        elif self.trainer._skips_updates():
            values, optimizer_values, new_logs = jax.lax.cond(
                ran,
                functools.partial(self._update, update, dict(logs)),
                self._skipper(update, values),
                values,
                optimizer_values,
            )
        else:
            values, optimizer_values, new_logs = self._update(
                update, logs, values, optimizer_values, ran
            )
        record_logs(logs, counted, new_logs, ran)
        return values, optimizer_values

    def _skipper(self, update: Update, values: GroupValues) -> Callable:
        """The branch of `jax.lax.cond` that skips `update`: the state unchanged, zero logs of
        the update's logs' structure (from an abstract evaluation of its loss)."""
        structure = jax.eval_shape(lambda values: update.loss_fn(values)[1].get("logs", {}), values)

        def skip(values, optimizer_values):
            zeros = jax.tree.map(lambda s: jax.numpy.zeros(s.shape, s.dtype), structure)
            return values, list(optimizer_values), zeros

        return skip

    def _update(self, update: Update, logs, values, optimizer_values, ran=None):
        """`update` applied to `values` and `optimizer_values`: their new versions and the
        update's logs. Where `ran` (None: always) is False, the old versions."""
        optimizer_values = list(optimizer_values)
        scale = self._loss_scale(optimizer_values)
        self.trainer.loss_scale = scale
        aux, grads = self._gradients(update, values, scale)
        new_values, new_optimizer = self._apply(update, values, optimizer_values, grads, aux)
        new_logs = aux.get("logs", {})
        keep = ran
        if update.gate is not None:
            gate = update.gate({**logs, **new_logs})
            keep = gate if keep is None else keep & gate
        if scale is not None:
            finite = all_finite(grads)
            keep = finite if keep is None else keep & finite
        if keep is not None:
            new_values = jax.tree.map(functools.partial(choose, keep), new_values, values)
            new_optimizer = jax.tree.map(
                functools.partial(choose, keep), new_optimizer, optimizer_values
            )
        if scale is not None:
            self._advance_loss_scale(new_optimizer, finite, ran)
        return new_values, new_optimizer, new_logs

    def _gradients(self, update: Update, values: GroupValues, scale) -> tuple[dict, dict]:
        """The aux of `update`'s loss and its gradients with respect to the trainable values of
        its groups (unscaled where a loss `scale` multiplied the loss)."""
        params = {group: values[group][0] for group in update.groups}

        def scaled_loss(params):
            loss, aux = update.loss_fn(with_params(values, params))
            return loss * (1.0 if scale is None else scale), aux

        (_, aux), grads = jax.value_and_grad(scaled_loss, has_aux=True)(params)
        if scale is not None:
            grads = jax.tree.map(lambda g: g / scale, grads)
        return aux, grads

    def _apply(self, update: Update, values, optimizer_values: list, grads, aux):
        """Each group's optimizer applied to its gradients, and the new non-trainable values of
        `aux`: new (values, optimizer values)."""
        trainer = self.trainer
        slices = trainer._optimizer_slices()
        values, optimizer_values = dict(values), list(optimizer_values)
        for group in update.groups:
            key = update.optimizer_of(group)
            start, stop = slices[key]
            new_trainable, new_optimizer = trainer._group_optimizers[key].stateless_apply(
                optimizer_values[start:stop], grads[group], values[group][0]
            )
            optimizer_values[start:stop] = new_optimizer
            values[group] = (list(new_trainable), values[group][1])
        for group, new_values in aux.get("non_trainable", {}).items():
            values[group] = (values[group][0], list(new_values))
        return values, optimizer_values

    def _loss_scale(self, optimizer_values: list):
        """The loss scale under `mixed_float16`, else None."""
        trainer = self.trainer
        if trainer._loss_scale is None:
            return None
        return optimizer_values[trainer._optimizer_index(trainer._loss_scale.scale)]

    def _advance_loss_scale(self, optimizer_values: list, finite, ran) -> None:
        """Move the loss scale in `optimizer_values` by the rule of `next_loss_scale`, where
        `ran` (None: always); in place."""
        trainer = self.trainer
        scale_index = trainer._optimizer_index(trainer._loss_scale.scale)
        count_index = trainer._optimizer_index(trainer._loss_scale.finite_updates)
        scale, count = optimizer_values[scale_index], optimizer_values[count_index]
        new_scale, new_count = next_loss_scale(scale, count, finite)
        if ran is not None:
            new_scale, new_count = choose(ran, new_scale, scale), choose(ran, new_count, count)
        optimizer_values[scale_index], optimizer_values[count_index] = new_scale, new_count

    def _track(self, logs: dict, counted: dict, metrics_values: list):
        """The step's logs added to the metrics statelessly: (results, new metric values)."""
        trainer = self.trainer
        mapping = list(zip(trainer.metrics_variables, metrics_values))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            trainer._update_trackers(logs, counted)
            results = {name: tracker.result() for name, tracker in trainer._trackers.items()}
        return results, [scope.get_current_value(v) for v in trainer.metrics_variables]


def _first_conditional(updates: list[Update]) -> int:
    """The position of the first update with a condition."""
    return next(i for i, update in enumerate(updates) if update.condition is not None)


def training_step(trainer: StatelessTrainer) -> JaxStep:
    """The JaxStep of `trainer`."""
    return JaxStep(trainer)


@contextlib.contextmanager
def weights_kept_on_failure(model: keras.Model) -> Iterator[None]:
    """Put back the values of `model`'s variables that a failing `fit`, `evaluate` or
    `predict` left empty. Keras' JAX loops take the values out of the variables before their
    first step and put the last step's back at the end; where the first step fails (a wrong
    shape, found when the step is traced), none has ended and the variables stay empty: every
    model sharing them (a notebook's f_A, trained by an earlier phase) would be lost. A value
    the failed step consumed (donated) is gone and stays so."""
    optimizer = getattr(model, "optimizer", None)
    variables = [
        *model.variables,
        *(optimizer.variables if optimizer is not None and optimizer.built else []),
    ]
    kept = [(variable, variable._value) for variable in variables]
    try:
        yield
    except BaseException:
        for variable, value in kept:
            if variable._value is None and value is not None and not value.is_deleted():
                variable.assign(value)
        raise


def value_and_gradient(
    fn: Callable[[list], Any], params: list, has_aux: bool = False
) -> tuple[Any, list]:
    """`fn(params)` and its gradient, differentiable again: `jax.value_and_grad` inside the
    outer one."""
    return jax.value_and_grad(fn, has_aux=has_aux)(params)


def hessian_vector_product(fn: Callable[[list], Any], params: list, vector: list) -> list:
    """H(fn)(params) @ vector as `jax.jvp` of `jax.grad`. `params` are made to wait for all of
    `vector` (`_after`), so XLA neither merges this pass with an earlier one of `fn` at
    `params` nor runs any of it before `vector` exists; inside it, each block under
    `checkpoint` is recomputed only once the tangents of its output cotangents exist too, so the
    pass holds one block's recomputed activations at a time (`_RECOMPUTE_AFTER_TANGENTS`)."""
    global _RECOMPUTE_AFTER_TANGENTS
    params = _after(list(params), list(vector))
    outer, _RECOMPUTE_AFTER_TANGENTS = _RECOMPUTE_AFTER_TANGENTS, True
    try:
        return jax.jvp(jax.grad(fn), (params,), (list(vector),))[1]
    finally:
        _RECOMPUTE_AFTER_TANGENTS = outer


_RECOMPUTE_AFTER_TANGENTS = False
"""True while `hessian_vector_product` traces its pass. There `checkpoint`'s recomputations
wait for the tangents of their output cotangents as well, and each block's outputs wait for
their own tangents in the forward pass (`_wait_for_tangents`). Without the first, XLA ran the
whole primal backward pass, recomputing every block, before the tangent pass that needs those
values; without the second, it computed the forward pass's tangents only where the backward
pass reads them, keeping every block's activations until then (the meta step's plan at batch
4 / 8: `docs/memory.md`). Only there: the wait cannot be differentiated in reverse mode."""


def checkpoint(fn: Callable) -> Callable:
    """`fn` recomputed in the derivative passes that need its intermediates, which are then
    not stored: a custom VJP that keeps `fn`'s inputs and, in the backward pass, recomputes
    `fn` from inputs made to wait for the cotangents of its outputs (`_after`).

    Not `jax.checkpoint`: in XLA:CPU's plans of its passes, activations of the forward pass
    stayed live into the backward one, and a Hessian-vector product recomputed every block
    before the tangents came back, holding them all. f_A's product on 16 frames of 112 x 112
    plans 1.43 GiB that way, 1.53 with nothing recomputed, 0.97 with this."""

    @jax.custom_vjp
    def recomputed(*args):
        return fn(*args)

    def forward(*args):
        outputs = fn(*args)
        if _RECOMPUTE_AFTER_TANGENTS:
            outputs = _after(outputs, outputs, with_tangents=True)
        return outputs, args

    def backward(args, cotangents):
        _, pullback = jax.vjp(fn, *_after(args, cotangents, _RECOMPUTE_AFTER_TANGENTS))
        return pullback(cotangents)

    recomputed.defvjp(forward, backward)
    return recomputed


def _after(tree, awaited, with_tangents: bool = False):
    """`tree`'s floating arrays times 1 + 0 x (a reduction of every floating array of
    `awaited`): the same values, which XLA can neither merge with another computation of
    them nor compute before all of `awaited` exists; `with_tangents`, nor before the tangents
    of `awaited` in a forward-mode pass over this one. The reduction is a minimum, which cannot
    overflow; a non-finite element of `awaited` makes them NaN (a loss-scaled step skips such a
    step)."""
    leaves, structure = jax.tree.flatten(tree)
    floats = [i for i, leaf in enumerate(leaves) if _is_float(leaf)]
    awaited_floats = [a for a in jax.tree.leaves(awaited) if _is_float(a)]
    if not floats or not awaited_floats:
        return tree
    signal = sum(jax.numpy.min(a).astype("float32") for a in awaited_floats)
    wait = _wait_for_tangents if with_tangents else _wait
    for i, leaf in zip(floats, wait([leaves[i] for i in floats], signal)):
        leaves[i] = leaf
    return jax.tree.unflatten(structure, leaves)


def _wait(arrays: list, signal):
    """`arrays` times 1 + 0 x `signal`, held constant."""
    one = 1 + 0 * jax.lax.stop_gradient(signal)
    return [a * one.astype(a.dtype) for a in arrays]


@jax.custom_jvp
def _wait_for_tangents(arrays: list, signal):
    """`_wait`, whose forward-mode derivative makes both `arrays` and their tangents wait for
    the tangent of `signal` as well (a primal that reads a tangent: forward mode only)."""
    return _wait(arrays, signal)


@_wait_for_tangents.defjvp
def _wait_for_tangents_jvp(primals, tangents):
    (arrays, signal), (arrays_dot, signal_dot) = primals, tangents
    awaited = signal + signal_dot
    return _wait(arrays, awaited), _wait(arrays_dot, awaited)


def _is_float(array) -> bool:
    return jax.numpy.issubdtype(array.dtype, jax.numpy.floating)


def recomputes_checkpoints() -> bool:
    """True: `checkpoint` recomputes."""
    return True


def max_pool_dtype() -> None:
    """None: max pools compute in the dtype policy's dtype (JAX differentiates a 16-bit pool
    twice)."""
    return None


def replica_position() -> tuple[int, int]:
    """(0, 1): a JAX step is already one program over the global batch."""
    return 0, 1


def gather_replicas(x: Tensor) -> Tensor:
    """`x` itself: a JAX step is already one program over the global batch."""
    return x
