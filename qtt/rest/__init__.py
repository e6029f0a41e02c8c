"""The REST QTT runner: ksqlDB's REST query-validation tests against a real kspark server.

    qtt rest tests/rest_cases --report reports/rest.json

``loader`` reads the files (QTT's JSON with comments and ``format`` expansion),
``responses`` judges HTTP responses against the expected ones, ``client`` speaks ksqlDB's
REST API over HTTP/1.1, ``producer`` writes the input records with Kafka's Java client,
``runner`` drives one case and a whole run against a server (started with its broker
unless one is named), and ``cli`` is the ``qtt rest`` subcommand.
"""
