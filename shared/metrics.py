"""Metrics computed the same way for every framework, in NumPy, from the framework's outputs."""
import numpy as np


def accuracy(logits, labels):
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def roc_auc(scores, labels):
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


def mean_auc(scores, labels):
    """Mean AUC over the classes (columns) where it is defined, and how many classes that was."""
    aucs = [roc_auc(scores[:, k], labels[:, k]) for k in range(labels.shape[1])]
    defined = [a for a in aucs if a is not None]
    return (float(np.mean(defined)) if defined else None), len(defined)
