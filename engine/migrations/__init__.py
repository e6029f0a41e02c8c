"""``kspark migrations``: ksqlDB's migrations tool (``ksql-migrations``) for kspark's server.

A project is a directory with ``ksql-migrations.properties`` and a ``migrations/`` folder of
files named ``V000001__Add_users.sql`` (six digits, two underscores, a description whose
underscores read as spaces). Applied versions are recorded on the server, as ksqlDB's tool
records them: rows inserted into a stream (``MIGRATION_EVENTS``) folded by a table
(``MIGRATION_SCHEMA_VERSIONS``) keyed by ``VERSION_KEY``, one row per version and a
``CURRENT`` row; each row carries the MD5 checksum of the file's bytes. A project therefore
moves between a ksqlDB server and a kspark server unchanged.

    files.py      file names, versions, checksums, the statement splitter
    config.py     ksql-migrations.properties: names, defaults, the new project's file
    client.py     the server over REST (httpx): statements, pull queries, inserts
    metadata.py   the metadata stream and table: their statements, rows and reads
    commands.py   new-project, create, initialize-metadata, apply, info, validate, destroy-metadata
    cli.py        the argparse front (``kspark migrations ...``)
"""
