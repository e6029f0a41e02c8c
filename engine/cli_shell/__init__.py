"""``kspark cli [URL]``: ksqlDB's interactive CLI, for a kspark server.

The rooms: ``statements`` splits what is typed into statements and tells which the shell runs
itself; ``client`` speaks ksqlDB's REST API over httpx; ``render`` prints entities and rows as
ksqlDB's CLI prints them; ``shell`` holds a session (properties, variables, spool, output
format) and its interactive loop; ``command`` is the ``kspark cli`` subcommand.
"""
