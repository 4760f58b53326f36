"""State in Kafka against the embedded broker: a service SIGKILLed at random moments and
restarted with its state dir wiped each time (a new machine) restores every partition from the
changelog topic and publishes the snapshots of an uninterrupted run."""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import threading
import time

import pytest
from test_service import (
    _run_until_caught_up,
    consume_cmd,
    expected_windows,
    produce,
    read_topic,
    snapshots_by_key,
    wait_for,
    with_closers,
)

from consumers.changelog import default_changelog_topic
from streammetrics.stream.synthetic import generate_events

WINDOW = 60


@pytest.mark.slow
def test_sigkill_with_the_state_dir_wiped_gives_the_snapshots_of_an_uninterrupted_run(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    topic, out = new_topic(2), new_topic(1)
    events = with_closers(list(generate_events(20_000, duration=20 * WINDOW, seed=13)))
    n_windows = len(expected_windows(events[:-3]))
    producer = make_producer(linger_ms=20)

    def produce_slowly() -> None:  # ~8 s of traffic, so that kills land mid-stream
        for i in range(0, len(events), 500):
            produce(producer, topic, events[i:i + 500])
            time.sleep(0.2)

    feeder = threading.Thread(target=produce_slowly)
    feeder.start()
    group, state = unique_name("wiped"), tmp_path / "wiped"
    cmd = consume_cmd(bootstrap_servers, topic, out, group, str(state), "--max-poll-records", "300",
                      "--checkpoint-interval", "0.2s")
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    kills = []
    while feeder.is_alive() or len(kills) < 3:
        shutil.rmtree(state, ignore_errors=True)  # a new machine: nothing but Kafka survives
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda started=started: any(p.stat().st_mtime > started for p in state.rglob("*.json"))
                     or (not feeder.is_alive() and time.time() - started > 8), 60,
                     "a checkpoint of the restarted process")
            delay = rng.uniform(0.0, 2.0)
            time.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        kills.append((round(delay, 2), len(read_topic(bootstrap_servers, out, 5))))
    feeder.join()
    shutil.rmtree(state, ignore_errors=True)
    _run_until_caught_up(cmd, bootstrap_servers, out, n_windows)
    crashed = snapshots_by_key(read_topic(bootstrap_servers, out))
    assert any(0 < published < n_windows for _, published in kills), kills
    assert read_topic(bootstrap_servers, default_changelog_topic(group, topic), 5)  # the state was in Kafka

    ref_out = new_topic(1)
    _run_until_caught_up(consume_cmd(bootstrap_servers, topic, ref_out, unique_name("ref"), str(tmp_path / "ref"),
                                     "--max-poll-records", "300", "--changelog-topic", ""),
                         bootstrap_servers, ref_out, n_windows)
    reference = snapshots_by_key(read_topic(bootstrap_servers, ref_out))
    assert len(reference) == n_windows and all(len(v) == 1 for v in reference.values())
    assert set(crashed) == set(reference), kills
    for key, values in crashed.items():
        assert set(values) == set(reference[key]), (key, kills)
