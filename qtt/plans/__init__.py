"""Planned cases: saved plans of the project's QTT cases, replayed to prove upgrades safe.

Layout (see planned_cases/README.md): ``planned_cases/<case-slug>/<version>_<epoch-ms>/``
holds ``plan.json``, ``spec.json``, ``physical_plans/<QUERY_ID>.txt`` and
``provenance.json``. Modules: ``layout`` (paths, versions, releases), ``codec`` (QTT case
and records to JSON), ``normalise`` (Spark plan text), ``record``, ``replay``, ``uptodate``,
``diff``, ``verify`` (everything at once), ``schema`` (the plan JSON Schema guard), ``html``.
"""
