"""Train a privacy-preserving anonymizer.

    python train.py --flagfile=configs/synthetic.cfg            # built-in benchmark, 2 CPU cores
    python train.py --flagfile=configs/ucf101_vispr.cfg --backend=jax

The backend comes from --backend, else from KERAS_BACKEND (default tensorflow). A run resumes
from its last checkpoint in --run_dir when restarted. --seeds=N trains seeds seed..seed+N-1 one
after the other, each in run_dir/seed_K. See the README for every flag.

A bad input (annotation, model file) or a diverged run is reported as one line; its traceback
goes to run_dir/error.log, and to the terminal with --verbose. A bad flag value is a usage
error: this text, then the flag and its value, before any work.
"""

import sys
from pathlib import Path

from absl import app, flags

from keras_privacy.cli import require_known_flags, run_command, script_argv

ARGV = script_argv(sys.argv)  # flag files expanded; the backend set before Keras is imported

from keras_privacy.flags import define_script_flags, select_backend, validated_config  # noqa: E402

define_script_flags(flags.FLAGS)
require_known_flags(flags.FLAGS, sys.argv)  # a flag file's bad line, named with its line


def main(argv):
    select_backend(flags.FLAGS, argv)
    config = validated_config(flags.FLAGS)

    from keras_privacy import distribute

    try:
        distribute.initialize_processes(
            config.num_processes, config.process_id, config.coordinator_address
        )
    except ValueError as error:
        raise app.UsageError(str(error)) from error

    def train_every_seed() -> None:
        from keras_privacy.training import require_the_seeds_layout, train

        require_the_seeds_layout(config)
        for run in config.seed_runs():
            result = train(run)
            if not distribute.is_chief():
                continue
            print(f"trained models in {result.run_dir}:")
            for name, path in result.model_paths.items():
                print(f"  {name}: {path}")

    log_file = Path(config.run_dir) / "error.log"
    return distribute.run_stopping_together(
        lambda: run_command(
            train_every_seed,
            flags.FLAGS.verbose,
            log_file,
            interrupted="interrupted (Ctrl-C or SIGTERM): the checkpoints are kept; the same "
            "command resumes from the last",
            process=distribute.process_name(),
        )
    )


if __name__ == "__main__":
    app.run(main, argv=ARGV)
