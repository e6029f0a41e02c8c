"""Hosting queries on Kafka: a streaming application's persistent queries and push queries.

``engine.hosting.application`` runs a SQL file's statements as persistent queries (``kspark
run``, and the server's queries); ``engine.hosting.push_query`` hands the rows of ``SELECT ...
EMIT CHANGES`` to a caller.
"""
