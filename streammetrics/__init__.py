"""streammetrics: incremental, mergeable model-quality metrics for prediction streams.

Every accumulator follows one protocol (see :mod:`streammetrics._base`): ``update`` one
event, ``update_many`` a batch, ``merge`` another, ``copy``/``reset``, ``count`` and
``total_weight``, and a versioned JSON-safe ``to_dict`` that :func:`from_dict` reads back.
"""
from ._base import Accumulator, from_dict, registered_types

__version__ = "0.1.0"

__all__ = ["Accumulator", "from_dict", "registered_types", "__version__"]

# --- accumulators (each module registers its types with from_dict on import) ---
from .confusion import ConfusionMatrix  # noqa: E402
from .multilabel import MultilabelConfusion  # noqa: E402
from .exceptions import UndefinedMetricWarning  # noqa: E402
from .regression import Regression  # noqa: E402

__all__ += ["ConfusionMatrix", "MultilabelConfusion", "UndefinedMetricWarning"]
__all__ += ["Regression"]
from .binary_scores import BinaryScores  # noqa: E402
__all__ += ["BinaryScores"]
from .multiclass_scores import MulticlassScores  # noqa: E402
from .multilabel_scores import MultilabelScores  # noqa: E402
__all__ += ["MulticlassScores", "MultilabelScores"]
