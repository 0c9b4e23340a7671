"""Reading image files (`keras_privacy.data.images`)."""

import logging

import cv2
import numpy as np
import pytest

from keras_privacy.data.images import jpeg_cut_short, read_image, read_image_and_cut


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


def test_an_exif_orientation_is_not_applied(tmp_path, jpeg_bytes):
    """VISPR's photos carry EXIF orientations, which the authors' loaders (torchvision's
    `read_image`, scikit-image's `imread`) do not apply: the image is read as stored."""
    # A TIFF header (big-endian) and one IFD entry: Orientation (0x0112), SHORT, 6 (rotate 90).
    ifd = (1).to_bytes(2, "big") + bytes.fromhex("0112 0003 00000001 0006 0000") + bytes(4)
    exif = b"Exif\0\0" + b"MM\0*" + (8).to_bytes(4, "big") + ifd
    app1 = b"\xff\xe1" + (len(exif) + 2).to_bytes(2, "big") + exif
    path = tmp_path / "rotated.jpg"
    path.write_bytes(jpeg_bytes[:2] + app1 + jpeg_bytes[2:])
    assert cv2.imread(str(path)).shape == (64, 48, 3)  # OpenCV's default applies it
    rgb = read_image(path)
    assert rgb.shape == (48, 64, 3)
    np.testing.assert_array_equal(
        rgb, cv2.imdecode(np.frombuffer(jpeg_bytes, np.uint8), 1)[..., ::-1]
    )


def test_a_jpeg_cut_short_is_read_with_a_warning_that_names_it_once(tmp_path, jpeg_bytes, caplog):
    """libjpeg's own warning ("Premature end of JPEG file") names no file. Training from the
    files reads an image each time it is drawn: one warning."""
    path = tmp_path / "cut.jpg"
    path.write_bytes(jpeg_bytes[: len(jpeg_bytes) // 2])
    with caplog.at_level(logging.WARNING):
        rgb = read_image(path)
        read_image(path)
    assert rgb.shape == (48, 64, 3)
    assert [record.getMessage() for record in caplog.records] == [
        f"{path}: a JPEG without its end marker, probably cut short: its missing part decodes "
        "as grey"
    ]


def test_data_after_the_end_marker_and_a_thumbnails_marker_are_not_a_cut(tmp_path, jpeg_bytes):
    """A motion photo appends its video after the image; EXIF holds a thumbnail, with its own
    end marker, before the image's scan."""
    appended = tmp_path / "motion.jpg"
    appended.write_bytes(jpeg_bytes + b"\0" * 4096)
    assert not jpeg_cut_short(appended)
    thumbnail = cv2.imencode(".jpg", np.zeros((8, 8, 3), np.uint8))[1].tobytes()
    exif = b"Exif\0\0" + thumbnail
    app1 = b"\xff\xe1" + (len(exif) + 2).to_bytes(2, "big") + exif
    with_thumbnail = jpeg_bytes[:2] + app1 + jpeg_bytes[2:]
    (tmp_path / "exif.jpg").write_bytes(with_thumbnail)
    assert not jpeg_cut_short(tmp_path / "exif.jpg")
    (tmp_path / "exif_cut.jpg").write_bytes(with_thumbnail[: len(with_thumbnail) - 200])
    assert jpeg_cut_short(tmp_path / "exif_cut.jpg")
    (tmp_path / "image.png").write_bytes(cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1])
    assert not jpeg_cut_short(tmp_path / "image.png")


def test_stray_bytes_between_segments_are_no_cut(tmp_path, jpeg_bytes):
    """libjpeg skips them to the next marker ("extraneous bytes before marker") and decodes the
    whole image: common in scraped images."""
    app0_end = 4 + int.from_bytes(jpeg_bytes[4:6], "big")
    whole = tmp_path / "whole.jpg"
    whole.write_bytes(jpeg_bytes)
    for stray in (b"\0\0", b"\xff\x00", b"abc\xff"):
        padded = tmp_path / "padded.jpg"
        padded.write_bytes(jpeg_bytes[:app0_end] + stray + jpeg_bytes[app0_end:])
        np.testing.assert_array_equal(cv2.imread(str(padded)), cv2.imread(str(whole)))
        assert not jpeg_cut_short(padded), stray
    (tmp_path / "padded_cut.jpg").write_bytes(padded.read_bytes()[: len(jpeg_bytes) // 2])
    assert jpeg_cut_short(tmp_path / "padded_cut.jpg")


def test_an_image_rewritten_whole_is_no_longer_cut_short(tmp_path, jpeg_bytes, caplog):
    """The answer is kept per version of the file: a download completed in place is read anew."""
    path = tmp_path / "download.jpg"
    path.write_bytes(jpeg_bytes[: len(jpeg_bytes) // 2])
    with caplog.at_level(logging.WARNING):
        assert read_image_and_cut(path)[1]
        path.write_bytes(jpeg_bytes)
        assert not read_image_and_cut(path)[1]
    assert len(caplog.records) == 1


CORRUPT = "corrupt image data (an image file's header, but it does not decode)"


@pytest.mark.parametrize(
    "content, reason",
    [
        (None, "no such file"),
        (b"", "empty file (0 bytes)"),
        (
            b"not an image",
            "not a JPEG, PNG, GIF, BMP, TIFF or WebP file (it starts with b'not an i')",
        ),
        (b"\xff\xd8\xff\xe0" + bytes(40), CORRUPT),
        (b"\x89PNG\r\n\x1a\n" + bytes(12), CORRUPT),
    ],
)
def test_a_missing_empty_or_undecodable_image_is_named_with_its_reason(tmp_path, content, reason):
    path = tmp_path / "bad.jpg"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ValueError) as raised:
        read_image(path)
    assert str(raised.value) == f"{path}: unreadable image: {reason}"
