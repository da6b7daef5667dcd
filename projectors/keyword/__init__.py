"""The keyword projector: BM25 documents from every event (see `extract`)."""
