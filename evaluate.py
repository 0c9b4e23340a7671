"""Evaluate anonymizers and baselines with fresh target models, and write the trade-off report.

    python evaluate.py --flagfile=configs/synthetic.cfg             # after train.py, same flags
    python evaluate.py --flagfile=configs/hmdb_vispr.cfg --eval_methods=raw,blur_strong

For every method of --eval_methods a new action model is trained and tested on anonymized clips
and a new privacy model on anonymized images (one of each per architecture of --eval_action_model
and --eval_privacy_model), on the datasets of --eval_protocol; the report (report.json,
report.md, tradeoff.png, frames.png) goes to --eval_dir (default run_dir/evaluation) and is
rewritten after each method, so a restarted evaluation skips the methods it finished. See the
README for every flag.
"""

import os
import sys

from absl import app, flags, logging

from keras_privacy.config import ExperimentConfig
from keras_privacy.flags import config_from_flags, define_flags

define_flags(flags.FLAGS, ExperimentConfig)
flags.DEFINE_enum(
    "backend", None, ["tensorflow", "jax"], "Keras backend (default: $KERAS_BACKEND or tensorflow)."
)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if flags.FLAGS.backend:
        os.environ["KERAS_BACKEND"] = flags.FLAGS.backend
    if "keras" in sys.modules and flags.FLAGS.backend:
        import keras

        if keras.backend.backend() != flags.FLAGS.backend:
            raise app.UsageError("--backend must be chosen before keras is imported")
    config = config_from_flags(flags.FLAGS, ExperimentConfig)
    try:
        config.validate()
    except ValueError as error:
        raise app.UsageError(str(error)) from error

    from keras_privacy.evaluation import protocol

    logging.set_verbosity(logging.INFO)
    try:
        data = protocol.evaluation_data(config)
        methods = protocol.methods_of(config)
    except (FileNotFoundError, ValueError) as error:
        raise app.UsageError(str(error)) from error
    out_dir = protocol.report_dir(config)
    report = protocol.evaluate(config, data, methods, out_dir)
    print(report.markdown())
    print(f"report, trade-off plot and frames in {out_dir}")


if __name__ == "__main__":
    app.run(main)
