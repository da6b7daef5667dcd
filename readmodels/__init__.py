"""Read models built from the log: store contracts, backends, retrieval and the query service."""
