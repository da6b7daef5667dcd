"""The inferred-edge projector: the audit view of inferred and causal edges (see `extract`)."""
