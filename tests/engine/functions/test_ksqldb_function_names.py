"""Every built-in function of ksqlDB's function reference (0.29 / Confluent Platform 7.x) is
registered, so LIST FUNCTIONS shows it and a statement using it plans."""

from __future__ import annotations

import engine.functions  # noqa: F401 - registers the library
from engine.functions.registry import REGISTRY

# The names of ksqlDB's published function reference, by its sections.
KSQLDB_FUNCTIONS = {
    "numeric": "ABS ACOS ASIN ATAN ATAN2 CEIL COS COSH COT DEGREES EXP FLOOR GREATEST LEAST LN LOG PI "
               "POWER RADIANS RANDOM ROUND SIGN SIN SINH SQRT TAN TANH TRUNC",
    "collections": "ARRAY_CONCAT ARRAY_CONTAINS ARRAY_DISTINCT ARRAY_EXCEPT ARRAY_INTERSECT ARRAY_JOIN "
                   "ARRAY_LENGTH ARRAY_MAX ARRAY_MIN ARRAY_REMOVE ARRAY_SORT ARRAY_UNION AS_MAP ELT ENTRIES "
                   "FIELD FILTER GENERATE_SERIES JSON_ARRAY_CONTAINS MAP_KEYS MAP_UNION MAP_VALUES REDUCE "
                   "SLICE TRANSFORM",
    "strings": "CHR CONCAT CONCAT_WS ENCODE EXTRACTJSONFIELD FROM_BYTES INITCAP INSTR LCASE LEN LPAD MASK "
               "MASK_KEEP_LEFT MASK_KEEP_RIGHT MASK_LEFT MASK_RIGHT REGEXP_EXTRACT REGEXP_EXTRACT_ALL "
               "REGEXP_REPLACE REGEXP_SPLIT_TO_ARRAY REPLACE RPAD SPLIT SPLIT_TO_MAP SUBSTRING TO_BYTES "
               "TRIM UCASE UUID",
    "bytes": "BIGINT_FROM_BYTES DOUBLE_FROM_BYTES INT_FROM_BYTES",
    "nulls": "COALESCE IFNULL NULLIF",
    "date and time": "CONVERT_TZ DATEADD DATESUB DATETOSTRING FORMAT_DATE FORMAT_TIME FORMAT_TIMESTAMP "
                     "FROM_DAYS FROM_UNIXTIME PARSE_DATE PARSE_TIME PARSE_TIMESTAMP STRINGTODATE "
                     "STRINGTOTIMESTAMP TIMEADD TIMESUB TIMESTAMPADD TIMESTAMPSUB TIMESTAMPTOSTRING "
                     "UNIX_DATE UNIX_TIMESTAMP",
    "urls": "URL_DECODE_PARAM URL_ENCODE_PARAM URL_EXTRACT_FRAGMENT URL_EXTRACT_HOST URL_EXTRACT_PARAMETER "
            "URL_EXTRACT_PATH URL_EXTRACT_PORT URL_EXTRACT_PROTOCOL URL_EXTRACT_QUERY",
    "json": "IS_JSON_STRING JSON_ARRAY_LENGTH JSON_CONCAT JSON_KEYS JSON_RECORDS TO_JSON_STRING",
    "other": "AS_VALUE GEO_DISTANCE",
    "aggregate": "AVG COLLECT_LIST COLLECT_SET CORRELATION COUNT COUNT_DISTINCT EARLIEST_BY_OFFSET "
                 "HISTOGRAM LATEST_BY_OFFSET MAX MIN STDDEV_SAMP SUM TOPK TOPKDISTINCT",
    "table": "CUBE_EXPLODE EXPLODE",
}


def test_every_function_of_ksqldbs_reference_is_registered() -> None:
    registered = set(REGISTRY.names())
    missing = {section: sorted(set(names.split()) - registered) for section, names in KSQLDB_FUNCTIONS.items()}
    assert not any(missing.values()), {section: names for section, names in missing.items() if names}
