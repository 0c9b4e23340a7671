"""`python -m keras_privacy.models list | count NAME [--num_classes N]`."""

from __future__ import annotations

import argparse

import numpy as np

from keras_privacy.models import registry


def trainable_parameters(model) -> int:
    """Parameters as PyTorch counts them: trainable weights only (no BatchNorm statistics)."""
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def main(argv: list[str] | None = None) -> None:
    """Run the command of `argv` (default: the command line): list the models or count one."""
    parser = argparse.ArgumentParser(prog="python -m keras_privacy.models")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="Every registered model name, by kind.")
    count = commands.add_parser("count", help="Parameter count of a registered model.")
    count.add_argument("name")
    count.add_argument("--num_classes", type=int, default=None)
    args = parser.parse_args(argv)

    if args.command == "list":
        for kind, models in (
            ("anonymizers", registry.ANONYMIZERS),
            ("action models", registry.ACTION_MODELS),
            ("image models", registry.IMAGE_MODELS),
        ):
            print(f"{kind}: {', '.join(sorted(models))}")
        return
    if args.name in registry.ACTION_MODELS:
        model = registry.build_action_model(args.name, num_classes=args.num_classes or 400)
    elif args.name in registry.IMAGE_MODELS:
        model = registry.build_image_backbone(args.name, num_classes=args.num_classes)
    else:
        model = registry.build_anonymizer(args.name)
    print(f"{args.name}: {trainable_parameters(model):,} parameters")


if __name__ == "__main__":
    main()
