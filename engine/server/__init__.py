"""The kspark server: ksqlDB's REST API (``app``) over a service object (``service``).

``service.KsqlService`` holds the command log, the metastore and the query registry and
knows nothing of HTTP; ``app`` is the thin Starlette layer over it.
"""
