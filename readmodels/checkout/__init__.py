"""The Memory Checkout: prompt-ready, cited bundles of what memory knows."""
