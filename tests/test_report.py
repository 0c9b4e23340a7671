"""The resumable evaluation report: JSON round trip, Markdown table, trade-off plot, strips."""

import json
import re

import matplotlib.image
import numpy as np
import pytest

from keras_privacy.evaluation import report as report_module
from keras_privacy.evaluation.report import Report, save_frame_strip, summarize_seeds

pytestmark = pytest.mark.backend_independent


def _filled_report(out_dir):
    report = Report(out_dir)
    report.add("raw", 0.60, 0.80, 0.50, extra={"skipped": ["tattoo"], "epochs": 3})
    report.add("downsample_4x", 0.45, 0.60, 0.55)
    report.add("spact", 0.60, 0.40, 0.25)
    return report


def test_add_writes_json_and_markdown_at_once(tmp_path):
    report = Report(tmp_path / "eval")
    report.add("raw", 0.6, 0.8, 0.5)
    assert json.loads((tmp_path / "eval" / "report.json").read_text())["methods"]["raw"] == {
        "action_top1": 0.6,
        "privacy_cmap": 0.8,
        "privacy_f1": 0.5,
        "extra": {},
    }
    assert "| raw |" in (tmp_path / "eval" / "report.md").read_text()
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["report.json", "report.md"]


def test_json_round_trip_and_resume(tmp_path):
    _filled_report(tmp_path)
    resumed = Report(tmp_path)
    assert resumed.methods == ["raw", "downsample_4x", "spact"]
    assert resumed.has("spact") and not resumed.has("blur_strong")
    assert resumed.get("raw").extra == {"skipped": ["tattoo"], "epochs": 3}
    assert resumed.get("downsample_4x").privacy_cmap == pytest.approx(0.60)
    resumed.add("blur_strong", 0.55, 0.7, 0.45)
    resumed.add("spact", 0.61, 0.41, 0.26)
    again = Report(tmp_path)
    assert again.methods == ["raw", "downsample_4x", "spact", "blur_strong"]
    assert again.get("spact").action_top1 == pytest.approx(0.61)


def test_two_evaluations_into_one_report_keep_each_others_rows(tmp_path):
    # Both load the report before either adds a row (two evaluate.py runs at once).
    first, second = Report(tmp_path), Report(tmp_path)
    first.add("raw", 0.6, 0.8, 0.5)
    second.add("spact", 0.6, 0.4, 0.25)
    first.add("vita", 0.5, 0.3, 0.2)
    assert Report(tmp_path).methods == ["raw", "spact", "vita"]
    assert "| spact |" in (tmp_path / "report.md").read_text()
    # A row that another evaluation replaced (a retrained anonymizer) is not put back.
    second.add("raw", 0.7, 0.9, 0.6)
    first.add("meta", 0.5, 0.35, 0.2)
    assert Report(tmp_path).get("raw").action_top1 == 0.7


def test_results_of_another_evaluation_never_join_a_report(tmp_path):
    report = _filled_report(tmp_path)
    report.set_evaluation({"protocol": "known", "attribute_names": ["a"]})
    # A report written before --privacy_image_side compares with a run without it, not with one
    # whose privacy images were cached at another side.
    Report(tmp_path).set_evaluation({"protocol": "known", "attribute_names": ["a"]})
    with pytest.raises(ValueError, match=r"its privacy_image_side differ\): choose another"):
        Report(tmp_path).set_evaluation(
            {"protocol": "known", "attribute_names": ["a"], "privacy_image_side": 192}
        )
    with pytest.raises(ValueError, match="its protocol, attribute_names differ"):
        Report(tmp_path).set_evaluation({"protocol": "cross_dataset", "attribute_names": ["b"]})
    fresh = Report(tmp_path / "fresh")
    fresh.set_evaluation({"protocol": "known", "attribute_names": ["a"], "privacy_image_side": 192})
    note = "Privacy images cached at a short side of 192 px (--privacy_image_side)."
    assert note in fresh.markdown() and "--eval_f1_threshold" not in fresh.markdown()
    # F1 at another threshold: not mixed with rows scored at 0.5, and said under the table.
    at_half = {"protocol": "known", "target_models": {"privacy": {"models": ["resnet_tiny"]}}}
    authors = json.loads(json.dumps(at_half))
    authors["target_models"]["privacy"]["f1_threshold"] = 0.6225
    _filled_report(tmp_path / "half").set_evaluation(at_half)
    with pytest.raises(ValueError, match=r"its target_models.privacy.f1_threshold differ\)"):
        Report(tmp_path / "half").set_evaluation(authors)
    other = Report(tmp_path / "authors")
    other.set_evaluation(authors)
    assert "at a probability of 0.6225 (--eval_f1_threshold;" in other.markdown()


def test_another_split_or_labels_file_never_joins_a_report(tmp_path):
    def record(split=None, digest=None, videos=None):
        action = {"name": "ucf101", "root": "/data/ucf101", **({"split": split} if split else {})}
        action |= {"videos_sha256": videos} if videos else {}
        privacy = {"name": "vispr", **({"labels_sha256": digest} if digest else {})}
        return {"protocol": "known", "action_dataset": action, "privacy_dataset": privacy}

    (tmp_path / "videos").mkdir()
    _filled_report(tmp_path / "videos").set_evaluation(record(digest="a", videos="v"))
    # A partial download completed since: the finished rows were measured on other videos.
    with pytest.raises(ValueError, match=r"its action_dataset.videos_sha256 differ\)"):
        Report(tmp_path / "videos").set_evaluation(record(digest="a", videos="w"))
    _filled_report(tmp_path).set_evaluation(record(digest="a"))
    with pytest.raises(ValueError, match=r"its action_dataset.split differ\): choose another"):
        Report(tmp_path).set_evaluation(record(split=2, digest="a"))
    with pytest.raises(ValueError, match=r"its privacy_dataset.labels_sha256 differ\)"):
        Report(tmp_path).set_evaluation(record(digest="b"))
    # moved files are the same dataset; a report written before the digest was kept compares
    Report(tmp_path).set_evaluation({**record(digest="a"), "action_dataset": {"name": "ucf101"}})
    (tmp_path / "older").mkdir()
    _filled_report(tmp_path / "older").set_evaluation(record())
    Report(tmp_path / "older").set_evaluation(record(digest="a"))


def test_markdown_table_has_every_method_and_relative_drops(tmp_path):
    rows = _filled_report(tmp_path).markdown().splitlines()
    cells = [row.strip("| ").split(" | ") for row in rows[2:5]]
    table = {row[0]: row for row in cells}
    assert list(table) == ["raw", "downsample_4x", "spact"]
    assert table["raw"] == ["raw", "60.00", "–", "80.00", "–", "0.500", "–"]
    # top-1 0.60 -> 0.45: 25 % drop; cMAP 0.80 -> 0.60: 25 %; F1 0.50 -> 0.55: 10 % rise.
    assert table["downsample_4x"] == [
        "downsample_4x",
        "45.00",
        "↓25%",
        "60.00",
        "↓25%",
        "0.550",
        "↑10%",
    ]
    assert table["spact"][2] == "↓0%" and table["spact"][4] == "↓50%"
    assert (tmp_path / "report.md").read_text().startswith(rows[0])


def test_markdown_shows_the_raw_trained_attacker_with_its_drops_from_raw(tmp_path):
    report = Report(tmp_path)
    raw = {"raw_attacker_cmap": 0.8, "raw_attacker_f1": 0.5}
    report.add("raw", 0.6, 0.8, 0.5, extra=raw | {"raw_attacker_cmap_interval": [0.7, 0.9]})
    report.add("spact", 0.6, 0.7, 0.4, extra={"raw_attacker_cmap": 0.4, "raw_attacker_f1": 0.55})
    report.add("blacken", 0.3, 0.6, 0.4)  # written before the attacker was recorded: no row
    text = report.markdown()
    assert "The raw-trained attacker (the first target privacy architecture" in text
    rows = text.split("on each method's test images:\n\n")[1].split("\n\n")[0].splitlines()
    assert rows[0] == "| Method | cMAP (%) ↓ | ↓ vs raw | F1 ↓ | ↓ vs raw |"
    assert rows[2:] == [
        "| raw | 80.00 [70.00, 90.00] | – | 0.500 | – |",
        "| spact | 40.00 | ↓50% | 0.550 | ↑10% |",
    ]
    assert "raw-trained attacker" not in Report(tmp_path / "none").markdown()


def test_markdown_without_raw_row_has_no_drops(tmp_path):
    report = Report(tmp_path)
    report.add("spact", 0.6, 0.4, 0.25)
    assert report.markdown().splitlines()[2] == "| spact | 60.00 | – | 40.00 | – | 0.250 | – |"


def test_corrupt_report_json_is_an_error(tmp_path):
    (tmp_path / "report.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a keras-privacy report"):
        Report(tmp_path)


def test_report_json_not_utf8_is_named(tmp_path):
    (tmp_path / "report.json").write_bytes(b'\xff\xfe{"methods": {}}')
    with pytest.raises(ValueError, match=r"report.json is not a keras-privacy report \('utf-8'"):
        Report(tmp_path)


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("privacy_f1", None, "privacy_f1 is None, not a finite number"),
        ("action_top1", "0.6", "action_top1 is '0.6', not a finite number"),
        ("privacy_cmap", float("nan"), "privacy_cmap is nan, not a finite number"),
        ("privacy_cmap", True, "privacy_cmap is True, not a finite number"),
        ("intervals", None, "intervals is None, not an object"),
        ("intervals", {"privacy_f1": [0.1]}, "intervals.privacy_f1 is [0.1], not a pair"),
        ("intervals", {"privacy_f1": [0.1, None]}, "intervals.privacy_f1 is [0.1, None], not"),
    ],
)
def test_report_json_with_a_metric_that_is_not_a_number_is_named(tmp_path, field, value, shown):
    # A hand-edited row: it failed later, with a TypeError in the relative drops.
    _filled_report(tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    report["methods"]["downsample_4x"][field] = value
    (tmp_path / "report.json").write_text(json.dumps(report))
    named = f"{tmp_path / 'report.json'}: method 'downsample_4x': {shown}"
    with pytest.raises(ValueError, match=re.escape(named)):
        Report(tmp_path)


def test_markdown_names_the_attributes_left_out_of_cmap_and_f1(tmp_path):
    # No test image is positive for s3: the means average the other attributes, which the
    # note under the table must say (it named all of them, as the evaluation record does).
    assert "leave out" not in _filled_report(tmp_path / "none").markdown()
    report = Report(tmp_path)
    report.add("raw", 0.6, 0.8, 0.5, extra={"privacy_skipped": ["s3_face_mark"]})
    report.add("blur", 0.5, 0.7, 0.4, extra={"privacy_skipped": ["s3_face_mark"]})
    note = (
        "Privacy cMAP and F1 leave out the attributes with no positive test image: "
        "s3_face_mark. Their means are over the other attributes."
    )
    assert note in (tmp_path / "report.md").read_text()
    # Rows that leave out different attributes are named row by row.
    report.add("spact", 0.6, 0.4, 0.25, extra={"privacy_skipped": ["s1", "s3_face_mark"]})
    assert "test image: s3_face_mark (raw); s3_face_mark (blur); s1, s3_face_mark (spact)." in (
        report.markdown()
    )


def test_tradeoff_plot_is_written(tmp_path):
    path = _filled_report(tmp_path).plot_tradeoff()
    assert path == tmp_path / "tradeoff.png" and path.stat().st_size > 1000
    assert matplotlib.image.imread(path).shape == (450, 750, 4)  # 7.5 x 4.5 in, legend at right


def test_tradeoff_plot_draws_the_intervals(tmp_path):
    plain = _filled_report(tmp_path / "plain").plot_tradeoff()
    report = Report(tmp_path / "bars")
    report.add("raw", 0.60, 0.80, 0.50, extra={"skipped": ["tattoo"], "epochs": 3})
    report.add("downsample_4x", 0.45, 0.60, 0.55)
    intervals = {"action_top1": [0.5, 0.7], "privacy_cmap": [0.3, 0.5]}
    report.add("spact", 0.60, 0.40, 0.25, intervals=intervals)
    with_bars = report.plot_tradeoff()
    # The same points; only the error bars (and the title saying so) add ink.
    ink = [(matplotlib.image.imread(p)[..., :3] < 0.9).any(-1).sum() for p in (plain, with_bars)]
    assert ink[1] > ink[0] + 100


def _drawn_axes(monkeypatch) -> list:
    """Collects the axes of every trade-off plot saved while the test runs."""
    drawn, save = [], report_module._save_tradeoff

    def recording_save(figure, axes, *args):
        drawn.append(axes)
        return save(figure, axes, *args)

    monkeypatch.setattr(report_module, "_save_tradeoff", recording_save)
    return drawn


def test_tradeoff_plots_put_each_method_at_its_privacy_and_action(tmp_path, monkeypatch):
    drawn = _drawn_axes(monkeypatch)
    _filled_report(tmp_path).plot_tradeoff()
    (axes,) = drawn
    points = {c.get_label(): c.get_offsets().tolist() for c in axes.collections}
    expected = {"raw": [[80.0, 60.0]], "downsample_4x": [[60.0, 45.0]], "spact": [[40.0, 60.0]]}
    assert points == expected  # (privacy cMAP, action top-1) in %
    assert axes.get_xlabel().startswith("privacy cMAP") and axes.get_ylabel().startswith("action")

    reports = {}
    for seed, shift in ((0, 0.0), (1, 0.02)):
        reports[seed] = Report(tmp_path / f"seed_{seed}")
        reports[seed].add("raw", 0.8 + shift, 0.9 - shift, 0.5)
        reports[seed].add("spact", 0.7 + shift, 0.5 - shift, 0.5)
    summarize_seeds(reports, tmp_path / "summary")
    means = {bars.get_label(): bars[0].get_xydata().tolist() for bars in drawn[-1].containers}
    assert means == {"raw (2 seeds)": [[89.0, 81.0]], "spact (2 seeds)": [[49.0, 71.0]]}


def test_frame_strip_one_row_per_method(tmp_path):
    rng = np.random.default_rng(0)
    frames = {
        "raw": rng.random((10, 30, 40, 3)).astype(np.float32),
        "blur_strong": (rng.random((10, 30, 40, 3)) * 255).astype(np.uint8),
        "downsample_4x": rng.random((10, 30, 40, 3)).astype(np.float32),
    }
    path = save_frame_strip(frames, tmp_path / "strips" / "frames.png")
    assert path.stat().st_size > 1000
    # 3 rows of 200 x 150 tiles (4:3 frames), 4 columns after the 40-pixel label column.
    assert matplotlib.image.imread(path).shape == (3 * 150, 40 + 4 * 200, 4)
    # Each row shows its method's frames: one colour each, floats in [0, 1] and uint8 alike.
    colours = {"raw": (1, 0, 0), "blur_strong": (0, 1, 0), "downsample_4x": (0, 0, 1)}
    solid = {name: np.broadcast_to(np.float32(c), (10, 30, 40, 3)) for name, c in colours.items()}
    solid["blur_strong"] = (solid["blur_strong"] * 255).astype(np.uint8)
    strip = matplotlib.image.imread(save_frame_strip(solid, tmp_path / "solid.png"))
    for row, colour in enumerate(colours.values()):
        for column in range(4):
            centre = strip[row * 150 + 75, 40 + column * 200 + 100, :3]
            np.testing.assert_allclose(centre, colour, atol=0.02, err_msg=f"{row}, {column}")


def test_intervals_are_kept_in_json_and_shown_in_markdown(tmp_path):
    report = Report(tmp_path)
    report.add("raw", 0.6, 0.8, 0.5, intervals={"action_top1": (0.55, 0.65)})
    report.add("spact", 0.6, 0.4, 0.25)
    methods = json.loads((tmp_path / "report.json").read_text())["methods"]
    assert methods["raw"]["intervals"] == {"action_top1": [0.55, 0.65]}
    assert "intervals" not in methods["spact"]  # as rows written before intervals existed
    assert Report(tmp_path).get("raw").intervals == {"action_top1": [0.55, 0.65]}
    markdown = (tmp_path / "report.md").read_text()
    assert "| raw | 60.00 [55.00, 65.00] | – | 80.00 | – |" in markdown
    assert "95 % bootstrap interval over the test videos / images." in markdown
    # The units an interval resamples are named where recorded: few give a rough interval.
    counts = {"action_test_videos": 12, "privacy_test_units": 400}
    report.add("raw", 0.6, 0.8, 0.5, extra=counts, intervals={"action_top1": (0.55, 0.65)})
    assert (
        "interval over the test videos / images (12 action test videos, 400 privacy test "
        "units; under 30 units an interval is rough, too narrow or even a point)."
    ) in report.markdown()
    many = counts | {"action_test_videos": 3783}
    report.add("raw", 0.6, 0.8, 0.5, extra=many, intervals={"action_top1": (0.55, 0.65)})
    assert "images (3783 action test videos, 400 privacy test units)." in report.markdown()
    with pytest.raises(ValueError, match="unknown metrics: top5"):
        report.add("vita", 0.6, 0.4, 0.25, intervals={"top5": (0.1, 0.2)})


def test_summary_of_seeds_gives_mean_and_sample_std(tmp_path):
    values = {0: (0.5, 0.4, 0.3), 1: (0.7, 0.2, 0.1), 2: (0.6, 0.3, 0.2)}
    reports = {}
    for seed, (action, cmap, f1) in values.items():
        reports[seed] = Report(tmp_path / f"seed_{seed}")
        reports[seed].add("raw", 0.8, 0.9, 0.6, extra={"raw_attacker_cmap": 0.9})
        if seed != 2:  # an evaluation interrupted before spact
            reports[seed].add("spact", action, cmap, f1, intervals={"privacy_f1": (0.0, 0.5)})
    summary = summarize_seeds(reports, tmp_path)
    spact = summary["methods"]["spact"]
    assert spact["seeds"] == [0, 1]
    assert spact["action_top1"]["mean"] == pytest.approx(0.6)
    assert spact["action_top1"]["std"] == pytest.approx(np.std([0.5, 0.7], ddof=1))
    assert spact["privacy_cmap"]["per_seed"] == {"0": 0.4, "1": 0.2}
    assert summary["methods"]["raw"]["privacy_f1"]["std"] == pytest.approx(0.0)
    assert summary["methods"]["raw"]["raw_attacker_cmap"]["mean"] == pytest.approx(0.9)
    assert "raw_attacker_cmap" not in spact  # its seeds have no raw-trained attacker
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    markdown = (tmp_path / "summary.md").read_text()
    # The 95 % interval of a mean of 2 seeds: t(0.975, 1) = 12.706 times std / sqrt(2).
    half = 12.7062047 * np.std([0.5, 0.7], ddof=1) / np.sqrt(2)
    np.testing.assert_allclose(spact["action_top1"]["interval"], [0.6 - half, 0.6 + half])
    assert summary["methods"]["raw"]["action_top1"]["interval"] == pytest.approx([0.8, 0.8])
    assert (
        "| spact | 2 | 60.00 [-67.06, 187.06] ± 14.14 | ↓25% | 30.00 [-97.06, 157.06] ± 14.14 "
        "| ↓67% | 0.200 [-1.071, 1.471] ± 0.141 | ↓67% | – | – | – |" in markdown
    )
    assert (
        "| raw | 3 | 80.00 [80.00, 80.00] ± 0.00 | – | 90.00 [90.00, 90.00] ± 0.00 | – "
        "| 0.600 [0.600, 0.600] ± 0.000 | – | 90.00 [90.00, 90.00] ± 0.00 | – | – |" in markdown
    )
    assert "| spact | 1 | 70.00 | 20.00 | 0.100 [0.000, 0.500] |" in markdown
    assert "± t · std / √N, t = 4.30 for 3 seeds, 12.71 for 2 seeds: wide for few" in markdown
    image = matplotlib.image.imread(tmp_path / "summary_tradeoff.png")
    assert image.shape[:2] == (450, 750)
    assert image[..., :3].std() > 0.01  # something is drawn


def test_summary_names_the_methods_that_dominate_each_method(tmp_path):
    rows = {"raw": (0.8, 0.9), "spact": (0.7, 0.5), "blacken": (0.3, 0.6), "blur": (0.75, 0.4)}
    reports = {}
    for seed, shift in ((0, 0.0), (1, 0.02)):
        reports[seed] = Report(tmp_path / f"seed_{seed}")
        for method, (action, cmap) in rows.items():
            reports[seed].add(method, action + shift, cmap - shift, 0.5)
    summary = summarize_seeds(reports, tmp_path)["methods"]
    assert summary["raw"]["dominated_by"] == []
    assert summary["blur"]["dominated_by"] == []
    assert summary["spact"]["dominated_by"] == ["blur"]
    assert summary["blacken"]["dominated_by"] == ["spact", "blur"]
    markdown = (tmp_path / "summary.md").read_text()
    assert "| blacken | 2 | 31.00 [18.29, 43.71] ± 1.41 | ↓62% | 59.00 [46.29, 71.71] ± 1.41 |" in (
        markdown
    )
    assert markdown.count("| spact, blur |") == 1
