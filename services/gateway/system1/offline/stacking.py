"""A later cascade stage's head, stacked on the stage before (`Head.earlier`, `core/reading.py`).

Fitted from labelled rows of one yes/no kind: the later engine's vector of each row (the llama
judge's last hidden state) and the earlier stage's held-out probability of the first option
(from a fit that never saw the row, as it would answer a question it has not seen). Two fits:
a logistic head on the vectors, then a logistic over the earlier stage's log-odds and the
head's, the head's log-odds taken from grouped folds inside the rows so the second fit learns
how far to trust the head on rows it was not fitted on. The two fold into one linear head:
score = b·(w·x + w₀) + a·logit(p_earlier) + c.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression

from ..core.heads import Head
from .learning import grouped_folds, logistic, others

EPS = 1e-6


def log_odds(p: Sequence[float] | np.ndarray) -> np.ndarray:
    q = np.clip(np.asarray(p, dtype=float), EPS, 1 - EPS)
    return np.log(q / (1 - q))


def _probe_log_odds(x: np.ndarray, y: np.ndarray, groups: Sequence[str], kind: str, k: int) -> np.ndarray:
    """Each row's head log-odds from a head fitted on the other folds (whole groups held out)."""
    out = np.zeros(len(y))
    for fold in grouped_folds([str(v) for v in y], groups, k):
        train = others(len(y), fold)
        out[fold] = logistic(x[train], y[train], kind).decision_function(x[fold])
    return out


def _fit(x: np.ndarray, earlier: np.ndarray, y: np.ndarray, groups: Sequence[str], kind: str,
         k: int) -> tuple[np.ndarray, float, float]:
    """The folded coefficients: head weights b·w, bias b·w₀ + c, earlier weight a."""
    probe = logistic(x, y, kind)
    inner = _probe_log_odds(x, y, groups, kind, k)
    stack = LogisticRegression().fit(np.column_stack([earlier, inner]), y)
    a, b = (float(v) for v in stack.coef_[0])
    return b * probe.coef_[0], b * float(probe.intercept_[0]) + float(stack.intercept_[0]), a


def stacked_head(kind: str, options: tuple[str, str], vectors: np.ndarray, earlier_first: Sequence[float],
                 labels: Sequence[str], groups: Sequence[str], embedder: str, model: str, k: int = 5) -> Head:
    """The head for `kind` on `vectors` (unit length, as the engine gives them), stacked on the
    earlier stage's P(`options[0]`) of each row."""
    y = np.array([label == options[0] for label in labels], dtype=int)
    weights, bias, a = _fit(vectors, log_odds(earlier_first), y, groups, kind, k)
    # softmax over two scores: only their difference counts, so the second option scores 0 and
    # a·logit(p) is a·log p(first) − a·log p(second)
    return Head(kind=kind, embedder=embedder, model=model, options=list(options),
                weights=[[float(v) for v in weights], [0.0] * vectors.shape[1]], bias=[bias, 0.0],
                earlier=[a, a], n=len(labels))


def held_out_stacked(kind: str, options: tuple[str, str], vectors: np.ndarray, earlier_first: Sequence[float],
                     labels: Sequence[str], groups: Sequence[str], k: int = 5) -> list[float]:
    """Each row's P(`options[0]`) from a stacked head fitted on the other folds (whole groups)."""
    y = np.array([label == options[0] for label in labels], dtype=int)
    earlier = log_odds(earlier_first)
    out = np.zeros(len(y))
    for fold in grouped_folds([str(v) for v in y], groups, k):
        train = others(len(y), fold)
        weights, bias, a = _fit(vectors[train], earlier[train], y[train], [groups[i] for i in train], kind, k)
        out[fold] = 1 / (1 + np.exp(-(vectors[fold] @ weights + bias + a * earlier[fold])))
    return [float(p) for p in out]
