"""Write the table of the papers' settings against our configs, so it cannot go stale.

    python scripts/deviations_table.py          # print the tables
    python scripts/deviations_table.py --write  # replace them in docs/paper_settings.md

The rows are `keras_privacy.paper_settings.SETTINGS`. The document holds the generated Markdown
between `<!-- settings:start -->` and `<!-- settings:end -->`; `tests/test_paper_settings.py`
fails when the two differ, or when a row's value is not what its configs set.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generated_section import read_section, table_cell, write_section  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOCUMENT = REPO / "docs" / "paper_settings.md"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def _ours(flag: str, ours: str) -> str:
    if not flag:
        return f"no flag: {ours}"
    return f"`--{flag}={ours}`" if ours else f"`--{flag}` unset"


def settings_tables(settings=None, methods=None) -> str:
    """One Markdown table per method, each row a setting."""
    if settings is None or methods is None:
        sys.path.insert(0, str(REPO))
        from keras_privacy import paper_settings

        settings, methods = paper_settings.SETTINGS, paper_settings.METHODS
    blocks = []
    for method, title in methods.items():
        lines = [
            f"**{title}**",
            "",
            "| Setting | Paper | Source | Configs | Ours | Same, or why not |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in settings:
            if row.method != method:
                continue
            configs = ", ".join(f"`{name}`" for name in row.configs)
            cells = (
                row.setting,
                row.paper,
                row.source,
                configs,
                _ours(row.flag, row.ours),
                row.why,
            )
            lines.append("| " + " | ".join(table_cell(cell) for cell in cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def document_tables(document: Path = DOCUMENT) -> str:
    """The tables as the document holds them now (between the markers)."""
    return read_section(document, START, END)


def write_document(document: Path = DOCUMENT) -> None:
    """Replace the document's tables with freshly generated ones."""
    write_section(document, START, END, settings_tables())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_document()
        print(f"settings tables written to {DOCUMENT}")
    elif sys.argv[1:]:
        raise SystemExit(__doc__)
    else:
        print(settings_tables(), end="")
