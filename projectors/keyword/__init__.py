"""The keyword projector: BM25 documents from every event (see `projectors.memory_docs`)."""
