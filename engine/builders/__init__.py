"""Step builders (lower layer, frozen per step version): steps -> Spark DataFrame operations."""
