"""Metrics computed the same way for every framework, in NumPy, from the framework's outputs."""

from typing import Any, Dict, Iterable, Optional, Tuple

import numpy as np


def accuracy(logits: Any, labels: Any) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def roc_auc(scores: Any, labels: Any) -> Optional[float]:
    """Area under the ROC curve of one binary label (Mann-Whitney U with average ranks for ties); None if the label
    has only one class in `labels`, where AUC is undefined."""
    labels = np.asarray(labels).astype(bool)
    positives, negatives = labels.sum(), (~labels).sum()
    if positives == 0 or negatives == 0:
        return None
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = np.asarray(scores)[order]
    # average ranks over ties: every run of equal scores gets the mean of its positions
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    mean_rank = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(mean_rank, counts)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def mean_auc(scores: Any, labels: Any) -> Tuple[Optional[float], int]:
    """Mean AUC over the classes (columns) where it is defined, and how many classes that was."""
    aucs = [roc_auc(scores[:, k], labels[:, k]) for k in range(labels.shape[1])]
    defined = [a for a in aucs if a is not None]
    return (float(np.mean(defined)) if defined else None), len(defined)


# One loss definition for every training record (README, "How to read a record"): `final_loss` is the mean per-step
# training loss over the last epoch, and `loss_curve` the per-step loss of the first epoch (its first LOSS_CURVE_STEPS
# steps), so trajectories compare step by step across frameworks. The runners hand over each step's loss as a float.
LOSS_CURVE_STEPS = 200


def loss_metrics(step_losses: Iterable[Any], steps_per_epoch: int) -> Dict[str, Any]:
    """`final_loss` and `loss_curve` from every step's loss in order (a run's epochs back to back)."""
    losses = [float(v) for v in step_losses]
    if not losses or steps_per_epoch < 1:
        return {"final_loss": None, "loss_curve": []}
    last_epoch = losses[-steps_per_epoch:] if len(losses) >= steps_per_epoch else losses
    return {"final_loss": float(np.mean(last_epoch)), "loss_curve": losses[: min(steps_per_epoch, LOSS_CURVE_STEPS)]}
