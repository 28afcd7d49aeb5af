"""Example data sets shared by the demo job, the tests and the benchmarks."""
