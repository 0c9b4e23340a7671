import numpy as np
import pytest

from keras_privacy.data.frames import frames_as_floats, frames_as_uint8

pytestmark = pytest.mark.backend_independent


def test_frames_round_trip_to_within_half_a_level():
    frames = np.random.default_rng(0).uniform(size=(3, 5, 5, 3)).astype("float32")
    back = frames_as_floats(frames_as_uint8(frames))
    assert back.dtype == np.float32
    np.testing.assert_allclose(back, frames, atol=0.5 / 255 + 1e-7)


def test_floats_outside_the_unit_range_are_clipped_and_levels_rounded():
    frames = np.array([-0.5, 0.0, 0.5 / 255 + 1e-4, 127.4 / 255, 1.0, 3.0], dtype="float64")
    np.testing.assert_array_equal(frames_as_uint8(frames), [0, 0, 1, 127, 255, 255])
    assert frames_as_uint8(frames).dtype == np.uint8


def test_uint8_frames_and_integer_labels_pass_unchanged():
    frames = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    assert frames_as_uint8(frames) is frames
    labels = np.arange(4, dtype="int32")
    assert frames_as_uint8(labels) is labels
    assert frames_as_floats(labels) is labels
    assert frames_as_floats(frames).dtype == np.float32
    np.testing.assert_allclose(frames_as_floats(frames), frames / 255.0, rtol=1e-6)
