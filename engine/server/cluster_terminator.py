"""TERMINATE CLUSTER (``POST /ksql/terminate``), as ksqlDB's ``ClusterTerminator`` defines it.

    patterns = delete_patterns(["FOO", "bar.*"])       # ServiceError 400 on a bad regex
    plan = TerminationPlan.of(metastore, patterns, managed_topics)
    plan.delete(bootstrap_servers, registry_url)      # the topics, then the schema subjects

The request is written to the command log as the statement ``TERMINATE CLUSTER;`` with the
request's ``deleteTopicList`` among its properties. Every server of the service that reads it
stops accepting statements, stops its persistent and push queries, then deletes

- the sink topics of the sources a ``CREATE ... AS SELECT`` made whose topic name matches one
  of the patterns in full (Java regular expressions: Python's ``re.fullmatch`` reads the
  common forms alike), and the registry subjects ``<topic>-key`` / ``<topic>-value`` of their
  AVRO, JSON_SR or PROTOBUF keys and values (the ones the registry knows);
- the service's own topics: its command topic, its query-ownership topics and the processing
  log topic when the server created it.

Topics that do not exist are left out; a broker that refuses topic deletion leaves them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.metastore.model import MetaStore
from engine.server.errors import ServiceError

LOG = logging.getLogger("engine.server.cluster_terminator")

TERMINATE_CLUSTER = "TERMINATE CLUSTER;"
COMMAND_ID = "cluster/TerminateCluster/terminate"
DELETE_TOPIC_LIST = "deleteTopicList"
SCHEMA_FORMATS = frozenset({"AVRO", "JSON_SR", "PROTOBUF"})  # formats whose schemas the registry holds
_AS_SELECT = re.compile(r"\bAS\s+SELECT\b", re.IGNORECASE)


def is_terminate_cluster(statement: str) -> bool:
    """Whether a command's statement is TERMINATE CLUSTER (compared ignoring case, as ksqlDB does)."""
    return statement.strip().upper() == TERMINATE_CLUSTER


def delete_patterns(delete_topic_list: object) -> list[re.Pattern[str]]:
    """The request's ``deleteTopicList`` compiled; a bad one is ksqlDB's ``Invalid pattern: P``."""
    if delete_topic_list is None:
        return []
    if not isinstance(delete_topic_list, list) or not all(isinstance(p, str) for p in delete_topic_list):
        raise ServiceError("'deleteTopicList' must be a list of topic names or patterns.", code=40000)
    patterns = []
    for pattern in delete_topic_list:
        try:
            patterns.append(re.compile(pattern))
        except re.error:
            raise ServiceError(f"Invalid pattern: {pattern}", code=40000) from None
    return patterns


@dataclass(frozen=True, slots=True)
class TerminationPlan:
    """What one server deletes when the cluster terminates."""

    sink_topics: tuple[str, ...]
    subjects: tuple[str, ...]
    managed_topics: tuple[str, ...]

    @classmethod
    def of(cls, metastore: MetaStore, patterns: Sequence[re.Pattern[str]], managed_topics: Iterable[str]) -> TerminationPlan:
        """The sinks of ``CREATE ... AS SELECT`` sources matching ``patterns``, their subjects,
        and the service's ``managed_topics``."""
        sinks: list[str] = []
        subjects: list[str] = []
        for source in metastore.all():
            if not _AS_SELECT.search(source.sql or "") or not any(p.fullmatch(source.topic) for p in patterns):
                continue
            if source.topic not in sinks:
                sinks.append(source.topic)
            if source.formats.key_format.upper() in SCHEMA_FORMATS:
                subjects.append(f"{source.topic}-key")
            if source.formats.value_format.upper() in SCHEMA_FORMATS:
                subjects.append(f"{source.topic}-value")
        return cls(tuple(sinks), tuple(dict.fromkeys(subjects)), tuple(dict.fromkeys(managed_topics)))

    def delete(self, bootstrap_servers: str, registry_url: str | None) -> None:
        """Delete the sink topics and the service's topics that exist, then the known subjects."""
        from engine.kafka.admin import KafkaClientError, TopicAdmin

        admin = TopicAdmin(bootstrap_servers)
        existing = set(admin.list_topics(internal=True))
        for topic in (*self.sink_topics, *self.managed_topics):
            if topic in existing:
                try:
                    admin.delete_topic(topic, missing_ok=True)
                except KafkaClientError as exc:
                    LOG.warning("TERMINATE CLUSTER did not delete topic %s: %s", topic, exc)
        if self.subjects and registry_url:
            from engine.serde.registry import registry_client

            client = registry_client(registry_url)
            known = set(client.get_subjects())
            for subject in self.subjects:
                if subject in known:
                    try:  # a soft delete, then the permanent one, as ksqlDB's clean-up does
                        client.delete_subject(subject)
                        client.delete_subject(subject, permanent=True)
                    except Exception as exc:  # noqa: BLE001 - a schema left behind is only logged, as in ksqlDB
                        LOG.warning("TERMINATE CLUSTER did not delete subject %s: %s", subject, exc)
