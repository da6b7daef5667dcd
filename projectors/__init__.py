"""Consumer runtime, plug-in API, built-in projectors and inference producers."""
