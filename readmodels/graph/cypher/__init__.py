"""Cypher shared by every backend: reads as generators (`io`), the operator's read-only check
(`guard`, `read_plan`)."""
