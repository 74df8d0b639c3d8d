"""What ``specgen verilog`` and ``specgen golden`` write: Verilog (:mod:`.verilog`) for the blocks
(:mod:`.blocks`), the Vivado flow, the FuseSoC core, the register map (SystemRDL, C header,
Markdown), the DSP58 check and the golden vectors."""
