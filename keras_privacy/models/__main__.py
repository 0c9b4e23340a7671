"""`python -m keras_privacy.models list | count NAME [--num_classes N]`."""

from __future__ import annotations

import argparse
import sys

import keras
import numpy as np

from keras_privacy.cli import positive_int
from keras_privacy.models import registry


def trainable_parameters(model: keras.Model) -> int:
    """Parameters as PyTorch counts them: trainable weights only (no BatchNorm statistics)."""
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def main(argv: list[str] | None = None) -> int:
    """Run the command of `argv` (default: the command line): list the models or count one;
    returns the exit status (an unknown name: a usage error listing every kind's names)."""
    parser = argparse.ArgumentParser(prog="python -m keras_privacy.models")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="Every registered model name, by kind.")
    count = commands.add_parser("count", help="Parameter count of a registered model.")
    count.add_argument("name")
    count.add_argument("--num_classes", type=positive_int, default=None)
    args = parser.parse_args(argv)
    kinds = (
        ("anonymizers", registry.ANONYMIZERS),
        ("action models", registry.ACTION_MODELS),
        ("image models", registry.IMAGE_MODELS),
    )
    if args.command == "list":
        for kind, models in kinds:
            print(f"{kind}: {', '.join(sorted(models))}")
        return 0
    if args.name in registry.ACTION_MODELS:
        model = registry.build_action_model(args.name, num_classes=args.num_classes or 400)
    elif args.name in registry.IMAGE_MODELS:
        model = registry.build_image_backbone(args.name, num_classes=args.num_classes)
    elif args.name in registry.ANONYMIZERS:
        model = registry.build_anonymizer(args.name)
    else:
        known = "; ".join(f"{kind}: {', '.join(sorted(models))}" for kind, models in kinds)
        count.error(f"unknown model {args.name!r} ({known})")
    print(f"{args.name}: {trainable_parameters(model):,} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
