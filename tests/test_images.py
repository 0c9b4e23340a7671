"""Reading image files (`keras_privacy.data.images`)."""

import logging

import cv2
import numpy as np
import pytest

from keras_privacy.data.images import read_image


@pytest.fixture
def jpeg_bytes() -> bytes:
    image = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    return cv2.imencode(".jpg", image)[1].tobytes()


def test_an_image_reads_as_rgb(tmp_path, jpeg_bytes, caplog):
    path = tmp_path / "whole.jpg"
    path.write_bytes(jpeg_bytes + b"\0" * 16)  # bytes after the end marker are common
    with caplog.at_level(logging.WARNING):
        rgb = read_image(path)
    bgr = cv2.imread(str(path))
    np.testing.assert_array_equal(rgb, bgr[..., ::-1])
    assert rgb.shape == (48, 64, 3) and rgb.dtype == np.uint8
    assert not caplog.records


def test_a_jpeg_cut_short_is_read_with_a_warning_that_names_it(tmp_path, jpeg_bytes, caplog):
    """libjpeg's own warning ("Premature end of JPEG file") names no file."""
    path = tmp_path / "cut.jpg"
    path.write_bytes(jpeg_bytes[: len(jpeg_bytes) // 2])
    with caplog.at_level(logging.WARNING):
        rgb = read_image(path)
    assert rgb.shape == (48, 64, 3)
    assert [record.getMessage() for record in caplog.records] == [
        f"{path}: a JPEG without its end marker, probably cut short: its missing part decodes "
        "as grey"
    ]


@pytest.mark.parametrize("content", [None, b"", b"not an image"])
def test_a_missing_empty_or_undecodable_image_is_named(tmp_path, content):
    path = tmp_path / "bad.jpg"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=f"^{path}: unreadable image$"):
        read_image(path)
