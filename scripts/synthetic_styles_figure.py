"""Draw the README's picture of the synthetic benchmark's version 5: one frame of each class
(columns) in each render style (rows), at the benchmark's 40 x 40, enlarged without smoothing.

    python scripts/synthetic_styles_figure.py  # writes docs/images/synthetic_v5_styles.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]


def styles_figure(size: int = 40, zoom: int = 2, frame: int = 4, gap: int = 4) -> np.ndarray:
    """The picture, RGB uint8: row r is style r of `STYLES`, column c class c of `CLASSES_V5`,
    each frame `frame` of a clip drawn with the seed of its class (the same actor and scene
    across the styles of a column), separated by `gap` white pixels."""
    sys.path.insert(0, str(REPO))
    from keras_privacy.data.synthetic import (
        ATTRIBUTE_IDS,
        CLASSES_V5,
        STYLES,
        balanced_attributes,
        styled_example,
    )

    side = size * zoom
    rows, columns = len(STYLES), len(CLASSES_V5)
    picture = np.full((rows * (side + gap) - gap, columns * (side + gap) - gap, 3), 255, np.uint8)
    for row, style in enumerate(STYLES.values()):
        for label in range(columns):
            attributes = balanced_attributes(np.random.default_rng(label), 2)[0]
            frames, _ = styled_example(
                np.random.default_rng(label),
                dict(zip(ATTRIBUTE_IDS, (int(v) for v in attributes))),
                label,
                size,
                frame + 1,
                style,
            )
            enlarged = np.repeat(np.repeat(frames[frame], zoom, axis=0), zoom, axis=1)
            top, left = row * (side + gap), label * (side + gap)
            picture[top : top + side, left : left + side] = enlarged
    return picture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "images" / "synthetic_v5_styles.png"))
    args = parser.parse_args()
    if not cv2.imwrite(args.out, styles_figure()[..., ::-1]):
        raise SystemExit(f"error: {args.out}: could not be written")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
