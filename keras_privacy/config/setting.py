"""What every settings section shares: help metadata, the error that names a setting, checks.

Validators name a setting as `<name>` in their messages and never spell it as a flag: how a
setting is spelt for the user is the command line's business (`keras_privacy.spelling`).
"""

from __future__ import annotations

from keras_privacy.spelling import SettingError


def described(text: str, group: str) -> dict:
    """A setting's metadata: its help text, which names other settings as `<name>` (the flags
    and the README's tables spell them `--name`), and the group (README table) it is listed
    under."""
    return {"help": text, "group": group}


def one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    """Raise SettingError when the setting `name` is not one of `allowed`."""
    if value not in allowed:
        raise SettingError(f"<{name}>={value!r} is not one of {', '.join(allowed)}")


def at_least_one(config: object, names: tuple[str, ...]) -> None:
    """Raise SettingError naming the first of the integer settings `names` below 1."""
    for name in names:
        if getattr(config, name) < 1:
            raise SettingError(f"<{name}> must be at least 1, got {getattr(config, name)}")


def not_negative(config: object, names: tuple[str, ...]) -> None:
    """Raise SettingError naming the first of the settings `names` below 0."""
    for name in names:
        if getattr(config, name) < 0:
            raise SettingError(f"<{name}> cannot be negative, got {getattr(config, name)}")


def names(text: str) -> list[str]:
    """The names of a comma-separated value, in order."""
    return [name.strip() for name in text.split(",") if name.strip()]
