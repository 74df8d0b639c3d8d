"""Golden models: the numerical and behavioural specification of specgen.

Everything in this package is plain numpy/Python and imports nothing else of the
project. ``hw`` reads its configs and tables from here; never the reverse.
"""
