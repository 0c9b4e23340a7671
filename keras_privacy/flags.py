"""absl flags made from `ExperimentConfig`, for the scripts only.

`define_flags` and `config_from_flags` take the flag values object from the script; nothing in the
library reads the global `FLAGS`, so notebooks never meet `UnparsedFlagAccessError`.
"""

from __future__ import annotations

import dataclasses

from absl import flags

from keras_privacy.config import ExperimentConfig

_DEFINERS = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
}


def define_flags(flag_values: flags.FlagValues, config_cls=ExperimentConfig) -> None:
    """Define one flag per field of `config_cls`, with its default and help text."""
    hints = {"bool": bool, "int": int, "float": float, "str": str}
    for field in dataclasses.fields(config_cls):
        kind = hints[field.type] if isinstance(field.type, str) else field.type
        help_text = f"[{field.metadata.get('group', 'misc')}] {field.metadata.get('help', '')}"
        _DEFINERS[kind](field.name, field.default, help_text, flag_values=flag_values)


def config_from_flags(flag_values: flags.FlagValues, config_cls=ExperimentConfig):
    """The config whose fields take the parsed flag values."""
    return config_cls(**{f.name: flag_values[f.name].value for f in dataclasses.fields(config_cls)})
