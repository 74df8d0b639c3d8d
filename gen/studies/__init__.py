"""Studies that write a table of the docs: the BSFP study, the SSM error budget, the backtrack
cost, the tree memory, the DSP numerics and the acceptance of the shipped models."""
