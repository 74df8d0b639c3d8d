"""``specgen estimate``: resources and logic depth of the blocks on a Yosys ``synth_xilinx``
proxy, next to an analytical DSP58 model, and the report of both (docs/estimate.md)."""

