"""The built-in extractors, one module per family of event types (work, activity, sources, memory,
inference); `projectors.graph.registry` puts them together."""
