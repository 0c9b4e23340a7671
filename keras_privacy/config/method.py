"""What the method optimises: the loss weights, VITA's and meta's supervised adversaries,
SPAct's variants, and where each method-specific setting has an effect (`FLAG_SCOPES`)."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import TYPE_CHECKING

from keras_privacy.config.run import METHODS
from keras_privacy.config.setting import SettingError, at_least_one, described, names, one_of
from keras_privacy.methods.spact import SSL_ADVERSARIES
from keras_privacy.methods.steps import CONTRASTIVE_VIEWS
from keras_privacy.methods.vita import ACTION_SCHEDULES, BUDGET_LOSSES

if TYPE_CHECKING:
    from keras_privacy.config import ExperimentConfig

SELF_SUPERVISED = ("spact", "penalty")
IMAGE_ADVERSARIES = ("ntxent", "rotnet", "moco")


@dataclasses.dataclass(frozen=True)
class FlagScope:
    """Where a flag has an effect: under `methods`, with one of `ssl_adversaries` (for the
    SPAct methods), and only while the flag `needs` is on (not its default), or, written
    "flag=value", has that value. A flag that is also the default of `fallback_for` acts under
    every method while that one is unset."""

    methods: tuple[str, ...]
    ssl_adversaries: tuple[str, ...] = SSL_ADVERSARIES
    needs: str = ""
    fallback_for: str = ""

    def note(self) -> str:
        """Where the flag acts, as the sentence its help ends with ("Only with ...")."""
        parts = [] if self.methods == METHODS else [f"--method={' / '.join(self.methods)}"]
        if self.ssl_adversaries != SSL_ADVERSARIES:
            parts.append(f"--ssl_adversary={' / '.join(self.ssl_adversaries)}")
        if self.needs:
            parts.append(f"--{self.needs}" if "=" in self.needs else f"--{self.needs} set")
        note = "Only with " + ", ".join(parts)
        if self.fallback_for:
            note += f", or as the default of --{self.fallback_for}"
        return note + "."


FLAG_SCOPES = {
    "pair_sampler": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
    "privacy_backbone": FlagScope(SELF_SUPERVISED, fallback_for="eval_privacy_model"),
    "projection_hidden": FlagScope(SELF_SUPERVISED),
    "projection_dim": FlagScope(SELF_SUPERVISED),
    "contrastive_views": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
    "privacy_weights": FlagScope(SELF_SUPERVISED),
    "action_weight": FlagScope(SELF_SUPERVISED),
    "temperature": FlagScope(SELF_SUPERVISED),
    "penalty_weight": FlagScope(("spact", "penalty", "vita")),
    "penalty_budget": FlagScope(("spact", "penalty", "vita"), needs="penalty_weight"),
    "adversary_models": FlagScope(("vita", "meta")),
    "budget_loss": FlagScope(("vita",)),
    "budget_batch_statistics": FlagScope(("vita",)),
    "action_threshold": FlagScope(("vita", "meta")),
    "adversary_threshold": FlagScope(("vita", "meta")),
    "restart_every": FlagScope(("vita",)),
    "action_schedule": FlagScope(("vita",)),
    "action_max_updates": FlagScope(("vita",), needs="action_schedule=validation_loop"),
    "action_validation_every": FlagScope(("vita",), needs="action_schedule=validation_loop"),
    "action_fresh_clips": FlagScope(("vita",)),
    "action_moves_anonymizer": FlagScope(("vita",)),
    "adversary_updates_per_step": FlagScope(("vita",)),
    "budget_pretrain_updates": FlagScope(("vita",)),
    "meta_fraction": FlagScope(("meta",)),
    "meta_alpha": FlagScope(("meta",)),
    "meta_first_order": FlagScope(("meta",)),
    "meta_recompute": FlagScope(("meta",)),
    "ssl_adversary": FlagScope(SELF_SUPERVISED),
    "moco_queue_size": FlagScope(SELF_SUPERVISED, ("moco",)),
    "moco_momentum": FlagScope(SELF_SUPERVISED, ("moco",)),
    "triplet_weight": FlagScope(SELF_SUPERVISED),
    "triplet_margin": FlagScope(SELF_SUPERVISED, needs="triplet_weight"),
    "embedding_weights": FlagScope(SELF_SUPERVISED, needs="triplet_weight"),
    "adversary_crop": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
    "adversary_jitter": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
    "init_lr_patience": FlagScope(METHODS, needs="init_lr_drop"),
}
"""The flags that only some methods, or some settings, read (from `training.py`, the trainers
and the input pipeline); every other flag acts under every method. `validate_settings_in_use`
refuses a flag set to a non-default value where it has no effect. `pair_sampler` also picks the two
frames per clip that the identity initialisation reconstructs, but its purpose, SPAct's
temporal positive pairs, exists only with an image adversary of the SPAct methods."""


@dataclasses.dataclass
class MethodSettings:
    """What the method optimises: the loss weights, VITA's and meta's supervised adversaries,
    SPAct's variants."""

    action_weight: float = field(default=1.0, metadata=described("w_T of L_T for f_A.", "train"))
    privacy_weight: float = field(
        default=1.0,
        metadata=described(
            "Weight of the privacy term in f_A's loss: w_B of -L_B (SPAct), gamma of the "
            "budget term (VITA, meta).",
            "train",
        ),
    )
    temperature: float = field(default=0.1, metadata=described("NT-Xent temperature.", "train"))
    penalty_weight: float = field(
        default=0.0, metadata=described("lambda of the RMS penalty (0 = off).", "train")
    )
    penalty_budget: float = field(default=0.3, metadata=described("B of the RMS penalty.", "train"))
    # Supervised adversaries (vita, meta)
    adversary_models: str = field(
        default="resnet_tiny",
        metadata=described(
            "Comma-separated image models: VITA's budget ensemble / meta's training attack "
            "models. Trained on privacy labels (init: <privacy_init_*>, minimax: <privacy_lr>).",
            "adversary",
        ),
    )
    budget_loss: str = field(
        default="max_bce",
        metadata=described(
            "VITA's budget term on the anonymized action clips: max_bce (the authors': per clip, "
            "BCE of the frame-averaged logits against all ones, max over the ensemble, batch "
            "mean) | entropy (negative binary entropy in its place) | image_max_bce (earlier "
            "form: BCE against all ones on the anonymized privacy images, max of batch means).",
            "adversary",
        ),
    )
    budget_batch_statistics: bool = field(
        default=True,
        metadata=described(
            "VITA: in the f_A update the budget models normalise by the anonymized batch's own "
            "statistics (BatchNorm in training mode, its moving averages kept; the authors') "
            "| false: inference mode, as SPAct's f_B.",
            "adversary",
        ),
    )
    action_threshold: float = field(
        default=0.7,
        metadata=described(
            "f_T updates while its accuracy is below this (T1; VITA's validation_loop: on the "
            "held-out clips); 0 = never.",
            "adversary",
        ),
    )
    adversary_threshold: float = field(
        default=0.95,
        metadata=described(
            "An adversary updates while its batch accuracy is below this (T2); for VITA, 1 = "
            "no threshold (the authors'); 0 = never (meta with both at 0: f_A every step).",
            "adversary",
        ),
    )
    restart_every: int = field(
        default=0,
        metadata=described(
            "VITA: restart the budget models after every N minimax steps (0 = never).",
            "adversary",
        ),
    )
    action_schedule: str = field(
        default="validation_loop",
        metadata=described(
            "VITA's f_T updates per step: validation_loop (the authors': while f_T's accuracy "
            "on held-out clips < <action_threshold>, at most <action_max_updates>) | "
            "batch_gate (one update, applied while its training-batch accuracy is below it).",
            "adversary",
        ),
    )
    action_max_updates: int = field(
        default=5,
        metadata=described(
            "VITA: the bound of the validation_loop's f_T updates a step.", "adversary"
        ),
    )
    action_validation_every: int = field(
        default=10,
        metadata=described(
            "VITA's validation_loop: every Nth training video (by index) is held out of "
            "training as the validation clips.",
            "adversary",
        ),
    )
    action_fresh_clips: bool = field(
        default=False,
        metadata=described(
            "VITA's validation_loop: each f_T update on a batch of training clips of its own "
            "and each accuracy check on a batch of held-out clips of its own (the authors'), "
            "read with the step: <action_max_updates> more batches of each a step | false: "
            "every f_T update of a step on the step's clips, every check on one held-out batch.",
            "adversary",
        ),
    )
    action_moves_anonymizer: bool = field(
        default=True,
        metadata=described(
            "VITA: f_T's update also moves f_A, with an Adam of its own at <action_lr> (the "
            "authors').",
            "adversary",
        ),
    )
    adversary_updates_per_step: int = field(
        default=5,
        metadata=described(
            "VITA: updates of every budget model per step, each on its own privacy batch (the "
            "authors: 5).",
            "adversary",
        ),
    )
    budget_pretrain_updates: int = field(
        default=0,
        metadata=described(
            "VITA: budget-model updates alone (a multiple of <adversary_updates_per_step>) at "
            "the start of the minimax and after each restart (the authors: 200).",
            "adversary",
        ),
    )
    meta_fraction: float = field(
        default=0.6,
        metadata=described(
            "Meta: share of attributes / attack models in support sets, and of the images "
            "with positives on both sides of an attribute split that go to the support set.",
            "adversary",
        ),
    )
    meta_alpha: float = field(
        default=5e-4, metadata=described("Meta: virtual-training step size alpha.", "adversary")
    )
    meta_first_order: bool = field(
        default=False,
        metadata=described(
            "Meta: first-order meta-gradient (no second-order term). Beta is <anonymizer_lr> "
            "(an SGD step, as the paper).",
            "adversary",
        ),
    )
    meta_recompute: bool = field(
        default=True,
        metadata=described(
            "Meta: recompute f_A block by block in the meta update's derivative passes instead "
            "of storing its activations (JAX; TensorFlow stores them): less memory, one more "
            "forward pass of f_A per pass, the same meta-gradient.",
            "adversary",
        ),
    )
    # SPAct variants (spact, penalty)
    ssl_adversary: str = field(
        default="ntxent",
        metadata=described(
            "Self-supervised adversary of the minimax (SPAct Table 5): ntxent | rotnet (4-way "
            "rotation prediction) | moco (momentum encoder and queue); its init stays NT-Xent. "
            "spatiotemporal (SPAct Table 3): f_B is a video encoder trained, in its init too, by "
            "NT-Xent on two clips of each video (needs <eval_privacy_model>).",
            "variants",
        ),
    )
    moco_queue_size: int = field(
        default=4096, metadata=described("MoCo: K, negatives kept in the queue.", "variants")
    )
    moco_momentum: float = field(
        default=0.999, metadata=described("MoCo: m of the key encoder's EMA.", "variants")
    )
    triplet_weight: float = field(
        default=0.0,
        metadata=described(
            "TeD-SPAD temporal triplet term in the action loss of f_A and f_T: the clip, its "
            "frames augmented again and another clip of the video, on TeD-SPAD's embedding head "
            "(trained with f_T) of f_T's pooled features (0 = off; TeD-SPAD: 0.1 of an action "
            "loss weighted 0.7).",
            "variants",
        ),
    )
    triplet_margin: float = field(
        default=1.0, metadata=described("Margin mu of the triplet term (TeD-SPAD: 1).", "variants")
    )
    contrastive_views: str = field(
        default="images",
        metadata=described(
            "Positive pairs of an image f_B (its init and the minimax): images (two augmented "
            "views of each privacy image, the authors' code) | frames (two frames of each clip, "
            "chosen by <pair_sampler>, the paper's Sec. 3.2.2) | both (one NT-Xent over both).",
            "variants",
        ),
    )
    adversary_crop: float = field(
        default=0.0,
        metadata=described(
            "Smallest area of a random resized crop (and flip) of f_A's output before an image "
            "f_B; > 0 also makes both sides of a pair augmentations of one anonymized image "
            "(0 = off).",
            "variants",
        ),
    )
    adversary_jitter: float = field(
        default=0.0,
        metadata=described(
            "Strength of a random colour jitter (SimCLR's colour distortion) of f_A's outputs "
            "before an image f_B, in both halves of the minimax (0 = off; SimCLR: 1).",
            "variants",
        ),
    )

    def adversary_model_names(self) -> list[str]:
        """The image models of `adversary_models`, in order."""
        return names(self.adversary_models)


def validate_settings_in_use(config: ExperimentConfig) -> None:
    """Refuse every setting of `FLAG_SCOPES` set (to a non-default value) where it has no
    effect, naming each and why."""
    defaults = {f.name: f.default for f in dataclasses.fields(config)}

    def is_set(name: str) -> bool:
        return getattr(config, name) != defaults[name]

    def needed(needs: str) -> bool:
        name, _, value = needs.partition("=")
        return str(getattr(config, name)) == value if value else is_set(name)

    unused = []
    for name, scope in FLAG_SCOPES.items():
        if not is_set(name) or (scope.fallback_for and not is_set(scope.fallback_for)):
            continue
        setting = f"<{name}>={getattr(config, name)}"
        if config.method not in scope.methods:
            why = f"<method>={config.method} does not read it ({', '.join(scope.methods)} do)"
            if scope.fallback_for:
                why += f", and <{scope.fallback_for}> is set"
        elif config.ssl_adversary not in scope.ssl_adversaries:
            why = (
                f"<ssl_adversary>={config.ssl_adversary} does not read it "
                f"({', '.join(scope.ssl_adversaries)} do)"
            )
        elif scope.needs and not needed(scope.needs):
            name, _, value = scope.needs.partition("=")
            why = (
                f"<{name}> is {getattr(config, name)}, it acts at {value}"
                if value
                else f"<{name}> is off ({defaults[name]})"
            )
        else:
            continue
        unused.append(f"{setting}: {why}")
    if unused:
        raise SettingError(
            "flags set where they have no effect (leave them at their defaults): "
            + "; ".join(unused)
        )


def validate_method(config: ExperimentConfig) -> None:
    """The loss weights, the supervised adversaries' schedule and SPAct's variants."""
    one_of("budget_loss", config.budget_loss, BUDGET_LOSSES)
    if not config.temperature > 0:
        raise SettingError(f"<temperature> must be positive, got {config.temperature}")
    for name in ("action_weight", "privacy_weight"):
        if getattr(config, name) < 0:
            raise SettingError(
                f"<{name}> cannot be negative, got {getattr(config, name)} (a negative weight "
                "would train f_A against its own objective)"
            )
    if config.penalty_weight < 0 or config.penalty_budget < 0:
        raise SettingError("<penalty_weight> and <penalty_budget> cannot be negative")
    if config.method == "penalty" and config.penalty_weight == 0:
        raise SettingError("<method>=penalty needs <penalty_weight> > 0 (lambda of the penalty)")
    one_of("contrastive_views", config.contrastive_views, CONTRASTIVE_VIEWS)
    if (
        config.ssl_adversary == "moco"
        and config.moco_queue_size < config.batch_size + config.privacy_batch_size
    ):
        raise SettingError(
            f"<moco_queue_size>={config.moco_queue_size} must hold at least one batch of keys "
            f"(<batch_size> + <privacy_batch_size> = "
            f"{config.batch_size + config.privacy_batch_size})"
        )
    if not 0 <= config.moco_momentum < 1:
        raise SettingError(f"<moco_momentum> must be in [0, 1), got {config.moco_momentum}")
    if config.adversary_jitter < 0:
        raise SettingError(f"<adversary_jitter> cannot be negative, got {config.adversary_jitter}")
    if not 0 <= config.adversary_crop <= 1:
        raise SettingError(f"<adversary_crop> must be in [0, 1], got {config.adversary_crop}")
    if config.triplet_weight < 0 or config.triplet_margin < 0:
        raise SettingError("<triplet_weight> and <triplet_margin> cannot be negative")
    for name in ("action_threshold", "adversary_threshold"):
        if not 0 <= getattr(config, name) <= 1:
            raise SettingError(f"<{name}> must be in [0, 1], got {getattr(config, name)}")
    if not 0 < config.meta_fraction < 1:
        raise SettingError(f"<meta_fraction> must be in (0, 1), got {config.meta_fraction}")
    if config.restart_every < 0 or config.meta_alpha < 0:
        raise SettingError("<restart_every> and <meta_alpha> cannot be negative")
    one_of("action_schedule", config.action_schedule, ACTION_SCHEDULES)
    at_least_one(config, ("action_max_updates", "adversary_updates_per_step"))
    if config.action_fresh_clips and config.action_schedule != "validation_loop":
        raise SettingError(
            "<action_fresh_clips> needs <action_schedule>=validation_loop (the batch_gate's one "
            "f_T update takes the step's clips)"
        )
    if config.action_validation_every < 2:
        raise SettingError(
            f"<action_validation_every> must be at least 2, got {config.action_validation_every}"
        )
    if (
        config.budget_pretrain_updates < 0
        or config.budget_pretrain_updates % config.adversary_updates_per_step
    ):
        raise SettingError(
            f"<budget_pretrain_updates>={config.budget_pretrain_updates} must be a "
            "non-negative multiple of <adversary_updates_per_step>="
            f"{config.adversary_updates_per_step}"
        )
