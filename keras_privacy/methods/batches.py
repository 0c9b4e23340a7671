"""A fixed list of ready batches as a `keras.utils.PyDataset`, for `fit` without TensorFlow.

Meta generalisation's batches carry per-batch masks, and an exported minimax comes as batches,
so `fit(x=arrays, batch_size=B)` (which slices examples) does not fit them: `fit(BatchList(...))`
takes each batch dict as it is, on either backend.
"""

from __future__ import annotations

import keras


class BatchList(keras.utils.PyDataset):
    """`batches` (dicts of arrays, one per training step) in order."""

    def __init__(self, batches: list[dict]):
        super().__init__()
        self.batches = list(batches)

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> dict:
        return self.batches[index]
