"""Spark runtime: the one SparkSession, value conversions, and the bounded/unbounded adapter."""
