"""What every command line does with its arguments and with an error, in one place.

Flag files (`--flagfile=PATH`) are expanded here (`expand_flagfiles`) rather than by absl, so
that a nested relative PATH is found next to the file that names it, a missing or circular
one is named with the line that includes it, `--backend` is seen inside one, and a line that
is not a flag, an unknown flag or a bad value is named with its file and line
(`require_known_flags`), where absl would name neither.

A user error (a missing or malformed file, a bad flag value, an unsafe or unfitting model file,
a diverged run: `USER_ERRORS`) is printed as one message, `error: ...`, naming the file and the
problem, and the command exits with status 1 (the data CLI: 2). Its traceback is shown only
with `--verbose`, and written to the command's log file when it has one. Any other exception is
a bug and keeps its traceback. SIGTERM (what `timeout`, `docker stop`, systemd and a cluster's
scheduler preempting a job send) stops a command as Ctrl-C does.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

BACKENDS = ("tensorflow", "jax")
"""The Keras backends the library runs on (`--backend`, KERAS_BACKEND)."""
INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports
Ctrl-C)."""
USER_ERRORS = (ValueError, OSError, RuntimeError)
"""What bad input raises here: ValueError (DatasetFormatError, ConversionError, Keras' refusal
of a model), OSError (FileNotFoundError) and RuntimeError (CheckpointError,
TrainingDivergedError, VideoDecodeError)."""


class FlagfileError(ValueError):
    """A flag file that is missing, unreadable or includes itself."""


def script_argv(argv: Sequence[str]) -> list[str]:
    """The arguments of `train.py` or `evaluate.py` (`argv`, program name first), flag files
    expanded, with KERAS_BACKEND set from a `--backend` among them before anything imports
    Keras (the settings' modules import it, and Keras fixes its backend on import). A bad flag
    file or backend exits with its message (Keras would fail on import, with a traceback).
    Once the script has defined its flags, `require_known_flags` checks the flag files'."""
    try:
        expanded = expand_flagfiles(argv)
    except FlagfileError as error:
        raise SystemExit(f"error: {error}") from None
    from_flag = backend_from_argv(expanded)
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    if backend not in BACKENDS:
        where = "--backend" if from_flag else "the environment variable KERAS_BACKEND"
        raise SystemExit(f"error: {where} is {backend!r}; choose {' or '.join(BACKENDS)}")
    return expanded


def expand_flagfiles(argv: Sequence[str]) -> list[str]:
    """`argv` with each `--flagfile=PATH` (or `--flagfile PATH`) replaced by the arguments its
    file holds, as absl reads them: one per line, blank lines and `#` or `//` comments skipped,
    nested flag files expanded in place, a later flag winning. An empty PATH (absl ignores it:
    an unset variable) raises FlagfileError, as does a flag that a later flag file would set
    to another value over the command line's or an including file's earlier line, or over an
    earlier flag file's (on the command line, or included by the same file), which would lose
    without a word: set it after the `--flagfile`, or in one of the two files only.

    A relative PATH on the command line is the working directory's. In a flag file it is looked
    for next to that file (the folder it is in, then, for a link, its target's), so that a
    config's includes are found from any directory, then (as absl reads it) in the working
    directory. A flag file's line that is not one flag, as absl would misread it, raises
    FlagfileError naming the file and line: a line without a leading dash (absl takes it for
    a positional argument), a comment after a value, a value in quotes (absl keeps both as
    part of the value), or a flag the same file has set already (an included file's may be
    set again after the include: the including file's wins)."""
    return [argument for argument, _ in _expanded(argv)]


def require_known_flags(flag_values: Any, argv: Sequence[str]) -> None:
    """Exit with a message naming the file and line of a flag-file argument of `argv` that
    `flag_values` (absl's, the script's flags defined) refuses: an unknown flag or a value
    that does not parse. absl's own message names the flag alone."""
    from absl import flags

    parsed = copy.deepcopy(flag_values)
    for argument, origin in _expanded(argv):
        if origin is None:
            continue
        try:
            parsed(["flag file", argument])
        except flags.Error as error:
            raise SystemExit(f"error: {origin}: {error}") from None


def _expanded(argv: Sequence[str]) -> list[tuple[str, str | None]]:
    """`expand_flagfiles`' arguments, each with the "file:line" it comes from (None: the
    command line)."""
    result, rest, given = [], list(argv), {}
    while rest:
        argument = rest.pop(0)
        if argument in ("--flagfile", "-flagfile"):
            if not rest:
                raise FlagfileError(f"{argument} with no file")
            result += _flagfile_not_overriding(given, rest.pop(0))
        elif argument.startswith(("--flagfile=", "-flagfile=")):
            result += _flagfile_not_overriding(given, argument.split("=", 1)[1])
        else:
            result.append((argument, None))
            if argument == "--":
                return result + [(argument, None) for argument in rest]
            if argument.startswith("-"):
                given[_flag_name(argument)] = (argument, f"{argument} on the command line")
    return result


def _flagfile_not_overriding(given: dict[str, tuple[str, str]], name: str) -> list[tuple[str, str]]:
    """The arguments of the command line's flag file `name`, refused where one sets a flag of
    `given` (the command line's earlier flags and flag files'); its flags join `given`, so that
    a later flag file does not override them without a word either."""
    arguments = _not_overriding(given, _flagfile_arguments(name, []))
    given.update(_where_set(arguments))
    return arguments


def _not_overriding(
    earlier: dict[str, tuple[str, str]], arguments: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """`arguments` (a flag file's, with their "file:line"), refused with FlagfileError where
    one sets a flag of `earlier` (flag name -> the argument that set it and where) to another
    value, which it would override."""
    for argument, origin in arguments:
        name = _flag_name(argument)
        if name in earlier and earlier[name][0] != argument:
            raise FlagfileError(
                f"{origin}: {argument!r} would override {earlier[name][1]} (the later flag "
                "wins): set a flag after the --flagfile that sets it too, or in one file only"
            )
    return arguments


def _where_set(arguments: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Flag name -> (the argument that set it last, its "file:line") of flag-file arguments."""
    return {_flag_name(argument): (argument, origin) for argument, origin in arguments}


def _flagfile_arguments(name: str, chain: list[tuple[Path, int]]) -> list[tuple[str, str]]:
    """The arguments of the flag file `name`, each with its "file:line"; `chain` holds the
    (file, line) of each flag file that led to it, where it is looked for and what the
    messages name."""
    including = " -> ".join(f"{file}:{line}" for file, line in chain)
    named_by = f" (named at {including})" if chain else ""
    if not name:
        raise FlagfileError(f"--flagfile= names no file{named_by} (an unset variable?)")
    try:
        path = Path(name).expanduser()
        if chain and not path.is_absolute():
            including_file = chain[-1][0]
            folders = dict.fromkeys([including_file.parent, including_file.resolve().parent])
            found = [folder / path for folder in folders if (folder / path).is_file()]
            if not found and not path.is_file():
                where = " or ".join(str(folder) for folder in folders)
                raise FlagfileError(
                    f"{name}: no such flag file{named_by}, neither in {where} nor in the "
                    "working directory"
                )
            path = found[0] if found else path
        if path.resolve() in [file.resolve() for file, _ in chain]:
            raise FlagfileError(f"{path}: includes itself through {including}")
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, RuntimeError, UnicodeDecodeError) as error:
        problem = "no such file" if isinstance(error, FileNotFoundError) else error
        raise FlagfileError(f"{name}: cannot read this flag file{named_by}: {problem}") from None
    result, set_at = [], {}
    # Lines end at \n, \r\n or \r only, as absl's readlines() ends them.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        if line.startswith(("--flagfile=", "-flagfile=")):
            included = _flagfile_arguments(line.split("=", 1)[1], [*chain, (path, number)])
            result += _not_overriding(_where_set(result), included)
            continue
        problem = _misread_line(line)
        if problem:
            raise FlagfileError(f"{path}:{number}: {line!r}: {problem}")
        name = _flag_name(line)
        if name in set_at:
            raise FlagfileError(
                f"{path}:{number}: {line!r}: --{name} is set again (first at line "
                f"{set_at[name]}): a flag file sets a flag once, and absl would keep the last"
            )
        set_at[name] = number
        result.append((line, f"{path}:{number}"))
    return result


def _flag_name(line: str) -> str:
    """The flag a flag file's line sets: `--name=value`, `--name` or `--noname` (a boolean)."""
    name = line.lstrip("-").partition("=")[0]
    return name[2:] if "=" not in line and name.startswith("no") else name


def _misread_line(line: str) -> str | None:
    """What absl would misread in a flag file's `line` (stripped, not a comment), or None."""
    if not line.startswith("-"):
        return "not a flag: a flag file holds one --name=value a line"
    value = line.partition("=")[2]
    if re.search(r"\s#", value):
        return "a comment goes on a line of its own (after a value, it would be part of it)"
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return "quotes would be part of the value: write it without them"
    return None


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a count or a size), refused as a usage
    error naming the value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def refuse_a_file(path: str | os.PathLike, flag: str = "--out") -> None:
    """Refuse by name a folder to write into that is a file, or lies under one (`flag`: what
    named it), before any work: the OS's message would come later and name a path inside it."""
    for folder in (Path(path), *Path(path).parents):
        if folder.exists() and not folder.is_dir():
            where = "names a file" if folder == Path(path) else f"lies under the file {folder}"
            raise NotADirectoryError(f"{path}: {flag} {where}; name a folder (made if missing)")


def backend_from_argv(argv: list[str]) -> bool:
    """Set KERAS_BACKEND from a `--backend=NAME` (or `--backend NAME`, one dash or two) among
    the arguments, before anything imports Keras: the settings' modules import it, and Keras
    fixes its backend on import. The flag itself is still parsed and checked
    (`flags.select_backend`). Whether the arguments set it."""
    found = False
    for position, argument in enumerate(argv):
        if argument.startswith(("--backend=", "-backend=")):
            os.environ["KERAS_BACKEND"] = argument.split("=", 1)[1]
            found = True
        elif argument in ("--backend", "-backend") and position + 1 < len(argv):
            os.environ["KERAS_BACKEND"] = argv[position + 1]
            found = True
    return found


def run_command(
    command: Callable[[], int | None],
    verbose: bool = False,
    log_file: str | os.PathLike | None = None,
    status: int = 1,
    interrupted: str = "interrupted (Ctrl-C or SIGTERM)",
    process: str = "",
) -> int:
    """Run `command` and return its exit status (None counts as 0); a user error becomes one
    message on stderr and exit status `status`, Ctrl-C or SIGTERM the line `interrupted` (what
    was kept) and status `INTERRUPTED`; either propagates with its traceback when `verbose`.

    The traceback is appended to `log_file` when its folder exists (a run folder that the
    command created), and the message says where. `process` names the process in a job of
    several (`distribute.process_name`): its error line and its traceback's header say it,
    since the processes' output mixes (`srun` without `--label`) and they share `log_file`."""
    try:
        with sigterm_as_interrupt():
            return command() or 0
    except USER_ERRORS as error:
        if verbose:
            raise
        who = f" ({process})" if process else ""
        message = f"error{who}: {str(error) or type(error).__name__}"
        if log_file is not None and Path(log_file).parent.is_dir():
            message += _log_traceback(log_file, process)
        print(message, file=sys.stderr)
    except KeyboardInterrupt:
        if verbose:
            raise
        print(interrupted, file=sys.stderr)
        status = INTERRUPTED
    # The failed command's objects (held by the error's frames until now) are freed while the
    # interpreter is whole: a tf.data iterator freed at its shutdown can hang the exit.
    gc.collect()
    return status


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside, as Ctrl-C does, so that what a command keeps
    on Ctrl-C (a closed recording, written checkpoints, finished report rows) is kept and said
    (Python's default for SIGTERM ends the process at once, without a word, and can leave a
    hidden partial file). Only on the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _log_traceback(log_file: str | os.PathLike, process: str = "") -> str:
    """Append the exception being handled to `log_file`, after a line naming `process` where
    given; what the message then says of it (where it is, or why it could not be written: a
    full disk)."""
    try:
        with open(log_file, "a", encoding="utf-8") as log:
            if process:
                log.write(f"{process}:\n")
            traceback.print_exc(file=log)
    except OSError as error:
        return f" (traceback not written to {log_file}: {error.strerror or error})"
    return f" (traceback in {log_file})"
