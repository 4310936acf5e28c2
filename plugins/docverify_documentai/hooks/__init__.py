"""Document AI hooks."""
