"""Columnar batches (issue 24 point 2): ``Pipeline.process_lines`` (columns decoded with msgspec,
``WindowManager.add_columns``) gives exactly what ``Pipeline.process`` of each line gives - the
same problems in the same order, counters, snapshot lines and checkpoint - on streams with late,
out-of-order, refused, unusual and far-future events, new and evicted keys, hopping windows and
grace; and it is columnar for the common lines (not the per-event path under another name)."""
from __future__ import annotations

import json
import random
import zlib

import numpy as np
import pytest

from streammetrics.events.columns import column_decoder
from streammetrics.events.parser import EventParser
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.windows import WindowManager

pytest.importorskip("msgspec")

NOW = 1_767_225_600.0
T0 = NOW - 100_000
CLASSES = ["a", "b", "c"]


def _event(rng: random.Random, task: str, t: float, keys: int) -> dict:
    e: dict = {"ts": round(t, 3), "model": f"m{rng.randrange(keys)}"}
    if rng.random() < 0.5:
        e["segment"] = rng.choice(["", "s1", "s2", None])
    if task == "binary":
        e["y_true"] = rng.choice([0, 1, 1, True, False, 1.0])
        e["score"] = rng.choice([rng.random(), rng.random(), 0.0, 1.0, 1.5, -0.0, 3])
    elif task == "labels":
        kinds = [["x", "y", "z"], [1, 2, 3.0, 2.5], [True, False]]
        kind = rng.choice(kinds) if rng.random() < 0.05 else kinds[0]
        e["y_true"], e["y_pred"] = rng.choice(kind), rng.choice(kind)
    elif task == "regression":
        e["y_true"] = rng.gauss(0.0, 3.0)
        e["y_pred"] = rng.choice([rng.gauss(0.0, 3.0), 2, -7])
    else:
        e["y_true"] = rng.choice(CLASSES)
        raw = [rng.random() for _ in CLASSES]
        e["scores"] = [x / sum(raw) for x in raw]
    if rng.random() < 0.1:
        e["weight"] = rng.choice([0.5, 2, 0.0, None])
    if rng.random() < 0.2:
        e["id"] = rng.choice(["p1", 17, -3, "ü", None])  # (not 0: binary intervals raise on a window of zero weights)
    return e


def _odd(rng: random.Random, e: dict) -> str:
    """A line the column decoder leaves to the per-event path (valid or not)."""
    kind = rng.randrange(16)
    e = dict(e)
    if kind == 0:
        e["ts"] = "2025-12-31T00:00:00Z"
    elif kind == 1:
        e["id"] = "x"
    elif kind == 2:
        e["y_true"] = 2
    elif kind == 3:
        e["model"] = "a|b"
    elif kind == 4:
        return json.dumps(e)[:-3]
    elif kind == 5:
        e["ts"] = NOW + 7200  # beyond max_future
    elif kind == 6:
        e["weight"] = True
    elif kind == 7:
        return json.dumps([e, e])
    elif kind == 8:
        e["pad"] = "x" * 600
    elif kind == 9:
        return "   "
    elif kind == 10:
        e["ts"] = e["ts"] - 400  # late
    elif kind == 11:
        e["score"] = e["scores"] = e["y_pred"] = float("nan")
        return json.dumps(e, allow_nan=True)
    elif kind == 12:
        e["model"] = ""
    elif kind == 13:
        e["model"] = "ünï"  # valid, not ASCII
        return json.dumps(e, ensure_ascii=False)
    elif kind == 14:
        return json.dumps(e)[:-1] + ', "x": "\udcff"}'  # (written as invalid UTF-8 below)
    else:
        e["ts"] = int(e["ts"] * 1000)  # epoch milliseconds
    return json.dumps(e)


def _stream(seed: int, task: str, n: int, keys: int, odd: float) -> list[bytes]:
    rng = random.Random(seed)
    lines = []
    t = T0
    for _ in range(n):
        t += rng.expovariate(1.0) * 2.0
        ts = t - (rng.random() * 90.0 if rng.random() < 0.15 else 0.0)  # out of order, some late
        e = _event(rng, task, ts, keys)
        line = (_odd(rng, e) if rng.random() < odd else json.dumps(e)) + "\n"
        lines.append(line.replace("\\udcff", "\udcff"))
    return [line.encode("utf-8", "surrogateescape") for line in lines]


def _run(lines: list[bytes], columnar: bool, chunks: list[int], **config):
    p = Pipeline(PipelineConfig(**config), wall_clock=lambda: NOW)
    checkpoint = p.windows.to_dict if config.get("slicing") else p.to_dict  # (slices: the windows')
    out, problems = [], []
    pos = 0
    for size in chunks:
        chunk = lines[pos:pos + size]
        if columnar:
            found = p.process_lines(chunk)
        else:
            found = [(i, list(p.process(line).problems)) for i, line in enumerate(chunk) if line.strip()]
            found = [(i, ps) for i, ps in found if ps]
        problems += [(pos + i, q.index, q.code, q.reason, q.field) for i, ps in found for q in ps]
        out += p.poll_lines(revisions=False)
        pos += size
    state = json.dumps(checkpoint(), sort_keys=True)
    out += p.flush_lines()
    return out, problems, p.counters, state


CONFIGS = [
    {},
    {"include_state": False},
    {"window": 30.0, "slide": 10.0, "grace": 5.0},
    {"window": 20.0, "grace": 30.0, "max_pending": 7},
    {"max_keys": 4},
    {"cumulative": True},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("task", ["binary", "regression", "multiclass", "labels"])
@pytest.mark.parametrize("odd", [0.0, 0.08])
def test_process_lines_equals_process_line_by_line(config, task, odd):
    # a seed fixed per case (hash() of strings changes with every interpreter: another stream each run)
    rng = random.Random(zlib.crc32(repr((task, odd, sorted(config.items()))).encode()))
    lines = _stream(rng.randrange(10**6), task, 1500, keys=6, odd=odd)
    chunks = []
    while sum(chunks) < len(lines):
        chunks.append(rng.choice([1, 7, 64, 300, 1024]))
    cfg = {**config, "task": task, **({"classes": CLASSES} if task == "multiclass" else {})}
    if task == "labels" and rng.random() < 0.5:
        cfg["labels"] = ["x", "y"]
    want = _run(lines, False, chunks, **cfg)
    got = _run(lines, True, chunks, **cfg)
    assert got[1] == want[1]  # problems: same lines, codes, reasons, fields, order
    assert got[2] == want[2]  # counters
    assert got[3] == want[3]  # checkpoint before the end
    assert got[0] == want[0]  # snapshot lines, in order


def test_common_lines_go_through_add_columns(monkeypatch):
    """The common case is columnar: one add_columns per batch, no per-event add."""
    calls = {"columns": 0, "add": 0}
    add_columns, add = WindowManager.add_columns, WindowManager.add

    def spy_columns(self, *args, **kwargs):
        calls["columns"] += 1
        return add_columns(self, *args, **kwargs)

    def spy_add(self, event):
        calls["add"] += 1
        return add(self, event)

    monkeypatch.setattr(WindowManager, "add_columns", spy_columns)
    monkeypatch.setattr(WindowManager, "add", spy_add)
    p = Pipeline(PipelineConfig(), wall_clock=lambda: NOW)
    lines = _stream(5, "binary", 2000, keys=3, odd=0.0)
    p.process(lines[0])
    assert calls["add"] == 1
    p.process_lines(lines[1:])
    assert calls == {"columns": 1, "add": 1}
    assert p.counters["events"] + p.counters["late"] == 2000
    assert p.column_counts == {"columns": 1999, "per_event": 0, "declined": 0}
    p.process_lines([b'{"ts": "x"}\n', *lines[1:3]])
    assert p.column_counts == {"columns": 2001, "per_event": 1, "declined": 0}


def test_add_columns_declines_without_changing_anything():
    """Beyond max_future or max_keys, before any stream time: None, and the state unchanged."""
    wm = WindowManager(lambda: None, 60.0, batch=True, max_keys=2, wall_clock=lambda: NOW)
    ts = np.array([NOW - 10.0, NOW - 5.0])
    assert wm.add_columns(ts, np.array([0, 1]), [("a", ""), ("b", "")], np.array([0.5, -0.5])) is None  # no time yet
    wm.advance_watermark(int((NOW - 20.0) * 1e6))
    wm.poll()
    before = json.dumps(wm.to_dict(), sort_keys=True)
    assert wm.add_columns(np.array([NOW - 10.0, NOW + 7200.0]), np.array([0, 0]), [("a", "")],
                          np.array([0.5, 0.5])) is None  # future
    assert wm.add_columns(ts[[0, 1, 1]], np.array([0, 1, 2]), [("a", ""), ("b", ""), ("c", "")],
                          np.array([0.5, 0.5, 0.5])) is None  # three new keys, max_keys=2
    assert json.dumps(wm.to_dict(), sort_keys=True) == before and wm.key_count == 0


@pytest.mark.parametrize("line,why", [
    (b'{"ts": "2025-01-01T00:00:00Z", "model": "m", "y_true": 1, "score": 0.5}', "ISO ts"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5, "id": true}', "a bool id"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5, "id": 123456789012345678901234}', "a long id"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 2, "score": 0.5}', "y_true not 0/1"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5, "weight": true}', "bool weight"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 1e400}', "number out of range"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 12345678901234567890123}', "beyond 2**53"),
    (b'{"ts": 1767225600, "model": "\\ud800", "y_true": 1, "score": 0.5}', "lone surrogate"),
    (b'{"ts": 1767225600, "model": "m|x", "y_true": 1, "score": 0.5}', "'|' in model"),
    (b'{"ts": 1767225600, "model": "m", "segment": 3, "y_true": 1, "score": 0.5}', "segment not a string"),
    (b'\xef\xbb\xbf{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5}', "BOM"),
    (b'[{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5}]', "an array"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5, "x": "' + b"y" * 600 + b'"}', "long line"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1}', "missing score"),
    (b'{"ts": 1e13, "model": "m", "y_true": 1, "score": 0.5}', "ts out of range"),
    (b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5, "x": "\xff"}', "invalid UTF-8 in an unknown field"),
])
def test_unusual_lines_are_left_to_the_per_event_path(line, why):
    dec = column_decoder(EventParser("binary"))
    assert dec is not None
    good = b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5}\n'
    cols, odd = dec.decode([good, line + b"\n", good])
    assert odd == [1], why
    assert cols is not None and cols.rows.tolist() == [0, 2]


def test_columns_hold_the_parsers_values():
    """Each valid row's event equals the one the per-event parser gives (types included)."""
    rng = random.Random(3)
    for task in ("binary", "regression", "multiclass", "labels"):
        parser = EventParser(task, classes=CLASSES if task == "multiclass" else None,
                             fields={"y_true": "label"} if task == "regression" else None)
        lines = [line.replace(b'"y_true"', b'"label"') if task == "regression" else line
                 for line in _stream(rng.randrange(1000), task, 400, keys=5, odd=0.0)]
        if task == "labels":  # (one kind of labels per batch)
            lines = [line for line in lines if isinstance(json.loads(line)["y_true"], str)
                     and isinstance(json.loads(line)["y_pred"], str)]
        cols, odd = column_decoder(parser).decode(lines)  # type: ignore[union-attr]
        assert cols is not None
        for row, event in zip(cols.rows.tolist(), cols.events()):
            [want] = parser.parse_value(lines[row])
            assert event == want and [type(getattr(event, k)) for k in event.__slots__] == \
                [type(getattr(want, k)) for k in want.__slots__], lines[row]
        assert len(odd) < 40, task


def test_message_values_with_tombstones_and_blanks():
    """skip_blank=False (Kafka values): blank values and tombstones are refused as process refuses them."""
    lines: list = list(_stream(9, "binary", 600, keys=4, odd=0.05))
    lines[100] = None
    lines[200] = b""
    lines[300] = b"  \n"
    want = Pipeline(PipelineConfig(), wall_clock=lambda: NOW)
    got = Pipeline(PipelineConfig(), wall_clock=lambda: NOW)
    expected = [(i, [(q.code, q.reason) for q in want.process(v).problems]) for i, v in enumerate(lines)]
    found = dict(got.process_lines(lines[:50], skip_blank=False))
    found.update({i + 50: ps for i, ps in got.process_lines(lines[50:], skip_blank=False)})
    assert [(i, [(q.code, q.reason) for q in ps]) for i, ps in sorted(found.items())] == [e for e in expected if e[1]]
    assert got.counters == want.counters
    assert got.flush_lines() == want.flush_lines()


def test_checked_keys_are_bounded(monkeypatch):
    """The column decoder remembers at most KEYS_CHECKED valid keys; beyond, keys are checked per batch."""
    import streammetrics.events.columns as columns

    monkeypatch.setattr(columns, "KEYS_CHECKED", 3)
    dec = column_decoder(EventParser("binary"))
    assert dec is not None
    lines = [json.dumps({"ts": T0, "model": f"m{i}", "y_true": 1, "score": 0.5}).encode() + b"\n" for i in range(6)]
    lines.append(b'{"ts": 1767225600, "model": "a|b", "y_true": 1, "score": 0.5}\n')
    for _ in range(2):
        cols, odd = dec.decode(lines)
        assert odd == [6] and cols is not None and cols.keys[:6] == [(f"m{i}", "") for i in range(6)]
        assert len(dec._raw_number) == len(dec._keys) == 3  # noqa: SLF001 - the bound under test


@pytest.mark.parametrize("task", ["binary", "regression", "multiclass", "labels"])
def test_process_rows_equals_process_decoded(task):
    """Decoded rows (CSV, Parquet, --ts-unit): process_rows equals process_decoded of each row,
    non-finite numbers, None (blank lines), rejections and arrays included."""
    from streammetrics.events.decoding import decode_value

    rows = [decode_value(line) if line.strip() else None for line in _stream(11, task, 1200, keys=5, odd=0.1)]
    rng = random.Random(2)
    for i in rng.sample(range(len(rows)), 40):
        if isinstance(rows[i], dict):
            rows[i] = {**rows[i], rng.choice(["ts", "score", "y_true", "y_pred", "weight"]): rng.choice(
                [float("nan"), float("inf"), np.float64(0.5), 10**30])}
    cfg = PipelineConfig(task=task, **({"classes": CLASSES} if task == "multiclass" else {}))
    want, got = Pipeline(cfg, wall_clock=lambda: NOW), Pipeline(cfg, wall_clock=lambda: NOW)
    expected = []
    for i, row in enumerate(rows):
        if row is not None:
            expected += [(i, q.index, q.code, q.reason) for q in want.process_decoded(row).problems]
        if i % 100 == 99:
            want.poll_lines(revisions=False)
    found = []
    for lo in range(0, len(rows), 100):
        found += [(lo + i, q.index, q.code, q.reason) for i, ps in got.process_rows(rows[lo:lo + 100]) for q in ps]
        got.poll_lines(revisions=False)
    assert found == expected
    assert got.counters == want.counters and got.column_counts["columns"] > (200 if task == "labels" else 800)
    assert got.flush_lines() == want.flush_lines()


@pytest.mark.parametrize("config", [{"window": 5.0}, {"window": 5.0, "max_keys": 12}, {"window": 4.0, "slide": 2.0,
                                                                                      "grace": 3.0, "max_keys": 20}])
def test_many_keys_evicted_and_forgotten(config):
    """Many short windows over many keys: keys evicted, remembered, forgotten and refused
    (key_limit), late events of evicted keys; the same as line by line, with polls between."""
    rng = random.Random(len(config))
    lines = _stream(rng.randrange(10**6), "binary", 3000, keys=40, odd=0.03)
    chunks = [rng.choice([5, 50, 200]) for _ in range(200)]
    want = _run(lines, False, chunks, **config)
    got = _run(lines, True, chunks, **config)
    assert got[1] == want[1] and got[2] == want[2] and got[3] == want[3] and got[0] == want[0]
    assert want[2]["keys_evicted"] > 100


def _sliced_stream(seed: int, n: int) -> list[bytes]:
    """Events with slice fields a, b: strings, absent, null, numbers, booleans, and refused values
    (a '|', a list, over 1000 characters)."""
    rng = random.Random(seed)
    odd_values = [None, 3, 2.5, True, "x|y", ["l"], "v" * 1001, "ü"]
    lines, t = [], T0
    for _ in range(n):
        t += rng.expovariate(1.0) * 2.0
        e = _event(rng, "binary", t - (rng.random() * 60.0 if rng.random() < 0.1 else 0.0), 4)
        for field, k in (("a", 3), ("b", 5)):
            if rng.random() < 0.05:
                value = rng.choice(odd_values)
                if value is not None or rng.random() < 0.5:
                    e[field] = value
            else:
                e[field] = f"{field}{rng.randrange(k)}"
        lines.append((json.dumps(e, ensure_ascii=rng.random() < 0.5) + "\n").encode())
    return lines


@pytest.mark.parametrize(("rollups", "keys_checked"), [((), None), ((("a",), ()), None), ((), 5)])
def test_sliced_process_lines_equals_process_line_by_line(rollups, keys_checked, monkeypatch):
    """With --slice-by a,b the column path keys each event by its slice (the slice fields decoded
    with the event, each distinct key made once): the same problems, counters, checkpoint and
    snapshots as line by line, and the common lines columnar (also with the decoder's memory of
    keys full: KEYS_CHECKED 5, the keys beyond it numbered per batch)."""
    import streammetrics.events.columns as columns
    from streammetrics.stream.slicing import SliceSpec

    if keys_checked is not None:
        monkeypatch.setattr(columns, "KEYS_CHECKED", keys_checked)

    lines = _sliced_stream(5, 2500)
    rng = random.Random(6)
    chunks = []
    while sum(chunks) < len(lines):
        chunks.append(rng.choice([1, 30, 300, 1024]))
    spec = SliceSpec(fields=("a", "b"), max_values=2, rollups=rollups)
    want = _run(lines, False, chunks, slicing=spec)
    got = _run(lines, True, chunks, slicing=spec)
    assert got[1] == want[1] and got[2] == want[2] and got[3] == want[3] and got[0] == want[0]
    assert any(p[2] == "bad_value" for p in want[1]) and any(p[2] == "bad_type" for p in want[1])
    p = Pipeline(PipelineConfig(slicing=spec), wall_clock=lambda: NOW)
    p.process_lines(lines[:1])
    p.process_lines(lines[1:1000])
    assert p.column_counts["columns"] > 900


@pytest.mark.parametrize("keys_checked", [None, 2])
def test_each_slice_key_is_made_once(keys_checked, monkeypatch):
    """The column decoder makes each distinct raw key's slice key once (``Slicer.column_keys``)
    and remembers it across batches, at most KEYS_CHECKED of them: beyond, once per batch. A
    null and an absent segment or value give one key."""
    import streammetrics.events.columns as columns
    from streammetrics.stream.slicing import SliceSpec

    if keys_checked is not None:
        monkeypatch.setattr(columns, "KEYS_CHECKED", keys_checked)
    p = Pipeline(PipelineConfig(slicing=SliceSpec(fields=("a", "b"))), wall_clock=lambda: NOW)
    made = []
    make = p._slicer.column_keys  # noqa: SLF001 - counting the keys made under test
    p._columns = columns.column_decoder(  # noqa: SLF001
        p.parser.base, (("a", "b"), lambda segments, rows: made.extend(rows) or make(segments, rows)))
    p2 = Pipeline(PipelineConfig(slicing=SliceSpec(fields=("a", "b"))), wall_clock=lambda: NOW)
    events = [{"a": "x", "b": "y"}, {"a": "x", "b": "z"}, {"a": "x", "b": None, "segment": None},
              {"a": "x", "segment": ""}, {"a": "q|", "b": "y"}, {"a": "x", "b": "y"}]
    batch = [json.dumps({"ts": T0 + i, "model": "m", "y_true": 1, "score": 0.5, **e}).encode()
             for i, e in enumerate(events)]
    want = [list(p2.process(line).problems) for line in batch]
    assert [len(ps) for ps in want] == [0, 0, 0, 0, 1, 0]
    for _ in range(3):
        got = p.process_lines(batch)
        assert [(i, [q.code for q in ps]) for i, ps in got] == [(4, ["bad_value"])]
    raw_keys = 5  # (x, y), (x, z), (x, None) with a null segment, (x, None) with "", (q|, y)
    # then, per batch, the refused one again (and beyond KEYS_CHECKED 2, the three not remembered)
    assert len(made) == raw_keys + 2 * (1 if keys_checked is None else 3)
    assert p.counters["keys"] == p2.counters["keys"] == 3


def test_key_values_are_learned_and_bounded(monkeypatch):
    """Key values met are decoded by name (a Literal of them) once known: a line holding a value
    not known yet is decoded again as any string (and gives the same events, problems and
    snapshots as line by line); a decoder of the new values is built after RELEARN_LINES lines
    per known value; a field with more than LITERAL_VALUES values is decoded as any string."""
    import streammetrics.events.columns as columns
    from streammetrics.stream.slicing import SliceSpec

    monkeypatch.setattr(columns, "LITERAL_VALUES", 6)
    monkeypatch.setattr(columns, "RELEARN_LINES", 2)
    rng = random.Random(8)
    lines, t = [], T0
    for i in range(1500):
        t += 1.0
        e = {"ts": t, "model": f"m{rng.randrange(2 + i // 300)}", "y_true": rng.randrange(2), "score": rng.random(),
             "a": f"a{rng.randrange(3)}", "b": f"b{rng.randrange(1 + i // 100)}"}
        if rng.random() < 0.02:
            e["a"] = rng.choice([3, "x|y", None])
        lines.append((json.dumps(e) + "\n").encode())
    chunks = [rng.choice([50, 200]) for _ in range(12)]
    spec = SliceSpec(fields=("a", "b"), max_values=3)
    want = _run(lines, False, chunks, slicing=spec)
    got = _run(lines, True, chunks, slicing=spec)
    assert got[1] == want[1] and got[2] == want[2] and got[3] == want[3] and got[0] == want[0]
    p = Pipeline(PipelineConfig(slicing=spec), wall_clock=lambda: NOW)
    p.process_lines(lines[:1])
    dec = p._columns  # noqa: SLF001 - the decoder under test
    assert dec is not None and dec.builds == 1 and dec._known["model"] == {"m0": None}  # noqa: SLF001
    p.process_lines(lines[1:2])
    assert dec.builds == 1  # (one line decoded twice: not yet worth a build)
    p.process_lines(lines[2:1000])
    known = dec._known  # noqa: SLF001
    assert dec.builds == 2 and known["slice1"] is None and known["model"] == {f"m{i}": None for i in range(5)}
    assert p.column_counts["columns"] > 900


def test_object_column_keeps_each_value_whole() -> None:
    """Events, labels and tuples become one element each (assigning a list to an object slice
    would try to broadcast equal-length tuples into a second dimension)."""
    from streammetrics.events.columns import object_column

    values = [(0.2, 0.8), (0.5, 0.5), "a", 3]
    col = object_column(values)
    assert col.shape == (4,) and col.dtype == object and col.tolist() == values
    assert object_column([]).shape == (0,)
