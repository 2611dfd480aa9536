# SPDX-License-Identifier: MIT
"""Which numbers in csrc/libm/tables/ are recomputable facts, checked with mpmath.

Run from any checkout: `python tools/check_table_facts.py` (needs mpmath; says so if missing).
It reads the table files as text, recomputes each claimed fact at high precision and prints,
per check, how many entries agree with the recomputation; exit status 1 if a claim that
docs/provenance.md calls a fact does not hold for every entry.
"""
import pathlib
import re
import struct
import sys
from typing import Dict, List

TABLES = pathlib.Path(__file__).resolve().parent.parent / "csrc" / "libm" / "tables"


def c_array(name: str) -> List[str]:
    """The literal tokens of the C initialiser `name ... = { ... };` in the table files."""
    for path in sorted(TABLES.glob("*.c")):
        m = re.search(r"\b" + re.escape(name) + r"\b[^=;]*=\s*\{(.*?)\};", path.read_text(), re.S)
        if m:
            return re.findall(r"-?0x[0-9a-fA-F.]+(?:p[-+]?\d+)?|-?\d+\.\d*", m.group(1))
    raise KeyError(name)


def c_scalar(name: str) -> float:
    """The value of the C definition `const double name = literal;` in the table files."""
    for path in sorted(TABLES.glob("*.c")):
        m = re.search(r"\b" + re.escape(name) + r"\s*=\s*([-0-9a-fA-Fx.p+]+);", path.read_text())
        if m:
            return to_double(m.group(1))
    raise KeyError(name)


def to_double(token: str) -> float:
    """A C floating literal (hexadecimal or decimal) as a Python float, exactly."""
    return float.fromhex(token) if "x" in token.lower() else float(token)


def from_bits(bits: int) -> float:
    """The double whose IEEE-754 bit pattern is `bits`."""
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def bits_of(x: float) -> int:
    """The IEEE-754 bit pattern of the double `x`."""
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def check_exp(mp) -> Dict[str, object]:
    """T_exp: the head is RN(2^(i/128)) and the tail RN((2^(i/128) - head) / head)."""
    raw = [int(t, 16) for t in c_array("pd_T_exp")]
    heads = tails = 0
    for i in range(len(raw) // 2):
        head = from_bits(raw[2 * i + 1] + (i << 45))
        exact = mp.power(2, mp.mpf(i) / 128)
        heads += head == float(exact)
        tails += from_bits(raw[2 * i]) == float((exact - head) / head)
    return {"rows": len(raw) // 2, "head == RN(2^(i/128))": heads, "tail == RN((2^(i/128) - head)/head)": tails}


def check_d2pi(mp) -> Dict[str, object]:
    """D_2pi[j] = the j-th base-2^24 digit of 2/pi after the point."""
    digits = [int(to_double(t)) for t in c_array("pd_D_2pi")]
    scaled = int(mp.floor(2 / mp.pi * mp.power(2, 24 * len(digits))))
    exact = [(scaled >> (24 * (len(digits) - 1 - j))) & 0xFFFFFF for j in range(len(digits))]
    return {"rows": len(digits), "digits equal to those of 2/pi": sum(d == e for d, e in zip(digits, exact))}


def _round_to_bits(mp, x, bits: int) -> float:
    """x rounded to nearest with `bits` significant bits (as a double)."""
    with mp.workprec(bits):
        return float(+x)


def check_log(mp) -> Dict[str, object]:
    """T_log: is lc the double nearest log(1/rc), and is it that value rounded to 42 bits?"""
    v = [to_double(t) for t in c_array("pd_T_log")]
    rows = [(v[2 * i], v[2 * i + 1]) for i in range(len(v) // 2)]
    near = sum(lc == float(-mp.log(rc)) for rc, lc in rows)
    near42 = sum(lc == _round_to_bits(mp, -mp.log(rc), 42) for rc, lc in rows)
    low11 = sum(bits_of(lc) & 0x7FF == 0 for _, lc in rows)
    worst = max(abs(mp.mpf(lc) + mp.log(rc)) / mp.power(2, mp.floor(mp.log(abs(lc), 2)) - 52)
                for rc, lc in rows if lc != 0)
    return {"rows": len(rows), "lc == RN(-log rc)": near, "lc == RN42(-log rc)": near42,
            "lc low 11 bits zero": low11, "max |lc + log rc| in ulp(lc)": float(worst)}


def check_pow(mp) -> Dict[str, object]:
    """T_pow: lc = -log(rc) to the nearest multiple of 2^-43 and lt the double nearest the rest."""
    v = [to_double(t) for t in c_array("pd_T_pow")]
    rows = [tuple(v[3 * i:3 * i + 3]) for i in range(len(v) // 3)]
    grid = mp.power(2, -43)
    head = sum(mp.mpf(lc) == grid * mp.nint(-mp.log(rc) / grid) for rc, lc, _ in rows)
    near = sum(lc == float(-mp.log(rc)) for rc, lc, _ in rows)
    tail = sum(lt == float(-mp.log(rc) - lc) for rc, lc, lt in rows)
    rc8 = sum(bits_of(rc) & ((1 << 45) - 1) == 0 for rc, _, _ in rows)
    return {"rows": len(rows), "rc has <= 8 significant bits": rc8, "lc == RN(-log rc) on 2^-43 grid": head,
            "lc == RN(-log rc) as a double": near, "lt == RN(-log rc - lc)": tail}


def check_sc(mp) -> Dict[str, object]:
    """T_sc: heads RN(sin), RN(cos) at j/128 and tails RN(sin - sin_hi), RN(cos - cos_hi)."""
    v = [to_double(t) for t in c_array("pd_T_sc")]
    n = len(v) // 4
    heads = sin_tail = cos_tail = rows_off = 0
    for j in range(n):
        s_hi, s_lo, c_hi, c_lo = v[4 * j:4 * j + 4]
        x = mp.mpf(j) / 128
        s, c = mp.sin(x), mp.cos(x)
        heads += s_hi == float(s) and c_hi == float(c)
        ok_s, ok_c = s_lo == float(s - s_hi), c_lo == float(c - c_hi)
        sin_tail += ok_s
        cos_tail += ok_c
        rows_off += not (ok_s and ok_c)
    return {"rows": n, "heads nearest": heads, "sin tail nearest": sin_tail,
            "cos tail nearest": cos_tail, "rows with a tail not nearest": rows_off}


def check_constants(mp) -> Dict[str, bool]:
    """Single constants that are roundings of a mathematical number."""
    half_pi = mp.pi / 2
    h0 = c_array("pd_half_pi")
    return {
        "two_over_pi == RN(2/pi)": c_scalar("pd_two_over_pi") == float(2 / mp.pi),
        "H0 == RN(pi/2)": to_double(h0[0]) == float(half_pi),
        "H1 == RN(pi/2 - H0)": to_double(h0[1]) == float(half_pi - to_double(h0[0])),
        "exp_inv_ln2_n == RN(128/ln 2)": c_scalar("pd_exp_inv_ln2_n") == float(128 / mp.log(2)),
    }


# (check, the keys that docs/provenance.md calls facts: each must hold for every row)
CHECKS = (
    ("T_exp", check_exp, ("head == RN(2^(i/128))", "tail == RN((2^(i/128) - head)/head)")),
    ("D_2pi", check_d2pi, ("digits equal to those of 2/pi",)),
    ("T_log", check_log, ("lc == RN(-log rc)",)),
    ("T_pow", check_pow, ("lc == RN(-log rc) on 2^-43 grid", "lt == RN(-log rc - lc)")),
    ("T_sc", check_sc, ("heads nearest",)),
)


def main() -> int:
    """Print every check; return 1 if a claimed fact fails."""
    try:
        import mpmath
    except ImportError:
        print("mpmath is not installed: `pip install mpmath` to run these checks")
        return 2
    mpmath.mp.prec = 2000
    failed = []
    for label, check, facts in CHECKS:
        result = check(mpmath.mp)
        for key, val in result.items():
            print(f"{label}: {key:44s} {val}")
        failed += [f"{label}: {k}" for k in facts if result[k] != result["rows"]]
    for key, ok in check_constants(mpmath.mp).items():
        print(f"const: {key:44s} {ok}")
        failed += [] if ok else [key]
    print("every claimed fact holds" if not failed else f"claims that fail: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
