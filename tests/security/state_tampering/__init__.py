"""State tampering: shield state rolled back, ingest state deleted, truncated or out of step."""
