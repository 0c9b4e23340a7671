"""Write the README's table of flags from the `ExperimentConfig` fields, so it cannot go stale.

    python scripts/flag_table.py          # print the tables
    python scripts/flag_table.py --write  # replace them in README.md

Every field of `keras_privacy.config.ExperimentConfig` is a flag of `train.py` and `evaluate.py`;
its metadata holds the help text and the group (`described(text, group)` in the settings
section that defines it, `keras_privacy/config/`). The README holds the
generated Markdown between `<!-- flags:start -->` and `<!-- flags:end -->`; `tests/test_docs.py`
fails when the two differ.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generated_section import read_section, table_cell, write_section  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
START, END = "<!-- flags:start -->", "<!-- flags:end -->"
GROUP_TITLES = {
    "run": "Run",
    "data": "Data",
    "models": "Models",
    "train": "Training (phases, learning rates, loss weights)",
    "adversary": "Supervised adversaries (vita, meta)",
    "variants": "SPAct variants (spact, penalty)",
    "eval": "Evaluation",
}
"""Headings of the known groups; any other group is headed by its own name."""


def _default(value) -> str:
    if isinstance(value, str):
        return f"`{value}`" if value else "(empty)"
    return f"`{value}`"


def flag_tables(config_cls=None) -> str:
    """One Markdown table per flag group (in the order the groups first appear), each row a
    flag, its default and its help text; a flag that only some methods read (`FLAG_SCOPES`,
    refused elsewhere) says where it acts."""
    sys.path.insert(0, str(REPO))
    from keras_privacy.config import FLAG_SCOPES
    from keras_privacy.spelling import spell

    if config_cls is None:
        from keras_privacy.config import ExperimentConfig as config_cls
    groups: dict[str, list[dataclasses.Field]] = {}
    for field in dataclasses.fields(config_cls):
        groups.setdefault(field.metadata.get("group", "misc"), []).append(field)
    blocks = []
    for group, fields in groups.items():
        lines = [
            f"**{GROUP_TITLES.get(group, group)}**",
            "",
            "| Flag | Default | Meaning |",
            "| --- | --- | --- |",
        ]
        for field in fields:
            help_text = table_cell(spell(field.metadata.get("help", "")))
            if field.name in FLAG_SCOPES:
                help_text += f" *{FLAG_SCOPES[field.name].note()}*"
            lines.append(
                f"| `--{field.name}` | {table_cell(_default(field.default))} | {help_text} |"
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def readme_tables(readme: Path = README) -> str:
    """The flag tables as the README holds them now (between the markers)."""
    return read_section(readme, START, END)


def write_readme(readme: Path = README) -> None:
    """Replace the README's flag tables with freshly generated ones."""
    write_section(readme, START, END, flag_tables())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_readme()
        print(f"flag tables written to {README}")
    elif sys.argv[1:]:
        raise SystemExit(__doc__)
    else:
        print(flag_tables(), end="")
