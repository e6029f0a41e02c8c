"""The engine's benchmarks, each a module run with ``python -m benchmarks.<name>`` or its nox
session of the same name:

- ``benchmarks.conformance`` (``nox -s benchmark``): conformance throughput in cases/s;
- ``benchmarks.perf``: in-memory queries, the engine against hand-written PySpark;
- ``benchmarks.stream_bench``: streaming on a real broker, the engine against hand-written
  Structured Streaming jobs, and single-record latency;
- ``benchmarks.pull_bench``: pull-query key lookups through HTTP;
- ``benchmarks.metastore_bench``: a server's restart, metastore tables against command topic;
- ``benchmarks.replay_bench``: planned-case versions replayed per second.

They share one way to time (``benchmarks.timing``) and one report (``benchmarks.report``):
outputs are checked before any figure is set, and each run writes a JSON report under
``reports/``; ``--record`` also appends it to the committed history
``benchmarks/reports/<benchmark>.json`` that ``docs/benchmarks.md`` is generated from.
A benchmark is not a test: it asserts nothing about speed.
"""
