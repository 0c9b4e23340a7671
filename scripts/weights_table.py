"""Write the README's table of pretrained weight files from `keras_privacy.known_weights`.

    python scripts/weights_table.py          # print the table
    python scripts/weights_table.py --write  # replace it in README.md

The README holds the generated Markdown between `<!-- weights:start -->` and
`<!-- weights:end -->`; `tests/test_pretrained.py` fails when the two differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generated_section import read_section, table_cell, write_section  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
START, END = "<!-- weights:start -->", "<!-- weights:end -->"


def weights_table() -> str:
    """One row per known weight file: the file and what it starts, its source, the command
    that makes it, and the flags and configs that take it."""
    sys.path.insert(0, str(REPO))
    from keras_privacy.known_weights import KNOWN_WEIGHTS

    lines = ["| file: model | source | command | flags: configs |", "| --- | --- | --- | --- |"]
    for weights in KNOWN_WEIGHTS:
        configs = ", ".join(f"`{c}`" for c in weights.configs) or "none yet"
        flags = ", ".join(f"`--{flag}`" for flag in weights.flags)
        lines.append(
            f"| `{weights.path}`: {table_cell(weights.model)} | {table_cell(weights.source)} | "
            f"`{table_cell(weights.command)}` | {flags}: {configs} |"
        )
    return "\n".join(lines) + "\n"


def readme_table(readme: Path = README) -> str:
    """The table as the README holds it now (between the markers)."""
    return read_section(readme, START, END)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_section(README, START, END, weights_table())
        print(f"weights table written to {README}")
    elif sys.argv[1:]:
        raise SystemExit(__doc__)
    else:
        print(weights_table(), end="")
