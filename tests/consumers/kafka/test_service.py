"""The Kafka service against the embedded broker: snapshots equal scikit-learn per window,
dead letters, exact results across SIGKILLs, a two-process group, SIGTERM, /metrics."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

from consumers.broker import free_port
from consumers.service import MetricsService, ServiceConfig
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.synthetic import generate_events
from streammetrics.stream.windows import WindowManager

WINDOW = 60


# ----------------------------------------------------------------------------- helpers
def produce(producer, topic: str, events: list[dict]) -> None:
    for ev in events:
        producer.send(topic, key=f"{ev['model']}|{ev.get('segment', '')}".encode(),
                      value=json.dumps(ev).encode())
    producer.flush()


def with_closers(events: list[dict], ahead: float = 10 * WINDOW) -> list[dict]:
    """Append one event per key far ahead in event time so that every earlier window closes."""
    last = max(e["ts"] for e in events)
    keys = sorted({(e["model"], e["segment"]) for e in events})
    return events + [{"ts": last + ahead, "model": m, "segment": s, "y_true": 0, "score": 0.5, "id": "closer"}
                     for m, s in keys]


def read_topic(bootstrap: str, topic: str, timeout: float = 20.0) -> list[Any]:
    """Every record of ``topic`` up to its current end."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(records)
        return out
    finally:
        consumer.close()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def expected_windows(events: list[dict]) -> dict[str, list[dict]]:
    """Snapshot key -> events of each tumbling window holding an event (closers excluded)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for ev in events:
        start = int(ev["ts"] // WINDOW * WINDOW)
        out[f"{ev['model']}|{ev['segment']}|{start}"].append(ev)
    return out


def snapshots_by_key(records) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = defaultdict(list)
    for rec in records:
        out[rec.key.decode()].append(rec.value)
    return out


class ServiceThread:
    def __init__(self, config: ServiceConfig) -> None:
        self.service = MetricsService(config)
        self.thread = threading.Thread(target=self.service.run, daemon=True)

    def __enter__(self) -> MetricsService:
        self.thread.start()
        return self.service

    def __exit__(self, *exc: Any) -> None:
        self.service.stop()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()


def consume_cmd(bootstrap: str, topic: str, output: str, group: str, state_dir: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "streammetrics.cli", "consume", "--bootstrap-servers", bootstrap,
            "--topic", topic, "--output-topic", output, "--group-id", group, "--state-dir", state_dir,
            "--idle-close", "0", "--window", f"{WINDOW}s", "--log-level", "INFO", *extra]


# ----------------------------------------------------------------------------- tests
def test_end_to_end_snapshots_equal_sklearn_per_window(bootstrap_servers, new_topic, unique_name, make_producer,
                                                       tmp_path):
    topic, output, dlq = new_topic(3), new_topic(1), new_topic(1)
    events = list(generate_events(4000, duration=5 * WINDOW, seed=3))
    produce(make_producer(), topic, with_closers(events))
    expected = expected_windows(events)
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output, dlq_topic=dlq,
                           group_id=unique_name("g"), state_dir=str(tmp_path), idle_close=None)
    with ServiceThread(config):
        wait_for(lambda: len(read_topic(bootstrap_servers, output, 5)) >= len(expected), 60, "all snapshots")
    got = snapshots_by_key(read_topic(bootstrap_servers, output))
    assert set(got) == set(expected)
    for key, evs in expected.items():
        [value] = set(got[key])
        snap = json.loads(value)
        y = np.array([e["y_true"] for e in evs])
        s = np.array([e["score"] for e in evs])
        m = snap["metrics"]
        assert snap["count"] == len(evs) and snap["final"] is True
        assert snap["schema"] == "streammetrics.snapshot/1" and snap["late"] == 0
        assert f"{snap['key']['model']}|{snap['key']['segment']}|{snap['window']['start']}" == key
        assert m["accuracy"] == pytest.approx(skm.accuracy_score(y, s >= 0.5), abs=1e-12)
        assert m["f1"] == pytest.approx(skm.f1_score(y, s >= 0.5), abs=1e-12)
        assert m["log_loss"] == pytest.approx(skm.log_loss(y, s, labels=[0, 1]), abs=1e-12)
        exact = skm.roc_auc_score(y, s)
        assert m["roc_auc_low"] <= exact <= m["roc_auc_high"]
    assert read_topic(bootstrap_servers, dlq) == []


BAD = [
    (b"{not json", None, "JSON"),
    (json.dumps({"ts": 5, "model": "m", "y_true": 1}).encode(), "score", "missing field 'score'"),
    (b'{"ts": 5, "model": "m", "y_true": 1, "score": NaN}', "score", "finite"),
    (json.dumps({"ts": 5, "model": "m", "y_true": 2, "score": 0.5}).encode(), "y_true", "y_true"),
    (b"\xff\xfe garbage", None, "UTF-8"),
    (json.dumps([{"ts": 6, "model": "m", "y_true": 1, "score": 0.4},
                 {"ts": 6, "model": "m", "y_true": 1, "score": "x"}]).encode(), "score", "score"),
    (json.dumps({"ts": 500, "model": "m", "y_true": 1, "score": 0.4}).encode(), None, None),  # closes [0, 60)
    (json.dumps({"ts": 7, "model": "m", "y_true": 0, "score": 0.4}).encode(), "ts", "late"),
    (None, None, "no value"),
]


def test_bad_and_late_messages_go_to_the_dead_letter_topic_with_reason_and_source(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    topic, output, dlq = new_topic(1), new_topic(1), new_topic(1)
    producer = make_producer()
    for value, _, _ in BAD:
        producer.send(topic, key=b"m|", value=value)
    producer.flush()
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output, dlq_topic=dlq,
                           group_id=unique_name("g"), state_dir=str(tmp_path), idle_close=None)
    expected_dead = [(i, v, f, r) for i, (v, f, r) in enumerate(BAD) if r is not None]
    with ServiceThread(config) as service:
        wait_for(lambda: len(read_topic(bootstrap_servers, dlq, 5)) >= len(expected_dead), 60, "dead letters")
        wait_for(lambda: service.counts["snapshots"] >= 1, 30, "the first window's snapshot")
    dead = read_topic(bootstrap_servers, dlq)
    assert len(dead) == len(expected_dead)
    for rec, (offset, value, field, reason) in zip(dead, expected_dead):
        headers = {k: v.decode() for k, v in rec.headers}
        assert rec.value == value  # the original bytes
        assert headers["streammetrics.source"] == f"{topic}/0/{offset}"
        assert headers["streammetrics.offset"] == str(offset)
        assert reason.lower() in headers["streammetrics.reason"].lower(), headers
        if field is not None:
            assert headers["streammetrics.field"] == field
    array_letter = dict(dead[5].headers)
    assert array_letter["streammetrics.index"] == b"1"
    [snap] = [json.loads(r.value) for r in read_topic(bootstrap_servers, output)]
    assert snap["count"] == 1 and snap["window"]["start"] == 0  # the good half of the array message
    assert service.counts["late"] == 1


def stop(proc: subprocess.Popen) -> str:
    """SIGTERM ``proc`` and return its output; SIGKILL it (and fail) if it does not exit in 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        out = proc.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the service did not stop within 30 s of SIGTERM") from None
    return (out or b"").decode()


def run_until_then_stop(cmd, done, what, timeout=90.0, settle=0.0) -> str:
    """Run ``cmd`` until ``done()`` holds and the process has been assigned its partitions (so it
    is consuming, not still starting up: the output may all be there from an earlier run), wait
    ``settle`` seconds, then SIGTERM it; check it exits 0 and return its output."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        wait_for(lambda: (done() and any(b"assigned " in line for line in lines)) or proc.poll() is not None,
                 timeout, f"{what} and a partition assignment")
        assert proc.poll() is None, b"".join(lines).decode()[-3000:]
        time.sleep(settle)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("the service did not stop within 30 s of SIGTERM") from None
        reader.join(timeout=10)
    out = b"".join(lines).decode()
    assert proc.returncode == 0, out[-3000:]
    return out


def _run_until_caught_up(cmd, bootstrap, output, n_expected, timeout=90.0):
    """:func:`run_until_then_stop` once ``output`` holds ``n_expected`` windows, with 1.5 s for a last checkpoint."""
    return run_until_then_stop(cmd, lambda: len(snapshots_by_key(read_topic(bootstrap, output, 5))) >= n_expected,
                               "snapshots", timeout, settle=1.5)


@pytest.mark.slow
def test_sigkill_at_random_points_gives_the_snapshots_of_an_uninterrupted_run(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    topic, out = new_topic(2), new_topic(1)
    events = with_closers(list(generate_events(30_000, duration=20 * WINDOW, seed=9)))
    n_windows = len(expected_windows(events[:-3]))
    producer = make_producer(linger_ms=20)

    def produce_slowly() -> None:  # ~12 s of traffic, so that kills land mid-stream
        for i in range(0, len(events), 500):
            produce(producer, topic, events[i:i + 500])
            time.sleep(0.2)

    feeder = threading.Thread(target=produce_slowly)
    feeder.start()
    # the stream, killed with SIGKILL at random moments and restarted each time
    group, state = unique_name("crash"), str(tmp_path / "crash")
    cmd = consume_cmd(bootstrap_servers, topic, out, group, state, "--max-poll-records", "300",
                      "--checkpoint-interval", "0.2s")
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    kills = []
    checkpoints = tmp_path / "crash"
    while feeder.is_alive() or len(kills) < 3:
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # once this process is applying records (it wrote a checkpoint), kill it at a random moment;
            # after the feed ends a restart may have nothing left to checkpoint: give it time to join
            wait_for(lambda started=started: any(p.stat().st_mtime > started for p in checkpoints.rglob("*.json"))
                     or (not feeder.is_alive() and time.time() - started > 8), 60,
                     "a checkpoint of the restarted process")
            delay = rng.uniform(0.0, 2.0)
            time.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)  # also when the test fails: no process outlives it
            proc.wait(timeout=10)
        kills.append((round(delay, 2), len(read_topic(bootstrap_servers, out, 5))))
    feeder.join()
    _run_until_caught_up(cmd, bootstrap_servers, out, n_windows)
    crashed = snapshots_by_key(read_topic(bootstrap_servers, out))
    # some kill must have hit while windows were still being published
    assert any(0 < published < n_windows for _, published in kills), kills

    # reference: one uninterrupted process over the same topic
    ref_out = new_topic(1)
    _run_until_caught_up(consume_cmd(bootstrap_servers, topic, ref_out, unique_name("ref"), str(tmp_path / "ref"),
                                     "--max-poll-records", "300"), bootstrap_servers, ref_out, n_windows)
    reference = snapshots_by_key(read_topic(bootstrap_servers, ref_out))
    assert len(reference) == n_windows and all(len(v) == 1 for v in reference.values())
    assert set(crashed) == set(reference), kills
    for key, values in crashed.items():
        # re-published windows are byte-identical to the uninterrupted run's
        assert set(values) == set(reference[key]), (key, kills)


@pytest.mark.slow
def test_two_processes_in_one_group_produce_the_same_snapshots_as_one(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    topic = new_topic(4)
    events = list(generate_events(20_000, duration=10 * WINDOW, seed=21))
    produce(make_producer(linger_ms=50), topic, with_closers(events))
    n_windows = len(expected_windows(events))

    single_out = new_topic(1)
    _run_until_caught_up(consume_cmd(bootstrap_servers, topic, single_out, unique_name("one"),
                                     str(tmp_path / "one")), bootstrap_servers, single_out, n_windows)
    single = snapshots_by_key(read_topic(bootstrap_servers, single_out))

    pair_out, group, state = new_topic(1), unique_name("two"), str(tmp_path / "two")
    cmd = consume_cmd(bootstrap_servers, topic, pair_out, group, state, "--max-poll-records", "200")
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(1.0)
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:  # the finally below stops both, whatever happens
        wait_for(lambda: len(snapshots_by_key(read_topic(bootstrap_servers, pair_out, 5))) >= n_windows,
                 120, "the pair's snapshots")
        time.sleep(1.5)
    finally:
        logs = [stop(proc) for proc in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, logs
    assert all("assigned" in log for log in logs), logs  # both processes owned partitions
    pair = snapshots_by_key(read_topic(bootstrap_servers, pair_out))
    assert set(pair) == set(single)
    for key, values in pair.items():
        assert set(values) == set(single[key])


def test_sigterm_checkpoints_commits_and_exits_zero(bootstrap_servers, new_topic, unique_name, make_producer,
                                                   tmp_path, make_consumer):
    from kafka import TopicPartition

    topic, output = new_topic(1), new_topic(1)
    events = list(generate_events(500, duration=WINDOW / 2, seed=4))
    produce(make_producer(), topic, events)
    group, state = unique_name("g"), tmp_path / "state"
    port = free_port()
    proc = subprocess.Popen(consume_cmd(bootstrap_servers, topic, output, group, str(state),
                                        "--metrics-port", str(port), "--metrics-host", "127.0.0.1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def scraped() -> str:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                return ""
        wait_for(lambda: "streammetrics_events_total 500.0" in scraped(), 60, "500 events in /metrics")
        text = scraped()
        assert "streammetrics_consumer_lag{" in text and "streammetrics_late_events_total 0.0" in text
        health = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
        assert health.status == 200 and health.read() == b"ok\n"
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    [checkpoint] = list(state.rglob("0.json"))
    saved = json.loads(checkpoint.read_text())
    assert saved["offset"] == 500
    # the open windows (queued events included) hold all 500 events
    restored = Pipeline(PipelineConfig(window=WINDOW)).load_dict(saved["windows"])
    assert sum(snap["count"] for snap in restored.flush()) == 500
    consumer = make_consumer(group_id=group)
    assert consumer.committed(TopicPartition(topic, 0)) == 500


def test_kafka_options_go_to_the_client_that_knows_them():
    from consumers.clients import split_client_options
    from consumers.command import kafka_options as _kafka_options

    options = _kafka_options(["security_protocol=SASL_SSL", "check_crcs=false", "linger_ms=20"])
    consumer, producer = split_client_options(options)
    assert consumer == {"security_protocol": "SASL_SSL", "check_crcs": False}
    assert producer == {"security_protocol": "SASL_SSL", "linger_ms": 20}
    with pytest.raises(ValueError, match="no_such_option"):
        split_client_options({"no_such_option": 1})
    with pytest.raises(ValueError, match="OPTION=VALUE"):
        _kafka_options(["security_protocol"])


def test_consumer_fetch_wait_is_short_by_default_and_kafka_options_override_it(bootstrap_servers, new_topic):
    # kafka-python keeps one fetch per broker in flight; with the 500 ms default a backlog read
    # stalls whenever the other partitions have nothing new (see consumers.service.FETCH_SETTINGS)
    from consumers.settings import FETCH_SETTINGS

    topic = new_topic()
    waits = []
    for options in ({}, {"fetch_max_wait_ms": 500}):
        service = MetricsService(ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic,
                                               output_topic=topic + "-out", kafka_options=options))
        try:
            waits.append(service.consumer.config["fetch_max_wait_ms"])
        finally:
            service.close()
    assert waits == [FETCH_SETTINGS["fetch_max_wait_ms"], 500]


def test_an_exception_mid_batch_neither_loses_nor_double_counts(bootstrap_servers, new_topic, unique_name,
                                                                make_producer, tmp_path, monkeypatch):
    # issue 10 point 6: 50 events in one window, the service checkpointing after every poll of 20
    # records, and an exception while applying the 30th record (mid-batch, after a checkpoint).
    # It used to save the partly applied batch with the old offset on the way out and count 59.
    # The exception is raised in WindowManager.add, where both the fast path of plain single
    # events (consumers/fastpath.py, which does not call the field parser) and the general path
    # end; tests/consumers/test_service_faults.py injects into the parser of the general path.
    topic, output = new_topic(1), new_topic(1)
    events = [{"ts": 1 + i * 0.5, "model": "m", "segment": "s", "y_true": i % 2, "score": (i % 10) / 10}
              for i in range(50)]
    produce(make_producer(), topic, with_closers(events))
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output,
                           group_id=unique_name("g"), state_dir=str(tmp_path), idle_close=None,
                           max_poll_records=20, checkpoint_interval=0.0)
    add, calls = WindowManager.add, [0]

    def flaky_add(self: WindowManager, event: Any) -> bool:
        calls[0] += 1
        if calls[0] == 30:
            raise MemoryError("injected")
        return add(self, event)

    monkeypatch.setattr(WindowManager, "add", flaky_add)
    runner = ServiceThread(config)
    service = runner.service
    with runner:
        wait_for(lambda: service.counts["snapshots"] >= 1, 60, "the window's snapshot")
        time.sleep(0.5)
    assert service.counts["rollbacks"] == 1 and service.failure is None
    [snap] = [json.loads(r.value) for r in read_topic(bootstrap_servers, output)]
    assert snap["count"] == 50


def test_a_message_over_the_producer_limit_makes_a_truncated_dead_letter_not_a_crash_loop(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    # issue 10 point 3: a 1.5 MB invalid message's dead letter raised MessageSizeTooLargeError,
    # and every restart crashed on the same record
    topic, output, dlq = new_topic(1), new_topic(1), new_topic(1)
    big = b'{"ts": 5, "model": "m", "y_true": 1, "score": "' + b"x" * 1_500_000 + b'"}'
    producer = make_producer(max_request_size=4_000_000)
    producer.send(topic, key=b"m|", value=big)
    produce(producer, topic, [{"ts": 6, "model": "m", "segment": "", "y_true": 1, "score": 0.5}])
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output, dlq_topic=dlq,
                           group_id=unique_name("g"), state_dir=str(tmp_path), idle_close=None)
    with ServiceThread(config) as service:
        wait_for(lambda: service.counts["events"] == 1 and service.counts["dead_letters"] == 1, 60,
                 "the good event and the dead letter")
    assert service.failure is None
    [letter] = read_topic(bootstrap_servers, dlq)
    headers = dict(letter.headers)
    assert headers["streammetrics.truncated"] == str(len(big)).encode()
    assert big.startswith(letter.value) and len(letter.value) < 1_048_576
    assert headers["streammetrics.source"] == f"{topic}/0/0".encode()


@pytest.mark.slow
def test_sigterm_exits_within_the_stop_timeout_while_the_broker_is_frozen(
        kafka_broker, bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    # issue 10 point 7: with the broker paused the service blocked in producer.flush() forever and
    # SIGTERM could not stop it. Here the stop's checkpoint, commit and close meet the frozen broker
    # (no wall-clock close publishes anything any more: the events' windows stay open).
    topic, output = new_topic(1), new_topic(1)
    produce(make_producer(), topic, list(generate_events(300, duration=WINDOW / 2, seed=6)))
    state = tmp_path / "state"
    cmd = consume_cmd(bootstrap_servers, topic, output, unique_name("g"), str(state), "--checkpoint-interval",
                      "0.2s", "--stop-timeout", "8s")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    frozen = False
    try:
        wait_for(lambda: any(state.rglob("0.json")), 60, "the first checkpoint")
        os.kill(kafka_broker.pid, signal.SIGSTOP)
        frozen = True
        time.sleep(4)
        proc.send_signal(signal.SIGTERM)
        try:
            out = proc.communicate(timeout=8 + 15)[0].decode()
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("the service did not exit after SIGTERM with the broker frozen") from None
    finally:
        if frozen:
            os.kill(kafka_broker.pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, 1), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
