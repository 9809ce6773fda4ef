"""algos stage."""
