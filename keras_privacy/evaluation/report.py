"""The evaluation report: a resumable `report.json`, a Markdown table in the layout of SPAct's
Table 1, the action / privacy trade-off plot of SPAct's Fig. 4, and strips of anonymised frames.

Metric values are stored as fractions in [0, 1] and shown as percentages (top-1, cMAP) or as
they are (F1), as in SPAct's tables. Relative drops are from the "raw" row when there is one.
A metric with a 95 % bootstrap interval (`MethodResult.intervals`) shows it after its value, as
"72.80 [69.40, 76.10]"; `summarize_seeds` gives the mean and standard deviation of the reports
of several training seeds.
With several target architectures, a second table gives each one's results (the `*_by_model`
entries of a method's extra results).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from keras_privacy import environment
from keras_privacy.evaluation.metrics import relative_drop
from keras_privacy.files import write_text_atomically

RAW_METHOD = "raw"
_DPI = 100
_LABEL_WIDTH = 40
_JSON_NAME = "report.json"
_MARKDOWN_NAME = "report.md"
_SUMMARY_JSON = "summary.json"
_SUMMARY_MARKDOWN = "summary.md"
_SUMMARY_PLOT = "summary_tradeoff.png"
FEW_UNITS = 30
"""Test units under which a bootstrap interval is rough (few distinct resamples; all correct
videos give a point)."""
_RAW_ATTACKER = "raw_attacker_cmap"
"""The extra result that the summary of seeds averages too: the raw-trained attacker's cMAP."""
_COMPARED = (
    "protocol",
    "action_dataset",
    "class_names",
    "attribute_names",
    "test_epochs",
    "privacy_image_side",
    "target_models",
    "privacy_dataset",
)
"""Evaluation record keys that must agree for results to share one report (a dataset's
folders aside: `_WHERE`)."""
_NAMES = ("class_names", "attribute_names")
"""The record keys known only once the data are read."""
_WHERE = ("root", "annotations")
"""Where a dataset's files are: a moved dataset is the same dataset."""
_RECORDED_LATER = ("labels_sha256", "videos_sha256")
"""A dataset's record entries that earlier versions did not write for every dataset: compared
only where both records have them, so that earlier reports and attackers stay usable."""
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h")
"""Point markers of the trade-off plot: with 10 colours, every (colour, marker) pair differs
for the first 110 methods."""


def comparable(kept: Any, new: Any) -> tuple[Any, Any]:
    """Two record values as they are compared: without a dataset's folders (`_WHERE`), and
    without the entries of `_RECORDED_LATER` that only one of them has."""
    if not (isinstance(kept, dict) and isinstance(new, dict)):
        return kept, new
    left_out = set(_WHERE) | {key for key in _RECORDED_LATER if (key in kept) != (key in new)}
    return (
        {key: item for key, item in kept.items() if key not in left_out},
        {key: item for key, item in new.items() if key not in left_out},
    )


def _differences(name: str, kept: Any, new: Any) -> list[str]:
    """The names of what differs between two record values: `name`, or the dotted names of
    the differing entries where both are objects (`target_models.action.epochs`)."""
    if isinstance(kept, dict) and isinstance(new, dict):
        keys = [*kept, *(key for key in new if key not in kept)]
        return [
            difference
            for key in keys
            for difference in _differences(f"{name}.{key}", kept.get(key), new.get(key))
        ]
    return [] if kept == new else [name]


@dataclasses.dataclass(frozen=True)
class MethodResult:
    """The three headline metrics of one method (fractions), their 95 % bootstrap intervals
    ({field: [low, high]}, empty in reports written before intervals existed) and anything
    else worth keeping."""

    action_top1: float
    privacy_cmap: float
    privacy_f1: float
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    intervals: dict[str, list[float]] = dataclasses.field(default_factory=dict)


class Report:
    """Per-method results of an evaluation, kept in `out_dir/report.json` and `report.md`.

    An existing `report.json` is loaded, so an interrupted evaluation resumes: the caller skips
    the methods for which `has(method)` is true.
    """

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.out_dir = Path(out_dir)
        self._results: dict[str, MethodResult] = {}
        self._evaluation: dict[str, Any] = {}
        json_path = self.out_dir / _JSON_NAME
        if json_path.is_file():
            self._results, self._evaluation = _load_report(json_path)

    @property
    def evaluation(self) -> dict[str, Any]:
        """What the results mean (protocol, datasets, label names), or {} when not recorded."""
        return dict(self._evaluation)

    def set_evaluation(self, record: Mapping[str, Any]) -> None:
        """Record what the results mean (see `datasets.evaluation_record`) and rewrite the
        report. Results already there from another protocol, with other class or attribute
        names, other test epochs, privacy images cached at another side or target models
        trained or tested otherwise raise ValueError naming what differs: their rows would
        not compare with the new ones."""
        self.refuse_another(record)
        self._evaluation = dict(record)
        self._write()

    def refuse_another(self, record: Mapping[str, Any], names_known: bool = True) -> None:
        """Raise ValueError naming what differs when the results here come from an evaluation
        other than `record`'s (`set_evaluation`'s check, which writes nothing).
        `names_known=False` leaves out the class and attribute names: a record of
        `datasets.evaluation_settings`, checked before the data are read."""
        if not (self._results and self._evaluation):
            return
        keys = _COMPARED if names_known else [k for k in _COMPARED if k not in _NAMES]
        differ = [
            name
            for key in keys
            for name in _differences(key, *comparable(self._evaluation.get(key), record.get(key)))
        ]
        if differ:
            raise ValueError(
                f"{self.out_dir / _JSON_NAME} holds results of another evaluation (its "
                f"{', '.join(differ)} differ): choose another --eval_dir"
            )

    @property
    def methods(self) -> list[str]:
        """The methods reported so far, in the order they were first added."""
        return list(self._results)

    def has(self, method: str) -> bool:
        """Whether `method` is already reported (done: an evaluation may skip it)."""
        return method in self._results

    @property
    def action_metric(self) -> str:
        """What the action column holds: "top-1", or "cMAP" for multi-label actions (P-HVU,
        whose results say `action_metric: "cmap"` in `extra`)."""
        multilabel = any(r.extra.get("action_metric") == "cmap" for r in self._results.values())
        return "cMAP" if multilabel else "top-1"

    def get(self, method: str) -> MethodResult:
        """The result of `method`."""
        return self._results[method]

    def add(
        self,
        method: str,
        action_top1: float,
        privacy_cmap: float,
        privacy_f1: float,
        extra: Mapping[str, Any] | None = None,
        intervals: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        """Record (or replace) the result of `method` and rewrite report.json and report.md at
        once, so that nothing done is lost if the evaluation stops. `extra` must be JSON
        serialisable (e.g. per-attribute AP, skipped attributes, the checkpoint evaluated);
        `intervals` maps metric fields ("action_top1", "privacy_cmap", "privacy_f1") to the
        (low, high) of their 95 % interval.
        Every other row is taken as it is on disk: another evaluation may have added or
        replaced rows since this one loaded the report, and its rows are newer than this one's
        copies."""
        json_path = self.out_dir / _JSON_NAME
        if json_path.is_file():
            self._results = {**self._results, **_load_report(json_path)[0]}
        unknown = set(intervals or {}) - {field for field, _, _ in _COLUMNS}
        if unknown:
            raise ValueError(f"intervals of unknown metrics: {', '.join(sorted(unknown))}")
        self._results[method] = MethodResult(
            float(action_top1),
            float(privacy_cmap),
            float(privacy_f1),
            dict(extra or {}),
            {field: [float(bound) for bound in pair] for field, pair in (intervals or {}).items()},
        )
        self._write()

    def _write(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        payload = {name: _as_json(result) for name, result in self._results.items()}
        text = json.dumps({"evaluation": self._evaluation, "methods": payload}, indent=2)
        write_text_atomically(self.out_dir / _JSON_NAME, text)
        write_text_atomically(self.out_dir / _MARKDOWN_NAME, self.markdown())

    def markdown(self) -> str:
        """The results as a Markdown table like SPAct's Table 1, with relative drops from raw,
        then the per-architecture table (several target architectures) and the protocol."""
        raw = self._results.get(RAW_METHOD)
        header = ["Method"]
        for title in (f"Action {self.action_metric} (%) ↑", "Privacy cMAP (%) ↓", "F1 ↓"):
            header += [title, "↓ vs raw"]
        lines = [_table_row(header), _table_row(["---"] + ["---:"] * (len(header) - 1))]
        for method, result in self._results.items():
            no_drop = raw is None or method == RAW_METHOD
            cells = [method]
            for field, scale, digits in _COLUMNS:
                value = getattr(result, field)
                cells.append(_format_value(value, result.intervals.get(field), scale, digits))
                cells.append("–" if no_drop else _format_drop(value, getattr(raw, field)))
            lines.append(_table_row(cells))
        note = "↓ vs raw: relative drop from the raw-data row, (raw - value) / raw."
        if any(result.intervals for result in self._results.values()):
            note += " [low, high]: 95 % bootstrap interval over the test videos / images"
            note += self._units_note() + "."
        parts = [
            "\n".join(lines),
            note,
            self._skipped_note(),
            self._raw_attacker_table(),
            self._architecture_table(),
            self._detector_note(),
            self._evaluation_note(),
        ]
        return "\n\n".join(part for part in parts if part) + "\n"

    def _units_note(self) -> str:
        """How many test units the intervals resample, from the first row that recorded them
        ('' where none did), and a caution where they are few."""
        counts = next(
            (
                (extra["action_test_videos"], extra["privacy_test_units"])
                for extra in (result.extra for result in self._results.values())
                if "action_test_videos" in extra and "privacy_test_units" in extra
            ),
            None,
        )
        if counts is None:
            return ""
        videos, units = counts
        note = f" ({videos} action test videos, {units} privacy test units"
        if min(videos, units) < FEW_UNITS:
            note += f"; under {FEW_UNITS} units an interval is rough, too narrow or even a point"
        return note + ")"

    def _skipped_note(self) -> str:
        """The privacy attributes that cMAP and F1 leave out for having no positive test image
        (`extra.privacy_skipped`), for all rows or per row ('' when none is left out)."""
        skipped = {
            method: result.extra["privacy_skipped"]
            for method, result in self._results.items()
            if result.extra.get("privacy_skipped")
        }
        if not skipped:
            return ""
        lists = {tuple(names) for names in skipped.values()}
        if len(skipped) == len(self._results) and len(lists) == 1:
            left_out = ", ".join(next(iter(skipped.values())))
        else:
            left_out = "; ".join(
                f"{', '.join(names)} ({method})" for method, names in skipped.items()
            )
        return (
            "Privacy cMAP and F1 leave out the attributes with no positive test image: "
            f"{left_out}. Their means are over the other attributes."
        )

    def _raw_attacker_table(self) -> str:
        """The raw-trained attacker (a privacy model trained on raw images, SPAct supp. D.1 and
        its Table 2) on each method's anonymized test images: its cMAP and F1 with their
        intervals and drops from raw ('' where no row recorded it)."""
        rows = {
            method: result.extra
            for method, result in self._results.items()
            if _RAW_ATTACKER in result.extra
        }
        if not rows:
            return ""
        raw = rows.get(RAW_METHOD)
        header = ["Method", "cMAP (%) ↓", "↓ vs raw", "F1 ↓", "↓ vs raw"]
        lines = [_table_row(header), _table_row(["---"] + ["---:"] * (len(header) - 1))]
        for method, extra in rows.items():
            cells = [method]
            for key, scale, digits in ((_RAW_ATTACKER, 100, 2), ("raw_attacker_f1", 1, 3)):
                value = extra.get(key)
                if value is None:
                    cells += ["–", "–"]
                    continue
                cells.append(_format_value(value, extra.get(f"{key}_interval"), scale, digits))
                no_drop = raw is None or method == RAW_METHOD or raw.get(key) is None
                cells.append("–" if no_drop else _format_drop(value, raw[key]))
            lines.append(_table_row(cells))
        return (
            "The raw-trained attacker (the first target privacy architecture, trained on raw "
            "images) on each method's test images:\n\n" + "\n".join(lines)
        )

    def _architecture_table(self) -> str:
        """Each target architecture's metrics per method ('' when each kind had one)."""
        action = "cmap" if self.action_metric == "cMAP" else "top1"
        columns, most = [], 0
        for key, title, scale, digits in (
            (f"action_{action}_by_model", f"f'_T {{}} {self.action_metric} (%)", 100, 2),
            ("privacy_cmap_by_model", "f'_B {} cMAP (%)", 100, 2),
            ("privacy_f1_by_model", "f'_B {} F1", 1, 3),
            ("raw_attacker_cmap_by_model", "raw-trained {} cMAP (%)", 100, 2),
        ):
            results = self._results.values()
            models = list(dict.fromkeys(m for r in results for m in r.extra.get(key, {})))
            most = max(most, len(models))
            columns += [(key, model, title.format(model), scale, digits) for model in models]
        if most < 2:
            return ""
        lines = [
            _table_row(["Method"] + [column[2] for column in columns]),
            _table_row(["---"] + ["---:"] * len(columns)),
        ]
        for method, result in self._results.items():
            cells = [method]
            for key, model, _, scale, digits in columns:
                value = result.extra.get(key, {}).get(model)
                cells.append("–" if value is None else f"{value * scale:.{digits}f}")
            lines.append(_table_row(cells))
        return "Per target architecture:\n\n" + "\n".join(lines)

    def _detector_note(self) -> str:
        """Where each people or face baseline found its boxes ('' when no row says)."""
        lines = [
            f"- {method}: {result.extra['detector']}"
            for method, result in self._results.items()
            if "detector" in result.extra
        ]
        return "Boxes of the baselines:\n\n" + "\n".join(lines) if lines else ""

    def _evaluation_note(self) -> str:
        """How the results were obtained ('' when not recorded): the protocol, datasets and
        attributes, the F1 threshold, the test epochs, the files lost or cut short, and the
        machine and library versions."""
        if not self._evaluation:
            return ""
        record = self._evaluation
        note = (
            f"Protocol: {record.get('protocol')}; actions: "
            f"{record.get('action_dataset', {}).get('name')} "
            f"({len(record.get('class_names', []))} classes); privacy: "
            f"{record.get('privacy_dataset', {}).get('name')} "
            f"({', '.join(record.get('attribute_names', []))})."
        )
        privacy = record.get("privacy_dataset", {})
        frames = privacy.get("frames_per_video")
        if frames is not None:
            taken = {0: "every frame", 1: "the middle frame"}.get(
                frames, f"{frames} equidistant frames"
            )
            trained_on = privacy.get("trained_on", "")
            images = "images" if trained_on.startswith("frames") else "test images"
            note += f" Privacy {images}: {taken} of each video (--eval_privacy_frames)."
            if trained_on and images == "test images":
                note += f" f'_B and the raw-trained attacker trained on {trained_on}."
        if "privacy_image_side" in record:
            note += (
                f" Privacy images cached at a short side of {record['privacy_image_side']} px "
                "(--privacy_image_side)."
            )
        threshold = record.get("target_models", {}).get("privacy", {}).get("f1_threshold")
        if threshold is not None:
            note += (
                f" F1 counts an attribute as predicted at a probability of {threshold:g} "
                "(--eval_f1_threshold; 0.62246 is the SPAct and penalty authors' 0.5 on the "
                "logits)."
            )
        for target, epochs in record.get("test_epochs", {}).items():
            models = "f'_T" if target == "action" else "f'_B (and the raw-trained attacker)"
            note += (
                f"\n\n{models}: the best of its tests on the test split after epochs "
                f"{', '.join(str(epoch) for epoch in epochs)} (--eval_{target}_test_epochs, "
                "the penalty authors' choice), a best of several test scores, above a last "
                "epoch's."
            )
        lost = {
            split: counts
            for split, counts in record.get("examples", {}).items()
            if counts["missing"] or counts["failed"]
        }
        if lost:
            splits = "; ".join(
                f"{split} {counts['used']} used, {counts['missing']} missing, "
                f"{counts['failed']} failed to decode"
                for split, counts in lost.items()
            )
            note += (
                f"\n\nListed files not evaluated: {splits} (each split's manifest.json under "
                "cache/source/ names them): the scores are of fewer examples than the dataset's."
            )
        cut = {
            split: counts["cut_short"]
            for split, counts in record.get("examples", {}).items()
            if counts.get("cut_short")
        }
        if cut:
            splits = "; ".join(f"{split} {count}" for split, count in cut.items())
            note += (
                f"\n\nFiles that seem cut short, evaluated with the frames that decode: {splits} "
                "(each split's manifest.json under cache/source/ names them)."
            )
        if "environment" in record:
            note += f"\n\nLast run on: {environment.summary(record['environment'])}"
        return note

    def plot_tradeoff(self, path: str | os.PathLike = "tradeoff.png") -> Path:
        """Privacy cMAP (x) against action top-1 (y), one point per method, like SPAct's
        Fig. 4; the best trade-off lies top left. Each method has its own colour and marker
        (raw a star), named in the legend, so close points stay readable; a method with
        intervals has them as error bars. A relative `path` is in `out_dir`."""
        path = self._resolve(path)
        figure, axes = _tradeoff_figure()
        for index, (method, result) in enumerate(self._results.items()):
            axes.scatter(
                100 * result.privacy_cmap,
                100 * result.action_top1,
                s=110 if method == RAW_METHOD else 50,
                color=f"C{index % 10}",
                marker="*" if method == RAW_METHOD else _MARKERS[index % len(_MARKERS)],
                label=method,
            )
            x, y = result.intervals.get("privacy_cmap"), result.intervals.get("action_top1")
            if x and y:
                axes.errorbar(
                    100 * result.privacy_cmap,
                    100 * result.action_top1,
                    xerr=_bar(result.privacy_cmap, x),
                    yerr=_bar(result.action_top1, y),
                    fmt="none",
                    ecolor=f"C{index % 10}",
                    alpha=0.5,
                    linewidth=1,
                )
        if any(r.intervals for r in self._results.values()):
            title = "best trade-off: top left; bars: 95 % intervals"
        else:
            title = "best trade-off: top left"
        return _save_tradeoff(figure, axes, title, self.action_metric, path)

    def _resolve(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        if not path.is_absolute():
            path = self.out_dir / path
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


def summarize_seeds(reports: Mapping[int, Report], out_dir: str | os.PathLike) -> dict[str, Any]:
    """Mean and standard deviation across training seeds of every method's metrics, written to
    `out_dir/summary.json`, `summary.md` (with every seed's row) and `summary_tradeoff.png`
    (the means, their 95 % intervals as error bars), and returned.

    `reports` maps each seed to the report of its run. A method missing from some reports (an
    interrupted evaluation) is summarised over the seeds that have it, which the summary names.
    The standard deviation is the sample one (ddof=1), None for a single seed. Besides the three
    headline metrics, the cMAP of the raw-trained attacker is summarised where every seed of a
    method has it. Each method's `dominated_by` lists the methods whose mean action is higher
    and mean cMAP lower: a method with an empty list lies on the frontier of the trade-off.
    """
    if not reports:
        raise ValueError("no report to summarise")
    methods = list(
        dict.fromkeys(method for report in reports.values() for method in report.methods)
    )
    summary = {}
    for method in methods:
        seeds = [seed for seed, report in reports.items() if report.has(method)]
        results = [reports[seed].get(method) for seed in seeds]
        entry: dict[str, Any] = {"seeds": seeds}
        for field, _, _ in _COLUMNS:
            entry[field] = _spread(seeds, [getattr(result, field) for result in results])
        raw_attacker = [result.extra.get(_RAW_ATTACKER) for result in results]
        if all(value is not None for value in raw_attacker):
            entry[_RAW_ATTACKER] = _spread(seeds, raw_attacker)
        summary[method] = entry
    for entry in summary.values():
        entry["dominated_by"] = [
            other
            for other, rival in summary.items()
            if rival["action_top1"]["mean"] > entry["action_top1"]["mean"]
            and rival["privacy_cmap"]["mean"] < entry["privacy_cmap"]["mean"]
        ]
    payload = {"seeds": list(reports), "methods": summary}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    action_metric = next(iter(reports.values())).action_metric
    write_text_atomically(out_dir / _SUMMARY_JSON, json.dumps(payload, indent=2))
    write_text_atomically(
        out_dir / _SUMMARY_MARKDOWN, _summary_markdown(reports, summary, action_metric)
    )
    plot_summary_tradeoff(summary, out_dir / _SUMMARY_PLOT, action_metric)
    return payload


def _spread(seeds: Sequence[int], values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample standard deviation, the 95 % interval of the mean (Student's t with n - 1
    degrees of freedom: the spread between trainings, not the test set's sampling noise),
    and the value of every seed; std and interval are None for one value."""
    mean = float(np.mean(values))
    std = interval = None
    if len(values) > 1:
        std = float(np.std(values, ddof=1))
        half = float(scipy.stats.t.ppf(0.975, len(values) - 1)) * std / np.sqrt(len(values))
        interval = [float(mean - half), float(mean + half)]
    return {
        "mean": mean,
        "std": std,
        "interval": interval,
        "per_seed": dict(zip(map(str, seeds), map(float, values), strict=True)),
    }


def _summary_markdown(
    reports: Mapping[int, Report], summary: dict[str, Any], action_metric: str
) -> str:
    """The mean +- std table of `summarize_seeds` with the drops of the means from raw's and
    the frontier check, then every seed's row with its intervals."""
    raw = summary.get(RAW_METHOD)
    columns = [*_COLUMNS]
    titles = [f"Action {action_metric} (%) ↑", "Privacy cMAP (%) ↓", "F1 ↓"]
    if any(_RAW_ATTACKER in entry for entry in summary.values()):
        columns.append((_RAW_ATTACKER, 100, 2))
        titles.append("Raw-trained attacker cMAP (%) ↓")
    header = ["Method", "Seeds"]
    for title in titles:
        header += [title, "↓ vs raw"]
    lines = [
        _table_row(header + ["Dominated by"]),
        _table_row(["---"] + ["---:"] * (len(header) - 1) + ["---"]),
    ]
    for method, entry in summary.items():
        cells = [method, str(len(entry["seeds"]))]
        for field, scale, digits in columns:
            if field not in entry:
                cells += ["–", "–"]
                continue
            mean, std = entry[field]["mean"], entry[field]["std"]
            spread = "–" if std is None else f"{std * scale:.{digits}f}"
            cells.append(
                f"{_format_value(mean, entry[field]['interval'], scale, digits)} ± {spread}"
            )
            no_drop = raw is None or method == RAW_METHOD or field not in raw
            cells.append("–" if no_drop else _format_drop(mean, raw[field]["mean"]))
        cells.append(", ".join(entry["dominated_by"]) or "–")
        lines.append(_table_row(cells))
    rows = [_table_row(["Method", "Seed", *titles[:3]]), _table_row(["---"] + ["---:"] * 4)]
    for method, entry in summary.items():
        for seed in entry["seeds"]:
            result = reports[seed].get(method)
            cells = [method, str(seed)]
            for field, scale, digits in _COLUMNS:
                value, interval = getattr(result, field), result.intervals.get(field)
                cells.append(_format_value(value, interval, scale, digits))
            rows.append(_table_row(cells))
    note = (
        f"Mean [95 % interval of the mean, Student's t] ± sample standard deviation over the "
        f"training seeds {', '.join(map(str, reports))}; ↓ vs raw: relative drop of the mean "
        "from raw's mean; dominated by: the methods with both a higher mean action and a lower "
        "mean cMAP (– : on the frontier). Per seed, "
        "[low, high] is the 95 % bootstrap interval over the test videos / images."
    )
    counts = sorted({len(entry["seeds"]) for entry in summary.values()} - {1}, reverse=True)
    if counts:
        factors = ", ".join(
            f"{scipy.stats.t.ppf(0.975, count - 1):.2f} for {count} seeds" for count in counts
        )
        note += (
            f" The interval of the mean is ± t · std / √N, t = {factors}: wide for few seeds, "
            "it may reach past 0 or 100 %."
        )
    return "\n\n".join(["\n".join(lines), note, "Per seed:", "\n".join(rows)]) + "\n"


def plot_summary_tradeoff(
    summary: Mapping[str, Any], path: str | os.PathLike, action_metric: str = "top-1"
) -> Path:
    """The trade-off plot of `summarize_seeds`' methods: each method's mean privacy cMAP (x)
    against its mean action (y), the 95 % intervals of the means as error bars, in the colours
    and markers of `Report.plot_tradeoff`."""
    path = Path(path)
    figure, axes = _tradeoff_figure()
    for index, (method, entry) in enumerate(summary.items()):
        x, y = entry["privacy_cmap"], entry["action_top1"]
        color = f"C{index % 10}"
        axes.errorbar(
            100 * x["mean"],
            100 * y["mean"],
            xerr=_bar(x["mean"], x["interval"]),
            yerr=_bar(y["mean"], y["interval"]),
            fmt="*" if method == RAW_METHOD else _MARKERS[index % len(_MARKERS)],
            markersize=11 if method == RAW_METHOD else 7,
            color=color,
            ecolor=color,
            elinewidth=1,
            capsize=3,
            label=f"{method} ({len(entry['seeds'])} seeds)",
        )
    title = "best trade-off: top left; means over seeds, bars: their 95 % intervals"
    return _save_tradeoff(figure, axes, title, action_metric, path)


def _tradeoff_figure() -> tuple[Figure, Any]:
    """An empty figure and axes of a trade-off plot's size, drawn off screen."""
    figure = Figure(figsize=(7.5, 4.5), dpi=_DPI)
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _save_tradeoff(figure: Figure, axes, title: str, action_metric: str, path: Path) -> Path:
    """Title, legend, axis labels and grid of a trade-off plot, then the figure saved to
    `path`."""
    axes.set_title(title, fontsize=9)
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    axes.set_xlabel("privacy cMAP (%) (lower is better)")
    axes.set_ylabel(f"action {action_metric} (%) (higher is better)")
    axes.margins(0.15)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    return path


def save_frame_strip(
    frames_by_method: Mapping[str, np.ndarray],
    path: str | os.PathLike,
    num_frames: int = 4,
    tile_width: int = 200,
) -> Path:
    """A PNG grid of anonymised frames: one row per method, `num_frames` equidistant frames of
    its (T, H, W, 3) clip (uint8, or float in [0, 1]), the method name at the left.

    Tiles are `tile_width` pixels wide with the first clip's aspect ratio, after a label
    column, so the image is (rows * round(tile_width * H / W), 40 + num_frames * tile_width)
    pixels.
    """
    if not frames_by_method:
        raise ValueError("no frames to draw")
    clips = {method: np.asarray(clip) for method, clip in frames_by_method.items()}
    height, width = next(iter(clips.values())).shape[1:3]
    tile_height = round(tile_width * height / width)
    figure_width = _LABEL_WIDTH + num_frames * tile_width
    figure = Figure(figsize=(figure_width / _DPI, len(clips) * tile_height / _DPI), dpi=_DPI)
    FigureCanvasAgg(figure)
    grid = figure.subplots(len(clips), num_frames, squeeze=False)
    for row, (method, clip) in enumerate(clips.items()):
        indices = np.linspace(0, len(clip) - 1, num_frames).round().astype(int)
        for column, index in enumerate(indices):
            axes = grid[row, column]
            axes.imshow(_displayable(clip[index]), aspect="auto")
            axes.set_xticks([])
            axes.set_yticks([])
        grid[row, 0].set_ylabel(method, fontsize=9)
    figure.subplots_adjust(
        left=_LABEL_WIDTH / figure_width, right=1, bottom=0, top=1, wspace=0, hspace=0
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


_COLUMNS = (("action_top1", 100, 2), ("privacy_cmap", 100, 2), ("privacy_f1", 1, 3))
"""(MethodResult field, display scale, decimals) of the table's metric columns."""


def _bar(value: float, interval: Sequence[float] | None) -> list[list[float]] | None:
    """The error bar (percent) of `value` reaching its interval's bounds, or None without one."""
    if interval is None:
        return None
    low, high = interval
    return [[100 * (value - low)], [100 * (high - value)]]


def _format_value(value: float, interval: Sequence[float] | None, scale: float, digits: int) -> str:
    """`value` scaled, then its interval in brackets when there is one: "72.80 [69.40, 76.10]"."""
    text = f"{value * scale:.{digits}f}"
    if interval is None:
        return text
    low, high = interval
    return f"{text} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"


def _as_json(result: MethodResult) -> dict[str, Any]:
    """The JSON form of `result`; without intervals, the form of reports written before them."""
    fields = dataclasses.asdict(result)
    if not fields["intervals"]:
        del fields["intervals"]
    return fields


def _table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _format_drop(value: float, raw_value: float) -> str:
    if raw_value == 0:
        return "n/a"
    drop = relative_drop(value, raw_value)
    arrow = "↓" if drop >= 0 else "↑"
    return f"{arrow}{abs(drop) * 100:.0f}%"


def _displayable(frame: np.ndarray) -> np.ndarray:
    """uint8 as is; floats clipped to [0, 1] (imshow would warn and clip them anyway)."""
    return frame if frame.dtype == np.uint8 else np.clip(frame, 0.0, 1.0)


def _load_report(path: Path) -> tuple[dict[str, MethodResult], dict[str, Any]]:
    """The results and the evaluation record ({} in reports written before it existed)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        methods = {name: MethodResult(**fields) for name, fields in report["methods"].items()}
        evaluation = dict(report.get("evaluation", {}))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a keras-privacy report ({error})") from error
    for name, result in methods.items():
        _check_metrics(path, name, result)
    return methods, evaluation


def _check_metrics(path: Path, name: str, result: MethodResult) -> None:
    """Raise ValueError naming `path`, the method and the field where a metric of `result` is
    not a finite number or an interval is not a pair of them (a hand-edited report.json)."""
    for field, _, _ in _COLUMNS:
        value = getattr(result, field)
        if not _is_finite_number(value):
            raise ValueError(f"{path}: method {name!r}: {field} is {value!r}, not a finite number")
    if not isinstance(result.intervals, dict):
        raise ValueError(
            f"{path}: method {name!r}: intervals is {result.intervals!r}, not an object"
        )
    for field, pair in result.intervals.items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_finite_number, pair))):
            raise ValueError(
                f"{path}: method {name!r}: intervals.{field} is {pair!r}, "
                "not a pair of finite numbers"
            )


def _is_finite_number(value: Any) -> bool:
    """Whether `value` is an int or float (not a bool) that is neither NaN nor infinite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
