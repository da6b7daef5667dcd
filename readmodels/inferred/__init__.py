"""The inferred-edge read model: the audit view of every inferred and causal edge, with a trust score."""
