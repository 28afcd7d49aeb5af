"""Complex event processing: event patterns over event streams (issue 15, docs/cep.md).

``pattern`` (the language) and ``oracle`` (the reference matcher) are pure; ``spark``
compiles a pattern to native Structured Streaming and is the only module that needs a JVM.
"""
