"""The evaluation protocols by name (same, cross_dataset, novel_actions, novel_attributes), the
synthetic benchmark's attribute subsets, PA-HMDB51 as a privacy test set, and several target
architectures in one run: tiny models on the tiny synthetic benchmark and the real fixtures."""

import dataclasses
import json
import os
import re
from pathlib import Path

import cv2
import keras
import numpy as np
import pytest
import tiny_models
from tiny_models import tiny_config

from keras_privacy.config import ExperimentConfig, SettingError
from keras_privacy.config.evaluation import PA_HMDB51_LABELS
from keras_privacy.data import __main__ as data_cli
from keras_privacy.data import pa_hmdb51, synthetic
from keras_privacy.data.cache import prepare_cache, read_image_cache, read_manifest, verify_cache
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.sources import privacy_splits
from keras_privacy.data.ucf101 import read_ucf101
from keras_privacy.data.vispr import VISPR1
from keras_privacy.evaluation import anonymizations, datasets, protocol
from keras_privacy.evaluation.anonymizations import methods_of
from keras_privacy.evaluation.report import Report
from keras_privacy.training import training_data

TRAINED_ON = ["s1_warm_actor", "s2_striped_actor", "s3_face_mark"]
HELD_OUT = ["s4_outdoor_scene", "s5_object"]


VISPR_TRAINING = dict(privacy_dataset="vispr", privacy_annotations="v", privacy_root="v")
PA_EVALUATION = dict(
    eval_privacy_dataset="pa_hmdb51", eval_privacy_annotations="pa", eval_privacy_root="videos"
)
VP_EVALUATION = dict(
    eval_protocol="cross_dataset",
    eval_privacy_dataset="vp_hmdb51",
    eval_privacy_annotations="vp_hmdb51_privacy_attribute_label.csv",
    eval_privacy_root="hmdb51/videos",
)
HMDB51_EVALUATION = dict(
    eval_action_dataset="hmdb51", eval_action_annotations="splits", eval_action_root="videos"
)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(eval_privacy_attributes="s4_outdoor_scene"), "same evaluates on the training"),
        (
            dict(eval_action_dataset="ucf101", eval_action_annotations="a", eval_action_root="r"),
            "same .* --eval_action_dataset, --eval_action_annotations, --eval_action_root differ",
        ),
        (dict(eval_protocol="cross_dataset"), "cross_dataset needs an evaluation dataset other"),
        (dict(eval_protocol="novel_actions"), "novel_actions needs an action dataset of other"),
        (
            dict(
                eval_protocol="novel_attributes",
                privacy_attributes=",".join(TRAINED_ON),
                eval_privacy_attributes="s3_face_mark,s5_object",
            ),
            "disjoint from --privacy_attributes, but both name s3_face_mark$",
        ),
        (
            dict(eval_protocol="novel_attributes", **VISPR_TRAINING, eval_privacy_attributes="all"),
            "`all` shares every attribute",
        ),
        (
            dict(eval_protocol="novel_attributes", **VISPR_TRAINING, **PA_EVALUATION),
            "both name a4_gender, a9_face_complete, a10_face_partial",
        ),
        (dict(eval_protocol="cross_dataset", **PA_EVALUATION), "needs --privacy_dataset=vispr"),
        (
            dict(eval_protocol="cross_dataset", eval_privacy_dataset="vispr"),
            "--eval_privacy_dataset=vispr needs --eval_privacy_annotations and",
        ),
        (
            dict(
                eval_protocol="cross_dataset",
                **VISPR_TRAINING,
                **PA_EVALUATION,
                eval_privacy_attributes="face,eyes",
            ),
            r"--eval_privacy_attributes=face,eyes: unknown PA-HMDB51 \(merged.* eyes",
        ),
        (dict(**VP_EVALUATION), "vp_hmdb51 labels hmdb51's videos .* set --eval_vp_splits"),
        (
            dict(**VP_EVALUATION, eval_vp_splits="s", eval_privacy_attributes="face,gender,face"),
            "--eval_privacy_attributes=face,gender,face: choose distinct VP attributes",
        ),
        (
            dict(**VP_EVALUATION, eval_vp_splits="s", eval_privacy_attributes="skin_colour"),
            "unknown VP attribute.* skin_colour: choose all, or among face, skin_color, gender",
        ),
        (
            dict(**VP_EVALUATION, eval_vp_splits="s", eval_vp_privacy_training="vispr"),
            "--eval_vp_privacy_training=vispr trains .* needs --privacy_dataset=vispr",
        ),
        (
            dict(
                **VISPR_TRAINING,
                **VP_EVALUATION | dict(eval_protocol="novel_attributes"),
                eval_vp_splits="s",
            ),
            "disjoint from --privacy_attributes, but both name a9_face_complete",
        ),
        (
            dict(
                **VISPR_TRAINING,
                **VP_EVALUATION | dict(eval_protocol="novel_attributes"),
                eval_vp_splits="s",
                privacy_attributes="a17_color,a4_gender",
                eval_privacy_attributes="face,gender",
            ),
            "disjoint from --privacy_attributes, but both name a4_gender$",
        ),
        (dict(eval_vp_splits="s"), "--eval_vp_splits is read with --eval_privacy_dataset=vp_"),
        (
            dict(**VP_EVALUATION, eval_vp_splits="s", eval_methods="raw,blur_weak", eval_boxes="b"),
            "--eval_boxes with blur_weak on VP-HMDB51: its images are frames",
        ),
        (dict(eval_protocol="novel"), "--eval_protocol='novel' is not one of"),
        (dict(eval_pa_hmdb51_labels="vita5"), "--eval_pa_hmdb51_labels='vita5' is not one of"),
        (
            dict(eval_protocol="pa_hmdb51", **VISPR_TRAINING, **PA_EVALUATION),
            "pa_hmdb51 trains f'_T on HMDB51 .* --action_dataset=hmdb51 .* or, for an f_A "
            "trained on another action dataset .* --eval_action_dataset=hmdb51",
        ),
        (dict(privacy_attributes="s1_warm_actor,s9_hat"), "unknown synthetic attribute.* s9_hat"),
        (dict(privacy_attributes="vispr2"), "--privacy_attributes=vispr2: unknown synthetic"),
        (dict(eval_action_model="factorized_tiny,nope"), "--eval_action_model='nope' is not"),
        (dict(eval_privacy_model="resnet_tiny,resnet_tiny"), "--eval_privacy_model names a model"),
    ],
)
def test_each_protocol_says_what_it_needs(settings, message):
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**settings).validate()


@pytest.mark.parametrize(
    "settings",
    [
        dict(eval_privacy_attributes="all"),  # all five, as the training default `vispr1`
        dict(
            eval_protocol="novel_attributes",
            privacy_attributes=",".join(TRAINED_ON),
            eval_privacy_attributes=",".join(HELD_OUT),
        ),
        dict(eval_protocol="novel_attributes", **VISPR_TRAINING, eval_privacy_attributes="vispr2"),
        dict(
            eval_protocol="novel_attributes",
            **VISPR_TRAINING,
            privacy_attributes="a17_color,a12_semi_nudity,a64_rel_personal",
            **PA_EVALUATION,
            eval_privacy_attributes="gender,face",
        ),
        dict(eval_protocol="cross_dataset", **VISPR_TRAINING, **PA_EVALUATION),
        dict(**VP_EVALUATION, **HMDB51_EVALUATION),  # the split lists: HMDB51's
        # f_A on another action dataset, f'_T on HMDB51 and PA-HMDB51 (Table 2's UCF -> PA-HMDB)
        dict(eval_protocol="pa_hmdb51", **VISPR_TRAINING, **PA_EVALUATION, **HMDB51_EVALUATION),
        dict(**VP_EVALUATION, eval_vp_splits="hmdb51/splits", eval_privacy_attributes="gender"),
        # The penalty paper's Table 2 VPHMDB -> VPUCF: f_A trained on HMDB51, whose split lists
        # are the VP ones; f'_T on UCF101.
        dict(
            **VP_EVALUATION | dict(eval_protocol="novel_actions"),
            action_dataset="hmdb51",
            action_annotations="hmdb51/splits",
            action_root="hmdb51/videos",
            eval_action_dataset="ucf101",
            eval_action_annotations="ucf101/splits",
            eval_action_root="ucf101/videos",
        ),
        # Unseen attributes on VP: colour and nudity trained on, gender and face tested.
        dict(
            **VISPR_TRAINING,
            **VP_EVALUATION | dict(eval_protocol="novel_attributes"),
            eval_vp_splits="s",
            eval_vp_privacy_training="vispr",
            privacy_attributes="a17_color,a12_semi_nudity",
            eval_privacy_attributes="gender,face",
        ),
        dict(
            eval_protocol="novel_actions",
            eval_action_dataset="hmdb51",
            eval_action_annotations="a",
            eval_action_root="r",
        ),
    ],
)
def test_each_protocol_accepts_its_datasets(settings):
    config = ExperimentConfig(**settings)
    config.validate()
    # and the evaluation reads the datasets it was given, the training ones elsewhere
    evaluation = config.evaluation_datasets()
    for name, value in settings.items():
        if name.startswith("eval_") and name != "eval_protocol" and hasattr(evaluation, name[5:]):
            assert getattr(evaluation, name[5:]) == value, name


def test_synthetic_attribute_subsets_have_their_own_training_caches(benchmark, tmp_path):
    subsets = {"vispr1": list(synthetic.ATTRIBUTE_IDS), ",".join(TRAINED_ON): TRAINED_ON}
    subsets["s5_object,s4_outdoor_scene"] = ["s5_object", "s4_outdoor_scene"]
    caches = []
    for flag, names in subsets.items():
        data = training_data(tiny_config(benchmark, tmp_path, privacy_attributes=flag))
        assert data.attribute_names == names
        assert read_manifest(data.images)["attribute_names"] == names
        assert next(iter(read_image_cache(data.images)))["privacy"].shape == (len(names),)
        caches.append(data.images)
    assert len(set(caches)) == len(subsets)

    # One folder given another subset: its shards are rewritten, never reused.
    folder = tmp_path / "cache"
    first, second = (
        privacy_splits(
            tiny_config(benchmark, tmp_path, privacy_attributes=attributes).dataset_files("privacy")
        )
        for attributes in ("s1_warm_actor", "s2_striped_actor")
    )
    prepare_cache(first["train"], "image", folder, 32)
    fingerprint = read_manifest(folder)["fingerprint"]
    prepare_cache(second["train"], "image", folder, 32)
    assert read_manifest(folder)["fingerprint"] != fingerprint
    labels = [record["privacy"].numpy().tolist() for record in read_image_cache(folder)]
    expected = {e.path: list(e.privacy) for e in second["train"].examples}
    paths = [record["path"].numpy().decode() for record in read_image_cache(folder)]
    assert labels == [expected[path] for path in paths]


@pytest.mark.backend_independent  # the protocol's splits and report
def test_novel_attributes_with_two_target_architectures(benchmark, tmp_path, monkeypatch):
    anonymizer = tmp_path / "anonymizer.keras"
    tiny_models.anonymizer().save(anonymizer)  # stands for f_A trained on TRAINED_ON
    config = tiny_config(
        benchmark,
        tmp_path,
        privacy_attributes=",".join(TRAINED_ON),
        eval_protocol="novel_attributes",
        eval_privacy_attributes=",".join(HELD_OUT),
        eval_methods="learned",
        anonymizer_path=str(anonymizer),
        eval_action_model="factorized_tiny,factorized_tiny_diff",
        eval_privacy_model="resnet_tiny,resnet_tiny_small_images",
    )
    data = protocol.evaluation_data(config)
    assert data.attribute_names == HELD_OUT
    out = tmp_path / "evaluation"
    protocol.evaluate(config, data, protocol.methods_of(config), out)

    report = json.loads((out / "report.json").read_text())
    assert report["evaluation"]["protocol"] == "novel_attributes"
    assert report["evaluation"]["attribute_names"] == HELD_OUT
    result = report["methods"]["spact"]
    extra = result["extra"]
    assert set(extra["privacy_ap"]) | set(extra["privacy_skipped"]) == set(HELD_OUT)
    action_models = ["factorized_tiny", "factorized_tiny_diff"]
    privacy_models = ["resnet_tiny", "resnet_tiny_small_images"]
    assert list(extra["action_top1_by_model"]) == action_models
    for key in ("privacy_cmap", "privacy_f1", "raw_attacker_cmap", "raw_attacker_f1"):
        assert list(extra[f"{key}_by_model"]) == privacy_models
    # The headline columns are the first architecture's.
    assert result["action_top1"] == extra["action_top1_by_model"]["factorized_tiny"]
    assert result["privacy_cmap"] == extra["privacy_cmap_by_model"]["resnet_tiny"]
    for name in privacy_models:
        attacker = keras.saving.load_model(out / f"raw_attacker_{name}.keras", compile=False)
        assert attacker.output_shape[-1] == len(HELD_OUT)
    markdown = (out / "report.md").read_text()
    assert "f'_T factorized_tiny_diff top-1 (%)" in markdown
    assert "f'_B resnet_tiny_small_images cMAP (%)" in markdown
    assert "Protocol: novel_attributes" in markdown and "s4_outdoor_scene, s5_object" in markdown

    # A rerun resumes: the method is in the report, so nothing is trained again.
    def no_training(*args, **kwargs):
        raise AssertionError("a finished method was trained again")

    monkeypatch.setattr(protocol, "train_action_target", no_training)
    monkeypatch.setattr(protocol, "train_privacy_target", no_training)
    assert protocol.evaluate(config, data, protocol.methods_of(config), out).methods == ["spact"]

    # Results of another protocol and attributes never join this report.
    same = tiny_config(benchmark, tmp_path, eval_methods="raw")
    with pytest.raises(ValueError, match="its protocol, attribute_names, target_models"):
        protocol.evaluate(same, protocol.evaluation_data(same), protocol.methods_of(same), out)


def test_novel_actions_needs_classes_new_to_training(benchmark, tmp_path):
    # The benchmark read as UCF101: another dataset by its flags, the same classes by its files.
    config = tiny_config(
        benchmark,
        tmp_path,
        eval_protocol="novel_actions",
        eval_action_dataset="ucf101",
        eval_action_annotations=str(benchmark / "ucf_splits"),
        eval_action_root=str(benchmark / "videos"),
    )
    with pytest.raises(ValueError, match="both have CircleAnticlockwise, CircleClockwise"):
        protocol.evaluation_data(config)


def test_multilabel_actions_are_refused_on_the_command_lines_datasets(benchmark, tmp_path):
    """No action dataset of the command line has multi-hot labels: refused by the settings'
    check (train.py's as evaluate.py's, before a training that evaluate.py would refuse), and
    by `evaluation_data` for a config made in Python, before any work."""
    message = "action_multilabel.*synthetic, ucf101, hmdb51.*read_phvu"
    with pytest.raises(ValueError, match=message):
        tiny_config(benchmark, tmp_path, action_multilabel=True)
    config = dataclasses.replace(tiny_config(benchmark, tmp_path), action_multilabel=True)
    with pytest.raises(ValueError, match=message):
        protocol.evaluation_data(config)
    assert not protocol.report_dir(config).exists()


def write_pa_hmdb51(tmp_path, fixtures_dir):
    """PA-HMDB51 annotations of two real fixture videos and one missing video, in its format."""
    ranges = {
        "brush_hair": {
            "test_brush_hair_0.avi": dict(
                gender=[[0, 163, [1, 2]]],
                face=[[0, 80, 0], [81, 163, 2]],
                nudity=[[0, 163, 0]],
                skin_color=[[0, 163, 1]],
                relationship=[[0, 163, 0]],
            )
        },
        "dive": {
            "part_dive_0.mp4": dict(
                gender=[[0, 31, 0]],
                face=[[0, 31, 0]],
                nudity=[[0, 31, 1]],
                skin_color=[[0, 31, [0, 3]]],
                relationship=[[0, 31, 1]],
            ),
            "gone_dive_0.avi": dict(
                gender=[[0, 9, 1]], face=[[0, 9, 1]], nudity=[], skin_color=[], relationship=[]
            ),
        },
    }
    annotations, root = tmp_path / "PrivacyAttributes", tmp_path / "videos"
    annotations.mkdir()
    for action, videos in ranges.items():
        (annotations / f"{action}.json").write_text(json.dumps(videos))
        (root / action).mkdir(parents=True)
        for video in videos:
            if video != "gone_dive_0.avi":
                fixture = "test.avi" if action == "brush_hair" else "part_0.mp4"
                os.symlink(fixtures_dir / "videos" / fixture, root / action / video)
    return annotations, root


def test_pa_hmdb51_videos_become_labelled_frames(fixtures_dir, tmp_path):
    annotations, root = write_pa_hmdb51(tmp_path, fixtures_dir)
    images = pa_hmdb51.privacy_images(annotations, root, tmp_path / "frames", 3)
    assert images.attribute_names == ["gender", "face", "nudity", "skin_color", "relationship"]
    # test.avi's frames 27, 82 and 136 of 164: its face is annotated from frame 81 on.
    assert [e.privacy for e in images.examples] == [(1, 0, 0, 1, 0)] + [(1, 1, 0, 1, 0)] * 2 + [
        (0, 0, 1, 1, 1)
    ] * 3
    assert len(images.missing) == 1 and "gone_dive_0.avi" in images.missing[0]
    frames = [cv2.imread(e.path) for e in images.examples[:3]]
    assert frames[0].shape == (240, 320, 3)  # test.avi, a real UCF101 clip
    assert not np.array_equal(frames[0], frames[2])  # equidistant frames, not one frame thrice

    subset = pa_hmdb51.privacy_images(annotations, root, tmp_path / "frames", 3, "face,gender")
    assert subset.attribute_names == ["face", "gender"]
    assert [e.privacy for e in subset.examples] == [(0, 1)] + [(1, 1)] * 2 + [(0, 0)] * 3

    with pytest.raises(
        FileNotFoundError, match="none of the 3 annotated videos.*test_brush_hair_0.avi"
    ):
        pa_hmdb51.privacy_images(annotations, tmp_path / "nowhere", tmp_path / "frames", 3)


def test_pa_hmdb51_labels_each_frame_by_its_own_index():
    ranges = {
        "face": [(0, 195, (2,)), (196, 258, (0,))],  # complete face, then invisible
        "gender": [(0, 99, (0,)), (100, 258, (1, 2))],  # unidentifiable, then a man and a woman
        "nudity": [(0, 150, (1,)), (151, 258, (0,))],  # partial, then none
        "skin_color": [(0, 258, (0, 3))],
        "relationship": [(0, 258, (0,))],
    }
    assert pa_hmdb51.labels_at(ranges, 100) == (1, 1, 1, 1, 0)
    assert pa_hmdb51.labels_at(ranges, 200) == (1, 0, 0, 1, 0)
    assert pa_hmdb51.labels_at(ranges, 50, ["face", "gender"]) == (1, 0)


def test_pa_hmdb51_frames_no_range_holds_are_unlabelled_and_overlaps_read_as_the_viewer_does():
    """As the release's viewer (GUI/Reviewer.py) shows them: "N/A" where no range of an
    attribute holds the frame (14 of its 515 videos start their ranges at frames 1 to 13), the
    first range holding it where two overlap (its hug.json has one such frame)."""
    ranges = {
        "face": [(5, 11, (1,)), (11, 29, (2,))],  # partial, complete: both hold frame 11
        "gender": [(2, 29, (1,))],
        "nudity": [(2, 29, (0,))],
        "skin_color": [(2, 29, (1,))],
        "relationship": [(0, 25, (0,))],
    }
    assert pa_hmdb51.labelled_frames(ranges, 40) == list(range(5, 26))
    assert pa_hmdb51.labelled_frames(ranges, 40, ["gender", "nudity"]) == list(range(2, 30))
    assert pa_hmdb51.labelled_frames(ranges, 20, ["gender"]) == list(range(2, 20))
    partial, complete = "a10_face_partial", "a9_face_complete"
    assert pa_hmdb51.labels_at(ranges, 11, [partial, complete], "vispr1") == (1, 0)
    assert pa_hmdb51.labels_at(ranges, 12, [partial, complete], "vispr1") == (0, 1)
    with pytest.raises(ValueError, match="frame 3 has no face label"):
        pa_hmdb51.labels_at(ranges, 3)
    assert pa_hmdb51.labels_at(ranges, 3, ["gender"]) == (1,)


def test_pa_hmdb51_frames_over_spacts_vispr1_columns_keep_the_two_faces_apart():
    ranges = {
        "face": [(0, 99, (1,)), (100, 199, (2, 1)), (200, 258, (2,))],
        "gender": [(0, 258, (0,))],
        "nudity": [(0, 150, (2,)), (151, 258, (0,))],
        "skin_color": [(0, 258, (0, 3))],
        "relationship": [(0, 119, (0,)), (120, 258, (1,))],
    }
    assert pa_hmdb51.attribute_subset("all", "vispr1") == list(VISPR1[:6])
    # The flag's choices, kept by the settings without importing the data readers (PyAV).
    assert tuple(pa_hmdb51.LABEL_SCHEMES) == PA_HMDB51_LABELS
    # skin colour, gender, complete face, partial face, nudity, personal relationship
    assert pa_hmdb51.labels_at(ranges, 50, scheme="vispr1") == (1, 0, 0, 1, 1, 0)
    assert pa_hmdb51.labels_at(ranges, 130, scheme="vispr1") == (1, 0, 1, 1, 1, 1)
    assert pa_hmdb51.labels_at(ranges, 230, scheme="vispr1") == (1, 0, 1, 0, 0, 1)
    assert pa_hmdb51.labels_at(ranges, 230) == (0, 1, 0, 1, 1)  # merged: one face column
    chosen = ["a10_face_partial", "a17_color"]
    assert pa_hmdb51.labels_at(ranges, 50, chosen, "vispr1") == (1, 1)
    with pytest.raises(ValueError, match="unknown PA-HMDB51 label scheme 'vita'"):
        pa_hmdb51.labels_at(ranges, 50, scheme="vita")


def test_vispr_labels_merge_onto_pa_hmdb51_attributes():
    # VISPR-1: color, gender, face complete, face partial, semi-nudity, personal, social.
    split = Split(
        [
            Example("a.jpg", privacy=(0, 0, 0, 1, 0, 0, 1)),
            Example("b.jpg", privacy=(1, 1, 0, 0, 1, 0, 0)),
            Example("c.jpg"),  # no annotation: stays unlabelled
        ],
        attribute_names=list(VISPR1),
    )
    merged = pa_hmdb51.vispr_as_pa_hmdb51(split)
    assert merged.attribute_names == list(pa_hmdb51.PA_HMDB51_ATTRIBUTES)
    assert [e.privacy for e in merged.examples] == [(0, 1, 0, 0, 1), (1, 0, 1, 1, 0), ()]
    chosen = pa_hmdb51.vispr_as_pa_hmdb51(split, "face,gender")
    assert [e.privacy for e in chosen.examples] == [(1, 0), (0, 1), ()]
    six = pa_hmdb51.vispr_as_pa_hmdb51(split, scheme="vispr1")
    assert six.attribute_names == list(VISPR1[:6])  # VISPR-1 without a65_rel_social
    assert [e.privacy for e in six.examples] == [(0, 0, 0, 1, 0, 0), (1, 1, 0, 0, 1, 0), ()]


def write_vispr(folder, labels: dict[str, list[str]]):
    """A tiny VISPR in its format: every image in the train split, a copy of the first (its
    labels, another name: the lists are disjoint) in val and in test."""
    vocabulary = ["a0_safe", *VISPR1]
    rows = ["idx\tattribute_id\tgroup\tdescription"]
    rows += [f"{i}\t{name}\tg\td" for i, name in enumerate(vocabulary)]
    (folder / "annotations").mkdir(parents=True)
    (folder / "images").mkdir()
    (folder / "attributes.tsv").write_text("\n".join(rows) + "\n")
    first, first_labels = next(iter(labels.items()))
    copies = {f"{first}_{subset}": first_labels for subset in ("val", "test")}
    for subset, names in (
        ("train", list(labels)),
        ("val", [f"{first}_val"]),
        ("test", [f"{first}_test"]),
    ):
        (folder / f"{subset}2017.txt").write_text("".join(f"annotations/{n}.json\n" for n in names))
    for name, ids in (labels | copies).items():
        record = {"image_path": f"images/{name}.jpg", "labels": ids}
        (folder / "annotations" / f"{name}.json").write_text(json.dumps(record))
        cv2.imwrite(str(folder / "images" / f"{name}.jpg"), np.full((20, 20, 3), 90, np.uint8))


@pytest.mark.parametrize(
    "labels, names, train, test",
    [
        (
            "merged",
            list(pa_hmdb51.PA_HMDB51_ATTRIBUTES),
            [(0, 1, 0, 0, 1), (1, 0, 0, 0, 0)],
            [(1, 0, 0, 1, 0), (1, 1, 0, 1, 0), (0, 0, 1, 1, 1), (0, 0, 1, 1, 1)],
        ),
        (
            "vispr1",
            list(VISPR1[:6]),
            [(0, 0, 0, 1, 0, 0), (0, 1, 0, 0, 0, 0)],
            [(1, 1, 0, 0, 0, 0), (1, 1, 1, 0, 0, 0), (1, 0, 0, 0, 1, 1), (1, 0, 0, 0, 1, 1)],
        ),
    ],
)
def test_cross_dataset_on_pa_hmdb51_labels_vispr_and_its_frames_alike(
    benchmark, fixtures_dir, tmp_path, labels, names, train, test
):
    """f'_B trains on VISPR and is tested on PA-HMDB51's frames, both labelled over the columns
    of `--eval_pa_hmdb51_labels`: VITA's five merged attributes, or SPAct's six VISPR-1 columns
    (complete and partial face apart, no social relationship)."""
    vispr = tmp_path / "vispr"
    write_vispr(vispr, {"x": ["a10_face_partial", "a65_rel_social"], "y": ["a4_gender"]})
    annotations, root = write_pa_hmdb51(tmp_path, fixtures_dir)
    config = tiny_config(
        benchmark,
        tmp_path,
        privacy_dataset="vispr",
        privacy_annotations=str(vispr),
        privacy_root=str(vispr),
        eval_protocol="cross_dataset",
        eval_privacy_dataset="pa_hmdb51",
        eval_privacy_annotations=str(annotations),
        eval_privacy_root=str(root),
        eval_privacy_frames=2,
        eval_pa_hmdb51_labels=labels,
        eval_dir=str(tmp_path / "evaluation"),
    )
    data = protocol.evaluation_data(config)
    assert data.class_names == list(synthetic.CLASSES)  # the action side is the training one
    assert data.attribute_names == names
    assert [e.privacy for e in data.privacy_train.examples] == train
    # test.avi's frames 41 and 123 of 164 (its complete face from frame 81 on), part_0.mp4's two.
    assert [e.privacy for e in data.privacy_test.examples] == test
    frames = tmp_path / "evaluation" / "pa_hmdb51_frames"
    assert all(e.path.startswith(str(frames)) for e in data.privacy_test.examples)
    record = protocol.evaluation_record(config, data)
    assert record["protocol"] == "cross_dataset"
    assert record["privacy_dataset"]["name"] == "pa_hmdb51"
    # a corrected labels file would give another digest: its rows are not resumed
    assert len(record["privacy_dataset"]["labels_sha256"]) == 64
    assert record["privacy_dataset"].get("labels", "merged") == labels
    assert record["attribute_names"] == data.attribute_names


def test_vp_labels_train_and_test_the_privacy_model_on_frames_of_their_videos(benchmark, tmp_path):
    """VP-UCF101 / VP-HMDB51 (the penalty paper's VP columns): f'_B trains on frames of the
    split lists' training videos and is tested on frames of their test videos, each frame
    labelled by its video. The benchmark's videos and UCF101-style lists stand for UCF101's,
    with labels in the form loaders of the VP release read (`.mp4` names, five-label lists)."""
    videos = read_ucf101(benchmark / "ucf_splits", benchmark / "videos")
    every = [e.path for name in ("train", "test") for e in videos[name].examples]
    release = {
        f"{Path(path).parent.name}/{Path(path).stem}.mp4": [(i + k) % 2 for k in range(5)]
        for i, path in enumerate(every)
    }
    labels_file = tmp_path / "vp_ucf101_privacy_attribute_label.csv"
    rows = [f'{video},"{values}"' for video, values in release.items()]
    labels_file.write_text("\n".join(["File Path,Array Values", *rows]) + "\n")
    vp = dict(
        eval_protocol="cross_dataset",
        eval_privacy_dataset="vp_ucf101",
        eval_privacy_annotations=str(labels_file),
        eval_privacy_root=str(benchmark / "videos"),
        eval_vp_splits=str(benchmark / "ucf_splits"),
        eval_privacy_attributes="gender,face",
        eval_privacy_frames=2,
        eval_dir=str(tmp_path / "evaluation"),
    )
    config = tiny_config(benchmark, tmp_path, eval_methods="raw", **vp)
    gone = dataclasses.replace(config, eval_privacy_annotations=str(tmp_path / "gone.csv"))
    with pytest.raises(FileNotFoundError) as raised:
        protocol.evaluation_data(gone)
    assert str(raised.value) == (
        f"{tmp_path / 'gone.csv'}: no such vp_ucf101 labels file (--eval_privacy_annotations)"
    )
    # Both privacy splits are video frames: a people baseline blurs them at a video's scale.
    assert datasets.video_frame_splits(config) == ("privacy_train", "privacy_test")
    data = protocol.evaluation_data(config)
    assert data.class_names == list(synthetic.CLASSES)  # the action side is the training one
    assert data.attribute_names == ["gender", "face"]
    by_stem = {Path(video).stem: (values[2], values[0]) for video, values in release.items()}
    frames = tmp_path / "evaluation" / "vp_ucf101_frames"
    for name, split in (("train", data.privacy_train), ("test", data.privacy_test)):
        stems = [Path(e.path).stem for e in videos[name].examples]
        assert [e.privacy for e in split.examples] == [by_stem[s] for s in stems for _ in "ab"]
        assert all(e.path.startswith(str(frames / name)) for e in split.examples)
        assert cv2.imread(split.examples[0].path).shape == (32, 32, 3)
    record = protocol.evaluation_record(config, data)
    assert record["privacy_dataset"]["name"] == "vp_ucf101"
    assert record["privacy_dataset"]["frames_per_video"] == 2

    out = tmp_path / "evaluation"
    assert protocol.evaluate(config, data, protocol.methods_of(config), out).methods == ["raw"]
    written = json.loads((out / "report.json").read_text())
    assert written["evaluation"]["examples"]["privacy_train"]["used"] == 2 * len(videos["train"])
    assert set(written["methods"]["raw"]["extra"]["privacy_ap"]) == {"gender", "face"}
    assert "privacy: vp_ucf101 (gender, face). Privacy images: 2 equidistant frames of each" in (
        (out / "report.md").read_text()
    )

    # Resumed with other frames or other labels, its rows would not compare: refused.
    one_frame = dataclasses.replace(config, eval_privacy_frames=1)
    with pytest.raises(ValueError, match="privacy_dataset.frames_per_video, privacy_dataset.lab"):
        protocol.evaluate(one_frame, protocol.evaluation_data(one_frame), [], out)
    release = {
        video: [*values[:2], 1 - values[2], *values[3:]] for video, values in release.items()
    }
    rows = [f'{video},"{values}"' for video, values in release.items()]
    labels_file.write_text("\n".join(["File Path,Array Values", *rows]) + "\n")
    with pytest.raises(ValueError, match=r"its privacy_dataset.labels_sha256 differ\)"):
        protocol.evaluate(config, protocol.evaluation_data(config), [], out)

    # A labels file that names none of the training videos is refused, naming the three paths.
    labels_file.write_text("File Path,Array Values\n")
    where = f"in {benchmark / 'ucf_splits'} is both under {benchmark / 'videos'} and labelled in "
    with pytest.raises(FileNotFoundError, match=re.escape(f"{where}{labels_file}")):
        protocol.evaluation_data(config)
    # Split lists that are not there are named with the flag that sets them.
    no_lists = dataclasses.replace(config, eval_vp_splits=str(tmp_path / "no_lists"))
    message = "(the split lists of vp_ucf101: --eval_vp_splits, default the action dataset's"
    with pytest.raises(FileNotFoundError, match=re.escape(message)):
        protocol.evaluation_data(no_lists)


def test_vp_test_frames_against_an_f_b_trained_on_vispr(benchmark, tmp_path):
    """The penalty paper's text for Table 1's VPHMDB column: f'_B trains on VISPR-1, its labels
    merged onto the five VP attributes (as for PA-HMDB51), and is tested on VP frames."""
    vispr = tmp_path / "vispr"
    write_vispr(vispr, {"x": ["a10_face_partial", "a65_rel_social"], "y": ["a4_gender"]})
    videos = read_ucf101(benchmark / "ucf_splits", benchmark / "videos")
    labels_file = tmp_path / "vp.json"
    every = [Path(e.path).name for name in ("train", "test") for e in videos[name].examples]
    labels_file.write_text(json.dumps({name: [1, 0, 1, 0, 0] for name in every}))
    config = tiny_config(
        benchmark,
        tmp_path,
        privacy_dataset="vispr",
        privacy_annotations=str(vispr),
        privacy_root=str(vispr),
        eval_protocol="cross_dataset",
        eval_privacy_dataset="vp_ucf101",
        eval_privacy_annotations=str(labels_file),
        eval_privacy_root=str(benchmark / "videos"),
        eval_vp_splits=str(benchmark / "ucf_splits"),
        eval_vp_privacy_training="vispr",
        eval_privacy_attributes="gender,face,relationship",
        eval_privacy_frames=1,
        eval_dir=str(tmp_path / "evaluation"),
    )
    assert datasets.video_frame_splits(config) == ("privacy_test",)
    data = protocol.evaluation_data(config)
    assert data.attribute_names == ["gender", "face", "relationship"]
    assert [e.privacy for e in data.privacy_train.examples] == [(0, 1, 1), (1, 0, 0)]
    assert [e.privacy for e in data.privacy_test.examples] == [(1, 1, 0)] * len(videos["test"])
    record = protocol.evaluation_record(config, data)["privacy_dataset"]
    assert record["trained_on"] == f"VISPR-1 of {vispr}, merged"
    report = Report(tmp_path / "report")
    report.set_evaluation(protocol.evaluation_record(config, data))
    assert (
        "Privacy test images: the middle frame of each video (--eval_privacy_frames). f'_B and "
        f"the raw-trained attacker trained on VISPR-1 of {vispr}, merged." in report.markdown()
    )


def test_pa_hmdb51_protocol_trains_without_its_videos_and_tests_action_on_them(
    benchmark, fixtures_dir, tmp_path, capsys
):
    """The pa_hmdb51 protocol (SPAct's Sec. 5.3): HMDB51 split 1 (the real split files)
    without the PA-HMDB51 videos for f_A and f'_T; action top-1 and privacy both on the
    PA-HMDB51 videos."""
    in_pa, kept = (
        "April_09_brush_hair_u_nm_np1_ba_goo_0.avi",
        "April_09_brush_hair_u_nm_np1_ba_goo_1.avi",
    )
    dive = "BASE_Jumping_Compilation_-_Brilliant_dive_f_cm_np1_le_bad_0.avi"  # an HMDB51 test video
    hmdb = tmp_path / "hmdb51"
    for action, video, source in (
        ("brush_hair", in_pa, "test.avi"),
        ("brush_hair", kept, "test.avi"),
        ("dive", dive, "part_0.mp4"),
    ):
        (hmdb / action).mkdir(parents=True, exist_ok=True)
        os.symlink(fixtures_dir / "videos" / source, hmdb / action / video)
    annotations = tmp_path / "PrivacyAttributes"
    annotations.mkdir()
    face = dict(
        gender=[[0, 163, 1]],
        face=[[0, 80, 2], [81, 163, 0]],
        nudity=[[0, 163, 0]],
        skin_color=[[0, 163, 0]],
        relationship=[[0, 163, 0]],
    )
    (annotations / "brush_hair.json").write_text(json.dumps({in_pa: face}))
    (annotations / "dive.json").write_text(json.dumps({dive: face}))
    vispr = tmp_path / "vispr"
    write_vispr(vispr, {"x": ["a10_face_partial"], "y": ["a4_gender"]})
    config = tiny_config(
        benchmark,
        tmp_path,
        action_dataset="hmdb51",
        action_annotations=str(fixtures_dir / "hmdb51" / "splits"),
        action_root=str(hmdb),
        privacy_dataset="vispr",
        privacy_annotations=str(vispr),
        privacy_root=str(vispr),
        eval_protocol="pa_hmdb51",
        eval_privacy_dataset="pa_hmdb51",
        eval_privacy_annotations=str(annotations),
        eval_privacy_root=str(hmdb),
        eval_privacy_frames=2,
        eval_dir=str(tmp_path / "evaluation"),
    )
    data = protocol.evaluation_data(config)
    assert len(data.class_names) == 51
    assert [os.path.basename(e.path) for e in data.action_train.examples] == [kept]
    assert [os.path.basename(e.path) for e in training_data(config).videos.examples] == [kept]
    # A prepared cache must say that it left them out (`prepare --leave_out`).
    splits = str(fixtures_dir / "hmdb51" / "splits")
    prepare = ["prepare", "--dataset", "hmdb51", "--annotations", splits, "--root", str(hmdb)]
    prepare += ["--short_side", "32"]
    assert data_cli.main([*prepare, "--out", str(tmp_path / "all")]) == 0
    cached = dataclasses.replace(config, action_cache=str(tmp_path / "all" / "train"))
    with pytest.raises(SettingError) as raised:
        training_data(cached)
    assert str(raised.value) == (
        f"--action_cache={tmp_path / 'all' / 'train'}: prepared from hmdb51, split 1, train, but "
        "the run reads hmdb51, split 1, train, PA-HMDB51 videos left out (those of a folder of "
        "2) (the PA-HMDB51 "
        "videos, which the pa_hmdb51 protocol tests on, must be left out: `prepare --leave_out` "
        "the folder of --eval_privacy_annotations); give the cache of that, or prepare it (`python "
        "-m keras_privacy.data prepare`)"
    )
    leave_out = ["--leave_out", str(annotations)]
    # A --leave_out folder without the annotations (a typo, an empty copy) leaves nothing out,
    # which the cache's record would hide: refused by name.
    capsys.readouterr()
    for wrong in (tmp_path / "typo", tmp_path / "evaluation"):
        assert data_cli.main([*prepare, "--out", str(tmp_path / "x"), "--leave_out", str(wrong)])
        assert not (tmp_path / "x" / "train" / "manifest.json").exists()
        message = f"{wrong}: no PA-HMDB51 '<action>.json' files, so no video would be left out"
        assert message in capsys.readouterr().err
    assert data_cli.main([*prepare, "--out", str(tmp_path / "without"), *leave_out]) == 0
    printed = capsys.readouterr().out
    assert (
        f"train: 1 of the split's 2 videos left out, being PA-HMDB51's ({annotations})" in printed
    )
    cached.action_cache = str(tmp_path / "without" / "train")
    assert read_manifest(training_data(cached).videos)["num_records"] == 1
    # A cache that left out another PA-HMDB51 folder's videos (the VITA repository's copy, a
    # subset) holds videos that this run's folder labels: refused, naming one.
    other = tmp_path / "other_annotations"
    other.mkdir()
    (other / "dive.json").write_text(json.dumps({dive: face}))
    other_prepare = [*prepare, "--out", str(tmp_path / "other"), "--leave_out", str(other)]
    assert data_cli.main(other_prepare) == 0
    other_cache = dataclasses.replace(config, action_cache=str(tmp_path / "other" / "train"))
    with pytest.raises(SettingError, match="left out \\(those of a folder of 1\\), but the run"):
        training_data(other_cache)
    with pytest.raises(SettingError) as raised:
        training_data(other_cache)
    assert str(raised.value).endswith(
        "(it left out the videos of another PA-HMDB51 folder: --eval_privacy_annotations labels 1 "
        f"it did not leave out, e.g. brush_hair/{in_pa.lower()}, which the pa_hmdb51 protocol "
        "tests on: `prepare --leave_out` that folder); give the cache of that, or prepare it "
        "(`python -m keras_privacy.data prepare`)"
    )
    # Another dataset's cache is named as such, without the advice on PA-HMDB51's videos.
    wrong_dataset = tmp_path / "without" / "train" / "manifest.json"
    manifest = json.loads(wrong_dataset.read_text())
    manifest["source"]["dataset"] = "ucf101"
    wrong_dataset.write_text(json.dumps(manifest))
    with pytest.raises(SettingError) as raised:
        training_data(cached)
    assert "prepared from ucf101, split 1, train, PA-HMDB51 videos left out" in str(raised.value)
    assert "prepare --leave_out" not in str(raised.value)
    tested = [(os.path.basename(e.path), e.label) for e in data.action_test.examples]
    assert tested == [(in_pa, 0), (dive, data.class_names.index("dive"))]
    # The action test carries no privacy labels, nor attribute names: its cache reads back.
    cached = prepare_cache(data.action_test, "video", tmp_path / "action_test_cache", 32)
    assert verify_cache(cached)["ok"] and verify_cache(cached)["records"] == 2
    # test.avi's frames 41 and 123 of 164: a face up to frame 80 only.
    assert [e.privacy[:2] for e in data.privacy_test.examples[:2]] == [(1, 1), (1, 0)]
    record = protocol.evaluation_record(config, data)
    assert record["protocol"] == "pa_hmdb51"
    assert record["action_dataset"]["tested_on"] == "PA-HMDB51 videos"
    # Other videos (a download completed since, other lists) would give another digest.
    assert len(record["action_dataset"]["videos_sha256"]) == 64
    fewer = dataclasses.replace(
        data,
        action_test=dataclasses.replace(data.action_test, examples=data.action_test.examples[:1]),
    )
    other = protocol.evaluation_record(config, fewer)["action_dataset"]["videos_sha256"]
    assert other != record["action_dataset"]["videos_sha256"]
    # A box file names source files; PA-HMDB51's test frames are written by evaluate.py.
    boxed = dataclasses.replace(
        config, eval_methods="raw,blacken", eval_boxes=str(benchmark / "person_boxes.json")
    )
    with pytest.raises(SettingError, match="--eval_boxes with blacken on PA-HMDB51"):
        methods_of(boxed)
    assert config.pa_hmdb51_left_out() == str(annotations)

    # f_A trained on another action dataset (here the benchmark; SPAct's and the penalty paper's
    # Table 2 column UCF101 -> PA-HMDB): f'_T alone trains on HMDB51 without the PA-HMDB51
    # videos and is tested on them; f_A's training split is its own, whole.
    novel = tiny_config(
        benchmark,
        tmp_path,
        privacy_dataset="vispr",
        privacy_annotations=str(vispr),
        privacy_root=str(vispr),
        eval_protocol="pa_hmdb51",
        eval_action_dataset="hmdb51",
        eval_action_annotations=splits,
        eval_action_root=str(hmdb),
        eval_privacy_dataset="pa_hmdb51",
        eval_privacy_annotations=str(annotations),
        eval_privacy_root=str(hmdb),
        eval_dir=str(tmp_path / "evaluation"),
    )
    assert novel.action_dataset == "synthetic" and novel.pa_hmdb51_left_out() == ""
    data = protocol.evaluation_data(novel)
    assert [os.path.basename(e.path) for e in data.action_train.examples] == [kept]
    assert [(os.path.basename(e.path), e.label) for e in data.action_test.examples] == tested


def test_an_anonymizer_trained_on_the_pa_hmdb51_test_videos_is_refused(tmp_path):
    """PA-HMDB51's test videos are HMDB51 videos: an f_A trained on HMDB51 under another
    protocol, or leaving out another folder's videos, trained on some; one trained on UCF101,
    or leaving out those tested, did not."""
    names = ("gender", "face", "nudity", "skin_color", "relationship")
    ranges = {name: [[0, 9, 0]] for name in names}
    annotations, subset = tmp_path / "PrivacyAttributes", tmp_path / "subset"
    for folder, videos in (
        (annotations, ["x_hug_a.avi", "x_hug_b.avi"]),
        (subset, ["x_hug_a.avi"]),
    ):
        folder.mkdir()
        (folder / "hug.json").write_text(json.dumps({video: ranges for video in videos}))
    config = ExperimentConfig(
        action_dataset="hmdb51",
        eval_protocol="pa_hmdb51",
        eval_privacy_dataset="pa_hmdb51",
        eval_privacy_annotations=str(annotations),
    )
    run = tmp_path / "run"
    run.mkdir()
    path = str(run / "anonymizer.keras")
    recorded = run / "config.json"
    anonymizations.require_unseen_test_videos(config, path)  # no record: taken as it is

    def trained(**settings):
        recorded.write_text(json.dumps(dataclasses.asdict(config) | settings))

    for unseen in ({}, {"action_dataset": "ucf101", "eval_protocol": "same"}):
        trained(**unseen)
        anonymizations.require_unseen_test_videos(config, path)
    trained(eval_protocol="same")
    with pytest.raises(SettingError) as raised:
        anonymizations.require_unseen_test_videos(config, path)
    assert str(raised.value) == (
        f"{path} was trained on HMDB51 with --eval_protocol=same ({recorded}), its training "
        "split holding the PA-HMDB51 videos this evaluation tests on: train it with "
        f"--eval_protocol=pa_hmdb51 and --eval_privacy_annotations={annotations}, which leave "
        "them out"
    )
    trained(eval_privacy_annotations=str(subset))
    with pytest.raises(
        SettingError, match=r"not 1 of those this evaluation tests on \(e.g. hug/x_hug_b"
    ):
        anonymizations.require_unseen_test_videos(config, path)
    # Every saved anonymizer the evaluation names is checked, not only this run's.
    named = dataclasses.replace(config, eval_methods=f"raw,other={path}")
    with pytest.raises(SettingError, match="not 1 of those"):
        methods_of(named)
    trained(eval_privacy_annotations=str(tmp_path / "moved"))  # gone: taken as it is
    anonymizations.require_unseen_test_videos(config, path)
    elsewhere = dataclasses.replace(config, eval_protocol="same")
    trained(eval_protocol="same")
    anonymizations.require_unseen_test_videos(elsewhere, path)


def test_report_tables_each_target_architecture(tmp_path):
    report = Report(tmp_path)
    report.add("raw", 0.5, 0.4, 0.3, extra={"action_top1_by_model": {"a": 0.5}})
    assert "Per target architecture" not in report.markdown()
    extra = {
        "action_top1_by_model": {"a": 0.5, "b": 0.25},
        "privacy_cmap_by_model": {"p": 0.4},
        "privacy_f1_by_model": {"p": 0.3},
        "raw_attacker_cmap_by_model": {"p": 0.2},
    }
    report.add("spact", 0.5, 0.4, 0.3, extra=extra)
    lines = report.markdown().split("Per target architecture:\n\n")[1].splitlines()
    assert lines[0] == (
        "| Method | f'_T a top-1 (%) | f'_T b top-1 (%) | f'_B p cMAP (%) | f'_B p F1 "
        "| raw-trained p cMAP (%) |"
    )
    assert lines[2] == "| raw | 50.00 | – | – | – | – |"
    assert lines[3] == "| spact | 50.00 | 25.00 | 40.00 | 0.300 | 20.00 |"
