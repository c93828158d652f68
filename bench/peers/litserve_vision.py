"""LitServe peer of the vision scenario: one LitAPI whose decode_request prepares the image with
Pillow and whose predict runs onnxruntime on batches (max_batch_size BENCH_MAX_BATCH, batch_timeout
BENCH_MAX_WAIT_MS), in BENCH_NUM (2) worker processes of BENCH_INTRA_OP_THREADS intra-op threads.

    BENCH_MODEL=... BENCH_LABELS=... bench/.venv/bin/python bench/peers/litserve_vision.py --port 8000

LitServe reads a request as JSON (or a form), so the image travels base64-encoded:
{"image": "<base64 JPEG>"} → {"top": [{"label", "score"} × 5]}.
"""
import argparse
import base64
import os

import litserve as ls
import numpy as np
from fastapi import HTTPException

from vision_prep import labels, prepare, session, top


class Vision(ls.LitAPI):
    def setup(self, device):
        self.session = session(os.environ["BENCH_MODEL"])
        self.labels = labels()

    def decode_request(self, request):
        try:
            return prepare(base64.b64decode(request["image"]))
        except (KeyError, TypeError, ValueError) as err:
            raise HTTPException(status_code=422, detail=str(err)) from err

    def batch(self, inputs):
        return np.stack(inputs)

    def predict(self, x):
        return self.session.run(["probs"], {"input": x})[0]

    def unbatch(self, output):
        return list(output)

    def encode_response(self, probs):
        return {"top": top(probs, self.labels)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    api = Vision(
        max_batch_size=int(os.environ.get("BENCH_MAX_BATCH", "16")),
        batch_timeout=int(os.environ.get("BENCH_MAX_WAIT_MS", "5")) / 1000,
        api_path="/classify",
    )
    server = ls.LitServer(api, accelerator="cpu", workers_per_device=int(os.environ.get("BENCH_NUM", "2")))
    server.run(host=args.address, port=args.port, log_level=args.log_level, generate_client_file=False)
