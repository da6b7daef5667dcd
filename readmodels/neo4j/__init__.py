"""Everything Neo4j: the graph, keyword (full-text) and vector stores, the schema, bulk loading,
the driver and a local server for tests (`local`)."""
