"""A built-in benchmark standing in for UCF101 + VISPR, written as real files in their formats.

The ACTION is carried by motion only: a person-like actor (skin-toned head, body, legs) moves
right, left, down, up, or around a circle clockwise or anticlockwise, from a uniformly random
start position at a random speed, wrapping around the frame edges, so no single frame tells the
class. The PRIVACY attributes are static appearance only; each is present in exactly half of
every split (half of every class for videos), drawn independently of the others:

- `s1_warm_actor` (colour, coarse): the body is warm (red-orange) rather than cool (blue-green);
- `s2_striped_actor` (texture, fine): horizontal body stripes of a 4-pixel period (at 40 px);
- `s3_face_mark` (face, fine): a 4 x 4 pixel checker mark on the face;
- `s4_outdoor_scene` (scene, coarse): sky-and-grass background rather than a tiled room;
- `s5_object` (object, coarse): a lamp-like object stands in the scene.

The fine cues keep the mean colour of what they cover: 4x down-sampling by area averaging
removes them, while the coarse ones survive. Frames are 40 x 40, so at the 32-px training input
(a 0.8x resize) the fine cues are still visible: a method must remove them, and 4x
down-sampling (10 px) is the baseline that does so bluntly. The same renderer makes the
privacy images (actor in a scene, no motion) and the video frames, so what is learned on
images transfers to frames.

VERSION 5 (`version=5`, in a render `style` of `STYLES`) keeps the attributes and the formats
but reads the ACTION from details inside the actor's box, as real actions are: the actor
drifts the same way whatever the class, and the class is how its right hand moves (lifted to
the mouth, waved above the shoulder, shaken at the waist) x what it holds (an 8 x 8 object
striped across or barred along, whose stripes average out under 4x down-sampling). Blackening
the actor's box leaves the same frames for every class; 4x down-sampling leaves the movement.
The styles change the palette, the background's textures, the actor's shape and the camera's
motion; configs are chosen on `studio` and reported on the held-out `dusk`.

Layout written under `out_dir`:

    videos/<Class>/v_<Class>_gXX_cYY.avi               MPEG-4 Part 2 (UCF101's XviD), 40 x 40,
                                                       32 frames, 25 fps
    ucf_splits/{classInd,trainlist01,testlist01}.txt   UCF101 split format (CRLF)
    vispr/images/{train,val,test}2017/<id>.jpg         privacy images (JPEG, quality 95)
    vispr/annotations/{train,val,test}2017/<id>.json   VISPR per-image annotations
    vispr/{train,val,test}2017.txt, vispr/attributes.tsv
    vp_labels.csv                                      video-level privacy labels (VP style)
    person_boxes.json                                  the actor's true boxes per video frame and
                                                       image (`--eval_boxes` of the baselines)
"""

from __future__ import annotations

import colorsys
import dataclasses
import json
import os
from pathlib import Path

import cv2
import numpy as np

from keras_privacy.data.annotations import named_subset
from keras_privacy.data.video import write_video

CLASSES = ("MoveRight", "MoveLeft", "MoveDown", "MoveUp", "CircleClockwise", "CircleAnticlockwise")
ATTRIBUTES = (
    ("s1_warm_actor", "Colour", "Warm-coloured clothing (coarse cue)"),
    ("s2_striped_actor", "Texture", "Thin horizontal stripes on the clothing (fine cue)"),
    ("s3_face_mark", "Face", "Small checker mark on the face (fine cue)"),
    ("s4_outdoor_scene", "Scene", "Outdoor scene instead of a tiled room (coarse cue)"),
    ("s5_object", "Object", "A lamp-like object in the scene (coarse cue)"),
)
ATTRIBUTE_IDS = tuple(a[0] for a in ATTRIBUTES)
SAFE = "a0_safe"
_KIND_CODES = {"video": 1, "image": 2, "split": 3}
VERSION = 4
"""Bumped whenever the written files change, so that an older benchmark on disk is rewritten."""

ENTRIES = frozenset(
    {"VERSION", "videos", "ucf_splits", "vispr", "vp_labels.csv", "person_boxes.json"}
)
"""What `write_synthetic_benchmark` writes into its folder."""

FOLDERS = ("videos", "ucf_splits", "vispr")
"""The folders `write_synthetic_benchmark` makes first, together, before it writes any file."""


@dataclasses.dataclass(frozen=True)
class SyntheticPaths:
    """Where the benchmark's parts are: pass `ucf_splits` and `videos` to `read_ucf101`
    (annotations_dir, root) and `vispr` to `read_vispr` (annotations_dir and root)."""

    root: Path
    videos: Path
    ucf_splits: Path
    vispr: Path
    vp_labels: Path
    person_boxes: Path


def attribute_subset(attributes: str) -> list[str]:
    """The attribute ids that a `--privacy_attributes` value names on this benchmark: all five
    for `all` or the flag's default `vispr1`, else the comma-separated ids (so that f_A can be
    trained on some attributes and evaluated on the others). Raises ValueError naming an
    unknown or repeated id."""
    if attributes in ("all", "vispr1"):
        return list(ATTRIBUTE_IDS)
    return named_subset(attributes, ATTRIBUTE_IDS, "synthetic")


def _rng(seed: int, kind: str, *index: int) -> np.random.Generator:
    """An independent generator per (seed, kind, index): output does not depend on order."""
    return np.random.default_rng([seed, _KIND_CODES[kind], *index])


def balanced_attributes(rng: np.random.Generator, count: int) -> np.ndarray:
    """(count, A) binary labels: each attribute present in exactly half (rounded down) of the
    rows, each column shuffled independently."""
    column = (np.arange(count) < count // 2).astype(np.int64)
    return np.stack([rng.permutation(column) for _ in ATTRIBUTE_IDS], axis=1)


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v), np.float32)


def _background(rng: np.random.Generator, size: int, outdoor: bool) -> np.ndarray:
    """A textured scene (float RGB in [0, 1]): sky above grass, or a tiled wall above a floor."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    horizon = rng.uniform(0.4, 0.6)
    grain = rng.normal(0.0, 0.025, (size, size, 1)).astype(np.float32)
    if outdoor:
        sky = _hsv(rng.uniform(0.55, 0.62), rng.uniform(0.3, 0.5), rng.uniform(0.75, 0.9))
        grass = _hsv(rng.uniform(0.22, 0.32), rng.uniform(0.5, 0.7), rng.uniform(0.35, 0.55))
        sky_part = sky * (1.1 - 0.25 * yy[..., None])
        blades = 0.08 * np.sin(2 * np.pi * xx * size / rng.uniform(5, 7))[..., None]
        image = np.where(yy[..., None] < horizon, sky_part, grass + blades)
    else:
        wall = _hsv(rng.uniform(0.05, 0.15), rng.uniform(0.1, 0.25), rng.uniform(0.6, 0.8))
        floor = _hsv(rng.uniform(0.05, 0.12), rng.uniform(0.3, 0.5), rng.uniform(0.3, 0.45))
        tile = max(4, round(size * rng.uniform(0.12, 0.16)))
        grid = (np.arange(size)[:, None] // tile + np.arange(size)[None] // tile) % 2
        image = np.where(yy[..., None] < horizon, wall * (0.92 + 0.12 * grid[..., None]), floor)
    return np.clip(image + grain, 0.0, 1.0).astype(np.float32)


def _add_object(rng: np.random.Generator, scene: np.ndarray) -> None:
    """Draw a lamp (a bright shade on a dark pole) at a random place, in place."""
    size = scene.shape[0]
    width, height = max(4, round(size * 0.14)), max(6, round(size * 0.25))
    y, x = rng.integers(0, size - height), rng.integers(0, size - width)
    shade = _hsv(rng.uniform(0.1, 0.17), rng.uniform(0.7, 0.9), rng.uniform(0.9, 1.0))
    scene[y : y + height // 2, x : x + width] = shade
    pole = slice(x + width // 2 - max(1, width // 6), x + width // 2 + max(1, width // 6))
    scene[y + height // 2 : y + height, pole] = 0.15


def actor_sprite(rng: np.random.Generator, attrs: dict, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The actor as (RGB float image, alpha mask), about 0.4 x 0.2 of a `size` frame.

    Fine cues are mean-preserving (light and dark halves around the same base, an even number
    of stripe rows, and base colours dark enough that the light half never clips at 1), so
    averaging 4 x 4 pixels removes them while 2x down-sampling keeps them visible.
    """
    unit = size / 40
    period = max(2, round(4 * unit))
    head, body, legs = round(6 * unit), 3 * period, round(4 * unit)
    width = round(10 * unit)
    height = head + body + legs
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    centre = (width - 1) / 2
    head_mask = (yy - (head - 1) / 2) ** 2 + (xx - centre) ** 2 <= (head / 2) ** 2
    body_mask = (yy >= head) & (yy < head + body)
    leg_mask = (yy >= head + body) & (np.abs(xx - centre) >= 1.0 * unit)
    hue = rng.uniform(0.0, 0.09) if attrs["s1_warm_actor"] else rng.uniform(0.45, 0.62)
    clothes = _hsv(hue, rng.uniform(0.65, 0.9), rng.uniform(0.6, 0.76))
    skin = _hsv(rng.uniform(0.05, 0.1), rng.uniform(0.25, 0.5), rng.uniform(0.5, 0.64))
    image = np.zeros((height, width, 3), np.float32)
    image[head_mask] = skin
    image[body_mask] = clothes
    image[leg_mask] = 0.2
    if attrs["s2_striped_actor"]:
        light = ((yy - head) % period) < period / 2
        image[body_mask & light] *= 1.3
        image[body_mask & ~light] *= 0.7
    if attrs["s3_face_mark"]:
        block = max(1, round(2 * unit))
        y0, x0 = round((head - 2 * block) / 2), round(centre + 0.5 - block)
        for dy in range(2):
            for dx in range(2):
                tone = 0.45 if (dy + dx) % 2 == 0 else 1.55
                region = (
                    slice(y0 + dy * block, y0 + (dy + 1) * block),
                    slice(x0 + dx * block, x0 + (dx + 1) * block),
                )
                image[region] = skin * tone
    mask = (head_mask | body_mask | leg_mask).astype(np.float32)
    return np.clip(image, 0.0, 1.0), mask


@dataclasses.dataclass
class Scene:
    """The static appearance of one example: background (with object) and actor sprite."""

    background: np.ndarray
    sprite: np.ndarray
    mask: np.ndarray

    @classmethod
    def sample(cls, rng: np.random.Generator, attrs: dict, size: int) -> Scene:
        """A random scene of `size` x `size` pixels showing the attributes `attrs`."""
        background = _background(rng, size, bool(attrs["s4_outdoor_scene"]))
        if attrs["s5_object"]:
            _add_object(rng, background)
        sprite, mask = actor_sprite(rng, attrs, size)
        return cls(background, sprite, mask)

    def render(self, y: float, x: float) -> np.ndarray:
        """The scene with the actor's top-left corner at (y, x), wrapping around the edges,
        as RGB uint8."""
        frame = self.background.copy()
        size = frame.shape[0]
        rows = (np.arange(self.mask.shape[0]) + round(y)) % size
        cols = (np.arange(self.mask.shape[1]) + round(x)) % size
        alpha = self.mask[..., None]
        frame[np.ix_(rows, cols)] = frame[np.ix_(rows, cols)] * (1 - alpha) + self.sprite * alpha
        return np.round(frame * 255).astype(np.uint8)


def actor_boxes(y: float, x: float, height: int, width: int, size: int) -> list[list[int]]:
    """The boxes `[x1, y1, x2, y2]` (exclusive ends) covering a `height` x `width` actor drawn
    at (y, x) on a `size` frame as `Scene.render` draws it: up to four when it wraps around the
    edges."""

    def spans(start: int, length: int) -> list[tuple[int, int]]:
        start %= size
        end = start + length
        return [(start, min(end, size))] + ([(0, end - size)] if end > size else [])

    return [
        [x1, y1, x2, y2] for y1, y2 in spans(round(y), height) for x1, x2 in spans(round(x), width)
    ]


def trajectory(
    rng: np.random.Generator, label: int, num_frames: int, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """(y, x) of the actor in each frame for motion class `label` of `CLASSES`: a uniformly
    random start, a random speed (0.8-1.6 pixels a frame at 64 px), and for circles a random
    radius and phase. Positions are not wrapped (the renderer wraps them)."""
    y0, x0 = rng.uniform(0, size, size=2)
    speed = rng.uniform(0.8, 1.6) * size / 64
    t = np.arange(num_frames, dtype=np.float64)
    if label < 4:
        dy, dx = ((0, 1), (0, -1), (1, 0), (-1, 0))[label]
        return y0 + dy * speed * t, x0 + dx * speed * t
    radius = rng.uniform(0.12, 0.2) * size
    turn = (1 if CLASSES[label] == "CircleClockwise" else -1) * speed / radius
    phase = rng.uniform(0, 2 * np.pi)
    # Image rows grow downwards, so an increasing angle turns clockwise on screen.
    return y0 + radius * np.sin(phase + turn * t), x0 + radius * np.cos(phase + turn * t)


# ---------------------------------------------------------------------------- version 5
#
# Version 4's classes are directions of the actor's motion, which survive blackening the actor
# (the black box still moves) and 4x down-sampling (a 10 x 10 picture still shows the motion).
# In version 5 the actor drifts the same way whatever the class, and the class is what the
# right hand does with which object, drawn at a few pixels inside the actor's box: what real
# actions are read from (SPAct Table 1: blackening costs 9 points of action on UCF101,
# down-sampling 4x 23).

CLASSES_V5 = (
    "LiftStriped",
    "LiftBarred",
    "WaveStriped",
    "WaveBarred",
    "ShakeStriped",
    "ShakeBarred",
)
"""How the right hand moves (lifted to the mouth, waved above the shoulder, shaken at the
waist) x what it holds (an object striped across or barred along): 3 movements of the arm,
which 4x down-sampling blurs but keeps, and 2 objects, which it makes alike."""


@dataclasses.dataclass(frozen=True)
class Style:
    """How a version-5 benchmark looks; the classes and attributes are the same in every style.
    Lengths are in pixels of a 40-pixel frame."""

    name: str
    tint: tuple[float, float, float]  # palette: every rendered pixel is multiplied by it
    hue_shift: float  # palette: added to the background's hues
    grain: float  # texture: standard deviation of the per-pixel noise
    tile: tuple[float, float]  # texture: the room's tile side, as a fraction of the frame
    blade_period: tuple[float, float]  # texture: period of the grass blades
    body_width: int  # actor shape: torso width
    head: int  # actor shape: head diameter
    camera: str  # camera motion: "static", "pan" (steady sideways) or "shake" (1-pixel jitter)


STYLES = {
    "studio": Style("studio", (1.0, 1.0, 1.0), 0.0, 0.025, (0.12, 0.16), (5, 7), 8, 6, "static"),
    "street": Style("street", (0.75, 0.9, 1.2), 0.12, 0.04, (0.2, 0.25), (3, 4), 10, 5, "pan"),
    "dusk": Style("dusk", (1.1, 0.8, 0.6), -0.04, 0.015, (0.07, 0.1), (8, 11), 6, 7, "shake"),
}
"""Configs are chosen on `studio`; `dusk` is held out: no config is tuned on it."""


def version_tag(version: int, style: str) -> str:
    """What the `VERSION` file of a complete benchmark of `version` and `style` holds (a
    change to version 5's files needs a new tag, as one to version 4's a new `VERSION`)."""
    return str(version) if version == VERSION else f"{version} {style}"


def is_version_tag(text: str) -> bool:
    """Whether `text` (a `VERSION` file's content) is a tag `version_tag` writes, of any
    version: a number, with a style after it from version 5 on."""
    version, _, style = text.strip().partition(" ")
    return version.isdigit() and (style in STYLES if style else int(version) <= VERSION)


def _style(name: str) -> Style:
    if name not in STYLES:
        raise ValueError(f"unknown synthetic style {name!r}: choose from {', '.join(STYLES)}")
    return STYLES[name]


def _styled_background(rng: np.random.Generator, size: int, outdoor: bool, style: Style):
    """`_background` in `style`'s palette and textures."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    horizon = rng.uniform(0.4, 0.6)
    grain = rng.normal(0.0, style.grain, (size, size, 1)).astype(np.float32)
    shift = style.hue_shift
    if outdoor:
        sky = _hsv(rng.uniform(0.55, 0.62) + shift, rng.uniform(0.3, 0.5), rng.uniform(0.75, 0.9))
        grass = _hsv(
            rng.uniform(0.22, 0.32) + shift, rng.uniform(0.5, 0.7), rng.uniform(0.35, 0.55)
        )
        sky_part = sky * (1.1 - 0.25 * yy[..., None])
        period = rng.uniform(*style.blade_period) * size / 40
        blades = 0.08 * np.sin(2 * np.pi * xx * size / period)[..., None]
        image = np.where(yy[..., None] < horizon, sky_part, grass + blades)
    else:
        wall = _hsv(rng.uniform(0.05, 0.15) + shift, rng.uniform(0.1, 0.25), rng.uniform(0.6, 0.8))
        floor = _hsv(rng.uniform(0.05, 0.12) + shift, rng.uniform(0.3, 0.5), rng.uniform(0.3, 0.45))
        tile = max(2, round(size * rng.uniform(*style.tile)))
        grid = (np.arange(size)[:, None] // tile + np.arange(size)[None] // tile) % 2
        image = np.where(yy[..., None] < horizon, wall * (0.92 + 0.12 * grid[..., None]), floor)
    return np.clip(image + grain, 0.0, 1.0).astype(np.float32)


@dataclasses.dataclass
class Actor:
    """A version-5 actor: a static body (head, torso with the fine cues, legs) on a canvas of
    fixed size, and a right arm whose hand moves an object as `pose` draws it per frame. The
    canvas, the actor's box, is the same for every class, so a blackened box tells nothing of
    the action."""

    body: np.ndarray  # (H, W, 3) float RGB of head, torso, legs and the hanging left arm
    body_mask: np.ndarray  # (H, W) float
    clothes: np.ndarray  # the sleeve's colour
    skin: np.ndarray
    object_colour: np.ndarray
    unit: float
    top: int  # canvas row of the head's top
    shoulder: int  # canvas row of the shoulders
    waist: int
    centre: float  # canvas column of the body's axis
    half_body: float

    @classmethod
    def sample(cls, rng: np.random.Generator, attrs: dict, size: int, style: Style) -> Actor:
        """A random actor showing the actor attributes of `attrs` (as `actor_sprite`)."""
        unit = size / 40
        period = max(2, round(4 * unit))
        head, body, legs = round(style.head * unit), 3 * period, round(4 * unit)
        body_width = round(style.body_width * unit)
        # room for the left hand, and on the right for the object held up to 11 pixels out
        left, right, top = round(2 * unit), round(11 * unit), round(5 * unit)
        width, height = left + body_width + right, top + head + body + legs
        yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
        centre = left + (body_width - 1) / 2
        head_mask = (yy - top - (head - 1) / 2) ** 2 + (xx - centre) ** 2 <= (head / 2) ** 2
        in_body = np.abs(xx - centre) < body_width / 2
        torso = (yy >= top + head) & (yy < top + head + body) & in_body
        legs_mask = (yy >= top + head + body) & (np.abs(xx - centre) >= unit) & in_body
        # the left arm hangs along the body
        left_arm = (yy >= top + head) & (yy < top + head + 0.7 * body) & (xx < left) & (xx >= 0)
        hue = rng.uniform(0.0, 0.09) if attrs["s1_warm_actor"] else rng.uniform(0.45, 0.62)
        clothes = _hsv(hue, rng.uniform(0.65, 0.9), rng.uniform(0.6, 0.76))
        skin = _hsv(rng.uniform(0.05, 0.1), rng.uniform(0.25, 0.5), rng.uniform(0.5, 0.64))
        image = np.zeros((height, width, 3), np.float32)
        image[head_mask], image[torso], image[legs_mask], image[left_arm] = (
            skin,
            clothes,
            0.2,
            clothes,
        )
        if attrs["s2_striped_actor"]:
            light = ((yy - top - head) % period) < period / 2
            image[torso & light] *= 1.3
            image[torso & ~light] *= 0.7
        if attrs["s3_face_mark"]:
            block = max(1, round(2 * unit))
            y0, x0 = top + round((head - 2 * block) / 2), round(centre + 0.5 - block)
            for dy in range(2):
                for dx in range(2):
                    tone = 0.45 if (dy + dx) % 2 == 0 else 1.55
                    rows = slice(y0 + dy * block, y0 + (dy + 1) * block)
                    image[rows, x0 + dx * block : x0 + (dx + 1) * block] = skin * tone
        mask = (head_mask | torso | legs_mask | left_arm).astype(np.float32)
        object_colour = _hsv(rng.uniform(0.0, 1.0), rng.uniform(0.3, 0.6), rng.uniform(0.45, 0.6))
        return cls(
            np.clip(image, 0, 1),
            mask,
            clothes,
            skin,
            object_colour,
            unit,
            top,
            shoulder=top + head + round(unit),
            waist=top + head + round(0.6 * body),
            centre=centre,
            half_body=body_width / 2,
        )

    def hand(self, label: int, phase: float) -> tuple[float, float]:
        """(y, x) canvas position of the right hand for class `label` of `CLASSES_V5` at
        `phase` (radians) of its movement."""
        u, swing = self.unit, np.sin(phase)
        side = self.centre + self.half_body + 4 * u  # the object clears the body
        motion = CLASSES_V5[label]
        if motion.startswith("Lift"):  # between the waist and the mouth
            mouth = self.shoulder - 2 * u
            return mouth + (self.waist - mouth) * (1 + swing) / 2, side
        if motion.startswith("Wave"):  # above the shoulder, swinging sideways
            return self.top + 1 * u, side + 3 * u * swing
        return self.waist, side + 3 * u * swing  # Shake: at the waist, swinging sideways

    def pose(self, label: int, phase: float) -> tuple[np.ndarray, np.ndarray]:
        """The actor as (RGB float image, alpha mask) doing class `label` at `phase`: a sleeve
        from the shoulder to the hand, and in the hand an 8 x 8 object (at 40 px) whose light
        and dark stripes of a 4-pixel period run across (`Striped`) or along (`Barred`) it;
        the two average to the same colour over 4 x 4 pixels, so 4x down-sampling removes what
        tells them apart."""
        image, mask = self.body.copy(), self.body_mask.copy()
        height, width = mask.shape
        u = self.unit
        y, x = self.hand(label, phase)
        sleeve, shoulder_x = max(1, round(2 * u)), self.centre + self.half_body - u
        for s in np.linspace(0.0, 1.0, 12):
            row = int(np.clip(round(self.shoulder + s * (y - self.shoulder)), 0, height - sleeve))
            col = int(np.clip(round(shoulder_x + s * (x - shoulder_x)), 0, width - sleeve))
            image[row : row + sleeve, col : col + sleeve] = self.clothes
            mask[row : row + sleeve, col : col + sleeve] = 1.0
        side, period = max(2, round(8 * u)), max(2, round(4 * u))
        row = int(np.clip(round(y - side / 2), 0, height - side))
        col = int(np.clip(round(x - side / 2), 0, width - side))
        yy, xx = np.mgrid[0:side, 0:side]
        across = yy if CLASSES_V5[label].endswith("Striped") else xx
        tone = np.where(across % period < period / 2, 1.5, 0.5)[..., None]
        image[row : row + side, col : col + side] = np.clip(self.object_colour * tone, 0, 1)
        mask[row : row + side, col : col + side] = 1.0
        return image, mask


def _composite(background: np.ndarray, sprite: np.ndarray, mask: np.ndarray, y: float, x: float):
    """`background` with `sprite` pasted (alpha `mask`) at top-left (y, x), wrapping around the
    edges, as float RGB."""
    frame = background.copy()
    size = frame.shape[0]
    rows = (np.arange(mask.shape[0]) + round(y)) % size
    cols = (np.arange(mask.shape[1]) + round(x)) % size
    alpha = mask[..., None]
    frame[np.ix_(rows, cols)] = frame[np.ix_(rows, cols)] * (1 - alpha) + sprite * alpha
    return frame


def _camera(rng: np.random.Generator, style: Style, num_frames: int, size: int) -> np.ndarray:
    """(num_frames, 2) integer (dy, dx) shift of the whole picture per frame."""
    unit = size / 40
    if style.camera == "pan":
        speed = rng.uniform(0.3, 0.6) * unit * rng.choice((-1, 1))
        return np.stack([np.zeros(num_frames), np.round(speed * np.arange(num_frames))], 1)
    if style.camera == "shake":
        return np.round(rng.integers(-1, 2, (num_frames, 2)) * unit)
    return np.zeros((num_frames, 2))


def styled_example(
    rng: np.random.Generator, attrs: dict, label: int, size: int, num_frames: int, style: Style
) -> tuple[list[np.ndarray], list[list[list[int]]]]:
    """One version-5 example: its frames (RGB uint8) and the actor's boxes in each. The
    actor starts anywhere and drifts slowly in a random direction whatever `label` is; its arms
    do class `label` from a random phase at a random tempo (a period of 7-11 frames)."""
    background = _styled_background(rng, size, bool(attrs["s4_outdoor_scene"]), style)
    if attrs["s5_object"]:
        _add_object(rng, background)
    actor = Actor.sample(rng, attrs, size, style)
    y0, x0 = rng.uniform(0, size, size=2)
    angle, speed = rng.uniform(0, 2 * np.pi), rng.uniform(0.0, 0.2) * size / 40
    period, phase = rng.uniform(7, 11), rng.uniform(0, 2 * np.pi)
    shifts = _camera(rng, style, num_frames, size)
    tint = np.array(style.tint, np.float32)
    frames, boxes = [], []
    for t in range(num_frames):
        sprite, mask = actor.pose(label, phase + 2 * np.pi * t / period)
        y = y0 + speed * np.sin(angle) * t + shifts[t, 0]
        x = x0 + speed * np.cos(angle) * t + shifts[t, 1]
        picture = np.roll(background, shifts[t].astype(int), axis=(0, 1))
        picture = np.clip(_composite(picture, sprite, mask, y, x) * tint, 0.0, 1.0)
        frames.append(np.round(picture * 255).astype(np.uint8))
        boxes.append(actor_boxes(y, x, *mask.shape, size))
    return frames, boxes


def _attrs(row: np.ndarray) -> dict:
    return dict(zip(ATTRIBUTE_IDS, (int(v) for v in row)))


def _video_v4(
    rng: np.random.Generator, attrs: dict, label: int, size: int, num_frames: int
) -> tuple[list[np.ndarray], list[list[list[int]]]]:
    """One version-4 video: its frames (RGB uint8) and the actor's boxes in each."""
    scene = Scene.sample(rng, attrs, size)
    ys, xs = trajectory(rng, label, num_frames, size)
    frames = [scene.render(y, x) for y, x in zip(ys, xs)]
    return frames, [actor_boxes(y, x, *scene.mask.shape, size) for y, x in zip(ys, xs)]


def _write_videos(
    paths: SyntheticPaths,
    seed: int,
    size: int,
    num_frames: int,
    per_class: tuple[int, int],
    fps: int,
    style: Style | None,
) -> dict[str, list]:
    """Write the videos (version 4, or version 5 in `style`) and their split lists; return the
    actor's boxes of every frame."""
    lists: dict[str, list[str]] = {"train": [], "test": []}
    boxes = {}
    rows = []
    for label, name in enumerate(CLASSES if style is None else CLASSES_V5):
        (paths.videos / name).mkdir(parents=True, exist_ok=True)
        for subset, count, offset in (("train", per_class[0], 0), ("test", per_class[1], 1)):
            labels = balanced_attributes(_rng(seed, "split", label, offset), count)
            for index in range(count):
                number = index + offset * per_class[0]
                relative = f"{name}/v_{name}_g{number // 4 + 1:02d}_c{number % 4 + 1:02d}.avi"
                rng = _rng(seed, "video", label, number)
                attrs = _attrs(labels[index])
                if style is None:
                    frames, frame_boxes = _video_v4(rng, attrs, label, size, num_frames)
                else:
                    frames, frame_boxes = styled_example(rng, attrs, label, size, num_frames, style)
                boxes[Path(relative).name] = [
                    [t, *box] for t, found in enumerate(frame_boxes) for box in found
                ]
                # MPEG-4 gives the same bytes run after run; libx264 encoded 2-20 % of these
                # videos differently from one run to the next (measured), same frames in.
                write_video(paths.videos / relative, frames, fps=fps, codec="mpeg4", quality=1)
                lists[subset].append(f"{relative} {label + 1}" if subset == "train" else relative)
                rows.append([relative, *labels[index]])
    names = CLASSES if style is None else CLASSES_V5
    class_index = "".join(f"{i + 1} {name}\r\n" for i, name in enumerate(names))
    (paths.ucf_splits / "classInd.txt").write_text(class_index, newline="")
    for subset, lines in lists.items():
        text = "".join(f"{line}\r\n" for line in lines)
        (paths.ucf_splits / f"{subset}list01.txt").write_text(text, newline="")
    header = ",".join(("video", *ATTRIBUTE_IDS))
    paths.vp_labels.write_text("\n".join([header, *(",".join(map(str, r)) for r in rows)]) + "\n")
    return boxes


def _write_images(
    paths: SyntheticPaths, seed: int, size: int, counts: dict[str, int], style: Style | None
) -> dict[str, list]:
    """Write the images, their annotations and lists; return the actor's boxes of each. A
    version-5 image (`style` given) shows the actor in a random pose of a random class."""
    boxes = {}
    vocabulary = [(SAFE, "Safe", "Safe"), *ATTRIBUTES]
    tsv = "idx\tattribute_id\tgroup\tdescription\r\n" + "".join(
        f"{i}\t{a}\t{g}\t{d}\r\n" for i, (a, g, d) in enumerate(vocabulary)
    )
    (paths.vispr / "attributes.tsv").write_text(tsv, newline="")
    for number, (subset, count) in enumerate(counts.items()):
        for folder in ("images", "annotations"):
            (paths.vispr / folder / f"{subset}2017").mkdir(parents=True, exist_ok=True)
        labels = balanced_attributes(_rng(seed, "split", len(CLASSES), number), count)
        lines = []
        for index in range(count):
            image_id = f"2017_{number + 1}{index:07d}"
            rng = _rng(seed, "image", number, index)
            if style is None:
                scene = Scene.sample(rng, _attrs(labels[index]), size)
                y, x = rng.uniform(0, size, size=2)
                picture, found = scene.render(y, x), actor_boxes(y, x, *scene.mask.shape, size)
            else:
                label = int(rng.integers(len(CLASSES_V5)))
                pictures, found = styled_example(rng, _attrs(labels[index]), label, size, 1, style)
                picture, found = pictures[0], found[0]
            image_path = f"images/{subset}2017/{image_id}.jpg"
            boxes[f"{image_id}.jpg"] = found
            cv2.imwrite(
                str(paths.vispr / image_path), picture[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95]
            )
            present = [a for a, v in zip(ATTRIBUTE_IDS, labels[index]) if v] or [SAFE]
            record = {"id": image_id, "image_path": image_path, "labels": present}
            annotation = f"annotations/{subset}2017/{image_id}.json"
            (paths.vispr / annotation).write_text(json.dumps(record))
            lines.append(annotation)
        (paths.vispr / f"{subset}2017.txt").write_text("".join(f"{x}\n" for x in lines))
    return boxes


def write_synthetic_benchmark(
    out_dir: str | os.PathLike,
    seed: int = 0,
    *,
    size: int = 40,
    num_frames: int = 32,
    videos_per_class: tuple[int, int] = (150, 30),
    num_images: tuple[int, int, int] = (600, 60, 240),
    fps: int = 25,
    version: int = VERSION,
    style: str = "",
) -> SyntheticPaths:
    """Write the benchmark (see the module docstring) into `out_dir` and return its paths:
    version 4 (the default), or version 5 in `style` (a name of `STYLES`, default `studio`).

    Defaults: 6 classes x (150 train + 30 test) = 900 + 180 videos of 32 frames at 40 x 40
    (with fewer videos a small action model memorises each video's look instead of learning
    its motion), 600 / 60 / 240 train / val / test images; about 27 MB, written in about 40 s.
    The same seed
    writes the same frames and labels. Files already there are overwritten.
    """
    if version == VERSION and style:
        raise ValueError(f"styles are version 5's, got version {version} with style {style!r}")
    if version not in (VERSION, 5):
        raise ValueError(f"unknown synthetic benchmark version {version}: 4 or 5")
    look = None if version == VERSION else _style(style or "studio")
    root = Path(out_dir)
    paths = SyntheticPaths(
        root=root,
        videos=root / "videos",
        ucf_splits=root / "ucf_splits",
        vispr=root / "vispr",
        vp_labels=root / "vp_labels.csv",
        person_boxes=root / "person_boxes.json",
    )
    for name in FOLDERS:
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "VERSION").unlink(missing_ok=True)  # written last: marks a complete benchmark
    boxes = _write_videos(paths, seed, size, num_frames, videos_per_class, fps, look)
    counts = dict(zip(("train", "val", "test"), num_images))
    boxes |= _write_images(paths, seed, size, counts, look)
    paths.person_boxes.write_text(json.dumps(boxes, separators=(",", ":")))
    (root / "VERSION").write_text(f"{version_tag(version, look.name if look else '')}\n")
    return paths
