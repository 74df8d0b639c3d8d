"""The papers' claims the model is compared with: SpecMamba (arXiv 2509.19873) and SPEQ
(arXiv 2510.18525). Never our figures; every report labels them as the papers'."""

__all__ = ["SEED_VHK158", "SEED", "SEED_TREE", "SPEQ_CHAIN", "SPEQ_ALPHA"]

#: SpecMamba's VHK158 resource table: LUT, FF, DSP58, BRAM and URAM per unit.
SEED_VHK158 = {
    "Linear unit": {"LUT": 254_000, "FF": 403_400, "DSP": 3537, "BRAM": 142, "URAM": 30},
    "SSM unit": {"LUT": 253_500, "FF": 382_100, "DSP": 1068},
    "State controller": {"LUT": 31_500, "DSP": 0},
    "Total": {"LUT": 975_000, "DSP": 5093},
}

#: Figures claimed by SpecMamba (throughput, speed-ups, energy, DSP use on VHK158) and SPEQ
#: (acceptance and speed-up ranges).
SEED = {
    "gpu_tok_s": 89.0,
    "lightmamba_tok_s": 169.0,
    "specmamba_tok_s": 313.0,
    "speedup_vs_gpu": 2.27,
    "speedup_vs_fpga": 2.85,
    "energy_vs_gpu": 5.41,
    "energy_vs_fpga": 1.26,
    "tokens_per_step": 4.91,
    "draft_time_share": 0.35,
    "linear_dsp_vhk158": SEED_VHK158["Linear unit"]["DSP"],
    "ssm_dsp_vhk158": SEED_VHK158["SSM unit"]["DSP"],
    "tops_per_w": {"vck190": 2.09, "vhk158": 4.91},
    "speq_acceptance": (0.964, 0.990),
    "speq_speedup": (2.07, 2.18),
}


# =====================================================================================
# The papers' configurations
# =====================================================================================

#: The SpecMamba notes' tree in our reading: branching 2, depth 4, 14 draft tokens (15 nodes ≤ 16 lanes).
SEED_TREE = (2, 2, 1, 1)
#: SPEQ: chain of up to L = 16 draft tokens, acceptance 0.97 (the SPEQ notes' 0.964–0.990).
SPEQ_CHAIN = 16
SPEQ_ALPHA = 0.97
