"""Document AI operators."""
