"""rewards stage."""
