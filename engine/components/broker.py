"""An Apache Kafka broker for development and tests: KRaft broker and controller in one JVM.

    broker = Broker("/tmp/kafka", port=None)   # None or 0: a free port
    broker.start()                              # background JVM, survives this process
    broker.wait_ready(timeout=60)
    broker.bootstrap_servers                    # '127.0.0.1:40123'
    broker.stop()

With ``security=BrokerSecurity()`` the broker also listens on a SASL_SSL port (SCRAM-SHA-512
and PLAIN, one user; OAUTHBEARER with unsecured tokens, Kafka's unsecured validator) and an
SSL port that requires a client certificate; with ``BrokerSecurity(oidc_jwks_url=...)`` also
on an ``OIDC`` port (SASL_SSL, OAUTHBEARER tokens checked against that JWKS); the certificates
are made at the first start in ``pki/`` (``engine.components.certificates``), and
``broker.client_properties("SASL_SSL")`` gives the Kafka client properties, under the Java
client's names as a ksqlDB user writes them, of a client of either listener. The PLAINTEXT
listener stays: it is the broker's own (between broker and controller).

The jars come from Maven Central on first use (see ``engine.components.maven``). Files in
the broker directory::

    server.properties   written at every start (ports can change between starts)
    log4j2.properties   the broker's logging: everything goes to broker.log
    broker.log          the broker's own log (rolled at 10 MB)
    console.log         the JVM's stdout and stderr (start-up failures before logging)
    broker.pid          pid of the running broker; removed by stop()
    broker.json         the last ports used, reused by the next start when free
    data/               topic data and the KRaft metadata log, formatted on first start
    pki/                with ``security``: the CA, the broker's and a client's key stores
    classes.jsa         while no class archive exists: the classes this JVM loads, dumped
                        at a clean stop and moved to the jar cache (kafka-<version>/classes-*.jsa)
                        where later brokers start from it (Java class data sharing)

Settings suit one-node development and tests: replication factor 1 everywhere, no topic
auto-creation, no group rebalance delay, and records kept whatever their timestamps
(time retention off, any timestamp accepted, no time-based segment roll), since test data
often uses timestamps near 0: a segment whose first record is from 1970 would otherwise roll
with every write, and a compacted topic (a table's) would be compacted at once.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.components.certificates import Pki, make_pki
from engine.components.maven import fetch_artifacts, kspark_home
from engine.components.process import HOST, JvmComponent, free_port, port_free
from engine.components.process import java as java_executable
from engine.errors import ComponentError

KAFKA_VERSION = "4.4.0"
ARTIFACTS = (
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    # Kafka logs through SLF4J 1.x: this binding (not log4j-slf4j2-impl) routes it to log4j2.
    "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
)
NODE_ID = 1
PID_FILE = "broker.pid"
LOG_FILE = "broker.log"
CONSOLE_FILE = "console.log"
STATE_FILE = "broker.json"

# C1 only and class data sharing: a development broker starts in about half the time.
JVM_OPTIONS = ["-XX:+IgnoreUnrecognizedVMOptions", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true"]
CDS_DUMP = "classes.jsa"

DEFAULT_CONFIG: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": str(NODE_ID),
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.segment.bytes": str(16 * 1024 * 1024),
    "log.retention.ms": "-1",
    "log.roll.ms": str(2**63 - 1),
    "log.message.timestamp.before.max.ms": str(2**63 - 1),
    "log.message.timestamp.after.max.ms": str(2**63 - 1),
}

LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.filePattern = {log}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 10MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 1
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""


SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTHBEARER_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
# Kafka 4 fetches JWKS and tokens only from the URLs this JVM system property allows.
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
SASL_SSL = "SASL_SSL"
SSL = "SSL"
OIDC = "OIDC"  # a SASL_SSL listener whose OAUTHBEARER tokens are checked against a JWKS


@dataclass(frozen=True, slots=True)
class BrokerSecurity:
    """The secured listeners of a development broker: SASL_SSL with one user (SCRAM-SHA-512,
    created when the storage is formatted, PLAIN, and OAUTHBEARER with unsecured tokens), SSL
    with client certificates, and with ``oidc_jwks_url`` an OIDC listener (SASL_SSL,
    OAUTHBEARER tokens signed by a key of that JWKS, issued by ``oidc_issuer``, for
    ``oidc_audience`` when given)."""

    username: str = "kspark"
    password: str = "kspark-secret"
    oidc_jwks_url: str | None = None
    oidc_issuer: str | None = None
    oidc_audience: str | None = None

    def __post_init__(self) -> None:
        for name, value in (("username", self.username), ("password", self.password)):
            if not value or any(c in value for c in '",=[]\\ '):
                raise ValueError(f"BrokerSecurity {name} {value!r} must be non-empty without quotes, "
                                 "commas, '=', brackets, backslashes or spaces.")
        if self.oidc_jwks_url and not self.oidc_issuer:
            raise ValueError("BrokerSecurity oidc_jwks_url needs oidc_issuer: the broker checks the tokens' issuer.")


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """Whether a broker runs in a directory, and where it listens."""

    running: bool
    pid: int | None = None
    port: int | None = None

    @property
    def bootstrap_servers(self) -> str | None:
        return f"{HOST}:{self.port}" if self.port else None

    def __str__(self) -> str:
        if not self.running:
            return "stopped"
        return f"running (pid {self.pid}), bootstrap.servers={self.bootstrap_servers}"


class Broker(JvmComponent):
    """A one-node Kafka broker living in ``directory``, listening on ``port`` (None: a free one).

    ``config`` overrides or adds ``server.properties`` entries. With ``stop_with_parent``
    the JVM is killed when the process that started it dies (Linux only), for test
    fixtures; otherwise it is detached and outlives the starting process, for the CLI.
    """

    WHAT = "The Kafka broker"
    PID_FILE = PID_FILE
    STATE_FILE = STATE_FILE

    def __init__(
        self,
        directory: str | os.PathLike[str],
        port: int | None = None,
        *,
        config: Mapping[str, str] | None = None,
        heap: str = "512m",
        home: Path | None = None,
        stop_with_parent: bool = False,
        security: BrokerSecurity | None = None,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.port = port or None
        self.config = dict(config or {})
        self.security = security
        self.secured_ports: dict[str, int] = {}
        self.heap = heap
        self.home = home
        self.stop_with_parent = stop_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        if self.port is None:
            self.port = self.saved_port() if self.running_pid() else None
        if self.running_pid():
            self.secured_ports = self._saved_secured_ports()

    def command_marker(self) -> str:
        return str(self.directory / "server.properties")  # a Kafka JVM started here names it

    # -- where ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``HOST:PORT`` for clients' ``bootstrap.servers``."""
        if self.port is None:
            raise ComponentError(
                f"The Kafka broker in {self.directory} has no port yet: start it first."
            )
        return f"{HOST}:{self.port}"

    def secured_bootstrap_servers(self, listener: str = SASL_SSL) -> str:
        """``HOST:PORT`` of the ``SASL_SSL`` or ``SSL`` listener of a broker started with ``security``."""
        port = self.secured_ports.get(listener)
        if port is None:
            raise ComponentError(
                f"The Kafka broker in {self.directory} has no running {listener} listener: "
                "start it with security=BrokerSecurity()."
            )
        return f"{HOST}:{port}"

    @property
    def pki(self) -> Pki:
        """The certificates of the secured listeners (made at the first start)."""
        directory = self.directory / "pki"
        return Pki(directory, directory / "ca.pem", directory / "server.p12",
                   directory / "client.p12", directory / "client.pem", directory / "server.pem")

    def client_properties(self, listener: str = SASL_SSL, *, mechanism: str = "SCRAM-SHA-512",
                          password: str | None = None) -> dict[str, str]:
        """The Kafka client properties (Java client names) of a client of ``listener``:
        SASL_SSL as the broker's user with ``mechanism`` (``password`` replaces the right one;
        OAUTHBEARER: an unsecured token naming the user), or SSL with the client certificate.
        A client of the OIDC listener adds its token endpoint's settings to the SASL_SSL ones."""
        if self.security is None:
            raise ComponentError(f"The Kafka broker in {self.directory} was not given security=BrokerSecurity().")
        pki = self.pki
        properties = {
            "security.protocol": listener,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
        }
        if listener == SASL_SSL and mechanism == "OAUTHBEARER":
            properties |= {
                "sasl.mechanism": mechanism,
                "sasl.jaas.config":
                    f'{OAUTHBEARER_LOGIN} required unsecuredLoginStringClaim_sub="{self.security.username}";',
            }
        elif listener == SASL_SSL:
            login = SCRAM_LOGIN if mechanism.startswith("SCRAM-") else PLAIN_LOGIN
            secret = self.security.password if password is None else password
            properties |= {
                "sasl.mechanism": mechanism,
                "sasl.jaas.config": f'{login} required username="{self.security.username}" password="{secret}";',
            }
        elif listener == SSL:
            properties |= {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(pki.client_keystore),
                "ssl.keystore.password": pki.password,
            }
        else:
            raise ComponentError(f"Unknown secured listener {listener!r}: expected {SASL_SSL} or {SSL}.")
        return properties

    @property
    def lib(self) -> Path:
        return (self.home or kspark_home()) / f"kafka-{KAFKA_VERSION}" / "lib"

    # -- lifecycle -----------------------------------------------------------------------

    def fetch(self) -> Path:
        """The directory of the broker's jars, fetched from Maven Central on first use."""
        return fetch_artifacts(ARTIFACTS, self.lib, home=self.home)

    def start(self) -> bool:
        """Start the broker in the background; False if one already runs in this directory.

        Formats the storage on the first start. Does not wait for the broker to answer:
        call ``wait_ready``.
        """
        running = self.running_pid()
        if running is not None:
            self.port = self.saved_port() or self.port
            return False
        java = java_executable("the Kafka broker")
        self.directory.mkdir(parents=True, exist_ok=True)
        port = self._choose_port()
        controller_port = free_port()
        secured = self._choose_secured_ports(port, controller_port)
        if self.security is not None and not self.pki.client_pem.exists():
            make_pki(self.pki.directory)
        lib = self.fetch()
        properties = self.directory / "server.properties"
        properties.write_text(self._server_properties(port, controller_port, secured), encoding="utf-8")
        log4j = self.directory / "log4j2.properties"
        log4j.write_text(
            LOG4J2_PROPERTIES.format(log=self.directory / LOG_FILE), encoding="utf-8"
        )
        jvm = [java, f"-Xmx{self.heap}", *JVM_OPTIONS, *self._security_jvm_options(),
               f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{lib}{os.sep}*"]
        archive = self._class_archive(java)
        sharing = [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []
        if not (self.directory / "data" / "meta.properties").exists():
            self._format([*jvm, *sharing], properties)
        if not sharing:  # the first broker records the classes it loads for the next ones
            (self.directory / CDS_DUMP).unlink(missing_ok=True)
            sharing = [f"-XX:ArchiveClassesAtExit={self.directory / CDS_DUMP}"]
        self._spawn(
            [*jvm, *sharing, "kafka.Kafka", str(properties)],
            self.directory / CONSOLE_FILE,
            port=port,
            controller_port=controller_port,
            secured_ports=secured,
        )
        self.port = port
        self.secured_ports = secured
        return True

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the broker answers a metadata request; raise if it dies or times out."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        while True:
            if self.running_pid() is None:
                self._wait_for_exit_code()
                raise ComponentError(
                    f"The Kafka broker in {self.directory} exited during start-up"
                    f"{self._exit_code()}: {self._failure()}"
                )
            with contextlib.suppress(Exception):
                if admin.list_topics(timeout=1.0).brokers:
                    return
            if time.monotonic() >= deadline:
                raise ComponentError(
                    f"The Kafka broker in {self.directory} did not answer on "
                    f"{self.bootstrap_servers} within {timeout:.0f} s; see {self.directory / LOG_FILE}."
                )
            time.sleep(0.2)

    def status(self) -> BrokerStatus:
        """Running or stopped, with the pid and port of a running broker."""
        pid = self.running_pid()
        if pid is None:
            return BrokerStatus(running=False)
        return BrokerStatus(running=True, pid=pid, port=self.saved_port())

    def _after_clean_exit(self) -> None:
        self._keep_class_archive()

    def _saved_secured_ports(self) -> dict[str, int]:
        saved = self.saved_state().get("secured_ports")
        if not isinstance(saved, dict):
            return {}
        return {str(k): v for k, v in saved.items() if isinstance(v, int)}

    def _choose_secured_ports(self, port: int, controller_port: int) -> dict[str, int]:
        """The secured listeners' ports: the last start's when free, else new ones."""
        if self.security is None:
            return {}
        previous = self._saved_secured_ports()
        chosen: dict[str, int] = {}
        for listener in (SASL_SSL, SSL, *((OIDC,) if self.security.oidc_jwks_url else ())):
            candidate = previous.get(listener)
            taken = {port, controller_port, *chosen.values()}
            if candidate is None or candidate in taken or not port_free(candidate):
                candidate = free_port()
                while candidate in taken:
                    candidate = free_port()
            chosen[listener] = candidate
        return chosen

    def _server_properties(self, port: int, controller_port: int, secured: Mapping[str, int]) -> str:
        listeners = [f"PLAINTEXT://{HOST}:{port}", *(f"{name}://{HOST}:{p}" for name, p in secured.items()),
                     f"CONTROLLER://{HOST}:{controller_port}"]
        config = {
            **DEFAULT_CONFIG,
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(listeners),
            "controller.quorum.bootstrap.servers": f"{HOST}:{controller_port}",
            "log.dirs": str(self.directory / "data"),
            **self._security_config(),
            **self.config,
        }
        lines = [f"{key}={_escape(value)}" for key, value in config.items()]
        return "# Written by kspark at each start; edit Broker(config=...) instead.\n" + "\n".join(lines) + "\n"

    def _security_config(self) -> dict[str, str]:
        if self.security is None:
            return {}
        pki = self.pki
        user, password = self.security.username, self.security.password
        oidc: dict[str, str] = {}
        if self.security.oidc_jwks_url:
            oidc = {
                "listener.name.oidc.sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.oidc.oauthbearer.sasl.jaas.config": f"{OAUTHBEARER_LOGIN} required;",
                "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_VALIDATOR,
                "listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": self.security.oidc_jwks_url,
                "sasl.oauthbearer.jwks.endpoint.url": self.security.oidc_jwks_url,
            }
            oidc["sasl.oauthbearer.expected.issuer"] = self.security.oidc_issuer or ""
            if self.security.oidc_audience:
                oidc["sasl.oauthbearer.expected.audience"] = self.security.oidc_audience
        return {
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL"
                + (",OIDC:SASL_SSL" if oidc else ""),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN,OAUTHBEARER",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                f'{PLAIN_LOGIN} required user_{user}="{password}";',
            # No callback handler: Kafka's unsecured validator, which takes any unsigned token.
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                f'{OAUTHBEARER_LOGIN} required unsecuredLoginStringClaim_sub="{user}";',
            **oidc,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki.server_keystore),
            "ssl.keystore.password": pki.password,
            "ssl.key.password": pki.password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
            "listener.name.ssl.ssl.client.auth": "required",
        }

    def _security_jvm_options(self) -> list[str]:
        if self.security is None or not self.security.oidc_jwks_url:
            return []
        return [f"-D{ALLOWED_URLS_PROPERTY}={self.security.oidc_jwks_url}"]

    def _format(self, jvm: list[str], properties: Path) -> None:
        scram = []
        if self.security is not None:
            user = f"SCRAM-SHA-512=[name={self.security.username},password={self.security.password}]"
            scram = ["--add-scram", user]
        command = [*jvm, "kafka.tools.StorageTool", "format", "--standalone",
                   "-t", _cluster_id(), "-c", str(properties), *scram]
        done = subprocess.run(command, cwd=self.directory, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ComponentError(
                f"Cannot format the Kafka storage in {self.directory / 'data'}: "
                f"{_last_error((done.stdout + done.stderr).splitlines())}"
            )

    def _class_archive(self, java: str) -> Path:
        """The class-data-sharing archive for this java and these jars, in the jar cache."""
        binary = Path(java).resolve()
        stat = binary.stat()
        tag = hashlib.sha1(f"{binary}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
        return self.lib.parent / f"classes-{tag}.jsa"

    def _keep_class_archive(self) -> None:
        """Move the archive a cleanly stopped first broker wrote into the jar cache."""
        dump = self.directory / CDS_DUMP
        if not dump.exists():
            return
        with contextlib.suppress(OSError, ComponentError):
            archive = self._class_archive(java_executable("the Kafka broker"))
            if not archive.exists():
                partial = archive.with_suffix(f".{os.getpid()}.tmp")
                shutil.move(dump, partial)
                os.replace(partial, archive)  # atomic: readers never map a half-copied file
        dump.unlink(missing_ok=True)

    def _wait_for_exit_code(self) -> None:
        """Let a dying JVM finish (its last log lines are written at exit)."""
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=10)

    def _exit_code(self) -> str:
        if self._process is not None and self._process.poll() is not None:
            return f" (exit code {self._process.returncode})"
        return ""

    def _failure(self) -> str:
        lines: list[str] = []
        for name in (LOG_FILE, CONSOLE_FILE):
            with contextlib.suppress(OSError):
                lines += (self.directory / name).read_text(encoding="utf-8", errors="replace").splitlines()
        return _last_error(lines) if lines else f"no log output; see {self.directory}"


def _last_error(lines: list[str]) -> str:
    """The last error in a Java program's output with its root cause, on one line."""
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if line.startswith("Exception in thread"):
            return _root_cause([line.split('" ', 1)[-1], *_causes(lines[i + 1:])])
        if " ERROR " in line or " FATAL " in line:
            # "[time] ERROR text (logger)" -> "text"
            message = re.sub(r" \([\w.$]+\)$", "", line.split("] ", 1)[-1]).split(" ", 1)[-1].rstrip(".")
            trace = lines[i + 1:]
            if trace and not trace[0].startswith("["):
                return f"{message}: {_root_cause([trace[0].strip(), *_causes(trace[1:])])}"
            return message
    tail = [line.strip() for line in lines[-3:] if line.strip() and not line.startswith("\tat ")]
    return " | ".join(tail) or "no error message"


def _causes(trace: list[str]) -> list[str]:
    causes = []
    for line in trace:
        if line.startswith("["):  # the next log entry
            break
        if line.startswith("Caused by: "):
            causes.append(line.removeprefix("Caused by: ").strip())
    return causes


def _root_cause(chain: list[str]) -> str:
    """The deepest exception in ``chain`` that says more than its cause, package names dropped."""
    shortened = [re.sub(r"^(?:[a-z_$][\w$]*\.)+(?=[A-Z])", "", text) for text in chain]
    for depth in range(len(shortened) - 1, 0, -1):
        message = shortened[depth].split(": ", 1)[-1]
        if message not in shortened[depth - 1]:
            return shortened[depth]
    return shortened[0]


def _cluster_id() -> str:
    """A random Kafka cluster id (base64url of a UUID, not starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\")
