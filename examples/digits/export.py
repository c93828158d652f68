"""Writes the digits model as ONNX (skl2onnx), for examples/digits/server.ts's TypeScript stage,
and the held-out images to try both on: python export.py OUT_DIR"""

import json
import sys
from pathlib import Path

from skl2onnx import to_onnx

from digits import held_out, train

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
images, labels = held_out()
# Probabilities as one float tensor [N, 10] rather than a list of maps.
onnx = to_onnx(train(), images[:1].astype("float32"), options={"zipmap": False}, target_opset=17)
(out / "digits.onnx").write_bytes(onnx.SerializeToString())
(out / "held-out.json").write_text(json.dumps({"pixels": images.astype(int).tolist(), "digits": labels.tolist()}))
print(f"wrote {out / 'digits.onnx'} and {len(labels)} held-out images")
