"""The per-store owner daemon, its HTTP proxy and the stdio relay hosts spawn, and what they share."""
