"""The command-line layer: absl flags made from `ExperimentConfig`, for the scripts only.

One setting is one flag of the same name (`--batch_size`), with its default, help text and
group; help texts and messages, which name a setting as `<name>`, spell it as that flag
through `keras_privacy.spelling`. `define_flags` and `config_from_flags` take the flag values
object from the script (`parse_config` makes one of its own, for a list of arguments); nothing
in the library reads the global `FLAGS`, so notebooks never meet `UnparsedFlagAccessError`.
`select_backend` and `validated_config` are what `train.py` and `evaluate.py` do first.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence

from absl import app, flags

from keras_privacy.cli import BACKENDS, expand_flagfiles
from keras_privacy.config import FLAG_SCOPES, ExperimentConfig
from keras_privacy.spelling import spell

_DEFINERS = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
}


def define_flags(flag_values: flags.FlagValues) -> None:
    """Define one flag per field of `ExperimentConfig`, with its default and help text (ending,
    for a flag of `FLAG_SCOPES`, with where it acts)."""
    hints = {"bool": bool, "int": int, "float": float, "str": str}
    for field in dataclasses.fields(ExperimentConfig):
        kind = hints[field.type] if isinstance(field.type, str) else field.type
        help_text = (
            f"[{field.metadata.get('group', 'misc')}] {spell(field.metadata.get('help', ''))}"
        )
        if field.name in FLAG_SCOPES:
            help_text += f" {FLAG_SCOPES[field.name].note()}"
        _DEFINERS[kind](field.name, field.default, help_text, flag_values=flag_values)


def config_from_flags(flag_values: flags.FlagValues) -> ExperimentConfig:
    """The config whose fields take the parsed flag values."""
    fields = dataclasses.fields(ExperimentConfig)
    return ExperimentConfig(**{f.name: flag_values[f.name].value for f in fields})


def parse_config(argv: Sequence[str]) -> ExperimentConfig:
    """The config of command-line arguments (`--flagfile` and its includes too), parsed as
    `train.py` parses them but not checked: a caller validates where it needs to."""
    flag_values = flags.FlagValues()
    define_flags(flag_values)
    _define_backend(flag_values)  # a flag file of train.py may hold it; Keras runs already
    flag_values(["keras_privacy", *expand_flagfiles(argv)])
    return config_from_flags(flag_values)


def define_script_flags(flag_values: flags.FlagValues) -> None:
    """The flags of `train.py` and `evaluate.py`: every setting, `--backend` and `--verbose`."""
    define_flags(flag_values)
    _define_backend(flag_values)
    flags.DEFINE_bool(
        "verbose",
        False,
        "Show the traceback of an error, not only its message.",
        flag_values=flag_values,
    )


def _define_backend(flag_values: flags.FlagValues) -> None:
    flags.DEFINE_enum(
        "backend",
        None,
        list(BACKENDS),
        "Keras backend (default: $KERAS_BACKEND or tensorflow).",
        flag_values=flag_values,
    )


def select_backend(flag_values: flags.FlagValues, argv: list[str]) -> None:
    """Refuse positional arguments, and make `--backend` Keras's backend (KERAS_BACKEND); a
    UsageError when Keras already runs on another one."""
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    backend = flag_values.backend
    if backend:
        os.environ["KERAS_BACKEND"] = backend
    if "keras" in sys.modules and backend:
        import keras

        if keras.backend.backend() != backend:
            raise app.UsageError("--backend must be chosen before keras is imported")


def validated_config(flag_values: flags.FlagValues, training: bool = True) -> ExperimentConfig:
    """The `ExperimentConfig` of the parsed flags, checked (for an evaluation without
    `training`: `ExperimentConfig.validate`); a bad setting is a UsageError."""
    config = config_from_flags(flag_values)
    try:
        config.validate(training)
    except ValueError as error:
        raise app.UsageError(str(error)) from error
    return config
