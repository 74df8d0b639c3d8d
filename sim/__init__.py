"""cocotb benches and the Verilator/Icarus runner glue."""
