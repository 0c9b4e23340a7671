"""What every command line does with an error, in one place.

A user error (a missing or malformed file, a bad flag value, an unsafe or unfitting model file,
a diverged run: `USER_ERRORS`) is printed as one message, `error: ...`, naming the file and the
problem, and the command exits with status 1 (the data CLI: 2). Its traceback is shown only
with `--verbose`, and written to the command's log file when it has one. Any other exception is
a bug and keeps its traceback.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

USER_ERRORS = (ValueError, OSError, RuntimeError)
"""What bad input raises here: ValueError (DatasetFormatError, ConversionError, Keras' refusal
of a model), OSError (FileNotFoundError) and RuntimeError (CheckpointError,
TrainingDivergedError, VideoDecodeError)."""


def backend_from_argv(argv: list[str]) -> None:
    """Set KERAS_BACKEND from a `--backend=NAME` (or `--backend NAME`) on the command line,
    before anything imports Keras: the settings' modules import it, and Keras fixes its backend
    on import. The flag itself is still parsed and checked (`flags.select_backend`)."""
    for position, argument in enumerate(argv):
        if argument.startswith("--backend="):
            os.environ["KERAS_BACKEND"] = argument.split("=", 1)[1]
        elif argument == "--backend" and position + 1 < len(argv):
            os.environ["KERAS_BACKEND"] = argv[position + 1]


def run_command(
    command: Callable[[], int | None],
    verbose: bool = False,
    log_file: str | os.PathLike | None = None,
    status: int = 1,
) -> int:
    """Run `command` and return its exit status (None counts as 0); a user error becomes one
    message on stderr and exit status `status`, or propagates with its traceback when
    `verbose`.

    The traceback is appended to `log_file` when its folder exists (a run folder that the
    command created), and the message says where."""
    try:
        return command() or 0
    except USER_ERRORS as error:
        if verbose:
            raise
        message = f"error: {str(error) or type(error).__name__}"
        if log_file is not None and Path(log_file).parent.is_dir():
            with open(log_file, "a", encoding="utf-8") as log:
                traceback.print_exc(file=log)
            message += f" (traceback in {log_file})"
        print(message, file=sys.stderr)
    # The failed command's objects (held by the error's frames until now) are freed while the
    # interpreter is whole: a tf.data iterator freed at its shutdown can hang the exit.
    gc.collect()
    return status
