"""MLServer custom runtime of the vision scenario: EfficientNet-Lite0 (BENCH_MODEL) in onnxruntime,
each image prepared with Pillow inside predict() (an MLServer model is one step), adaptive
batching from model-settings.json, one session of BENCH_INTRA_OP_THREADS threads per worker.

A request is a V2 inference request with one BYTES input, the JPEG base64-encoded (V2 JSON has no
raw bytes); the answer's BYTES output "top" holds {"top": [{"label", "score"} × 5]} as JSON text.
"""
import json
import os
import sys

import numpy as np
from mlserver import MLModel
from mlserver.codecs import Base64Codec, StringCodec
from mlserver.errors import MLServerError
from mlserver.types import InferenceRequest, InferenceResponse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from vision_prep import labels, prepare, session, top  # noqa: E402


class VisionModel(MLModel):
    async def load(self) -> bool:
        self.session = session(os.environ["BENCH_MODEL"])
        self.labels = labels()
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        try:
            images = np.stack([prepare(b) for b in Base64Codec.decode_input(payload.inputs[0])])
        except ValueError as err:
            raise MLServerError(str(err), status_code=422) from err
        probs = self.session.run(["probs"], {"input": images})[0]
        answers = [json.dumps({"top": top(p, self.labels)}) for p in probs]
        return InferenceResponse(model_name=self.name, outputs=[StringCodec.encode_output("top", answers)])
