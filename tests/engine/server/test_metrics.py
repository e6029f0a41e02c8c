"""/metrics, /lag and DESCRIBE EXTENDED's statistics of a real server running a query on a real broker."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.kafka.produce import ProducerRecord, produce
from engine.server.service import KsqlService
from tests.engine.server.serving import serving


@pytest.fixture(scope="module")
def live_server(kafka_broker, spark, tmp_path_factory) -> Iterator[tuple[str, KsqlService]]:
    """A service running queries behind a real uvicorn on a free port."""
    service = KsqlService(kafka_broker.bootstrap_servers, f"metrics_{uuid.uuid4().hex[:8]}",
                          Path(tmp_path_factory.mktemp("metrics")), command_timeout=60.0)
    service.start(timeout=120)
    with serving(service) as url:
        yield url, service
    service.close()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.long
def test_records_driven_through_a_query_show_in_metrics_lag_and_describe_extended(live_server, kafka_broker) -> None:
    url, service = live_server
    topic = f"orders_{service.service_id}"
    with httpx.Client(base_url=url, timeout=120) as http:
        def ksql(text: str, **properties: str) -> list[dict]:
            answer = http.post("/ksql", json={"ksql": text, "streamsProperties": properties})
            assert answer.status_code == 200, answer.text
            return answer.json()

        ksql(f"CREATE STREAM ORDERS (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', "
             "PARTITIONS=2);")
        [created] = ksql("CREATE STREAM METERED_ORDERS AS SELECT ID, V FROM ORDERS WHERE V > 2;",
                         **{"auto.offset.reset": "earliest"})
        query_id = created["commandStatus"]["queryId"]
        produce(kafka_broker.bootstrap_servers, topic,
                [ProducerRecord(key=f"k{i}".encode(), value=json.dumps({"V": i}).encode()) for i in range(6)])

        labels = (("query_id", query_id),)
        deadline = time.monotonic() + 90  # a query's first batch waits for Spark's executors on a loaded machine
        while True:
            answer = http.get("/metrics")
            assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
            samples = _samples(answer.text)
            if samples.get(("kspark_query_records_consumed_total", labels)) == 6:
                break
            assert time.monotonic() < deadline, f"the query's records never showed in /metrics:\n{answer.text}"
            time.sleep(0.5)
        assert samples[("kspark_query_records_produced_total", labels)] == 3  # V = 3, 4, 5
        assert samples[("kspark_query_bytes_produced_total", labels)] > 3 * len('{"V":3}')
        consumed = sum(len(f"k{i}") + len(json.dumps({"V": i})) for i in range(6))
        assert samples[("kspark_query_bytes_consumed_total", labels)] == consumed
        assert samples[("kspark_query_batches_total", labels)] >= 1
        assert 0 <= samples[("kspark_query_saturation", labels)] <= 1
        assert samples[("kspark_query_busy_seconds_total", labels)] > 0
        assert samples[("kspark_query_state", (("query_id", query_id), ("state", "RUNNING")))] == 1
        assert samples[("kspark_queries", (("state", "RUNNING"),))] == 1
        lags = {k: v for k, v in samples.items() if k[0] == "kspark_query_consumer_lag"}
        assert sorted(dict(k[1])["partition"] for k in lags) == ["0", "1"] and set(lags.values()) == {0}
        offsets = sum(v for k, v in samples.items() if k[0] == "kspark_query_consumer_offset")
        assert offsets == 6
        assert samples[("kspark_command_log_applied_offset", ())] >= 2
        ksql_requests = [v for k, v in samples.items() if k[0] == "kspark_http_requests_total"
                         and dict(k[1]) == {"endpoint": "/ksql", "method": "POST", "status": "200"}]
        assert ksql_requests == [2]

        report = http.get("/lag")
        assert report.status_code == 200
        [figures] = report.json()["queries"]
        assert figures["queryId"] == query_id and figures["state"] == "RUNNING"
        assert figures["recordsConsumed"] == 6 and figures["recordsProduced"] == 3 and figures["totalLag"] == 0
        assert [(p["topic"], p["partition"], p["lag"]) for p in figures["partitions"]] == [(topic, 0, 0), (topic, 1, 0)]
        assert sum(p["currentOffset"] for p in figures["partitions"]) == 6
        assert sum(p["endOffset"] for p in figures["partitions"]) == 6

        [described] = ksql("DESCRIBE ORDERS EXTENDED;")
        statistics = described["sourceDescription"]["statistics"]
        assert "consumer-total-messages:         6" in statistics and "last-message: 20" in statistics
        assert described["sourceDescription"]["errorStats"] == ""
        [sink] = ksql("DESCRIBE METERED_ORDERS EXTENDED;")
        assert "   total-messages:         3" in sink["sourceDescription"]["statistics"]
        assert {s["name"] for s in sink["sourceDescription"]["clusterStatistics"]} == {"messages-per-sec",
                                                                                      "total-messages"}
        [plain] = ksql("DESCRIBE ORDERS;")
        assert plain["sourceDescription"]["statistics"] == ""

        ksql(f"TERMINATE {query_id};")
        assert http.get("/lag").json() == {"queries": []}
        after = _samples(http.get("/metrics").text)
        assert not any(k[0] == "kspark_query_records_consumed_total" for k in after)
