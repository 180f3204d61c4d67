"""`make bench`: throughput and latency tables for each backing (not a timed test)."""
