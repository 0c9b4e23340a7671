"""Behaviour tests of the dataset readers, video decoding and the TFRecord caches.

The annotation lists and videos are the real files of ../shared/fixtures (read in place);
inputs that must be broken or that cannot be redistributed are generated in tmp_path.
"""

import concurrent.futures
import json
import os
import re
import threading
from pathlib import Path
from unittest import mock

import av
import cv2
import numpy as np
import pytest
import tensorflow as tf
from test_files import killed_writers_temporary

from keras_privacy.data.cache import (
    FrameTransform,
    find_prepared,
    prepare_cache,
    prepare_image_cache,
    prepare_video_cache,
    read_image_cache,
    read_manifest,
    read_video_cache,
    verify_cache,
)
from keras_privacy.data.errors import DatasetFormatError, TransformError, VideoDecodeError
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.hmdb51 import read_hmdb51
from keras_privacy.data.pa_hmdb51 import PA_HMDB51_ATTRIBUTES, read_frame_ranges, read_pa_hmdb51
from keras_privacy.data.ucf101 import read_class_index, read_ucf101
from keras_privacy.data.video import (
    iter_video_frames,
    probe_video,
    read_video,
    seems_cut_short,
    stored_frame_span,
    write_video,
)
from keras_privacy.data.vispr import (
    VISPR1,
    VISPR2,
    attribute_subset,
    read_attribute_vocabulary,
    read_vispr,
)
from keras_privacy.data.vp_labels import VP_ATTRIBUTES, attach_privacy_labels, read_vp_labels

pytestmark = pytest.mark.backend_independent

# ---------------------------------------------------------------- UCF101


@pytest.fixture(scope="module")
def ucf101_lists(fixtures_dir):
    return fixtures_dir / "ucf101"


def test_ucf101_class_index_crlf(ucf101_lists):
    assert b"\r\n" in (ucf101_lists / "classInd.txt").read_bytes()
    names = read_class_index(ucf101_lists / "classInd.txt")
    assert len(names) == 101
    assert names[0] == "ApplyEyeMakeup" and names[-1] == "YoYo"
    assert names[36] == "HandstandPushups"
    assert all("\r" not in name and name == name.strip() for name in names)


@pytest.mark.parametrize(
    "name, first",
    [("ApplyEyeMakeup", "1)"), ("applyeyemakeup", "1, 'ApplyEyeMakeup')")],
    ids=["same", "other case"],
)
def test_ucf101_class_index_naming_a_class_twice_is_refused_there(
    ucf101_lists, tmp_path, name, first
):
    """Also in another case: the lists' class folders are matched whatever their case, so a
    second spelling would take the first's videos."""
    lines = (ucf101_lists / "classInd.txt").read_text().splitlines()
    lines[1] = f"2 {name}"
    (tmp_path / "classInd.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetFormatError) as raised:
        read_class_index(tmp_path / "classInd.txt")
    assert str(raised.value) == (
        f"{tmp_path / 'classInd.txt'}:2: class {name!r} again (first as class {first}"
    )


def test_an_empty_split_list_is_named_as_empty():
    from keras_privacy.config import SettingError
    from keras_privacy.data.sources import require_examples

    with pytest.raises(SettingError, match="the split lists no example .is its list empty"):
        require_examples(Split([]), "action_annotations")


def test_a_split_with_every_file_missing_points_at_the_root():
    from keras_privacy.config import SettingError
    from keras_privacy.data.sources import require_examples

    missing = Split([], missing=["hmdb51/brush_hair/a.avi: file not found"])
    with pytest.raises(SettingError) as raised:
        require_examples(missing, "action_annotations")
    assert str(raised.value) == (
        "--action_annotations: the split has no example on disk (1 listed files missing, e.g. "
        "hmdb51/brush_hair/a.avi: file not found): is --action_root the folder that holds the "
        "files as the list names them?"
    )


def test_pa_hmdb51_labelling_every_training_video_is_refused_naming_the_annotations(tmp_path):
    from keras_privacy.config import SettingError
    from keras_privacy.data.sources import without_pa_hmdb51

    unlabelled = {name: [] for name in PA_HMDB51_ATTRIBUTES}
    (tmp_path / "brush_hair.json").write_text(json.dumps({"a_brush_hair_b.avi": unlabelled}))
    train = Split([Example("brush_hair/a_brush_hair_b.avi", 0)], class_names=["brush_hair"])
    with pytest.raises(SettingError) as raised:
        without_pa_hmdb51(train, tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}: PA-HMDB51 labels all 1 videos of the HMDB51 training split on disk, so "
        "none is left to train on once they are left out"
    )


def test_pa_hmdb51_leave_out_matches_names_in_any_case_and_names_empty_files(tmp_path):
    """A test video named in another case is found on disk (`resolve`), so it is left out of
    training too; annotation files that label no video are named as such."""
    from keras_privacy.data.sources import without_pa_hmdb51

    unlabelled = {name: [] for name in PA_HMDB51_ATTRIBUTES}
    (tmp_path / "brush_hair.json").write_text(json.dumps({"A_brush_hair_B.avi": unlabelled}))
    train = Split(
        [Example("brush_hair/a_brush_hair_b.avi", 0), Example("brush_hair/c.avi", 0)],
        class_names=["brush_hair"],
    )
    assert [e.path for e in without_pa_hmdb51(train, tmp_path).examples] == ["brush_hair/c.avi"]
    (tmp_path / "brush_hair.json").write_text("{}")
    with pytest.raises(DatasetFormatError) as raised:
        without_pa_hmdb51(train, tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}: its PA-HMDB51 '<action>.json' files label no video, so no video would be "
        "left out"
    )


def test_ucf101_split1_counts_without_root(ucf101_lists):
    splits = read_ucf101(ucf101_lists, split=1)
    assert set(splits) == {"train", "test"}
    train, test = splits["train"], splits["test"]
    assert len(train.class_names) == 101 and test.class_names == train.class_names
    assert len(train) == 9537 and len(test) == 3783
    assert train.missing == [] and test.missing == []
    assert not any("\r" in e.path or e.path != e.path.strip() for e in train.examples)
    first = train.examples[0]
    assert first.path == "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi" and first.label == 0
    assert test.examples[-1].label == 100  # YoYo
    # every label in range, every class present in both subsets
    assert {e.label for e in train.examples} == set(range(101))
    assert {e.label for e in test.examples} == set(range(101))
    # the label follows the class folder in train and test alike
    for subset in (train, test):
        for example in subset.examples[::97]:
            assert subset.class_names[example.label] == example.path.split("/")[0]


def test_ucf101_handstand_case_mismatch(ucf101_lists):
    splits = read_ucf101(ucf101_lists)
    for subset in ("train", "test"):
        handstand = [e for e in splits[subset].examples if "v_HandStandPushups_" in e.path]
        assert handstand, subset
        assert {e.label for e in handstand} == {36}
        assert splits[subset].class_names[36] == "HandstandPushups"


def test_ucf101_missing_files_reported(ucf101_lists, tmp_path):
    # An empty dataset root: every listed video is reported missing, none is returned.
    splits = read_ucf101(ucf101_lists, root=tmp_path)
    assert len(splits["train"]) == 0 and len(splits["test"]) == 0
    assert len(splits["train"].missing) == 9537
    assert len(splits["test"].missing) == 3783
    entry = splits["train"].missing[0]
    assert str(tmp_path / "ApplyEyeMakeup" / "v_ApplyEyeMakeup_g08_c01.avi") in entry
    assert "not found" in entry


def test_ucf101_root_resolves_case_insensitively(ucf101_lists, tmp_path):
    # One file on disk whose name differs in case from the list (HandStand vs Handstand),
    # and one class folder whose name differs in case from classInd.txt.
    (tmp_path / "HandstandPushups").mkdir()
    on_disk = tmp_path / "HandstandPushups" / "v_HandstandPushups_g01_c01.avi"
    on_disk.write_bytes(b"x")
    (tmp_path / "applyeyemakeup").mkdir()
    other = tmp_path / "applyeyemakeup" / "v_ApplyEyeMakeup_g01_c01.avi"
    other.write_bytes(b"x")
    test = read_ucf101(ucf101_lists, root=tmp_path)["test"]
    found = {e.path: e.label for e in test.examples}
    assert found == {str(on_disk): 36, str(other): 0}
    assert len(test.missing) == 3783 - 2


def test_a_root_one_folder_too_deep_finds_nothing(tmp_path):
    """The case-insensitive search keeps every folder of the listed path: a root given one
    folder too deep does not find `images/train2017/x.jpg` as `train2017/x.jpg`."""
    from keras_privacy.data.annotations import resolve

    (tmp_path / "images" / "train2017").mkdir(parents=True)
    (tmp_path / "images" / "train2017" / "x.jpg").write_bytes(b"x")
    deep = tmp_path / "images"
    assert resolve(deep, "images/train2017/x.jpg") == (f"{deep}/images/train2017/x.jpg", False)
    assert resolve(tmp_path, "Images/Train2017/X.JPG")[1] is False  # one folder's case only
    assert resolve(tmp_path, "images/Train2017/X.JPG") == (str(deep / "train2017" / "x.jpg"), True)


def test_names_missing_from_one_folder_list_it_once(tmp_path):
    """A name in another case is found in its folder, a name in none is not (the path as
    listed); with the listings of a split's read, a folder is listed once for many missing
    names (1,000 missing of VISPR's 10,000 images cost 1,000 listings of its folder)."""
    from keras_privacy.data.annotations import resolve

    images = tmp_path / "images"
    images.mkdir()
    for i in range(20):
        (images / f"IMG_{i}.JPG").write_bytes(b"x")
    listings: dict = {}
    with mock.patch.object(Path, "iterdir", autospec=True, side_effect=Path.iterdir) as iterdir:
        assert resolve(tmp_path, "images/img_3.jpg", listings) == (str(images / "IMG_3.JPG"), True)
        for i in range(100):
            gone = f"gone_{i}.jpg"
            assert resolve(tmp_path, f"images/{gone}", listings) == (str(images / gone), False)
        assert iterdir.call_count == 1
        assert resolve(tmp_path, "images/gone_0.jpg") == (str(images / "gone_0.jpg"), False)
        assert iterdir.call_count == 2  # without the read's listings: listed again


def test_ucf101_bad_split_number(ucf101_lists):
    with pytest.raises(ValueError, match="4"):
        read_ucf101(ucf101_lists, split=4)


def _ucf101_copy(fixtures_dir, tmp_path, train_lines):
    """A tmp annotations folder: the real classInd.txt and a generated trainlist/testlist."""
    folder = tmp_path / "lists"
    folder.mkdir()
    (folder / "classInd.txt").write_bytes((fixtures_dir / "ucf101" / "classInd.txt").read_bytes())
    (folder / "trainlist01.txt").write_text("\r\n".join(train_lines) + "\r\n")
    (folder / "testlist01.txt").write_text("ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi\r\n")
    return folder


@pytest.mark.parametrize(
    "bad_line, line_number",
    [
        ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c02.avi one", 2),
        ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c02.avi 5", 2),  # label of another class
        ("NoSuchClass/v_NoSuchClass_g08_c02.avi 1", 2),
        ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c02.avi 1 2", 2),
        ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c02.avi \u00b9", 2),  # a digit int() refuses
        ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c02.avi,1", 2),  # a list saved as CSV
        ("ApplyEyeMakeup/../Archery/v_Archery_g01_c01.avi 1", 2),  # labelled by the first folder
    ],
)
def test_ucf101_malformed_line_names_file_and_line(fixtures_dir, tmp_path, bad_line, line_number):
    folder = _ucf101_copy(
        fixtures_dir, tmp_path, ["ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1", bad_line]
    )
    with pytest.raises(DatasetFormatError) as info:
        read_ucf101(folder)
    assert f"{folder / 'trainlist01.txt'}:{line_number}:" in str(info.value)


@pytest.mark.parametrize(
    "train_lines, test_line, where, first",
    [
        (  # a line repeated in the train list, the name's case changed
            [
                "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1",
                "applyeyemakeup/v_applyEyeMakeup_g08_c01.avi 1",
            ],
            "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi",
            "trainlist01.txt:2",
            "trainlist01.txt:1",
        ),
        (  # a training video in the test list
            ["ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1"],
            "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi",
            "testlist01.txt:1",
            "trainlist01.txt:1",
        ),
    ],
)
def test_ucf101_a_video_listed_twice_is_refused_with_both_lines(
    fixtures_dir, tmp_path, train_lines, test_line, where, first
):
    folder = _ucf101_copy(fixtures_dir, tmp_path, train_lines)
    (folder / "testlist01.txt").write_text(test_line + "\r\n")
    with pytest.raises(DatasetFormatError) as raised:
        read_ucf101(folder)
    assert str(raised.value).startswith(f"{folder / where}: ")
    assert str(raised.value).endswith(f"is listed again (first at {folder / first})")


def test_ucf101_malformed_class_index(tmp_path):
    path = tmp_path / "classInd.txt"
    path.write_text("1 ApplyEyeMakeup\r\nx ApplyLipstick\r\n")
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2:")):
        read_class_index(path)
    path.write_text("1 ApplyEyeMakeup\n3 Archery\n")
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2:")):
        read_class_index(path)
    path.write_text("1 ApplyEyeMakeup\n\u00b2 ApplyLipstick\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2:")):
        read_class_index(path)


def test_ucf101_missing_annotation_file(fixtures_dir, tmp_path):
    folder = _ucf101_copy(fixtures_dir, tmp_path, ["ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1"])
    with pytest.raises(FileNotFoundError, match="trainlist02.txt"):
        read_ucf101(folder, split=2)
    (folder / "classInd.txt").unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(str(folder / "classInd.txt"))):
        read_ucf101(folder)


def test_ucf101_non_utf8_list(fixtures_dir, tmp_path):
    folder = _ucf101_copy(fixtures_dir, tmp_path, ["ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1"])
    (folder / "testlist01.txt").write_bytes(b"ApplyEyeMakeup/v_\xff\xfe.avi\r\n")
    with pytest.raises(DatasetFormatError, match=re.escape(str(folder / "testlist01.txt"))):
        read_ucf101(folder)


# ---------------------------------------------------------------- HMDB51


def test_hmdb51_split1_counts(fixtures_dir):
    splits = read_hmdb51(fixtures_dir / "hmdb51" / "splits", split=1)
    train, test = splits["train"], splits["test"]
    assert len(train.class_names) == 51 and train.class_names == sorted(train.class_names)
    assert train.class_names.index("climb") < train.class_names.index("climb_stairs")
    assert len(train) == 3570 and len(test) == 1530
    assert {e.label for e in train.examples} == set(range(51))
    # 70 train / 30 test videos per class
    counts = np.bincount([e.label for e in train.examples], minlength=51)
    assert (counts == 70).all()
    assert not any(e.path != e.path.strip() for e in train.examples + test.examples)


def test_hmdb51_names_with_hash(fixtures_dir):
    test = read_hmdb51(fixtures_dir / "hmdb51" / "splits")["test"]
    hashed = [e for e in test.examples if "#" in e.path]
    assert hashed
    name = "catch/Goalkeeper_Training_Day_#_2_catch_f_cm_np1_ba_bad_3.avi"
    match = [e for e in hashed if e.path == name]
    assert len(match) == 1
    assert test.class_names[match[0].label] == "catch"


def test_hmdb51_missing_files_reported(fixtures_dir, tmp_path):
    (tmp_path / "catch").mkdir()
    video = tmp_path / "catch" / "Goalkeeper_Training_Day_#_2_catch_f_cm_np1_ba_bad_3.avi"
    video.write_bytes(b"x")
    splits = read_hmdb51(fixtures_dir / "hmdb51" / "splits", root=tmp_path)
    assert len(splits["train"]) == 0 and len(splits["train"].missing) == 3570
    assert [e.path for e in splits["test"].examples] == [str(video)]
    assert len(splits["test"].missing) == 1529
    assert all(m.endswith("file not found") for m in splits["test"].missing)


def test_hmdb51_malformed_line(tmp_path):
    path = tmp_path / "brush_hair_test_split1.txt"
    path.write_text("a_brush_hair_0.avi 1 \nb_brush_hair_0.avi 2 \nc_brush_hair_0.avi 7 \n")
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:3:")):
        read_hmdb51(tmp_path)


def test_hmdb51_line_with_an_extra_field_is_refused(tmp_path):
    path = tmp_path / "brush_hair_test_split1.txt"
    path.write_text("a_brush_hair_0.avi 1 \nd_brush_hair_0.avi 2 1\n")
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2: expected")):
        read_hmdb51(tmp_path)


def test_hmdb51_a_video_on_two_lines_is_refused_with_both(tmp_path):
    path = tmp_path / "brush_hair_test_split1.txt"
    path.write_text("a_brush_hair_0.avi 1 \nb_brush_hair_0.avi 2 \na_brush_hair_0.avi 2 \n")
    with pytest.raises(DatasetFormatError) as raised:
        read_hmdb51(tmp_path)
    assert str(raised.value) == (
        f"{path}:3: 'brush_hair/a_brush_hair_0.avi' is listed again (first at {path}:1)"
    )


def test_hmdb51_a_video_of_another_class_is_refused_by_line(tmp_path):
    """Every HMDB51 video's name holds its class: a line pasted into another class's file
    would train and test the video under the wrong label, or go missing in silence."""
    path = tmp_path / "catch_test_split1.txt"
    path.write_text("a_catch_0.avi 1 \nApril_09_brush_hair_u_nm_np1_ba_goo_0.avi 1 \n")
    with pytest.raises(DatasetFormatError) as raised:
        read_hmdb51(tmp_path)
    assert str(raised.value) == (
        f"{path}:2: April_09_brush_hair_u_nm_np1_ba_goo_0.avi is not a catch video: its name "
        "lacks '_catch_', which every HMDB51 video's name holds (a line of another class's file?)"
    )
    # A class whose name begins another's: a kick_ball video holds '_kick_' too.
    path.unlink()
    kick = tmp_path / "kick_test_split1.txt"
    kick.write_text("a_kick_0.avi 1\nGoal_kick_ball_f_cm_np1_ri_goo_0.avi 1\n")
    (tmp_path / "kick_ball_test_split1.txt").write_text("Goal_kick_ball_f_cm_np1_ri_goo_1.avi 1\n")
    with pytest.raises(DatasetFormatError) as raised:
        read_hmdb51(tmp_path)
    assert str(raised.value) == (
        f"{kick}:2: Goal_kick_ball_f_cm_np1_ri_goo_0.avi is not a kick video: its name holds "
        "'_kick_ball_', a kick_ball video's (a line of another class's file?)"
    )


def test_hmdb51_class_without_this_splits_file_is_refused(tmp_path):
    for name in (
        "brush_hair_test_split1.txt",
        "brush_hair_test_split2.txt",
        "wave_test_split2.txt",
    ):
        (tmp_path / name).write_text(f"a_{name.split('_test')[0]}_0.avi 1 \n")
    with pytest.raises(DatasetFormatError, match="no wave_test_split1.txt, though wave"):
        read_hmdb51(tmp_path, split=1)
    assert read_hmdb51(tmp_path, split=2)["train"].class_names == ["brush_hair", "wave"]


def test_an_empty_split_file_or_class_index_is_named(fixtures_dir, tmp_path):
    (tmp_path / "brush_hair_test_split1.txt").write_text("a_brush_hair_0.avi 1 \n")
    (tmp_path / "wave_test_split1.txt").write_text("")
    with pytest.raises(DatasetFormatError, match="wave_test_split1.txt: lists no video"):
        read_hmdb51(tmp_path)
    folder = _ucf101_copy(fixtures_dir, tmp_path, ["ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1"])
    (folder / "testlist01.txt").write_text("\r\n")
    with pytest.raises(DatasetFormatError, match="testlist01.txt: lists no video"):
        read_ucf101(folder)
    (folder / "classInd.txt").write_text("")
    with pytest.raises(DatasetFormatError, match="classInd.txt: lists no class"):
        read_ucf101(folder)


def test_hmdb51_no_split_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path))):
        read_hmdb51(tmp_path, split=2)


# ---------------------------------------------------------------- VISPR


def test_vispr_lists_counted_without_jsons(fixtures_dir):
    splits = read_vispr(fixtures_dir / "vispr")
    assert {name: len(split) for name, split in splits.items()} == {
        "train": 10000,
        "val": 4167,
        "test": 8000,
    }
    train = splits["train"]
    assert train.attribute_names == list(VISPR1)
    assert train.examples[0].path == "images/train2017/2017_10001018.jpg"
    assert train.examples[0].privacy == ()  # unknown: the JSON is not redistributable
    assert len(train.missing) == 10000
    assert "2017_10001018.json" in train.missing[0] and "not found" in train.missing[0]
    # An empty root is no root: the JSONs are looked for under the annotations alone.
    assert read_vispr(fixtures_dir / "vispr", root="")["train"].missing == train.missing


def test_vispr_attribute_vocabulary(fixtures_dir):
    vocabulary = read_attribute_vocabulary(fixtures_dir / "vispr" / "attributes.tsv")
    assert len(vocabulary) == 68 and vocabulary[0] == "a0_safe"
    assert all("\r" not in a for a in vocabulary)
    assert len(attribute_subset("vispr1", vocabulary)) == 7
    assert len(attribute_subset("vispr2", vocabulary)) == 7
    assert set(VISPR1).isdisjoint(VISPR2)
    assert "a0_safe" not in attribute_subset("all", vocabulary)
    assert len(attribute_subset("all", vocabulary)) == 67
    assert attribute_subset("a4_gender, a16_race", vocabulary) == ["a4_gender", "a16_race"]
    pa = read_attribute_vocabulary(fixtures_dir / "vispr" / "attributes_pa_hmdb51.tsv")
    assert sorted(pa) == sorted(VISPR1)


def test_vispr_attribute_vocabulary_written_by_a_spreadsheet_or_by_hand(fixtures_dir, tmp_path):
    """A byte-order mark (Excel's, Notepad's) is dropped, not read as a header that is not one
    (an `attribute_id` attribute); an id listed twice is named with both lines."""
    text = (fixtures_dir / "vispr" / "attributes.tsv").read_text()
    (tmp_path / "bom.tsv").write_text(text, encoding="utf-8-sig")
    expected = read_attribute_vocabulary(fixtures_dir / "vispr" / "attributes.tsv")
    assert read_attribute_vocabulary(tmp_path / "bom.tsv") == expected
    lines = text.splitlines()
    (tmp_path / "twice.tsv").write_text("\n".join([*lines, lines[3]]) + "\n")
    with pytest.raises(DatasetFormatError) as raised:
        read_attribute_vocabulary(tmp_path / "twice.tsv")
    repeated = lines[3].split("\t")[1]
    assert str(raised.value) == (
        f"{tmp_path / 'twice.tsv'}:{len(lines) + 1}: attribute id {repeated!r} again (first on "
        "line 4)"
    )


def test_an_attribute_vocabulary_without_an_attribute_is_named(fixtures_dir, tmp_path):
    header = (fixtures_dir / "vispr" / "attributes.tsv").read_text().splitlines()[0]
    for name, text in (("empty.tsv", ""), ("header.tsv", header + "\n")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(DatasetFormatError) as raised:
            read_attribute_vocabulary(path)
        message = "lists no attribute (an empty file, or its header alone)"
        assert str(raised.value) == f"{path}: {message}"


@pytest.mark.parametrize("attributes", ["vispr2", list(VISPR2)])
def test_vispr2_subset(fixtures_dir, attributes):
    splits = read_vispr(fixtures_dir / "vispr", attributes=attributes)
    assert splits["val"].attribute_names == list(VISPR2)
    assert len(splits["val"].attribute_names) == 7


def test_vispr_unknown_or_repeated_attribute_named(fixtures_dir):
    tsv = fixtures_dir / "vispr" / "attributes.tsv"
    with pytest.raises(ValueError) as raised:
        read_vispr(fixtures_dir / "vispr", attributes=["a4_gender", "a99_not_an_attribute"])
    assert str(raised.value) == f"unknown VISPR attribute(s) a99_not_an_attribute: not in {tsv}"
    with pytest.raises(ValueError, match="a65_rel_soci"):
        read_vispr(fixtures_dir / "vispr", attributes="a4_gender,a65_rel_soci")
    with pytest.raises(ValueError, match="choose distinct VISPR attributes"):
        read_vispr(fixtures_dir / "vispr", attributes="a4_gender,a4_gender")


def _vispr_annotations(fixtures_dir, tmp_path, records):
    """A VISPR folder with the real attributes.tsv and small generated lists and JSONs (one
    safe image in a subset `records` does not give: an empty list is refused)."""
    folder = tmp_path / "vispr"
    folder.mkdir()
    tsv = (fixtures_dir / "vispr" / "attributes.tsv").read_bytes()
    (folder / "attributes.tsv").write_bytes(tsv)
    for subset in ("train", "val", "test"):
        lines = []
        for image_id, labels in records.get(subset, {f"{subset}_0": ["a0_safe"]}).items():
            relative = f"annotations/{subset}2017/{image_id}.json"
            lines.append(relative)
            json_path = folder / relative
            json_path.parent.mkdir(parents=True, exist_ok=True)
            record = {
                "id": image_id,
                "image_path": f"images/{subset}2017/{image_id}.jpg",
                "labels": labels,
            }
            json_path.write_text(json.dumps(record) if isinstance(labels, list) else labels)
        (folder / f"{subset}2017.txt").write_text("\r\n".join(lines) + "\r\n")
    return folder


def test_vispr_per_image_json_labels(fixtures_dir, tmp_path):
    folder = _vispr_annotations(
        fixtures_dir,
        tmp_path,
        {
            "train": {
                "2017_1": ["a10_face_partial", "a16_race"],
                "2017_2": ["a0_safe"],
                "2017_3": ["a4_gender", "a65_rel_social"],
            }
        },
    )
    train = read_vispr(folder)["train"]
    assert train.missing == []
    assert [e.privacy for e in train.examples] == [
        (0, 0, 0, 1, 0, 0, 0),
        (0, 0, 0, 0, 0, 0, 0),
        (0, 1, 0, 0, 0, 0, 1),
    ]
    train2 = read_vispr(folder, attributes="vispr2")["train"]
    assert train2.examples[0].privacy == (0, 1, 0, 0, 0, 0, 0)
    # With a root, an image not on disk is reported instead of returned.
    images = tmp_path / "root" / "images" / "train2017"
    images.mkdir(parents=True)
    (images / "2017_2.jpg").write_bytes(b"x")
    train = read_vispr(folder, root=tmp_path / "root")["train"]
    assert [e.path for e in train.examples] == [str(images / "2017_2.jpg")]
    assert len(train.missing) == 2 and all("image not found" in m for m in train.missing)


def test_vispr_image_without_its_json_is_skipped_and_named_when_read_with_a_root(
    fixtures_dir, tmp_path
):
    folder = _vispr_annotations(
        fixtures_dir, tmp_path, {"train": {"2017_1": ["a4_gender"], "2017_2": ["a0_safe"]}}
    )
    (folder / "annotations" / "train2017" / "2017_1.json").unlink()
    images = folder / "images" / "train2017"
    images.mkdir(parents=True)
    for image_id in ("2017_1", "2017_2"):
        (images / f"{image_id}.jpg").write_bytes(b"x")
    train = read_vispr(folder, root=folder)["train"]
    assert [(e.path, e.privacy) for e in train.examples] == [(str(images / "2017_2.jpg"), (0,) * 7)]
    assert train.missing == [
        f"{folder / 'annotations/train2017/2017_1.json'}: annotation JSON not found, image skipped"
    ]


def test_an_empty_vispr_list_is_named(fixtures_dir, tmp_path):
    folder = _vispr_annotations(fixtures_dir, tmp_path, {})
    (folder / "test2017.txt").write_text("\r\n")
    with pytest.raises(DatasetFormatError) as raised:
        read_vispr(folder)
    assert str(raised.value) == f"{folder / 'test2017.txt'}: lists no image (an empty file)"


@pytest.mark.parametrize("again_in", ["train", "test"])
def test_a_vispr_image_listed_twice_is_refused_with_both_lines(fixtures_dir, tmp_path, again_in):
    """A repeated line (an image trained on twice) or an image in two lists (a test image
    trained on) is refused, as UCF101's and HMDB51's lists are (the real lists hold neither:
    `test_vispr_lists_counted_without_jsons` reads them)."""
    folder = _vispr_annotations(fixtures_dir, tmp_path, {})
    listed = folder / f"{again_in}2017.txt"
    with listed.open("a") as lines:
        lines.write("annotations/train2017/train_0.json\r\n")
    with pytest.raises(DatasetFormatError) as raised:
        read_vispr(folder)
    assert str(raised.value) == (
        f"{listed}:2: 'annotations/train2017/train_0.json' is listed again "
        f"(first at {folder / 'train2017.txt'}:1)"
    )


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "annotations/val2017/val_0.json 1",
            "expected one annotation JSON path, got 'annotations/val2017/val_0.json 1'",
        ),
        (
            "annotations/val2017",
            "'annotations/val2017' names the folder {folder}, not an annotation JSON",
        ),
    ],
)
def test_a_vispr_list_line_that_names_no_annotation_json_is_refused(
    fixtures_dir, tmp_path, line, message
):
    folder = _vispr_annotations(fixtures_dir, tmp_path, {})
    listed = folder / "val2017.txt"
    listed.write_text(line + "\n")
    with pytest.raises(DatasetFormatError) as raised:
        read_vispr(folder)
    expected = message.format(folder=folder / "annotations" / "val2017")
    assert str(raised.value) == f"{listed}:1: {expected}"


def test_a_cache_never_holds_an_example_without_its_privacy_labels(tmp_path):
    image = tmp_path / "a.png"
    assert cv2.imwrite(str(image), np.zeros((8, 8, 3), np.uint8))
    split = Split(
        [Example(str(image), privacy=(1, 0)), Example(str(image))], attribute_names=["x", "y"]
    )
    manifest = prepare_image_cache(split, tmp_path / "cache", short_side=8)
    assert manifest["num_records"] == 1
    assert manifest["failures"] == [
        {
            "path": str(image),
            "reason": f"{image}: 0 privacy labels for the split's 2 attributes "
            "(is its annotation missing?)",
        }
    ]
    assert verify_cache(tmp_path / "cache")["ok"]


def test_vispr_malformed_json_named(fixtures_dir, tmp_path):
    folder = _vispr_annotations(fixtures_dir, tmp_path, {"val": {"2017_9": '{"labels": ['}})
    with pytest.raises(DatasetFormatError, match="2017_9.json"):
        read_vispr(folder)
    empty_path = '{"image_path": "", "labels": []}'  # it would name the images' folder
    (tmp_path / "b").mkdir()
    folder = _vispr_annotations(fixtures_dir, tmp_path / "b", {"val": {"2017_9": empty_path}})
    with pytest.raises(DatasetFormatError, match="2017_9.json: .*a non-empty 'image_path'"):
        read_vispr(folder)


def test_vispr_json_that_is_not_utf8_named(fixtures_dir, tmp_path):
    folder = _vispr_annotations(fixtures_dir, tmp_path, {"val": {"2017_9": ["a4_gender"]}})
    (path,) = folder.rglob("2017_9.json")
    path.write_bytes(b'{"image_path": "images/val2017/2017_9.jpg", "labels": ["caf\xe9"]}')
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}: not UTF-8 text")):
        read_vispr(folder)


def test_vispr_unknown_label_in_json_named(fixtures_dir, tmp_path):
    folder = _vispr_annotations(fixtures_dir, tmp_path, {"test": {"2017_5": ["a999_bogus"]}})
    with pytest.raises(DatasetFormatError, match="2017_5.json") as info:
        read_vispr(folder)
    assert "a999_bogus" in str(info.value)


# ---------------------------------------------------------------- PA-HMDB51


def _pa_record(face=1, gender=(1, 2), skin=0, nudity=0, relationship=0):
    return {
        "face": [[0, 10, 0], [11, 20, face]],
        "gender": [[0, 20, list(gender)]],
        "skin_color": [[0, 20, skin]],
        "nudity": [[0, 20, nudity]],
        "relationship": [[0, 20, relationship]],
        "review": False,
        "note": "",
    }


def test_pa_hmdb51_reader(tmp_path):
    annotations = tmp_path / "PrivacyAttributes"
    annotations.mkdir()
    (annotations / "brush_hair.json").write_text(
        json.dumps(
            {
                "a#1_brush_hair_0.avi": _pa_record(face=2, gender=[1, 2], skin=[0, 3]),
                "b_brush_hair_0.avi": _pa_record(face=0, gender=[0], nudity=1, relationship=1),
            }
        )
    )
    (annotations / "cartwheel.json").write_text(
        json.dumps({"c_cartwheel_0.avi": _pa_record(gender=[0])})
    )
    test = read_pa_hmdb51(annotations)["test"]
    assert test.class_names == ["brush_hair", "cartwheel"]
    assert test.attribute_names == list(PA_HMDB51_ATTRIBUTES)
    assert PA_HMDB51_ATTRIBUTES == ("gender", "face", "nudity", "skin_color", "relationship")
    by_path = {e.path: (e.label, e.privacy) for e in test.examples}
    assert by_path == {
        "brush_hair/a#1_brush_hair_0.avi": (0, (1, 1, 0, 1, 0)),
        "brush_hair/b_brush_hair_0.avi": (0, (0, 0, 1, 0, 1)),
        "cartwheel/c_cartwheel_0.avi": (1, (0, 1, 0, 0, 0)),
    }
    # With a root, videos not on disk are listed as missing.
    (tmp_path / "videos" / "cartwheel").mkdir(parents=True)
    (tmp_path / "videos" / "cartwheel" / "c_cartwheel_0.avi").write_bytes(b"x")
    test = read_pa_hmdb51(annotations, root=tmp_path / "videos")["test"]
    assert [e.path for e in test.examples] == [
        str(tmp_path / "videos" / "cartwheel" / "c_cartwheel_0.avi")
    ]
    assert len(test.missing) == 2


@pytest.mark.parametrize(
    "content",
    [
        '{"a_kiss_0.avi": {"face": [[0, 1, 1]]',  # truncated JSON
        json.dumps(["a_kiss_0.avi"]),
        json.dumps({"a_kiss_0.avi": "face"}),
        json.dumps({"a_kiss_0.avi": {**_pa_record(), "face": [[0, 10, "yes"]]}}),
        json.dumps({"a_kiss_0.avi": {**_pa_record(), "nudity": [[0, 10]]}}),
        json.dumps({"a_kiss_0.avi": {**_pa_record(), "gender": [[0, 10, [1, True]]]}}),
        json.dumps({"a_kiss_0.avi": {k: v for k, v in _pa_record().items() if k != "skin_color"}}),
    ],
)
def test_pa_hmdb51_malformed_names_file(tmp_path, content):
    path = tmp_path / "kiss.json"
    path.write_text(content)
    with pytest.raises(DatasetFormatError, match=re.escape(str(path))):
        read_pa_hmdb51(tmp_path)


def test_pa_hmdb51_names_a_missing_folder_and_one_without_its_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="typo: no such folder"):
        read_pa_hmdb51(tmp_path / "typo")
    with pytest.raises(FileNotFoundError, match="no PA-HMDB51 '<action>.json' files"):
        read_pa_hmdb51(tmp_path)


@pytest.mark.parametrize(
    "attribute, ranges, problem",
    [
        ("face", [[20, 11, 1]], "range [20, 11, 1]: frames must satisfy 0 <= start <= end"),
        ("nudity", [[-1, 10, 0]], "range [-1, 10, 0]: frames must satisfy 0 <= start <= end"),
        ("relationship", [[0, 20, 2]], "range [0, 20, 2]: values must be in 0 .. 1"),
        ("skin_color", [[0, 20, [1, 4]]], "range [0, 20, [1, 4]]: values must be in 0 .. 3"),
        ("gender", [[0, 20, [-1]]], "range [0, 20, [-1]]: values must be in 0 .. 2"),
    ],
)
def test_pa_hmdb51_backward_range_or_out_of_range_value_names_file_video_attribute(
    tmp_path, attribute, ranges, problem
):
    path = tmp_path / "kiss.json"
    path.write_text(json.dumps({"a_kiss_0.avi": {**_pa_record(), attribute: ranges}}))
    with pytest.raises(DatasetFormatError) as raised:
        read_pa_hmdb51(tmp_path)
    assert str(raised.value) == f"{path}: video 'a_kiss_0.avi': attribute {attribute!r}: {problem}"


def test_pa_hmdb51_video_given_twice_is_refused_and_unknown_keys_are_named(tmp_path, caplog):
    path = tmp_path / "kiss.json"
    record = json.dumps(_pa_record())
    path.write_text(f'{{"a_kiss_0.avi": {record}, "a_kiss_0.avi": {record}}}')
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}: 'a_kiss_0.avi' given twice")):
        read_pa_hmdb51(tmp_path)
    path.write_text(json.dumps({"a_kiss_0.avi": {**_pa_record(), "age": [[0, 20, 5]]}}))
    with caplog.at_level("WARNING"):
        test = read_pa_hmdb51(tmp_path)["test"]
    assert test.examples[0].privacy == (1, 1, 0, 0, 0)
    assert f"{path}: ignoring the keys 'age', which are not PA-HMDB51 attributes" in caplog.text


def test_pa_hmdb51_videos_listed_under_another_action_are_refused(tmp_path):
    # As in Privacy-AdversarialLearning's raw_pa_hmdb51_annos/dive.json, whose climb_stairs
    # videos would otherwise be labelled dive.
    path = tmp_path / "dive.json"
    videos = ["BIG_FISH_dive_f_nm_np1_fr_med_1.avi", "BIG_FISH_climb_stairs_f_nm_np1_fr_med_1.avi"]
    path.write_text(json.dumps({video: _pa_record() for video in videos}))
    with pytest.raises(DatasetFormatError) as raised:
        read_pa_hmdb51(tmp_path)
    assert str(raised.value).startswith(
        f"{path}: 1 of its 2 videos are not of action 'dive' (e.g. "
        "'BIG_FISH_climb_stairs_f_nm_np1_fr_med_1.avi': its name lacks '_dive_', which every "
        "HMDB51 video's name holds): a copy with videos under the wrong action"
    )
    with pytest.raises(DatasetFormatError, match="not of action 'dive'"):
        read_frame_ranges(tmp_path)
    # A climb_stairs video listed under climb holds '_climb_' too.
    path.unlink()
    climb = tmp_path / "climb.json"
    climb.write_text(json.dumps({video: _pa_record() for video in videos[1:]}))
    (tmp_path / "climb_stairs.json").write_text(json.dumps({}))
    with pytest.raises(DatasetFormatError, match="holds '_climb_stairs_', a climb_stairs video's"):
        read_pa_hmdb51(tmp_path)


def test_pa_hmdb51_no_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path))):
        read_pa_hmdb51(tmp_path)


# ---------------------------------------------------------------- VP labels


def test_vp_labels_csv_and_json_agree(tmp_path):
    csv_path = tmp_path / "labels.csv"
    # columns in another order than VP_ATTRIBUTES, an extra column, CRLF, a blank line
    csv_path.write_text(
        "video,gender,face,extra,skin_color,nudity,relationship\r\n"
        "v_A_g01_c01.avi,1,0,x,1,0,0\r\n"
        "\r\n"
        "ApplyEyeMakeup/v_B_g01_c01.avi, 0 ,1,y,0,1,1\r\n"
    )
    expected = {
        "v_A_g01_c01.avi": (0, 1, 1, 0, 0),
        "ApplyEyeMakeup/v_B_g01_c01.avi": (1, 0, 0, 1, 1),
    }
    assert VP_ATTRIBUTES == ("face", "skin_color", "gender", "nudity", "relationship")
    assert read_vp_labels(csv_path) == expected
    json_path = tmp_path / "labels.json"
    json_path.write_text(
        json.dumps(
            {
                "v_A_g01_c01.avi": {
                    "gender": 1,
                    "face": 0,
                    "skin_color": 1,
                    "nudity": 0,
                    "relationship": False,
                },
                "ApplyEyeMakeup/v_B_g01_c01.avi": [1, 0, 0, "1", True],
            }
        )
    )
    assert read_vp_labels(json_path) == expected
    assert read_vp_labels(csv_path, ["nudity", "face"]) == {
        "v_A_g01_c01.avi": (0, 0),
        "ApplyEyeMakeup/v_B_g01_c01.avi": (1, 1),
    }


@pytest.mark.parametrize(
    "name, content, where",
    [
        ("a.csv", "video,face,skin_color,gender,nudity,relationship\nv.avi,1,0,2,0,0\n", ":2:"),
        ("a.csv", "video,face,skin_color,gender,nudity,relationship\nv.avi,1,0,1,0\n", ":2:"),
        ("a.csv", "video,face,skin_color,gender,nudity\nv.avi,1,0,1,0\n", ":1:"),
        ("a.csv", "", ":1:"),
        (
            "a.csv",
            "video,face,skin_color,gender,nudity,relationship\nv.avi,1,0,1,0,0\nv.avi,1,0,1,0,1\n",
            ":3:",
        ),
        ("a.json", '{"v.avi": [1, 0, 1, 0, 0]', ":1:"),
        ("a.json", '{"v.avi": [1, 0, 1, 0]}', ": video 'v.avi'"),
        ("a.json", '{"v.avi": [1, 0, 1, 0, -1]}', ": video 'v.avi'"),
        ("a.json", '{"v.avi": {"face": 1}}', ": video 'v.avi'"),
        ("a.json", "[1, 2]", ":"),
        ("a.json", '{"v.avi": [1, 0, 1, 0, 0], "v.avi": [0, 0, 0, 0, 0]}', ": 'v.avi' given twice"),
        ("a.json", '{" ": [1, 0, 1, 0, 0]}', ": video ' ': no video name"),
        ("a.csv", "video,face,skin_color,gender,nudity,relationship\n,1,0,1,0,0\n", ":2: no video"),
        (
            "a.csv",
            "video,face,face,skin_color,gender,nudity,relationship\nv.avi,1,0,0,1,0,0\n",
            ":1: the header names column(s) ['face'] twice",
        ),
    ],
)
def test_vp_labels_malformed_names_file(tmp_path, name, content, where):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}{where}")):
        read_vp_labels(path)


def test_vp_labels_json_keys_neither_read_nor_vps_are_named(tmp_path, caplog):
    path = tmp_path / "a.json"
    record = dict(zip(VP_ATTRIBUTES, (1, 0, 1, 0, 0)), hair=1)
    path.write_text(json.dumps({"v.avi": record}))
    with caplog.at_level("WARNING"):
        assert read_vp_labels(path, ["face", "gender"]) == {"v.avi": (1, 1)}
    assert f"{path}: ignoring the keys 'hair', which are neither the attributes read" in (
        caplog.text
    )


@pytest.mark.parametrize("name", ["a.csv", "a.json"])
def test_vp_labels_not_utf8_names_file(tmp_path, name):
    path = tmp_path / name
    text = "video,face\ncaf\xe9.avi,1\n" if name.endswith(".csv") else '{"caf\xe9.avi": [1]}'
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}: not UTF-8 text")):
        read_vp_labels(path, ["face"])


def test_vp_labels_csv_of_file_paths_and_label_lists(tmp_path):
    """The form loaders of the VP release read: a list per video, in the names' order."""
    path = tmp_path / "vp_ucf101_privacy_attribute_label.csv"
    path.write_text(
        'File Path,Array Values\r\nApplyEyeMakeup/v_A_g01_c01.mp4,"[1, 0, 1, 0, 0]"\r\n'
        'Archery/v_C.mp4,"[0, 1, 1, 1, 0]"\r\n'
    )
    labels = read_vp_labels(path)
    assert labels == {
        "ApplyEyeMakeup/v_A_g01_c01.mp4": (1, 0, 1, 0, 0),
        "Archery/v_C.mp4": (0, 1, 1, 1, 0),
    }
    split = Split([Example("/d/Archery/v_C.avi", 2)], class_names=["A", "B", "Archery"])
    assert attach_privacy_labels(split, labels).examples[0].privacy == (0, 1, 1, 1, 0)
    # pandas' index column beside them, a tuple, floats: as pandas and ast read them
    path.write_text(',File Path,Array Values\n0,Archery/v_C.mp4,"(0, 1.0, 1, 1, 0)"\n')
    assert read_vp_labels(path) == {"Archery/v_C.mp4": (0, 1, 1, 1, 0)}
    # A subset of the five, picked from the lists by their order; a JSON list alike.
    assert read_vp_labels(path, ["relationship", "face", "skin_color"], VP_ATTRIBUTES) == {
        "Archery/v_C.mp4": (0, 0, 1)
    }
    lists = tmp_path / "lists.json"
    lists.write_text('{"Archery/v_C.mp4": [0, 1, 1, 1, 0]}')
    assert read_vp_labels(lists, ["gender", "nudity"], VP_ATTRIBUTES) == {"Archery/v_C.mp4": (1, 1)}
    with pytest.raises(ValueError, match=r"\['face', 'eyes'\] must be among the list order"):
        read_vp_labels(path, ["face", "eyes"], VP_ATTRIBUTES)
    path.write_text('File Path,Array Values\nArchery/v_C.mp4,"[0, 1]"\n')
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2: expected a list of 5")):
        read_vp_labels(path)
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2: expected a list of 5")):
        read_vp_labels(path, ["face", "gender"], VP_ATTRIBUTES)
    path.write_text('File Path,Array Values\nArchery/v_C.mp4,"[0, 1, 2, 0, 0]"\n')
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2: expected a 0/1 label")):
        read_vp_labels(path)


def test_vp_labels_bad_suffix(tmp_path):
    with pytest.raises(ValueError, match="labels.txt"):
        read_vp_labels(tmp_path / "labels.txt")


def test_attach_privacy_labels():
    split = Split(
        [Example("/d/ApplyEyeMakeup/v_A_g01_c01.avi", 0), Example("/d/Archery/v_C.avi", 2)],
        class_names=["ApplyEyeMakeup", "ApplyLipstick", "Archery"],
        missing=["/d/x.avi: file not found"],
    )
    labeled = attach_privacy_labels(split, {"ApplyEyeMakeup/V_A_G01_C01.AVI": (1, 0, 0, 0, 1)})
    assert labeled.examples == [Example("/d/ApplyEyeMakeup/v_A_g01_c01.avi", 0, (1, 0, 0, 0, 1))]
    assert labeled.attribute_names == list(VP_ATTRIBUTES)
    assert labeled.missing == ["/d/x.avi: file not found", "/d/Archery/v_C.avi: no privacy labels"]
    assert len(split) == 2  # the input split is left unchanged
    with pytest.raises(ValueError, match="v.avi"):
        attach_privacy_labels(split, {"v.avi": (1, 0)})
    with pytest.raises(
        ValueError, match="of 'v_C.avi' and 'v_c.mp4' differ, and both are video 'v_c'"
    ):
        attach_privacy_labels(split, {"v_C.avi": (1, 0, 0, 0, 0), "v_c.mp4": (0, 0, 0, 0, 0)})


# ---------------------------------------------------------------- video decoding


@pytest.mark.parametrize(
    "name, frames, fps, size",
    [("test.avi", 164, 25.0, (240, 320)), ("part_0.mp4", 32, 30.0, (256, 340))],
)
def test_read_and_probe_fixture_videos(fixtures_dir, name, frames, fps, size):
    path = fixtures_dir / "videos" / name
    info = probe_video(path)
    assert (info.num_frames, info.fps, (info.height, info.width)) == (frames, fps, size)
    video = read_video(path)
    assert video.dtype == np.uint8 and video.shape == (frames, *size, 3)
    assert video.std() > 5  # real content, not a blank frame
    first = read_video(path, max_frames=3)
    assert first.shape == (3, *size, 3)
    np.testing.assert_array_equal(first, video[:3])
    streamed = iter_video_frames(path)
    np.testing.assert_array_equal(next(streamed), video[0])
    streamed.close()


@pytest.mark.parametrize("name", ["test.avi", "part_0.mp4"])
def test_frame_numbers_are_those_opencv_seeks_to(fixtures_dir, name):
    """PA-HMDB51 labels frames by number, and VITA's `extract_hmdb_testing_frames.py` takes
    frame i by OpenCV's seek (CAP_PROP_POS_FRAMES): frame i decoded here is that same frame."""
    path = fixtures_dir / "videos" / name
    video = read_video(path)
    capture = cv2.VideoCapture(str(path))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == len(video)
    for index in (0, 1, len(video) // 2, len(video) - 1):
        capture.set(cv2.CAP_PROP_POS_FRAMES, index)
        found, frame = capture.read()
        assert found
        np.testing.assert_array_equal(frame[..., ::-1], video[index])
    capture.release()


def test_read_video_is_rgb(tmp_path):
    # A red-green-blue striped clip written with write_video decodes in RGB order.
    frame = np.zeros((32, 48, 3), np.uint8)
    frame[:, :16, 0] = 255
    frame[:, 16:32, 1] = 255
    frame[:, 32:, 2] = 255
    path = tmp_path / "rgb.avi"
    write_video(path, [frame] * 4, fps=10)
    video = read_video(path)
    assert video.shape == (4, 32, 48, 3)
    centre = video[:, 16, [8, 24, 40]].astype(int)  # (T, 3 stripes, RGB)
    assert (np.argmax(centre, axis=-1) == [0, 1, 2]).all()
    info = probe_video(path)
    assert (info.num_frames, info.fps, info.height, info.width) == (4, 10.0, 32, 48)


def test_write_video_odd_size_and_h264(tmp_path):
    import av

    if "libx264" not in av.codecs_available:
        pytest.skip("this PyAV build has no libx264")
    frames = np.random.default_rng(0).integers(0, 255, (5, 17, 23, 3), dtype=np.uint8)
    path = tmp_path / "odd.mp4"
    write_video(path, frames, fps=30, codec="libx264")
    video = read_video(path)
    assert video.shape == (5, 18, 24, 3)
    assert probe_video(path).num_frames == 5
    with pytest.raises(ValueError, match="no frames"):
        write_video(tmp_path / "none.avi", [])


def test_write_video_mpeg4_quality_sets_the_quantiser(tmp_path):
    # A smooth moving gradient: the finer quantiser (1) reproduces it better than a coarse one.
    ramp = np.linspace(0, 255, 48)[None, :, None] + np.arange(8)[:, None, None, None] * 3
    frames = np.broadcast_to(ramp % 256, (8, 32, 48, 3)).astype(np.uint8)
    errors = {}
    for quality in (1, 8):
        path = tmp_path / f"q{quality}.avi"
        write_video(path, frames, fps=25, quality=quality)
        errors[quality] = np.abs(read_video(path).astype(float) - frames).mean()
    assert errors[1] < errors[8] / 2, errors


def test_read_video_bad_max_frames(fixtures_dir):
    with pytest.raises(ValueError, match="max_frames"):
        read_video(fixtures_dir / "videos" / "test.avi", max_frames=0)


def _bad_videos(tmp_path, fixtures_dir):
    empty = tmp_path / "empty.avi"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, np.uint8).tobytes())
    header_only = tmp_path / "header_only.avi"
    header_only.write_bytes((fixtures_dir / "videos" / "test.avi").read_bytes()[:4000])
    text = tmp_path / "notes.avi"
    text.write_text("not a video\n")
    return {
        "empty": empty,
        "garbage": garbage,
        "header_only": header_only,
        "text": text,
        "absent": tmp_path / "absent.avi",
    }


@pytest.mark.parametrize("kind", ["empty", "garbage", "header_only", "text", "absent"])
@pytest.mark.parametrize("reader", [read_video, probe_video, lambda p: list(iter_video_frames(p))])
def test_bad_videos_raise_video_decode_error(tmp_path, fixtures_dir, kind, reader):
    path = _bad_videos(tmp_path, fixtures_dir)[kind]
    with pytest.raises(VideoDecodeError, match=re.escape(str(path))):
        reader(path)


def test_a_video_whose_frame_size_changes_is_named(tmp_path):
    """Two MPEG-TS pieces joined (`cat a.ts b.ts`, a re-streamed camera) decode as frames of
    two sizes, which no clip can hold."""
    pieces = []
    for name, (height, width) in (("a.ts", (32, 32)), ("b.ts", (24, 40))):
        write_video(tmp_path / name, np.zeros((3, height, width, 3), np.uint8))
        pieces.append((tmp_path / name).read_bytes())
    joined = tmp_path / "joined.ts"
    joined.write_bytes(b"".join(pieces))
    message = r"joined.ts: frame 4 is 40x24, the earlier frames 32x32 \(the frame size changes"
    with pytest.raises(VideoDecodeError, match=message):
        read_video(joined)


def test_a_cut_short_video_is_cached_with_a_warning_naming_it(tmp_path, fixtures_dir, caplog):
    data = (fixtures_dir / "videos" / "test.avi").read_bytes()
    path = tmp_path / "half.avi"
    path.write_bytes(data[: len(data) // 2])
    split = Split([Example(str(path), 0, ())], class_names=["a"])
    with caplog.at_level("WARNING"):
        manifest = prepare_video_cache(split, tmp_path / "cache", short_side=32, workers=1)
    assert manifest["num_records"] == 1 and manifest["failures"] == []
    decoded = len(read_video(path))
    assert f"{path}: the container declares 164 frames, {decoded} decoded (the file seems cut " in (
        caplog.text
    )
    reason = f"the container declares 164 frames, {decoded} decoded"
    assert manifest["cut_short"] == [{"path": str(path), "reason": reason}]
    caplog.clear()
    written = (tmp_path / "cache" / "manifest.json").stat()
    again = prepare_video_cache(split, tmp_path / "cache", short_side=32, workers=1)
    assert again["cut_short"] == manifest["cut_short"]  # kept in the shard's sidecar
    kept = (tmp_path / "cache" / "manifest.json").stat()  # the same manifest: not written again
    assert (kept.st_ino, kept.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert "cut short" not in caplog.text  # the shard was not written again
    assert again["cut_short_unrecorded"] == []
    # A shard kept from a prepare before sidecars listed them: its files are unknown, not none.
    sidecar = tmp_path / "cache" / again["shards"][0]["file"].replace(".tfrecord", ".json")
    sidecar.write_text(
        json.dumps({k: v for k, v in json.loads(sidecar.read_text()).items() if k != "cut_short"})
    )
    older = prepare_video_cache(split, tmp_path / "cache", short_side=32, workers=1)
    assert older["cut_short"] == [] and older["cut_short_unrecorded"] == [
        again["shards"][0]["file"]
    ]
    assert "cut short" not in caplog.text  # kept, not written again
    whole = Split([Example(str(fixtures_dir / "videos" / "test.avi"), 0, ())], class_names=["a"])
    with caplog.at_level("WARNING"):
        kept_whole = prepare_video_cache(whole, tmp_path / "whole", short_side=32, workers=1)
    assert "cut short" not in caplog.text and kept_whole["cut_short"] == []


def write_video_dropping_frames(path: Path, timestamps: list[int]) -> None:
    """An AVI (MPEG-4 part 2, 25 fps) holding a frame at each of `timestamps` (frame units)
    alone, as a writer that drops frames of a still scene leaves one: gaps in the timestamps,
    and a header that counts the frames up to the last."""
    container = av.open(str(path), "w")
    stream = container.add_stream("mpeg4", rate=25)
    stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
    for index, timestamp in enumerate(timestamps):
        frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * index, np.uint8), "rgb24")
        frame.pts = timestamp
        container.mux(stream.encode(frame))
    container.mux(stream.encode())
    container.close()


def test_a_video_whose_writer_dropped_frames_is_not_called_cut_short(tmp_path, caplog):
    path = tmp_path / "dropped.avi"
    write_video_dropping_frames(path, [0, 1, 2, 5, 6, 7, 9, 10])
    info = probe_video(path)
    assert (info.num_frames, info.declared_frames) == (8, 11)
    assert seems_cut_short(info.num_frames, info.declared_frames)  # by the counts alone
    assert stored_frame_span(path) == 11  # but its packets span the declared frames
    split = Split([Example(str(path), 0, ())], class_names=["a"])
    with caplog.at_level("WARNING"):
        manifest = prepare_video_cache(split, tmp_path / "cache", short_side=32, workers=1)
    assert "cut short" not in caplog.text and manifest["cut_short"] == []
    assert manifest["num_records"] == 1


def test_truncated_video_gives_frames_that_decode(tmp_path, fixtures_dir):
    data = (fixtures_dir / "videos" / "test.avi").read_bytes()
    path = tmp_path / "half.avi"
    path.write_bytes(data[: len(data) // 2])
    video = read_video(path)
    assert 0 < len(video) < 164 and video.shape[1:] == (240, 320, 3)
    info = probe_video(path)
    assert (info.num_frames, info.declared_frames) == (len(video), 164)
    assert seems_cut_short(info.num_frames, info.declared_frames)
    assert stored_frame_span(path) == len(video)  # its packets end where it was cut
    whole = probe_video(fixtures_dir / "videos" / "test.avi")
    assert (whole.num_frames, whole.declared_frames) == (164, 164)
    assert not seems_cut_short(whole.num_frames, whole.declared_frames)
    # A header's count a few frames off (an edit list, an estimate) is no sign of a cut.
    assert not seems_cut_short(157, 164)


# ---------------------------------------------------------------- caches


def _clip(num_frames, height, width, seed):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, (height // 8, width // 8, 3), dtype=np.uint8)
    frame = cv2.resize(base, (width, height), interpolation=cv2.INTER_NEAREST)
    return np.stack([np.roll(frame, t, axis=1) for t in range(num_frames)])


@pytest.fixture
def video_split(tmp_path, fixtures_dir):
    """Three written videos, the real part_0.mp4 and a corrupt file, in one split."""
    videos = tmp_path / "videos"
    videos.mkdir()
    paths = []
    for i, (frames, height, width) in enumerate([(5, 48, 64), (7, 64, 48), (3, 40, 40)]):
        path = videos / f"v{i}.avi"
        write_video(path, _clip(frames, height, width, i), fps=25)
        paths.append(str(path))
    corrupt = videos / "corrupt.avi"
    corrupt.write_bytes(b"\x00garbage" * 100)
    examples = [
        Example(paths[0], 0, (1, 0)),
        Example(str(corrupt), 1, (0, 0)),
        Example(paths[1], 1, (0, 1)),
        Example(str(fixtures_dir / "videos" / "part_0.mp4"), 2, (1, 1)),
        Example(paths[2], 0, (0, 0)),
    ]
    split = Split(
        examples,
        class_names=["a", "b", "c"],
        attribute_names=["face", "gender"],
        missing=["/nowhere/x.avi: file not found"],
    )
    return split, str(corrupt)


def _records(dataset):
    return [{k: v.numpy() for k, v in record.items()} for record in dataset]


def test_video_cache_prepare_verify_read(tmp_path, video_split):
    split, corrupt = video_split
    out = tmp_path / "cache"
    manifest = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=2)
    assert manifest["kind"] == "video"
    assert manifest["num_examples"] == 5 and manifest["num_records"] == 4
    assert len(manifest["shards"]) == 2 and sum(s["count"] for s in manifest["shards"]) == 4
    assert all((out / s["file"]).is_file() for s in manifest["shards"])
    assert [f["path"] for f in manifest["failures"]] == [corrupt]
    assert corrupt in manifest["failures"][0]["reason"]
    assert manifest["missing"] == split.missing
    assert manifest["class_names"] == ["a", "b", "c"]
    assert read_manifest(out) == manifest
    assert not list(out.glob("*.tmp"))

    report = verify_cache(out)
    assert report["ok"], report["errors"]
    assert report["records"] == report["expected"] == 4
    assert report["failures"] == manifest["failures"]

    # Shards hold a fixed random order of the (class-sorted) split; records keep their index.
    records = sorted(_records(read_video_cache(out)), key=lambda r: int(r["index"]))
    assert [r["num_frames"] for r in records] == [5, 7, 32, 3]
    assert [len(r["frames"]) for r in records] == [5, 7, 32, 3]
    assert [r["index"] for r in records] == [0, 2, 3, 4]
    assert [r["label"] for r in records] == [0, 1, 2, 0]
    assert [r["path"].decode() for r in records] == [split.examples[i].path for i in (0, 2, 3, 4)]
    assert records[0]["privacy"].dtype == np.float32
    np.testing.assert_array_equal(records[1]["privacy"], [0.0, 1.0])
    # short side 32, aspect ratio kept
    sizes = [(r["height"], r["width"]) for r in records]
    assert sizes == [(32, 43), (43, 32), (32, 42), (32, 32)]  # 340x256 -> 42.5 -> 42
    image = tf.io.decode_jpeg(records[2]["frames"][0]).numpy()
    assert image.shape == (32, 42, 3) and image.dtype == np.uint8
    # every cached frame is the decoded frame of its index, resized (RGB order kept)
    frames = read_video(split.examples[3].path)
    for t, encoded in enumerate(records[2]["frames"]):
        image = tf.io.decode_jpeg(encoded).numpy().astype(int)
        original = cv2.resize(frames[t], (42, 32), interpolation=cv2.INTER_AREA).astype(int)
        assert np.abs(image - original).mean() < 8, t  # JPEG loss on a tiny frame
        assert np.abs(image - original[..., ::-1]).mean() > 20, t  # not BGR
        if t:
            previous = cv2.resize(frames[t - 1], (42, 32), interpolation=cv2.INTER_AREA)
            assert np.abs(image - original).mean() < np.abs(image - previous).mean(), t


def test_video_cache_resumes(tmp_path, video_split):
    split, _ = video_split
    out = tmp_path / "cache"
    first = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    shards = [out / s["file"] for s in first["shards"]]
    stamps = {p: p.stat().st_mtime_ns for p in shards}
    # a complete rerun rewrites nothing
    assert prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1) == first
    assert {p: p.stat().st_mtime_ns for p in shards} == stamps
    # a run killed while writing the second shard: its temporary never got renamed into place
    shards[1].rename(killed_writers_temporary(shards[1]))
    os.utime(shards[0], ns=(1, 1))  # an old mtime, so a rewrite would be visible
    again = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    assert again == first
    assert shards[0].stat().st_mtime_ns == 1
    assert shards[1].is_file()
    assert not list(out.glob("*.tmp"))  # the killed run's temporary is removed
    assert verify_cache(out)["ok"]
    # other settings change the fingerprint: the shards are written again
    changed = prepare_video_cache(split, out, short_side=24, num_shards=2, workers=1)
    assert changed["fingerprint"] != first["fingerprint"]
    assert shards[0].stat().st_mtime_ns != 1
    assert {min(r["height"], r["width"]) for r in _records(read_video_cache(out))} == {24}


def test_a_transform_changes_each_file_before_it_is_resized_and_keys_the_cache(
    tmp_path, video_split
):
    split, _ = video_split
    out = tmp_path / "cache"
    plain = prepare_video_cache(split, out, short_side=32, num_shards=1, workers=2)
    seen = []

    def darken_left_half(path: str, clip: np.ndarray) -> np.ndarray:
        seen.append((path, clip.shape))
        clip = clip.copy()
        clip[:, :, : clip.shape[2] // 2] = 0
        return clip

    transform = FrameTransform(darken_left_half, key="darken left half")
    changed = prepare_video_cache(
        split, out, short_side=32, num_shards=1, workers=2, transform=transform
    )
    # Another transform is another cache: written again, and the manifest names it.
    assert changed["fingerprint"] != plain["fingerprint"]
    assert changed["transform"] == "darken left half" and plain["transform"] == ""
    # Each decodable source file went through the transform once, whole and at its own size.
    paths = [path for path, _ in seen]
    assert len(paths) == len(set(paths)) == changed["num_records"]
    full_size = read_video(split.examples[0].path).shape
    assert dict(seen)[split.examples[0].path] == full_size
    for record in _records(read_video_cache(out)):
        frame = tf.io.decode_jpeg(record["frames"][0]).numpy()
        assert min(frame.shape[:2]) == 32
        assert frame[:, : frame.shape[1] // 2 - 2].mean() < 5  # black, but for JPEG noise
        assert frame[:, frame.shape[1] // 2 + 1 :].mean() > 20


def test_a_transform_that_fails_on_a_file_stops_the_cache_naming_it(tmp_path, video_split):
    # A baseline failing on one file (a box outside its frame, a detector's error) is not a
    # decoding failure: skipped, the file would be missing from that method's test set alone.
    split, _ = video_split
    failing = split.examples[2].path

    def refuse_one(path: str, clip: np.ndarray) -> np.ndarray:
        if path == failing:
            raise ValueError("a box outside the frame")
        return clip

    transform = FrameTransform(refuse_one, key="refuse one")
    with pytest.raises(TransformError, match=f"{re.escape(failing)}: refuse one failed: a box"):
        prepare_video_cache(
            split, tmp_path / "cache", short_side=32, num_shards=1, workers=2, transform=transform
        )


def test_two_writers_prepare_one_cache_at_once(tmp_path, video_split):
    # Two trainings started together on one dataset both prepare its cache: each writes its
    # own temporary files, so neither fails on the other's rename.
    split, _ = video_split
    out = tmp_path / "cache"
    start = threading.Barrier(2)

    def prepare():
        start.wait()
        return prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = [future.result() for future in [pool.submit(prepare) for _ in range(2)]]
    assert first == second
    assert verify_cache(out)["ok"]
    assert not list(out.glob("*.tmp"))


def _shard_of(out: Path, path: str) -> str:
    """The shard file that holds the record of source file `path`."""
    for shard in read_manifest(out)["shards"]:
        for serialized in tf.data.TFRecordDataset(str(out / shard["file"])):
            context, _ = tf.io.parse_single_sequence_example(
                serialized, {"path": tf.io.FixedLenFeature([], tf.string)}
            )
            if context["path"].numpy().decode() == path:
                return shard["file"]
    raise AssertionError(f"{path} is in no shard")


def test_a_source_file_rewritten_in_place_rewrites_its_shard_only(tmp_path, video_split):
    # A re-downloaded video of a large dataset costs its own shard, not the whole cache.
    split, _ = video_split
    out = tmp_path / "cache"
    first = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    for shard in first["shards"]:
        os.utime(out / shard["file"], ns=(1, 1))  # an old mtime, so a rewrite would be visible
    source = Path(split.examples[0].path)
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    again = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    assert again["fingerprint"] != first["fingerprint"]
    assert again["shards"] == first["shards"]
    rewritten = {s["file"] for s in again["shards"] if (out / s["file"]).stat().st_mtime_ns > 1}
    assert rewritten == {_shard_of(out, str(source))}
    assert verify_cache(out)["ok"]


def test_a_cache_of_the_same_files_at_the_same_settings_is_found_and_read_not_copied(
    tmp_path, video_split
):
    split, _ = video_split
    prepared = tmp_path / "prepared" / "train"
    prepare_video_cache(split, prepared, short_side=32, workers=1)
    other = tmp_path / "prepared" / "test"
    prepare_video_cache(Split(split.examples[:2], split.class_names, split.attribute_names), other)
    folders = [tmp_path / "nowhere", other, prepared]
    assert find_prepared(split, "video", 32, folders) == prepared
    assert find_prepared(split, "video", 48, folders) is None
    assert find_prepared(split, "image", 32, folders) is None
    copy = tmp_path / "evaluation" / "action_train"
    assert prepare_cache(split, "video", copy, 32, prepared=folders) == prepared
    assert not copy.exists()
    # A changed source file, or a shard gone, and the cache is another's: a copy is written.
    source = Path(split.examples[0].path)
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    assert find_prepared(split, "video", 32, folders) is None
    assert prepare_cache(split, "video", copy, 32, prepared=folders) == copy
    assert read_manifest(copy)["num_records"] == read_manifest(prepared)["num_records"]
    prepare_video_cache(split, prepared, short_side=32, workers=1)
    assert find_prepared(split, "video", 32, [prepared]) == prepared
    next(prepared.glob("*.tfrecord")).unlink()
    assert find_prepared(split, "video", 32, [prepared]) is None


def test_shards_written_with_the_whole_cache_fingerprint_are_kept(tmp_path, video_split):
    # Sidecars carried the whole cache's fingerprint before each shard had its own: a cache
    # prepared then, prepared again with the same settings and files, is not rewritten.
    split, _ = video_split
    out = tmp_path / "cache"
    manifest = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    for shard in manifest["shards"]:
        sidecar = out / shard["file"].replace(".tfrecord", ".json")
        info = json.loads(sidecar.read_text())
        sidecar.write_text(json.dumps({**info, "fingerprint": manifest["fingerprint"]}))
        os.utime(out / shard["file"], ns=(1, 1))
    assert prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1) == manifest
    assert all((out / s["file"]).stat().st_mtime_ns == 1 for s in manifest["shards"])


def test_verify_cache_detects_damage(tmp_path, video_split):
    split, _ = video_split
    out = tmp_path / "cache"
    manifest = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    shard = out / manifest["shards"][1]["file"]
    shard.write_bytes(shard.read_bytes()[:-20])
    report = verify_cache(out)
    assert not report["ok"]
    assert any(manifest["shards"][1]["file"] in error for error in report["errors"])


def test_read_cache_errors(tmp_path, video_split):
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        read_video_cache(tmp_path / "nothing")
    split, _ = video_split
    prepare_video_cache(split, tmp_path / "cache", short_side=32, num_shards=1, workers=1)
    with pytest.raises(ValueError, match="video cache"):
        read_image_cache(tmp_path / "cache")


def test_image_cache(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    examples = []
    for i, (height, width, suffix) in enumerate(
        [(40, 60, ".png"), (64, 48, ".jpg"), (33, 33, ".png")]
    ):
        rgb = cv2.resize(
            rng.integers(0, 255, (4, 4, 3), dtype=np.uint8),
            (width, height),
            interpolation=cv2.INTER_NEAREST,
        )
        path = images / f"im{i}{suffix}"
        assert cv2.imwrite(str(path), rgb[..., ::-1])
        examples.append(Example(str(path), privacy=(i % 2, 1, 0)))
    broken = images / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    examples.insert(1, Example(str(broken), privacy=(0, 0, 0)))
    split = Split(examples, attribute_names=list(VISPR1[:3]))
    out = tmp_path / "cache"

    manifest = prepare_image_cache(split, out, short_side=32, num_shards=2, workers=2)
    assert manifest["kind"] == "image"
    assert manifest["num_examples"] == 4 and manifest["num_records"] == 3
    assert [f["path"] for f in manifest["failures"]] == [str(broken)]
    assert str(broken) in manifest["failures"][0]["reason"]
    assert verify_cache(out)["ok"]

    records = sorted(_records(read_image_cache(out)), key=lambda r: int(r["index"]))
    assert [r["index"] for r in records] == [0, 2, 3]
    assert [r["label"] for r in records] == [-1, -1, -1]
    assert [(r["height"], r["width"]) for r in records] == [(32, 48), (43, 32), (32, 32)]
    np.testing.assert_array_equal(records[1]["privacy"], [1.0, 1.0, 0.0])
    # Each cached image is its file's, resized (RGB order kept).
    for record, example in zip(records, [examples[i] for i in (0, 2, 3)], strict=True):
        decoded = tf.io.decode_jpeg(record["image"]).numpy().astype(int)
        assert decoded.shape == (record["height"], record["width"], 3)
        rgb = cv2.imread(example.path)[..., ::-1]
        size = (int(record["width"]), int(record["height"]))
        original = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA).astype(int)
        assert np.abs(decoded - original).mean() < 12, example.path  # JPEG loss, sharp blocks
        assert np.abs(decoded - original[..., ::-1]).mean() > 20, example.path  # not BGR

    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*.tfrecord")}
    assert len(stamps) == 2
    assert prepare_image_cache(split, out, short_side=32, num_shards=2) == manifest
    assert {p: p.stat().st_mtime_ns for p in out.glob("*.tfrecord")} == stamps
    with pytest.raises(ValueError, match="image cache"):
        read_video_cache(out)


def test_prepare_refuses_the_cache_of_another_dataset(tmp_path):
    """A wrong --out would replace another dataset's cache; other settings of the same
    dataset replace it as before."""
    images = tmp_path / "images"
    images.mkdir()
    examples = []
    for i in range(2):
        assert cv2.imwrite(str(images / f"{i}.jpg"), np.full((16, 16, 3), 40 * i, np.uint8))
        examples.append(Example(str(images / f"{i}.jpg"), privacy=(i, 1, 0)))
    split = Split(examples, attribute_names=list(VISPR1[:3]))
    out = tmp_path / "cache" / "train"
    vispr = {"dataset": "vispr", "subset": "train"}
    kept = prepare_image_cache(split, out, short_side=8, source=vispr)
    shards = {p: p.read_bytes() for p in out.glob("*.tfrecord")}
    with pytest.raises(DatasetFormatError) as raised:
        prepare_image_cache(split, out, short_side=8, source={"dataset": "synthetic"})
    assert str(raised.value) == (
        f"{out} holds a cache of vispr (its manifest.json), not of synthetic: give another "
        "--out, or remove it to cache there"
    )
    assert read_manifest(out) == kept
    assert {p: p.read_bytes() for p in out.glob("*.tfrecord")} == shards
    assert prepare_image_cache(split, out, short_side=12, source=vispr)["short_side"] == 12


def test_a_prepare_with_another_shard_count_removes_the_old_shards_once_done(
    tmp_path, monkeypatch, caplog
):
    """The default shard count grows with the split (a partial download completed): the old
    count's shards would stay beside the new ones, up to a whole copy of the dataset. They are
    removed once the new manifest is written, not before (a stopped prepare keeps them), and
    no file the cache did not write is."""
    import keras_privacy.data.cache as cache

    images = tmp_path / "images"
    images.mkdir()
    examples = []
    for i in range(4):
        assert cv2.imwrite(str(images / f"{i}.png"), np.full((16, 16, 3), 50 * i, np.uint8))
        examples.append(Example(str(images / f"{i}.png"), privacy=(i % 2, 1, 0)))
    split = Split(examples, attribute_names=list(VISPR1[:3]))
    out = tmp_path / "cache"
    old = prepare_image_cache(split, out, short_side=8, num_shards=3)
    old_files = {p.name for p in out.glob("shard-*-of-00003.*")}
    assert len(old_files) == 6  # three shards, each with its sidecar
    kept = [out / "notes.txt", out / "shard-00000-of-00003.tfrecord.bak"]
    for path in kept:
        path.write_text("not the cache's")

    real_write = cache._write_shard

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache, "_write_shard", stopped)
    with pytest.raises(KeyboardInterrupt):
        prepare_image_cache(split, out, short_side=8, num_shards=2)
    assert old_files < {p.name for p in out.iterdir()}
    monkeypatch.setattr(cache, "_write_shard", real_write)

    with caplog.at_level("INFO"):
        manifest = prepare_image_cache(split, out, short_side=8, num_shards=2)
    new = [shard["file"] for shard in manifest["shards"]]
    assert new == ["shard-00000-of-00002.tfrecord", "shard-00001-of-00002.tfrecord"]
    sidecars = [name.replace(".tfrecord", ".json") for name in new]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*new, *sidecars, "manifest.json", *(path.name for path in kept)]
    )
    assert f"{out}: removed 3 old shards that its manifest.json does not list" in caplog.text
    assert verify_cache(out)["ok"]
    records = sorted(_records(read_image_cache(out)), key=lambda r: int(r["index"]))
    assert [r["path"].decode() for r in records] == [e.path for e in examples]
    assert [list(r["privacy"]) for r in records] == [list(e.privacy) for e in examples]
    assert manifest["num_records"] == old["num_records"] == 4


def test_vp_labels_csv_with_byte_order_mark(tmp_path):
    # Spreadsheet programs save "CSV UTF-8" with a BOM before the header.
    path = tmp_path / "labels.csv"
    path.write_bytes(
        "video,face,skin_color,gender,nudity,relationship\r\nv.avi,1,0,1,0,0\r\n".encode(
            "utf-8-sig"
        )
    )
    assert read_vp_labels(path) == {"v.avi": (1, 0, 1, 0, 0)}


def test_video_cache_crash_between_renames_is_not_resumed(tmp_path, video_split, monkeypatch):
    # A rerun with other settings dies while marking its first shard complete; the old shard
    # must not then pass for a complete shard of the new settings.
    import keras_privacy.data.cache as cache

    split, _ = video_split
    out = tmp_path / "cache"
    prepare_video_cache(split, out, short_side=32, num_shards=1, workers=1)
    real_replace = os.replace

    def crash_on_shard(source, target):
        if str(target).endswith(".tfrecord"):
            raise KeyboardInterrupt
        real_replace(source, target)

    monkeypatch.setattr(cache.os, "replace", crash_on_shard)
    with pytest.raises(KeyboardInterrupt):
        prepare_video_cache(split, out, short_side=24, num_shards=1, workers=1)
    monkeypatch.setattr(cache.os, "replace", real_replace)
    prepare_video_cache(split, out, short_side=24, num_shards=1, workers=1)
    assert verify_cache(out)["ok"]
    assert min(min(r["height"], r["width"]) for r in _records(read_video_cache(out))) == 24


def test_a_prepare_of_other_settings_stopped_part_way_leaves_no_manifest(
    tmp_path, video_split, monkeypatch
):
    """The old manifest would pass the folder off as the old cache with some of its shards
    rewritten (labels of other attributes, videos of another split); a prepare of the same
    settings resumed keeps it."""
    import keras_privacy.data.cache as cache

    split, _ = video_split
    out = tmp_path / "cache"
    prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    real_write = cache._write_shard
    written = []

    def stopped_after_one_shard(*args):
        if written:
            raise KeyboardInterrupt
        written.append(real_write(*args))
        return written[-1]

    monkeypatch.setattr(cache, "_write_shard", stopped_after_one_shard)
    with pytest.raises(KeyboardInterrupt):
        prepare_video_cache(split, out, short_side=24, num_shards=2, workers=1)
    with pytest.raises(FileNotFoundError, match="no manifest.json; run `prepare` first"):
        read_manifest(out)
    monkeypatch.setattr(cache, "_write_shard", real_write)
    manifest = prepare_video_cache(split, out, short_side=24, num_shards=2, workers=1)
    assert read_manifest(out) == manifest
    assert prepare_video_cache(split, out, short_side=24, num_shards=2, workers=1) == manifest


def test_prepares_out_folder_given_as_a_cache_names_its_subsets(tmp_path):
    for subset in ("test", "train"):
        (tmp_path / "cache" / subset).mkdir(parents=True)
        (tmp_path / "cache" / subset / "manifest.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as raised:
        read_manifest(tmp_path / "cache")
    assert str(raised.value) == (
        f"{tmp_path / 'cache'}: no manifest.json, but its folders test, train each hold a "
        "prepared subset (`prepare --out` writes one per subset): give the subset's folder, "
        f"e.g. {tmp_path / 'cache' / 'train'}"
    )


def test_a_manifest_cut_short_or_edited_and_a_damaged_sidecar(tmp_path, video_split):
    split, _ = video_split
    out = tmp_path / "cache"
    manifest = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    text = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text(text[: len(text) // 2])
    with pytest.raises(DatasetFormatError, match=r"cache/manifest.json:\d+: invalid JSON"):
        read_manifest(out)
    (out / "manifest.json").write_text(
        json.dumps({k: v for k, v in manifest.items() if k != "shards"})
    )
    with pytest.raises(
        DatasetFormatError, match=r"manifest.json: not a manifest of `prepare` \(no shards\)"
    ):
        read_manifest(out)
    # A key a reader indexes, missing or of another type, is named: not a KeyError or a bare
    # int() error later.
    edited = {k: v for k, v in manifest.items() if k not in ("num_records", "attribute_names")}
    (out / "manifest.json").write_text(json.dumps({**edited, "num_examples": "24 videos"}))
    with pytest.raises(DatasetFormatError) as raised:
        read_manifest(out)
    assert str(raised.value) == (
        f"{out / 'manifest.json'}: not a manifest of `prepare` (no num_records, attribute_names; "
        "num_examples is '24 videos', not a whole number); prepare the cache again"
    )
    (out / "manifest.json").write_text(json.dumps({**manifest, "shards": [{"file": "s"}]}))
    with pytest.raises(DatasetFormatError, match="shards is .* not a list of"):
        read_manifest(out)
    sidecar = out / manifest["shards"][0]["file"].replace(".tfrecord", ".json")
    written = json.loads(sidecar.read_text())
    sidecar.write_text('{"fingerprint": ')  # cut short: its shard is written again
    assert prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1) == manifest
    assert json.loads(sidecar.read_text()) == written


def test_a_damaged_or_missing_shard_is_named(tmp_path, video_split):
    from keras_privacy.data import pipelines
    from keras_privacy.data.cache import damaged_shard

    split, _ = video_split
    out = tmp_path / "cache"
    manifest = prepare_video_cache(split, out, short_side=32, num_shards=2, workers=1)
    assert damaged_shard(out) is None
    shard = out / manifest["shards"][1]["file"]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # a partial copy, a bad disk
    shard.write_bytes(bytes(data))
    path, reason = damaged_shard(out)
    assert path == str(shard) and re.fullmatch(r"corrupted record at \d+", reason)
    with pytest.raises(DatasetFormatError, match=rf"{re.escape(str(shard))}: the cache's shard "):
        with pipelines.damaged_shards_named(split, out):
            for _ in pipelines.action_eval_dataset(out, 1, clip_length=2, stride=1, size=16):
                pass
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=r"1 of the manifest's 2 shards are not there"):
        pipelines.action_eval_dataset(out, 1, clip_length=2, stride=1, size=16)


def test_cache_of_an_empty_or_all_failing_split(tmp_path):
    empty = prepare_video_cache(Split([]), tmp_path / "empty", short_side=32)
    assert empty["num_records"] == 0 and verify_cache(tmp_path / "empty")["ok"]
    assert _records(read_video_cache(tmp_path / "empty")) == []
    bad = tmp_path / "bad.avi"
    bad.write_bytes(b"")
    manifest = prepare_video_cache(Split([Example(str(bad))]), tmp_path / "bad", short_side=32)
    assert manifest["num_records"] == 0
    assert [f["path"] for f in manifest["failures"]] == [str(bad)]
    assert "empty" in manifest["failures"][0]["reason"]
    assert verify_cache(tmp_path / "bad")["ok"]
