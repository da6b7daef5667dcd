"""The vector read model: embeddings of what agents said and saw, tagged with the embedder that made them."""
