"""Records and values as every layer exchanges them (no pyspark, no Kafka client).

``engine.data.records``: topic records in QTT form; ``engine.data.values``: Java's formatting of
doubles, dates and times; ``engine.data.partitioner``: Kafka's partitioner for keyed records;
``engine.data.java_properties``: Java's ``.properties`` text (config files).
"""
