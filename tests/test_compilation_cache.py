"""`--compilation_cache`: compiled training steps kept in a folder and loaded from it (JAX); a
clear refusal on TensorFlow."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from keras_privacy.config import ExperimentConfig
from keras_privacy.spelling import SettingError

ROOT = Path(__file__).resolve().parents[1]

FIT_TWICE = """
import json, sys
import jax, keras, numpy as np
from keras_privacy import distribute

events = []
jax.monitoring.register_event_listener(lambda name, **kwargs: events.append(name))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # the tiny step's too
distribute.use_compilation_cache(sys.argv[1])


def fit():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    model.compile(keras.optimizers.SGD(0.1), "mse", jit_compile=True)
    return model.fit(np.ones((8, 8)), np.ones((8, 4)), verbose=0).history["loss"][-1]


first = fit()
written = sum(1 for path in __import__("pathlib").Path(sys.argv[1]).rglob("*") if path.is_file())
jax.clear_caches()  # the process forgets its compiles: only the folder holds them
hits_before = events.count("/jax/compilation_cache/cache_hits")
second = fit()
print(json.dumps({
    "written": written, "losses": [first, second],
    "hits": events.count("/jax/compilation_cache/cache_hits") - hits_before,
}))
"""


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "jax", reason="the cache is JAX's")
def test_compiled_steps_are_kept_in_the_folder_and_loaded_from_it(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", FIT_TWICE, str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["written"] > 0
    assert result["hits"] > 0  # the second fit loaded its train step instead of compiling it
    assert result["losses"][0] == pytest.approx(result["losses"][1])


@pytest.mark.skipif(os.environ["KERAS_BACKEND"] != "tensorflow", reason="TensorFlow's refusal")
def test_tensorflow_refuses_a_compilation_cache_by_name(tmp_path):
    from keras_privacy.training import train

    config = ExperimentConfig(run_dir=str(tmp_path / "run"), compilation_cache=str(tmp_path))
    with pytest.raises(SettingError, match="--compilation_cache=.*use --backend=jax"):
        train(config)
    assert not (tmp_path / "run").exists()  # refused before anything was written
