"""Shared query networks, pure: operator trees, merging, privacy switches (no pyspark).

Queries registered by many users over the same streams are planned as operator trees
(``operators``), merged into one network that computes shared nodes once (``equivalence``,
``merge``: the Chinese-Wall paper's query sharing), and guarded by privacy switches that
shut branches nobody may receive (``switches``, ``switch_state``: the privacy-switch
paper). ``evaluate`` is the reference meaning the Spark execution is checked against.
See docs/query-sharing.md.
"""
