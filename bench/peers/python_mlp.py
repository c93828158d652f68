"""The python scenario's forward(): a NumPy MLP sized like the model scenario's ONNX one
(1024→4096→4096→1000, float32, ReLU, fixed random weights), batched, behind Mosec or, with
BENCH_FRONT=shoal, behind Shoal through shoal.mosec: the same script, one import apart.

    bench/.venv/bin/python bench/peers/python_mlp.py --port 8000
    BENCH_FRONT=shoal SHOAL_CLI=dist/cli/main.js bench/.venv/bin/python bench/peers/python_mlp.py --port 8000

A request is {"input": [1024 numbers]}; its answer {"output": [1000 numbers]}. BENCH_NUM (2),
BENCH_MAX_BATCH (32) and BENCH_MAX_WAIT_MS (5) set the batching; BENCH_LAYERS the sizes.
"""
import os

import numpy as np

if os.environ.get("BENCH_FRONT") == "shoal":
    from shoal.mosec import Server, ValidationError, Worker
else:
    from mosec import Server, ValidationError, Worker

from numpy_mlp import SIZES, forward, weights


class Mlp(Worker):
    def __init__(self):
        super().__init__()
        self.weights = weights()
        # In forward()'s shape: a list of requests, as the stage batches.
        self.example = [{"input": [0.0] * SIZES[0]}] * 8

    def forward(self, data: list) -> list:
        try:
            x = np.asarray([item["input"] for item in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as err:
            raise ValidationError(f"bad input: {err}") from err
        if x.ndim != 2 or x.shape[1] != SIZES[0]:
            raise ValidationError(f"each input must be {SIZES[0]} numbers")
        return [{"output": row.tolist()} for row in forward(self.weights, x)]


if __name__ == "__main__":
    server = Server()
    server.append_worker(
        Mlp,
        num=int(os.environ.get("BENCH_NUM", "2")),
        max_batch_size=int(os.environ.get("BENCH_MAX_BATCH", "32")),
        max_wait_time=int(os.environ.get("BENCH_MAX_WAIT_MS", "5")),
    )
    server.run()
