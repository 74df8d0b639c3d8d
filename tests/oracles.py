"""Independent oracles shared by the golden-model tests.

Nothing here imports ``golden``: these are first-principles references
(exact rationals, IEEE 754 definitions) that the golden models are checked
against, plus the seeded random generator every random test uses.
"""

import os
import secrets
import zlib
from fractions import Fraction

import numpy as np

__all__ = ["seeded_rng", "pow2", "ref_round", "ftz32", "is_nan32", "ftz_add32", "ftz_mul32"]


def seeded_rng(tag):
    """A Generator seeded from SPECGEN_SEED (or a fresh seed), printed for replay."""
    env = os.environ.get("SPECGEN_SEED")
    base = int(env) if env else secrets.randbits(32)
    print(f"[{tag}] SPECGEN_SEED={base}")
    return np.random.default_rng([base, zlib.crc32(tag.encode())])


def pow2(e):
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def ref_round(q, fmt, zero_sign=0):
    """Round a Fraction to fmt, ties to even, from the definitions (IEEE 754 §4.3.1, §7.4).

    Plain integer arithmetic on numerator and denominator: find e with
    2**e <= |q| < 2**(e+1), clamp e at emin (gradual underflow), count |q| in
    units of the quantum 2**(e - man_bits), round that count half to even.
    """
    if q == 0:
        return zero_sign << (fmt.width - 1)
    s = 1 if q < 0 else 0
    n, d = abs(q.numerator), q.denominator
    m, emin, emax = fmt.man_bits, 1 - fmt.bias, fmt.bias
    e = n.bit_length() - d.bit_length()
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1
    e = max(e, emin)
    sh = m - e
    num, den = (n << sh, d) if sh >= 0 else (n, d << -sh)
    k, rem = divmod(num, den)
    if 2 * rem > den or (2 * rem == den and k % 2 == 1):
        k += 1
    if k == 1 << (m + 1):                      # rounded up to the next binade
        k, e = k >> 1, e + 1
    if e > emax:                               # beyond the largest finite: Inf (§7.4)
        return (s << (fmt.width - 1)) | fmt.inf_bits
    if k < 1 << m:                             # only possible at e == emin: subnormal
        return (s << (fmt.width - 1)) | k
    return (s << (fmt.width - 1)) | ((e + fmt.bias) << m) | (k - (1 << m))


# -- SoftFloat with a flush written from the encoding (the DSPFP32 reading of AM004) ----

def ftz32(u):
    """binary32 bits with a subnormal replaced by the zero of its sign (from the encoding)."""
    return u & 0x8000_0000 if (u >> 23) & 0xFF == 0 else u


def is_nan32(u):
    return (u >> 23) & 0xFF == 0xFF and u & 0x7F_FFFF != 0


def _sf32(u):
    import softfloatpy as sf
    return sf.Float32.from_bytes(int(u).to_bytes(4, "big"))


def _bits32(v):
    return int.from_bytes(v.to_bytes(), "big")


def ftz_add32(a, b):
    """Flush the operands, SoftFloat ``f32_add`` (round to nearest even), flush the sum."""
    import softfloatpy as sf
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    return ftz32(_bits32(sf.f32_add(_sf32(ftz32(a)), _sf32(ftz32(b)))))


def ftz_mul32(a, b):
    """Flush the operands, SoftFloat ``f32_mul`` (round to nearest even), flush the product."""
    import softfloatpy as sf
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    return ftz32(_bits32(sf.f32_mul(_sf32(ftz32(a)), _sf32(ftz32(b)))))
