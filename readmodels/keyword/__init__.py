"""The keyword read model: BM25 over entity names and summaries and over verbatim event text."""
