"""`--eval_action_test_epochs`, `--eval_privacy_test_epochs`: target models tested on the test
split during training, the weights of the best test score kept (the penalty authors' choice),
and what the report says of it."""

import json

import keras
import numpy as np
import pytest
from tiny_models import tiny_config

from keras_privacy.config import ExperimentConfig
from keras_privacy.evaluation import protocol
from keras_privacy.evaluation.targets import BestTestEpoch


class KernelByEpoch(keras.callbacks.Callback):
    """The Dense kernel after each epoch (from 1)."""

    def __init__(self):
        super().__init__()
        self.kernels = {}

    def on_epoch_end(self, epoch, logs=None):
        self.kernels[epoch + 1] = float(np.asarray(self.model.get_weights()[0]).ravel()[0])


def test_the_weights_of_the_best_test_score_are_kept_the_first_of_equal_ones():
    # SGD on y = 2x moves the kernel every epoch; the scores, handed out in turn, rank the
    # tests after epochs 1, 2 and 4: epoch 2 and 4 tie, so epoch 2's weights are kept.
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
    model.layers[0].kernel.assign([[0.0]])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    scores, seen = iter([0.3, 0.7, 0.7]), []
    x = np.ones((1, 1), "float32")

    def score(tested):
        # What the target tests do inside fit: predict with the epoch's weights.
        seen.append(float(np.asarray(tested.predict_on_batch(x)).ravel()[0]))
        return next(scores)

    best, kernels = BestTestEpoch([1, 2, 4, 9], score), KernelByEpoch()
    model.fit(x, 2 * x, epochs=5, verbose=0, callbacks=[kernels, best])
    assert seen == pytest.approx([kernels.kernels[e] for e in (1, 2, 4)])  # never after 3, 5
    assert best.scores == {1: 0.3, 2: 0.7, 4: 0.7}
    assert best.best_epoch == 2
    kept = float(model.layers[0].kernel.numpy()[0, 0])
    assert kept == pytest.approx(kernels.kernels[2])
    assert kept != pytest.approx(kernels.kernels[5])
    assert best.record("action") == {
        "action_test_scores": {"1": 0.3, "2": 0.7, "4": 0.7},
        "action_epoch": 2,
    }


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"eval_action_test_epochs": "0"},
            "--eval_action_test_epochs takes epochs from 1, comma-separated: '0'",
        ),
        (
            {"eval_privacy_test_epochs": "1,x"},
            "--eval_privacy_test_epochs takes epochs from 1, comma-separated: 'x'",
        ),
        ({"eval_action_test_epochs": "-2"}, "--eval_action_test_epochs takes epochs from 1"),
        (
            {"eval_action_test_epochs": "9, 12"},
            "--eval_action_test_epochs=9, 12 names epochs past the target action model's 8",
        ),
        (
            {"eval_privacy_test_epochs": "9"},
            "--eval_privacy_test_epochs=9 names epochs past the target privacy model's 8",
        ),
    ],
)
def test_test_epochs_out_of_range_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**overrides).validate()


def test_test_epochs_parse_in_order_for_each_target():
    config = ExperimentConfig(eval_action_test_epochs=" 1, 5,10", eval_privacy_test_epochs="2")
    assert config.eval_test_epoch_list("action") == [1, 5, 10]
    assert config.eval_test_epoch_list("privacy") == [2]
    assert ExperimentConfig().eval_test_epoch_list("action") == []


# Backend-independent: the target models' epoch records; test_target_schedule trains them on JAX.
@pytest.mark.backend_independent
def test_every_target_model_reports_its_best_test_epoch(benchmark, tmp_path):
    config = tiny_config(
        benchmark,
        tmp_path,
        eval_methods="raw,downsample_4x",
        eval_action_epochs=2,
        eval_privacy_epochs=2,
        eval_action_test_epochs="1,2",
        eval_privacy_test_epochs="1,2",
        eval_bootstrap=0,
    )
    data = protocol.evaluation_data(config)
    out = tmp_path / "evaluation"
    report = protocol.evaluate(config, data, protocol.methods_of(config), out)
    saved = json.loads((out / "report.json").read_text())
    assert saved["evaluation"]["test_epochs"] == {"action": [1, 2], "privacy": [1, 2]}
    for method, result in saved["methods"].items():
        extra = result["extra"]
        for kind, metric in (("action", "action_top1"), ("privacy", "privacy_cmap")):
            scores = extra[f"{kind}_test_scores"]
            assert set(scores) == {"1", "2"}, method
            # The reported model is the kept one: its final test gives the best test score.
            assert result[metric] == pytest.approx(max(scores.values())), (method, kind)
            assert result[metric] == pytest.approx(scores[str(extra[f"{kind}_epoch"])])
    assert (out / "raw_attacker_resnet_tiny.json").is_file()
    markdown = report.markdown()
    assert "f'_T: the best of its tests on the test split after epochs 1, 2" in markdown
    assert "f'_B (and the raw-trained attacker): the best of its tests" in markdown

    # Rows chosen another way never join this report.
    other = tiny_config(benchmark, tmp_path, eval_methods="raw", eval_action_epochs=2)
    with pytest.raises(ValueError, match=r"its test_epochs, target_models\.action\.test_epochs"):
        protocol.evaluate(other, data, protocol.methods_of(other), out)
