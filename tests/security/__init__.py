"""The security suite, one package per threat (docs/security.md)."""
