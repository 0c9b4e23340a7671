"""Every command line reports a user error as one message naming the file and the problem, with
the traceback only under --verbose (or in the run's error.log)."""

import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import pytest
import tiny_models

from keras_privacy import anonymize, export
from keras_privacy.cli import run_command
from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.methods.spact import SPAct

REPO = Path(__file__).resolve().parents[1]


def test_a_user_error_is_one_line_and_its_traceback_goes_to_the_log(tmp_path, capsys):
    def broken():
        raise FileNotFoundError("data/list.txt: annotation file not found")

    log = tmp_path / "error.log"
    assert run_command(broken, log_file=log) == 1
    assert capsys.readouterr().err == (
        f"error: data/list.txt: annotation file not found (traceback in {log})\n"
    )
    assert "Traceback" in log.read_text() and "in broken" in log.read_text()
    assert run_command(broken, log_file=tmp_path / "no_such_run" / "error.log", status=2) == 2
    assert capsys.readouterr().err == "error: data/list.txt: annotation file not found\n"
    assert not (tmp_path / "no_such_run").exists()
    with pytest.raises(FileNotFoundError):
        run_command(broken, verbose=True)
    # A process of a multi-process job names itself: the processes' output and log mix.
    assert run_command(broken, log_file=log, process="process 1 of 2 on node7") == 1
    assert capsys.readouterr().err == (
        f"error (process 1 of 2 on node7): data/list.txt: annotation file not found (traceback "
        f"in {log})\n"
    )
    assert "\nprocess 1 of 2 on node7:\nTraceback" in log.read_text()


@pytest.mark.parametrize(
    "module, argv",
    [
        ("keras_privacy.models.__main__", ["count", "r3d_18", "--num_classes", "{value}"]),
        (
            "keras_privacy.convert",
            ["w.pt", "--arch", "r3d_18", "--out", "o.keras", "--num_classes", "{value}"],
        ),
        ("keras_privacy.data.__main__", ["arrays", "--out", "o", "--epochs", "{value}"]),
    ],
)
@pytest.mark.parametrize(
    "value, message", [("0", "must be at least 1, got 0"), ("2.5", "not a whole number: '2.5'")]
)
def test_a_count_below_one_or_not_whole_is_a_usage_error(module, argv, value, message, capsys):
    main = importlib.import_module(module)
    with pytest.raises(SystemExit) as exit_info:
        main.main([part.format(value=value) for part in argv])
    assert exit_info.value.code == 2
    assert f": {message}" in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_status_130(tmp_path, capsys):
    def interrupted():
        raise KeyboardInterrupt

    assert run_command(interrupted, log_file=tmp_path / "error.log", interrupted="kept") == 130
    assert capsys.readouterr().err == "kept\n"
    assert not (tmp_path / "error.log").exists()  # no traceback: nothing went wrong
    with pytest.raises(KeyboardInterrupt):
        run_command(interrupted, verbose=True)


def test_sigterm_stops_a_command_as_ctrl_c_does(capsys):
    """What a cluster's scheduler, `timeout` and `docker stop` send: the same line and status."""

    def terminated():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # the handler raises before this ends

    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    assert run_command(terminated, interrupted="kept") == 130
    assert time.monotonic() - started < 5
    assert capsys.readouterr().err == "kept\n"
    assert signal.getsignal(signal.SIGTERM) is before  # put back after the command


def test_a_log_that_cannot_be_written_still_gives_the_error(tmp_path, capsys):
    """A full disk fails the log too: the error is still the one line, saying so."""

    def broken():
        raise OSError(28, "No space left on device")

    log = tmp_path / "error.log"
    log.mkdir()  # opening it to append fails
    assert run_command(broken, log_file=log) == 1
    assert capsys.readouterr().err == (
        "error: [Errno 28] No space left on device (traceback not written to "
        f"{log}: Is a directory)\n"
    )


def test_a_bug_keeps_its_traceback():
    def bug():
        return {}["missing key"]

    with pytest.raises(KeyError):
        run_command(bug)


@keras.saving.register_keras_serializable(package="test_cli")
class MyMinimax(SPAct):
    """A user's own trainer, registered: `load_keras_anonymizer` loads it, then refuses it."""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny anonymizer, and a model with a Lambda layer (Python code that loading would run)."""
    folder = tmp_path_factory.mktemp("models")
    tiny_models.anonymizer().save(folder / "tiny.keras")
    inputs = keras.Input((8, 8, 3))
    keras.Model(inputs, keras.layers.Lambda(lambda x: x * 2)(inputs)).save(folder / "lambda.keras")
    pooled = keras.layers.GlobalAveragePooling2D()(inputs)
    keras.Model(inputs, pooled).save(folder / "encoder.keras")
    frames = keras.Input((None, None, 3))
    halved = keras.layers.AveragePooling2D(2)(frames)
    keras.Model(frames, keras.layers.Conv2D(3, 1)(halved)).save(folder / "halving.keras")
    (folder / "empty.keras").write_bytes(b"")
    tiny_models.damaged_keras_file(folder / "tiny.keras", folder / "damaged.keras")
    submodels = (tiny_models.anonymizer, tiny_models.action_model, tiny_models.privacy_encoder)
    SPAct(*(build() for build in submodels)).save(folder / "trainer.keras")
    MyMinimax(*(build() for build in submodels)).save(folder / "my_minimax.keras")
    from keras_privacy.methods.init import IdentityInit

    IdentityInit(tiny_models.anonymizer()).save(folder / "identity_init.keras")
    return folder


@pytest.mark.parametrize(
    "output, model, message",
    [
        (
            "no_such_folder/out.mp4",
            "tiny.keras",
            "{tmp}/no_such_folder: the output folder does not",
        ),
        ("out.mp4", "gone.keras", "{models}/gone.keras: no such anonymizer file"),
        ("out.mp4", "", "{models}: a folder (a SavedModel export?), not a .keras file: give"),
        ("out.mp4", "lambda.keras", "{models}/lambda.keras: not loadable as a Keras anonymizer ("),
        ("out.mp4", "empty.keras", "{models}/empty.keras: not a .keras archive (0 bytes: empty"),
        (
            "out.mp4",
            "damaged.keras",
            "{models}/damaged.keras: a damaged .keras archive (Bad CRC-32 for file "
            "'model.weights.h5'): copy it again, or train it again",
        ),
        (
            "out.mp4",
            "trainer.keras",
            "{models}/trainer.keras: a saved SPAct trainer, not an anonymizer: save its anonymizer",
        ),
        (
            "out.mp4",
            "my_minimax.keras",
            "{models}/my_minimax.keras: a saved MyMinimax trainer, not an anonymizer",
        ),
        (
            "out.mp4",
            "identity_init.keras",
            "{models}/identity_init.keras: a saved IdentityInit trainer, not an anonymizer",
        ),
        (
            "out.mp4",
            "encoder.keras",
            "{models}/encoder.keras: not an anonymizer: it maps (None, 8, 8, 3) to (None, 3), not",
        ),
        (
            "out.mp4",
            "halving.keras",
            "{models}/halving.keras: not an anonymizer: it maps 4 x 4 frames to 2 x 2, not to "
            "frames of their own size",
        ),
    ],
)
def test_anonymize_names_the_missing_output_folder_or_the_bad_model(
    fixtures_dir, models, tmp_path, capsys, output, model, message
):
    args = [str(fixtures_dir / "videos" / "test.avi"), str(tmp_path / output)]
    assert anonymize.main([*args, "--anonymizer", str(models / model), "--no_progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: " + message.format(tmp=tmp_path, models=models))
    assert len(err.splitlines()) == 1


def test_anonymize_names_a_video_it_cannot_read_and_shows_the_traceback_with_verbose(
    models, tmp_path, capsys
):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a video")
    args = [str(notes), str(tmp_path / "out.mp4"), "--anonymizer", str(models / "tiny.keras")]
    assert anonymize.main([*args, "--no_progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {notes}: ") and len(err.splitlines()) == 1
    with pytest.raises(VideoDecodeError, match=re.escape(f"{notes}: cannot be opened")):
        anonymize.main([*args, "--no_progress", "--verbose"])  # its traceback, as every error's


def test_anonymize_names_an_output_folder_that_is_a_file(fixtures_dir, models, tmp_path, capsys):
    videos = tmp_path / "videos"
    videos.mkdir()
    shutil.copy(fixtures_dir / "videos" / "test.avi", videos)
    (tmp_path / "out").write_text("kept")
    args = [str(videos), str(tmp_path / "out"), "--anonymizer", str(models / "tiny.keras")]
    assert anonymize.main([*args, "--no_progress"]) == 1
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'out'}: the output folder names a file; name a folder (made if "
        "missing)\n"
    )


def test_a_folder_under_a_file_is_refused_naming_the_file(tmp_path):
    from keras_privacy.cli import refuse_a_file

    (tmp_path / "afile").write_text("kept")
    with pytest.raises(NotADirectoryError) as raised:
        refuse_a_file(tmp_path / "afile" / "run" / "sub", "--run_dir")
    assert str(raised.value) == (
        f"{tmp_path / 'afile' / 'run' / 'sub'}: --run_dir lies under the file "
        f"{tmp_path / 'afile'}; name a folder (made if missing)"
    )
    refuse_a_file(tmp_path / "new" / "run", "--run_dir")  # missing folders are made later


def test_export_refuses_a_lambda_layer_in_one_line_or_with_its_traceback(models, tmp_path, capsys):
    args = ["--anonymizer", str(models / "lambda.keras"), "--out", str(tmp_path / "saved")]
    assert export.main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {models / 'lambda.keras'}: not loadable as a Keras anonymizer")
    assert "Lambda" in err and "safe_mode" not in err and len(err.splitlines()) == 1
    with pytest.raises(ValueError, match="Lambda"):
        export.main([*args, "--verbose"])


def test_convert_names_a_missing_checkpoint_in_one_line_or_with_its_traceback(tmp_path, capsys):
    from keras_privacy import convert

    missing = tmp_path / "r3d_18.pth"
    args = [str(missing), "--arch", "r3d_18", "--out", str(tmp_path / "r3d.weights.h5")]
    assert convert.main(args) == 1
    assert capsys.readouterr().err == f"error: {missing}: no such file\n"
    with pytest.raises(convert.ConversionError, match="no such file"):
        convert.main([*args, "--verbose"])


@pytest.mark.backend_independent  # the command's message; test_training stops a NaN run on JAX
def test_train_py_reports_a_diverged_run_in_one_line(benchmark, tmp_path):
    """train.py's NaN stop: one line naming the kept checkpoint, the traceback in error.log."""
    settings = {
        **tiny_models.TINY_RUN,
        "synthetic_dir": benchmark,
        "run_dir": tmp_path / "run",
        "anonymizer": "unet_tiny",
        "identity_epochs": 2,
        "identity_warmup_epochs": 0,
        "identity_lr": 1e30,  # the weights overflow in the first step: a NaN loss in the second
        "action_init_epochs": 1,
        "privacy_init_epochs": 0,
        "minimax_epochs": 0,
        "steps_per_epoch": 1,
        "projection_hidden": 16,
        "projection_dim": 8,
    }
    completed = subprocess.run(
        [sys.executable, "train.py", *(f"--{name}={value}" for name, value in settings.items())],
        cwd=REPO,
        env=os.environ | {"TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 1, completed.stderr
    checkpoint = tmp_path / "run" / "checkpoints" / "identity-0001"
    log = tmp_path / "run" / "error.log"
    assert completed.stderr.splitlines()[-1] == (
        "error: phase identity, epoch 2, batch 1: reconstruction_loss = nan; the last "
        f"checkpoint, {checkpoint} (every weight finite), is kept and a restart resumes from "
        "it. Lower the learning rates or the privacy weight and restart. "
        f"(traceback in {log})"
    )
    assert "Traceback" not in completed.stderr
    assert "TrainingDivergedError" in log.read_text()
