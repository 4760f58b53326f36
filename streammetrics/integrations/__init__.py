"""Optional integrations with other libraries.

Each submodule imports the library it integrates with (and fails with an
``ImportError`` naming the extra to install when it is missing); importing
``streammetrics`` or this package imports none of them.

* :mod:`streammetrics.integrations.river`: any accumulator as a river metric
  (``pip install 'streammetrics[river]'``).
"""

__all__: list[str] = []
