"""Handwritten digits with scikit-learn: a logistic regression trained on the 8 × 8 digits that
ship with scikit-learn, served batched by a Python stage (Digits), and exported to ONNX for the
same answers from a TypeScript stage (export.py)."""

import numpy
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from shoal import ValidationError, Worker

# The images a model learns from; the rest are held out to try it on.
TRAINED = 1500


def train() -> LogisticRegression:
    """The model, the same on every run: the data and the solver are deterministic."""
    digits = load_digits()
    model = LogisticRegression(max_iter=5000)
    model.fit(digits.data[:TRAINED], digits.target[:TRAINED])
    return model


def held_out():
    """The images the model did not learn from, and their digits."""
    digits = load_digits()
    return digits.data[TRAINED:], digits.target[TRAINED:]


def pixels_of(request) -> numpy.ndarray:
    """A request's 64 pixels (0 to 16, row by row), or a ValidationError that says what is wrong."""
    pixels = request.get("pixels") if isinstance(request, dict) else None
    if not isinstance(pixels, list) or len(pixels) != 64 or not all(isinstance(p, (int, float)) and 0 <= p <= 16 for p in pixels):
        raise ValidationError("'pixels' must be 64 numbers from 0 to 16, the 8 × 8 image row by row")
    return numpy.asarray(pixels, dtype=numpy.float64)


class Digits(Worker):
    """{"pixels": [64 numbers]} -> {"digit": d, "score": p, "probabilities": [10 numbers]}, a batch per model call."""

    examples = [{"pixels": [0] * 64}]

    def init(self):
        self.model = train()

    def forward(self, batch):
        rows, answers = [], []
        for request in batch:
            try:
                rows.append(pixels_of(request))
                answers.append(None)
            except ValidationError as err:
                answers.append(err)
        if rows:
            probabilities = iter(self.model.predict_proba(numpy.stack(rows)))
            answers = [a if a is not None else _answer(next(probabilities)) for a in answers]
        return answers


def _answer(p: numpy.ndarray) -> dict:
    digit = int(numpy.argmax(p))
    return {"digit": digit, "score": float(p[digit]), "probabilities": p.tolist()}
