"""Retrieval: lanes (exact, keyword, vector, traversal, verbatim) fused into one cited, explained ranking."""
