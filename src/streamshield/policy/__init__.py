"""Pure policy core: roles, security punctuations, policies, the reference Security Shield.

Nothing in this package may import pyspark: it is the executable specification that
the Spark engine is tested against, and its tests must run without a JVM.
"""
