"""Dataset command line: counts, cache preparation and the synthetic benchmark.

    python -m keras_privacy.data stats --dataset ucf101 --annotations DIR [--root DIR] [--json]
    python -m keras_privacy.data prepare --dataset hmdb51 --annotations DIR --root DIR --out DIR
        [--split 1] [--short_side 128] [--leave_out PA_HMDB51_ANNOTATIONS]
    python -m keras_privacy.data synthetic --out DIR [--seed 0] [--version 4] [--style dusk]
    python -m keras_privacy.data arrays --flagfile configs/synthetic.cfg --out DIR [--epochs 2]
        [--models_from RUN_DIR] [any train.py flag, e.g. --steps_per_epoch=4]

`stats` needs only the annotation files: without --root (or with videos absent) it counts what
the lists name and says how many files are missing, naming the first few (`--json`: all).
`prepare` names the files that failed or are missing (the first few, then a count; all are in
each subset's manifest.json), reads every cache back, and exits with status 1 when a subset's
cache is empty or does not read back. Each manifest records what its subset was read from
(dataset, split, subset, VISPR's attributes, the PA-HMDB51 videos left out), which training
checks against its flags.
`arrays` exports a SPAct minimax as NumPy arrays and models for training without TensorFlow
(`keras_privacy.data.arrays`).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from keras_privacy.cli import positive_int, refuse_a_file, run_command
from keras_privacy.data.cache import (
    failure_line,
    prepare_image_cache,
    prepare_video_cache,
    verify_cache,
)
from keras_privacy.data.examples import Split
from keras_privacy.data.hmdb51 import read_hmdb51
from keras_privacy.data.sources import pa_hmdb51_videos, without_pa_hmdb51, write_benchmark
from keras_privacy.data.ucf101 import read_ucf101
from keras_privacy.data.vispr import read_vispr

VIDEO_DATASETS = ("ucf101", "hmdb51")
DATASETS = (*VIDEO_DATASETS, "vispr")


def read_dataset(
    name: str, annotations: str, root: str | None, split: int, attributes: str
) -> dict[str, Split]:
    """The subsets of dataset `name` as its reader returns them."""
    if name == "ucf101":
        return read_ucf101(annotations, root, split=split)
    if name == "hmdb51":
        return read_hmdb51(annotations, root, split=split)
    return read_vispr(annotations, root, attributes=attributes)


def split_stats(split: Split) -> dict:
    """Counts of one subset: examples, per class, per attribute, missing files (and their
    names, as "path: reason")."""
    per_class = collections.Counter(
        split.class_names[e.label] for e in split.examples if e.label >= 0
    )
    per_attribute = {
        name: sum(1 for e in split.examples if len(e.privacy) > i and e.privacy[i])
        for i, name in enumerate(split.attribute_names)
    }
    return {
        "examples": len(split.examples),
        "missing": len(split.missing),
        "missing_files": list(split.missing),
        "per_class": dict(sorted(per_class.items())),
        "per_attribute": per_attribute,
    }


def stats(subsets: dict[str, Split]) -> dict:
    """Counts of every subset; `train` and `test` also hold the example counts at the top."""
    first = next(iter(subsets.values()))
    result = {
        "num_classes": len(first.class_names),
        "num_attributes": len(first.attribute_names),
        "subsets": {name: split_stats(split) for name, split in subsets.items()},
    }
    for name in ("train", "test"):
        if name in subsets:
            result[name] = len(subsets[name].examples)
    return result


def _print_stats(result: dict) -> None:
    print(f"classes: {result['num_classes']}, attributes: {result['num_attributes']}")
    for name, subset in result["subsets"].items():
        print(f"{name}: {subset['examples']} examples, {subset['missing']} missing files")
        for attribute, count in subset["per_attribute"].items():
            print(f"  {attribute}: {count}")
        _print_some(f"{name}: missing", subset["missing_files"], listed_in="--json's output")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m keras_privacy.data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("--verbose", action="store_true", help="the traceback of an error too")
    for command in ("stats", "prepare"):
        sub = commands.add_parser(command, parents=[verbose])
        sub.add_argument("--dataset", required=True, choices=DATASETS)
        sub.add_argument("--annotations", required=True, help="split lists / annotation folder")
        sub.add_argument("--root", default=None, help="folder of the videos or images")
        sub.add_argument("--split", type=int, default=1, choices=(1, 2, 3), help="official split")
        sub.add_argument("--attributes", default="vispr1", help="VISPR attribute subset")
    commands.choices["stats"].add_argument("--json", action="store_true", help="one JSON object")
    prepare = commands.choices["prepare"]
    prepare.add_argument("--out", required=True, help="cache folder; one sub-folder per subset")
    prepare.add_argument("--short_side", type=positive_int, default=128)
    prepare.add_argument("--workers", type=positive_int, default=None)
    prepare.add_argument(
        "--leave_out",
        default=None,
        help="HMDB51 only: a PA-HMDB51 PrivacyAttributes/ folder whose videos the train subset "
        "leaves out (for --eval_protocol=pa_hmdb51, which tests on them)",
    )
    synthetic = commands.add_parser("synthetic", parents=[verbose])
    synthetic.add_argument("--out", required=True)
    synthetic.add_argument("--seed", type=int, default=0)
    synthetic.add_argument("--version", type=int, default=4, choices=(4, 5))
    synthetic.add_argument("--style", default="", help="version 5's render style, e.g. dusk")
    arrays = commands.add_parser("arrays", parents=[verbose])
    arrays.add_argument("--flagfile", required=True, help="a training config")
    arrays.add_argument("--out", required=True, help="the folder to write")
    arrays.add_argument("--epochs", type=positive_int, default=2, help="minimax epochs to export")
    arrays.add_argument("--models_from", default=None, help="a finished run's folder")
    return parser


def _arrays(args: argparse.Namespace, flags: Sequence[str]) -> int:
    """The `arrays` command: the config of `--flagfile` and `flags`, exported."""
    from absl import flags as absl_flags

    from keras_privacy.data.arrays import export_minimax_arrays
    from keras_privacy.flags import parse_config

    try:
        config = parse_config([f"--flagfile={args.flagfile}", *flags])
    except absl_flags.Error as error:
        raise ValueError(str(error)) from error
    config.validate()
    settings = export_minimax_arrays(config, args.out, args.epochs, args.models_from)
    print(
        f"{args.out}: {settings['epochs']} epochs of {settings['steps_per_epoch']} minimax steps, "
        f"models from {settings['source']['models_from']}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command of `argv` (default: the command line); returns the exit status."""
    args, unknown = _parser().parse_known_args(argv)
    if unknown and args.command != "arrays":
        _parser().error(f"unrecognized arguments: {' '.join(unknown)}")
    return run_command(lambda: _run(args, unknown), args.verbose, status=2)


def _run(args: argparse.Namespace, unknown: Sequence[str]) -> int:
    """The command of `args` (`unknown`: the train.py flags of `arrays`)."""
    if getattr(args, "out", None):
        refuse_a_file(args.out)
    if args.command == "arrays":
        return _arrays(args, unknown)
    if args.command == "synthetic":
        paths = write_benchmark(
            args.out, seed=args.seed, version=args.version, style=args.style, setting="out"
        )
        print(f"synthetic benchmark written to {paths.root}")
        return 0
    if args.root is not None and not Path(args.root).is_dir():
        raise FileNotFoundError(f"{args.root}: --root is not a folder")
    subsets = read_dataset(args.dataset, args.annotations, args.root, args.split, args.attributes)
    if args.command == "stats":
        result = stats(subsets)
        if args.json:
            print(json.dumps(result))
        else:
            _print_stats(result)
        return 0
    if args.root is None:
        raise ValueError("prepare needs --root (the files to decode)")
    if args.leave_out:
        if args.dataset != "hmdb51":
            raise ValueError("--leave_out takes PA-HMDB51's videos out of HMDB51 only")
        listed = len(subsets["train"])
        subsets["train"] = without_pa_hmdb51(subsets["train"], args.leave_out)
        print(
            f"train: {listed - len(subsets['train'])} of the split's {listed} videos left out, "
            f"being PA-HMDB51's ({args.leave_out})"
        )
    prepare = prepare_video_cache if args.dataset in VIDEO_DATASETS else prepare_image_cache
    status = 0
    for name, split in subsets.items():
        out = f"{args.out}/{name}"
        source = {"dataset": args.dataset, "subset": name}
        if args.dataset in VIDEO_DATASETS:
            source["split"] = args.split
        if args.leave_out and name == "train":
            source["pa_hmdb51_left_out"] = sorted(pa_hmdb51_videos(args.leave_out))
        manifest = prepare(
            split, out, short_side=args.short_side, workers=args.workers, source=source
        )
        cut_short = manifest["cut_short"]
        print(
            f"{name}: {manifest['num_records']} cached"
            + (f" ({len(cut_short)} cut short, as much as decodes)" if cut_short else "")
            + f", {len(manifest['failures'])} failed, {len(manifest['missing'])} missing"
        )
        _print_some(f"{name}: cut short", [failure_line(f) for f in cut_short])
        if unrecorded := manifest["cut_short_unrecorded"]:
            print(
                f"{name}: {len(unrecorded)} of {len(manifest['shards'])} shards were kept from "
                "a prepare that did not record the files it cached cut short (prepare into a "
                "new --out to list them)"
            )
        _print_some(f"{name}: failed", [failure_line(f) for f in manifest["failures"]])
        _print_some(f"{name}: missing", manifest["missing"])
        problem = _cache_problem(out, manifest)
        if problem:
            print(f"error: {out}: {problem}", file=sys.stderr)
            status = 1
    return status


SHOWN = 5
"""How many failed or missing files `stats` and `prepare` name on the terminal."""


def _print_some(title: str, lines: list[str], listed_in: str = "the manifest") -> None:
    """The first SHOWN `lines` on stderr under `title`, and how many more there are (all of
    them `listed_in`)."""
    if not lines:
        return
    print(f"{title} ({len(lines)}):", file=sys.stderr)
    for line in lines[:SHOWN]:
        print(f"  {line}", file=sys.stderr)
    if len(lines) > SHOWN:
        print(f"  ... and {len(lines) - SHOWN} more, listed in {listed_in}", file=sys.stderr)


def _cache_problem(out: str, manifest: dict) -> str:
    """Why the cache just written in `out` is unusable ('' when it reads back whole)."""
    if manifest["num_records"] == 0:
        return "no example could be cached, so the subset is empty"
    report = verify_cache(out)
    if not report["ok"]:
        return (
            f"the cache does not read back: {'; '.join(report['errors'][:SHOWN])}: remove each "
            "shard named and the .json beside it, and run this prepare again, which writes "
            "those shards alone"
        )
    return ""


if __name__ == "__main__":
    sys.exit(main())
