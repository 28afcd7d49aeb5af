"""Spark glue: compiles the pure policy core into native Spark expressions.

Per-tuple work here is Catalyst expressions only (DESIGN.md section 1); Python runs per
micro-batch and per policy.
"""
