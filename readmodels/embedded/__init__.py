"""The embedded backends: the graph on LadybugDB, the keyword, vector and inferred models on SQLite."""
