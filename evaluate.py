"""Evaluate anonymizers and baselines with fresh target models, and write the trade-off report.

    python evaluate.py --flagfile=configs/synthetic.cfg             # after train.py, same flags
    python evaluate.py --flagfile=configs/hmdb_vispr.cfg --eval_methods=raw,blur_strong

For every method of --eval_methods a new action model is trained and tested on anonymized clips
and a new privacy model on anonymized images (one of each per architecture of --eval_action_model
and --eval_privacy_model), on the datasets of --eval_protocol; the report (report.json,
report.md, tradeoff.png, frames.png) goes to --eval_dir (default run_dir/evaluation), all but
frames.png (drawn at the end) rewritten after each method, so a restarted evaluation skips the
methods it finished. With
--seeds=N, each seed's run (run_dir/seed_K) is evaluated into its own report (seed_K in the
report folder) and summary.md / summary.json / summary_tradeoff.png in the report folder give
the mean +- std across seeds and which methods dominate which. See the README for every
flag.

A bad input (annotation, model file) is reported as one line; its traceback goes to the report
folder's error.log, and to the terminal with --verbose. A bad flag value is a usage error: this
text, then the flag and its value, before any work.
"""

import sys

from absl import app, flags, logging

from keras_privacy.cli import refuse_a_file, require_known_flags, run_command, script_argv

ARGV = script_argv(sys.argv)  # flag files expanded; the backend set before Keras is imported

from keras_privacy.flags import define_script_flags, select_backend, validated_config  # noqa: E402

define_script_flags(flags.FLAGS)
require_known_flags(flags.FLAGS, sys.argv)  # a flag file's bad line, named with its line


def main(argv):
    select_backend(flags.FLAGS, argv)
    config = validated_config(flags.FLAGS, training=False)

    from keras_privacy.evaluation import protocol

    logging.set_verbosity(logging.INFO)
    log_file = protocol.report_dir(config) / "error.log"
    return run_command(
        lambda: evaluate(config),
        flags.FLAGS.verbose,
        log_file,
        interrupted="interrupted (Ctrl-C or SIGTERM): report.json keeps the methods finished; "
        "the same command goes on from them",
    )


def evaluate(config) -> None:
    """Evaluate every seed's run of `config` into its report, then summarise the seeds."""
    from keras_privacy import distribute
    from keras_privacy.evaluation import protocol
    from keras_privacy.evaluation.anonymizations import require_one_training_setting
    from keras_privacy.evaluation.report import summarize_seeds

    for warning in (
        protocol.ignored_run_settings(config),
        protocol.settings_without_effect(config),
    ):
        if warning:
            logging.warning(warning)
    if config.compilation_cache:  # the fresh target models' training steps
        distribute.use_compilation_cache(config.compilation_cache)
    runs = config.seed_runs()
    for run in runs:
        refuse_a_file(protocol.report_dir(run), "--eval_dir" if run.eval_dir else "--run_dir")
        protocol.refuse_another_evaluation(run)
    require_one_training_setting(runs)
    # The methods first: their settings are checked before any frame of a test set is written.
    methods = [protocol.methods_of(run) for run in runs]
    data = protocol.evaluation_data(config)
    reports = {}
    cache_dir = protocol.report_dir(config) / "cache"  # the seeds share the decoded data
    for run, run_methods in zip(runs, methods, strict=True):
        out_dir = protocol.report_dir(run)
        reports[run.seed] = protocol.evaluate(run, data, run_methods, out_dir, cache_dir)
        print(reports[run.seed].markdown())
        print(f"report, trade-off plot and frames in {out_dir}")
    if config.seeds > 1:
        out_dir = protocol.report_dir(config)
        summarize_seeds(reports, out_dir)
        print((out_dir / "summary.md").read_text(encoding="utf-8"))
        print(f"mean +- std over seeds in {out_dir / 'summary.md'} and summary.json")


if __name__ == "__main__":
    app.run(main, argv=ARGV)
