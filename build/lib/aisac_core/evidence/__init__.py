"""Evidence: the anchor that ties a claim to a passage of an indexed file, and its walk through results."""
