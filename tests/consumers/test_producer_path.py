"""The service's producer settings: the one-partition partitioner answers as kafka-python's default."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("kafka")

from kafka.partitioner import DefaultPartitioner  # noqa: E402

from consumers.clients import one_partition_partitioner  # noqa: E402


class Cluster:
    def __init__(self, partitions: dict[str, list[int]]) -> None:
        self.partitions = partitions
        self.asked = 0

    def topics(self) -> set[str]:
        return set(self.partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        self.asked += 1
        got = self.partitions.get(topic)
        return None if got is None else set(got)

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return set(self.partitions.get(topic, ()))


@pytest.mark.parametrize("partitions", [[0], [4], [0, 1, 2], list(range(6))])
def test_one_partition_partitioner_gives_the_default_partition(partitions):
    rng = random.Random(7)
    cluster = Cluster({"out": partitions})
    ours, default = one_partition_partitioner(), DefaultPartitioner()
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(500)]
    keys += [f"m{k}|s{k}|1767225600".encode() for k in range(500)]
    for key in keys:
        assert ours.partition("out", key, key, b"v", b"v", cluster) == \
            default.partition("out", key, key, b"v", b"v", cluster)
    if len(partitions) == 1:  # a key-less record too: the one partition there is
        assert ours.partition("out", None, None, b"v", b"v", cluster) == partitions[0]


def test_one_partition_partitioner_refuses_an_unknown_topic_as_the_default():
    with pytest.raises(ValueError, match="not found"):
        one_partition_partitioner().partition("nope", b"k", b"k", b"v", b"v", Cluster({"out": [0]}))
