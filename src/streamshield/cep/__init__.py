"""Complex event processing: event patterns over event streams (docs/cep.md).

``pattern`` (the language) and ``oracle`` (the reference matcher) are pure; ``spark``
compiles a pattern to native Structured Streaming and is the only module that needs a JVM.
"""
