"""Mosec peer of the vision scenario, the shape of Mosec's own image-classification example: a
Pillow preparation stage of BENCH_PREP_NUM (2) worker processes feeding a batched onnxruntime
stage (BENCH_NUM processes of BENCH_INTRA_OP_THREADS intra-op threads, BENCH_MAX_BATCH / BENCH_MAX_WAIT_MS).

    BENCH_MODEL=models/efficientnet-lite0/efficientnet-lite0.onnx BENCH_LABELS=models/efficientnet-lite0/labels.json \\
      bench/.venv/bin/python bench/peers/mosec_vision.py --port 8000

A request's body is the JPEG or PNG itself; the answer is {"top": [{"label", "score"} × 5]}.
"""
import os

import numpy as np
from mosec import Server, ValidationError, Worker

from vision_prep import labels, prepare, session, top


class Prepare(Worker):
    def deserialize(self, data: bytes) -> bytes:
        return data

    def forward(self, data: bytes) -> np.ndarray:
        try:
            return prepare(data)
        except ValueError as err:
            raise ValidationError(str(err)) from err


class Classify(Worker):
    def __init__(self):
        super().__init__()
        self.session = session(os.environ["BENCH_MODEL"])
        self.labels = labels()

    def forward(self, data: list) -> list:
        probs = self.session.run(["probs"], {"input": np.stack(data)})[0]
        return [{"top": top(p, self.labels)} for p in probs]


if __name__ == "__main__":
    server = Server()
    server.append_worker(Prepare, num=int(os.environ.get("BENCH_PREP_NUM", "2")))
    server.append_worker(
        Classify,
        num=int(os.environ.get("BENCH_NUM", "1")),
        max_batch_size=int(os.environ.get("BENCH_MAX_BATCH", "16")),
        max_wait_time=int(os.environ.get("BENCH_MAX_WAIT_MS", "5")),
    )
    server.run()
