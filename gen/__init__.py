"""The ``specgen`` CLI: Verilog emission, Vivado flows and golden vectors."""
