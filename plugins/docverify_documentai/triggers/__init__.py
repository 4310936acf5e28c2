"""Document AI triggers."""
