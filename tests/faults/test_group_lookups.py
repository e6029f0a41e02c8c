"""The group lookups a server makes (who owns the metastore's tables, which servers run the
queries) answer again once a stopped broker is back, without restarting the server.

A librdkafka admin client whose group request failed while the broker was away never
describes a group again; a server that kept it answered every statement after the outage
with minutes of retries, then an error. And a server assigned a metastore table while the
broker was not ready to initialise its transactional producer kept the assignment without
ever owning the table: nobody could write it. Run with ``nox -s faults`` (about a minute, no Spark).
"""

from __future__ import annotations

import time
import uuid

import pytest

from engine.errors import KsqlError
from engine.metastore.database import SOURCES, MetastoreDatabase
from engine.server.ownership import QueryOwnership
from tests.faults.support import until

pytestmark = pytest.mark.faults


def test_the_metastore_owner_and_the_query_owners_are_found_again_after_a_broker_restart(faulty_kafka) -> None:
    kafka = faulty_kafka
    service = f"groups_{uuid.uuid4().hex[:8]}"
    owner = MetastoreDatabase(kafka.proxied, service, internal_url="http://owner", timeout=20.0)
    other = MetastoreDatabase(kafka.proxied, service, internal_url="http://other", timeout=20.0)
    owner.create_topics()
    ownership = QueryOwnership(kafka.proxied, service, "server-1", on_assigned=lambda _: None,
                               on_revoked=lambda _: None, timeout=20.0)
    try:
        owner.start()
        other.start(join_group=False)
        ownership.start()
        until(lambda: other.owner_of(SOURCES) == "http://owner", 120, "the other server finds the owner")
        until(lambda: "server-1" in ownership.members(), 120, "the query-owner group lists the server")

        kafka.stop()
        assert other.owner_of(SOURCES) is None
        with pytest.raises(KsqlError, match="Cannot describe the query-owner group"):
            time.sleep(1)  # past the members cache
            ownership.members()
        kafka.start()

        owns = until(lambda: owner.owns(SOURCES), 120, "the owner owns the sources table again")
        found = until(lambda: other.owner_of(SOURCES) == "http://owner", 120, "the owner is found again")
        listed = until(lambda: "server-1" in ownership.members(), 120, "the server is listed again")
        print(f"\nafter the restart: metastore table owned again in {owns:.0f} s, its owner found in {found:.0f} s, "
              f"query owners in {listed:.0f} s")
    finally:
        ownership.close()
        other.close()
        owner.close()
