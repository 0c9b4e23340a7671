"""How a message names a setting: `<name>` where the library writes it, `--name` where the user
reads it.

The library never spells a setting (or a command's option) as a flag: its messages name one as
`<name>`, a family as `<eval_action_*>`, and `SettingError` shows them as the command line spells
them, `--name`, the one spelling a user meets in the configs, the README and the scripts. This
module is the command line's spelling, in one place; it imports nothing of the package, so the
settings' checks (`config.setting`), the data readers and training use it without an import
cycle.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"<([a-z][a-z0-9_]*\*?)>")
"""A setting named in a template: `<batch_size>`, or a family `<eval_action_*>`."""


def spell(template: str) -> str:
    """`template` with every setting it names as `<name>` spelt as its flag, `--name`."""
    return _NAME.sub(r"--\1", template)


class SettingError(ValueError):
    """A setting that makes no sense. `template` names each setting as `<name>`; the message
    spells them as flags (`spell`)."""

    def __init__(self, template: str):
        self.template = template
        super().__init__(spell(template))
