"""The signed JSONL ledger: one file per session, the portable and verifiable copy of the log."""
