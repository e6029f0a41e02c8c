"""Normalise Spark physical plan text so that two runs of the same query compare equal."""

from __future__ import annotations

import re

# Each rule: (pattern, replacement). Order matters: paths and UUIDs go before numbers.
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:file|hdfs|s3a?|dbfs):/[^\s,\])]*"), "<PATH>"),
    (re.compile(r"(?<![\w.])/(?:tmp|var|home|private|work|Users)/[^\s,\])]*"), "<PATH>"),
    (re.compile(_UUID), "<UUID>"),
    (re.compile(r"\bplan_id=\d+"), "plan_id=<PLAN_ID>"),
    (re.compile(r"\b(batchId|batch_id|ver|epochId)( ?= ?)\d+"), r"\1\2<BATCH>"),
    (re.compile(r"@[0-9a-f]{6,16}\b"), "@<HASH>"),
    # Java identity hashes may print with fewer digits (``KafkaSourceProvider@e0040``).
    (re.compile(r"\b([A-Z][\w$]*)@[0-9a-f]{1,5}\b"), r"\1@<HASH>"),
    (re.compile(r"\b(RDD|rdd|ExistingRDD)\s*\[\d+\]"), r"\1[<RDD>]"),
)
_EXPR_ID = re.compile(r"#(\d+)(L?)\b")
# PySpark names lambda variables from one process-wide counter (``lambda x_14``).
_LAMBDA_VAR = re.compile(r"\b([xyz])_(\d+)\b")


def normalise_physical_plan(text: str) -> str:
    """Replace the volatile tokens of a Spark physical plan description by stable ones.

    - expression ids (``ID#32``, ``ROWTIME#36L``, ``Project(...)#42``) are renumbered in
      order of first appearance (``#e0``, ``#e1L``...), so plans from different runs and
      sessions compare equal while the wiring between operators stays visible;
    - lambda variables PySpark numbers per process (``x_14``) are renumbered in order of
      first appearance (``x_l0``, ``y_l1``...);
    - ``plan_id=N`` -> ``plan_id=<PLAN_ID>``; object hashes ``@1a2b3c4d`` -> ``@<HASH>``;
    - run ids and other UUIDs -> ``<UUID>``; file system paths and URIs -> ``<PATH>``;
    - batch/version ids of streaming state (``batchId=3``, ``ver = 3``) -> ``<BATCH>``;
    - RDD ids (``RDD[12]``) -> ``RDD[<RDD>]``;
    - trailing spaces are dropped and the text ends with exactly one newline.
    Codegen stage markers (``*(1)``) are kept: they are deterministic for a given plan.
    """
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    numbering: dict[str, int] = {}

    def renumber(match: re.Match[str]) -> str:
        n = numbering.setdefault(match.group(1), len(numbering))
        return f"#e{n}{match.group(2)}"

    text = _EXPR_ID.sub(renumber, text)
    lambdas: dict[str, int] = {}

    def rename(match: re.Match[str]) -> str:
        n = lambdas.setdefault(match.group(0), len(lambdas))
        return f"{match.group(1)}_l{n}"

    text = _LAMBDA_VAR.sub(rename, text)
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    return "\n".join(lines) + "\n"
