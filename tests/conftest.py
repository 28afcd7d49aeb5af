"""Settings for the whole suite.

Hypothesis' per-example deadline measures the machine's load as much as the code: on
2 shared cores a pure check can take 10x its usual time. Examples stay bounded by
``max_examples``; the deadline is off so that load never fails a correct test.
"""

from hypothesis import settings

settings.register_profile("streamshield", deadline=None)
settings.load_profile("streamshield")
