"""The benchmark's building blocks (issue: what the ZFS tuning buys, measured side by side)."""
