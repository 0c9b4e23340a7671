"""Read and replace a generated section of a document: the text between two marker lines.

The README's flag tables (`flag_table.py`) and pretrained weights table (`weights_table.py`),
and docs/paper_settings.md's tables (`deviations_table.py`), are generated into such sections,
so tests can compare them with what the code generates now.
"""

from __future__ import annotations

from pathlib import Path


def table_cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def read_section(document: Path, start: str, end: str) -> str:
    """The text between the markers `start` and `end` of `document`."""
    text = document.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{document} has no {start} ... {end} section")
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n") + "\n"


def write_section(document: Path, start: str, end: str, content: str) -> None:
    """Replace the text between the markers `start` and `end` of `document` by `content`."""
    read_section(document, start, end)  # checks the markers
    before, rest = document.read_text().split(start, 1)
    after = rest.split(end, 1)[1]
    document.write_text(f"{before}{start}\n{content}{end}{after}")
