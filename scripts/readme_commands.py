"""Print a quick-start command of the README, so CI and tests run exactly what it says.

    python scripts/readme_commands.py main   # install + train + evaluate on the built-in data
    python scripts/readme_commands.py test   # install + run the tests on both backends

The README marks each command with an HTML comment `<!-- quickstart:NAME -->` on the line
before its fenced code block.
"""

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def quickstart_command(name: str, readme: Path = README) -> str:
    """The shell command in the fenced block after `<!-- quickstart:name -->`."""
    match = re.search(
        rf"<!-- quickstart:{re.escape(name)} -->\s*```(?:bash|sh)?\n(.*?)```",
        readme.read_text(),
        flags=re.DOTALL,
    )
    if match is None:
        raise SystemExit(f"{readme} has no quick-start command marked {name!r}")
    return " ".join(line.strip().rstrip("\\") for line in match.group(1).strip().splitlines())


if __name__ == "__main__":
    print(quickstart_command(sys.argv[1]))
