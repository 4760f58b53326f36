"""scikit-learn's ``classification_report`` layout from per-class weighted sums.

Given per-class ``tp`` (true positives), ``pred`` (predicted) and ``true`` (support)
weights, :func:`classification_report_of` computes precision, recall and F1 per class and
their micro ("accuracy" when every present label is reported), macro and weighted averages
(:func:`streammetrics.kernels.classification.prf`), and lays them out exactly as
``sklearn.metrics.classification_report`` does: as text (``digits`` decimals, columns
right-aligned to the longest name) or, with ``output_dict=True``, as a dict.

>>> import numpy as np
>>> print(classification_report_of(["a", "b"], np.array([1.0, 1.0]), np.array([2.0, 1.0]),
...                                np.array([1.0, 2.0]), int_support=True, micro_is_accuracy=True))
              precision    recall  f1-score   support
<BLANKLINE>
           a       0.50      1.00      0.67         1
           b       1.00      0.50      0.67         2
<BLANKLINE>
    accuracy                           0.67         3
   macro avg       0.75      0.75      0.67         3
weighted avg       0.83      0.67      0.67         3
<BLANKLINE>
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from streammetrics.kernels import classification as _cls

__all__ = ["classification_report_of"]

_HEADERS = ["precision", "recall", "f1-score", "support"]


def classification_report_of(
    target_names: Sequence[str],
    tp: np.ndarray,
    pred: np.ndarray,
    true: np.ndarray,
    *,
    int_support: bool,
    micro_is_accuracy: bool,
    output_dict: bool = False,
    digits: int = 2,
    zero_division: Any = "warn",
) -> str | dict:
    """The report of the classes named ``target_names`` (see the module docstring);
    ``int_support`` prints supports as ints (scikit-learn does without sample weights)."""
    headers = _HEADERS
    p, r, f1, s = _cls.prf(tp, pred, true, average=None, zero_division=zero_division)
    support: list = [int(v) for v in s] if int_support else s.tolist()
    rows = list(zip(target_names, p.tolist(), r.tolist(), f1.tolist(), support))

    report_dict: dict[str, Any] = {}
    report = ""
    if output_dict:
        report_dict = {row[0]: dict(zip(headers, [float(v) for v in row[1:]])) for row in rows}
    else:
        longest_last_line_heading = "weighted avg"
        name_width = max(len(cn) for cn in target_names)
        width = max(name_width, len(longest_last_line_heading), digits)
        head_fmt = "{:>{width}s} " + " {:>9}" * len(headers)
        report = head_fmt.format("", *headers, width=width)
        report += "\n\n"
        row_fmt = "{:>{width}s} " + " {:>9.{digits}f}" * 3 + " {:>9}\n"
        for row in rows:
            report += row_fmt.format(*row, width=width, digits=digits)
        report += "\n"

    total_support = sum(support) if int_support else float(np.sum(s))
    for average in ("micro", "macro", "weighted"):
        line_heading = "accuracy" if average == "micro" and micro_is_accuracy else average + " avg"
        avg_p, avg_r, avg_f1, _ = _cls.prf(tp, pred, true, average=average, zero_division=zero_division)
        avg = [avg_p, avg_r, avg_f1, total_support]
        if output_dict:
            report_dict[line_heading] = dict(zip(headers, [float(v) for v in avg]))
        elif line_heading == "accuracy":
            row_fmt_accuracy = "{:>{width}s} " + " {:>9.{digits}}" * 2 + " {:>9.{digits}f}" + " {:>9}\n"
            report += row_fmt_accuracy.format(line_heading, "", "", *avg[2:], width=width, digits=digits)
        else:
            report += row_fmt.format(line_heading, *avg, width=width, digits=digits)

    if output_dict:
        if "accuracy" in report_dict:
            report_dict["accuracy"] = report_dict["accuracy"]["precision"]
        return report_dict
    return report
