"""The topics a CREATE makes on Kafka are made as ksqlDB's topic injector makes them: a stream's
topic is deleted by time, a table's compacted (a windowed table's both), REPLICAS and RETENTION_MS
come from the WITH clause, and a query's sink inherits them from its first source's topic."""

from __future__ import annotations

import uuid
from typing import Any

from engine.facade.engine import KsqlEngine
from engine.hosting.application import StreamingApplication
from engine.kafka.admin import TopicAdmin

HOUR_MS = 3_600_000


def _settings(admin: TopicAdmin, topic: str) -> tuple[Any, str, str | None]:
    config = admin.topic_config(topic)
    described = admin.describe_topic(topic)
    assert described is not None, topic
    return described, config["cleanup.policy"], config.get("retention.ms")


def test_created_topics_get_ksqldbs_cleanup_policy_replicas_and_retention(kafka_broker, tmp_path) -> None:
    run = uuid.uuid4().hex[:8]
    names = {part: f"tc_{part}_{run}" for part in ("s", "t", "copy", "counts", "windows")}
    app = StreamingApplication(kafka_broker.bootstrap_servers, tmp_path / "state")
    app.load()
    try:
        app.submit(f"""
            CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='{names["s"]}', VALUE_FORMAT='JSON',
                PARTITIONS=2, REPLICAS=1, RETENTION_MS={HOUR_MS});
            CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH (KAFKA_TOPIC='{names["t"]}', VALUE_FORMAT='JSON',
                PARTITIONS=1);
            CREATE STREAM COPY WITH (KAFKA_TOPIC='{names["copy"]}') AS SELECT * FROM S;
            CREATE TABLE COUNTS WITH (KAFKA_TOPIC='{names["counts"]}') AS SELECT K, COUNT(*) AS N FROM S GROUP BY K;
            CREATE TABLE WINDOWS WITH (KAFKA_TOPIC='{names["windows"]}') AS SELECT K, COUNT(*) AS N FROM S
                WINDOW TUMBLING (SIZE 1 MINUTE, RETENTION 2 HOURS) GROUP BY K;
        """)
    finally:
        app.stop()
    admin = TopicAdmin(kafka_broker.bootstrap_servers)
    assert _settings(admin, names["s"]) == ((2, 1), "delete", str(HOUR_MS))
    assert _settings(admin, names["t"])[1] == "compact"
    assert _settings(admin, names["copy"]) == ((2, 1), "delete", str(HOUR_MS))  # inherited from S's topic
    assert _settings(admin, names["counts"])[:2] == ((2, 1), "compact")
    assert _settings(admin, names["windows"]) == ((2, 1), "compact,delete", str(2 * HOUR_MS))  # the longer


def test_the_bounded_runtime_keeps_the_settings_on_its_topics() -> None:
    engine = KsqlEngine()
    engine.execute_sql("CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON', "
                       "PARTITIONS=3, REPLICAS=2);")
    created = engine.store.topics["t"]
    assert (created.partitions, created.replicas, created.configs) == (3, 2, {"cleanup.policy": "compact"})


class _DescribedTopics:
    """An in-memory store whose existing topics describe as a three-broker cluster's would."""

    def __init__(self) -> None:
        from engine.runtime.adapter import TopicStore

        self.inner = TopicStore()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def settings(self, name: str) -> tuple[int | None, dict[str, str]]:
        return 3, {"retention.ms": "86400000", "cleanup.policy": "delete"}


def test_a_sinks_replicas_follow_its_source_unless_inheriting_is_turned_off() -> None:
    statements = ("CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);"
                  "CREATE STREAM C AS SELECT * FROM S;")
    inheriting = KsqlEngine(topics=_DescribedTopics())  # type: ignore[arg-type]
    inheriting.execute_sql(statements)
    assert (inheriting.store.topics["C"].replicas, inheriting.store.topics["C"].configs) == (
        3, {"cleanup.policy": "delete", "retention.ms": "86400000"})
    broker_default = KsqlEngine({"ksql.create.topic.inherit.source.replicas.enabled": "false"},
                                topics=_DescribedTopics())  # type: ignore[arg-type]
    broker_default.execute_sql(statements)
    assert broker_default.store.topics["C"].replicas is None
