"""The input pipelines' TensorFlow keeps off the GPUs where JAX trains (on a CPU machine the
GPUs are stood in for: the calls TensorFlow receives are checked)."""

import keras
import pytest
import tensorflow as tf

from keras_privacy import backend
from keras_privacy.data import tensorflow_runtime


@pytest.fixture
def two_gpus(monkeypatch):
    """TensorFlow lists two GPUs; the visible devices it is then given are recorded."""
    gpus = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(2)]
    listed = {"GPU": gpus, "CPU": tf.config.list_physical_devices("CPU")}
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: listed[kind])
    calls = []
    monkeypatch.setattr(tf.config, "set_visible_devices", lambda *args: calls.append(args))
    return calls


def test_gpus_are_hidden_from_tensorflow_unless_keras_trains_on_it(two_gpus):
    seen = backend.distribution().keep_input_pipelines_off_the_gpus(tf)
    if keras.backend.backend() == "tensorflow":
        assert seen == (0, "") and two_gpus == []
    else:
        assert seen == (2, "") and two_gpus == [([], "GPU")]


@pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="TensorFlow keeps its GPUs")
def test_a_runtime_started_with_gpus_is_named_in_a_warning(monkeypatch, two_gpus):
    def started(*args):
        raise RuntimeError("Visible devices cannot be modified after being initialized")

    monkeypatch.setattr(tf.config, "set_visible_devices", started)
    with pytest.warns(UserWarning, match=r"started with 2 GPU\(s\) .* cannot be modified"):
        tensorflow_runtime.keep_tensorflow_off_the_gpus()


def test_nothing_is_hidden_on_a_machine_without_gpus():
    assert not tf.config.list_physical_devices("GPU")
    assert backend.distribution().keep_input_pipelines_off_the_gpus(tf) == (0, "")
    assert tf.config.get_visible_devices("CPU") == tf.config.list_physical_devices("CPU")
