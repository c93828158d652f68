"""The python scenario's NumPy MLP, shared by its peers: sized like the model scenario's ONNX one
(BENCH_LAYERS, default 1024→4096→4096→1000), float32, ReLU between layers, fixed random weights."""
import os

import numpy as np

SIZES = [int(n) for n in os.environ.get("BENCH_LAYERS", "1024,4096,4096,1000").split(",")]


def weights() -> list:
    """The layers' weights, the same in every process."""
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((a, b), dtype=np.float32) / np.float32(np.sqrt(a))) for a, b in zip(SIZES, SIZES[1:])]


def forward(layers: list, x: np.ndarray) -> np.ndarray:
    """A batch of rows through the layers."""
    for i, w in enumerate(layers):
        x = x @ w
        if i < len(layers) - 1:
            np.maximum(x, 0, out=x)
    return x
