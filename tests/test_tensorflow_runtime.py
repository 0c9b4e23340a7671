"""The input pipelines' TensorFlow keeps off the GPUs where JAX trains, and grows its memory on
them where it trains (on a CPU machine the GPUs are stood in for: the calls TensorFlow
receives are checked)."""

import keras
import pytest
import tensorflow as tf

from keras_privacy import backend
from keras_privacy.data import tensorflow_runtime


@pytest.fixture
def two_gpus(monkeypatch):
    """TensorFlow lists two GPUs; the visible devices and memory growth it is then given are
    recorded."""
    gpus = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(2)]
    listed = {"GPU": gpus, "CPU": tf.config.list_physical_devices("CPU")}
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: listed[kind])
    calls = []
    monkeypatch.setattr(
        tf.config, "set_visible_devices", lambda *args: calls.append(("visible", *args))
    )
    monkeypatch.setattr(
        tf.config.experimental,
        "set_memory_growth",
        lambda device, grows: calls.append(("growth", device.name, grows)),
    )
    return calls


def test_gpus_are_hidden_from_tensorflow_unless_keras_trains_on_it(two_gpus):
    seen = backend.distribution().set_up_tensorflow_gpus(tf)
    assert seen == (2, "")
    if keras.backend.backend() == "tensorflow":  # every GPU visible, its memory grown as needed
        assert two_gpus == [("growth", f"/physical_device:GPU:{i}", True) for i in range(2)]
    else:
        assert two_gpus == [("visible", [], "GPU")]


def test_a_runtime_started_with_gpus_is_named_in_a_warning(monkeypatch, two_gpus):
    def started(*args):
        raise RuntimeError("Physical devices cannot be modified after being initialized")

    monkeypatch.setattr(tf.config, "set_visible_devices", started)
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", started)
    with pytest.warns(UserWarning, match=r"started with 2 GPU\(s\) .* cannot be modified"):
        tensorflow_runtime.set_up_the_gpus()


def test_nothing_is_hidden_on_a_machine_without_gpus():
    assert not tf.config.list_physical_devices("GPU")
    assert backend.distribution().set_up_tensorflow_gpus(tf) == (0, "")
    assert tf.config.get_visible_devices("CPU") == tf.config.list_physical_devices("CPU")
