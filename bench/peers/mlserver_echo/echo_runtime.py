"""MLServer peer of the echo scenario: a custom runtime computing exp(x) of a V2 request."""
import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class CalculateExp(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = self.decode(payload.inputs[0], default_codec=NumpyCodec)
        return InferenceResponse(model_name=self.name, outputs=[NumpyCodec.encode_output("y", np.exp(x))])
