"""The real components kspark runs beside the engine: each module fetches, starts, waits, stops.

Used alike by the CLI, the test fixtures and nox. Nothing here imports the rest of the
engine except ``engine.errors``.
"""
