"""Mosec peer of the pipeline scenario, Mosec's headline design: a CPU preprocessing stage with
two worker processes feeding a batched model stage.

    BENCH_MODEL=bench/.cache/mlp-med.onnx bench/.venv/bin/python bench/peers/mosec_pipeline.py --port 8000

A request is {"text": "..."}: the first stage hashes its byte bigrams into 256 buckets and
L2-normalises them (the same features as bench/servers/shoal-pipeline.ts), the second runs the MLP
on batches of up to 32 (5 ms wait) and answers {"output": [[...10 scores...]]}.
"""
import os

import numpy as np
from mosec import Server, ValidationError, Worker

from mosec_model import session

BUCKETS = 256


class Featurize(Worker):
    def forward(self, data: dict) -> np.ndarray:
        try:
            raw = np.frombuffer(data["text"].encode(), dtype=np.uint8).astype(np.int64)
        except (KeyError, AttributeError) as err:
            raise ValidationError("expected {\"text\": string}") from err
        counts = np.bincount((raw[:-1] * 31 + raw[1:]) % BUCKETS, minlength=BUCKETS).astype(np.float32)
        norm = np.linalg.norm(counts)
        return counts / norm if norm > 0 else counts


class Inference(Worker):
    def __init__(self):
        super().__init__()
        self.session = session(os.environ["BENCH_MODEL"])
        self.input = self.session.get_inputs()[0].name

    def forward(self, data: list) -> list:
        out = self.session.run(None, {self.input: np.stack(data)})[0]
        return [{"output": [row.tolist()]} for row in out]


if __name__ == "__main__":
    server = Server()
    server.append_worker(Featurize, num=2)
    server.append_worker(Inference, num=1, max_batch_size=32, max_wait_time=5)
    server.run()
