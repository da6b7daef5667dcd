"""The vector projector: embeddings of every memory document (`projectors.memory_docs`)."""
