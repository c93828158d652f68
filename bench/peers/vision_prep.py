"""What the Python peers of the vision scenario share: the image preparation of
examples/image-classification/ done with Pillow, the session and the top-5 answer.

An image (JPEG or PNG bytes) is resized with Lanczos so that it covers 256 × 256 (short side
256), its centre 256 × 256 and then its centre 224 × 224 are taken, and its RGB bytes become three
planes of (x / 255 − mean) / std with ImageNet's mean and standard deviation: what sharp does in
the example's ImagePrep stage. The model is BENCH_MODEL, its labels BENCH_LABELS.
"""
import io
import json
import os

import numpy as np
from PIL import Image

from mosec_model import session  # noqa: F401 (re-exported: the same session options for every peer)

RESIZE = 256
SIDE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
SCALE = (1 / (255 * STD)).astype(np.float32)
SHIFT = (MEAN / STD).astype(np.float32)


def prepare(data: bytes) -> np.ndarray:
    """One image as the model takes it: float32 [3, 224, 224]. Raises ValueError on a bad image."""
    try:
        image = Image.open(io.BytesIO(data))
        image = image.convert("RGB")
    except (OSError, Image.DecompressionBombError) as err:
        raise ValueError(f"not a readable image: {err}") from err
    width, height = image.size
    scale = RESIZE / min(width, height)
    w, h = max(RESIZE, round(width * scale)), max(RESIZE, round(height * scale))
    image = image.resize((w, h), Image.Resampling.LANCZOS)
    left, top = (w - RESIZE) // 2 + (RESIZE - SIDE) // 2, (h - RESIZE) // 2 + (RESIZE - SIDE) // 2
    rgb = np.asarray(image.crop((left, top, left + SIDE, top + SIDE)), dtype=np.float32)
    return np.ascontiguousarray((rgb * SCALE - SHIFT).transpose(2, 0, 1))


def labels() -> list:
    with open(os.environ["BENCH_LABELS"], encoding="utf8") as f:
        return json.load(f)


def top(probs: np.ndarray, names: list, k: int = 5) -> list:
    """The k most likely classes of one image, most likely first."""
    order = np.argsort(-probs)[:k]
    return [{"label": names[i], "score": float(probs[i])} for i in order]
