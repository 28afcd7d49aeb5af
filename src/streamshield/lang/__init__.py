"""Text forms: the pattern and CQL sp grammar, and the JSON-lines wire format."""
