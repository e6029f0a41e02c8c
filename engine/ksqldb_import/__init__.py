"""Import of ksqlDB's saved execution plans (``plan.json``, ``ksqlPlanV1``) into kspark plans.

    from engine.ksqldb_import import import_plan
    imported = import_plan(json.loads(text))   # ImportedPlan(statements, configs)
    engine = KsqlEngine(imported.configs)
    for plan in imported.statements:
        engine.restore(plan)                   # built as saved, never re-planned from SQL

Steps, commands, formats and configs kspark cannot run the way ksqlDB did raise
``UnsupportedFeatureError`` naming them; malformed plans raise ``PlanError``.
"""

from __future__ import annotations

from engine.ksqldb_import.plan import SEMANTIC_CONFIGS, ImportedPlan, import_plan
from engine.ksqldb_import.steps import TRANSLATORS, UNSUPPORTED_STEPS

__all__ = ["SEMANTIC_CONFIGS", "TRANSLATORS", "UNSUPPORTED_STEPS", "ImportedPlan", "import_plan"]
