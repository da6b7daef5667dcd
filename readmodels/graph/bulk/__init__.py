"""Bulk loading an empty graph from a whole log, on any backend: resolve, tables, workers, loader."""
