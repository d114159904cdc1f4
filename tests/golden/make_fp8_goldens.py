#!/usr/bin/env python3
"""FP8 E4M3 (the "fn" variant: no infinities, one NaN a sign, max 448) goldens
for engine/common/fp8.h, from the ml_dtypes package (PyPI), never from onecard.

  pip install ml_dtypes numpy
  tests/golden/make_fp8_goldens.py --out tests/golden/fp8/e4m3.json

Writes every code's value, and float32 inputs with the code ml_dtypes gives
them after clipping to [-448, 448] (onecard saturates where ml_dtypes' cast
returns NaN: the issue asks that finite inputs never become NaN): the
midpoints between neighbouring codes (ties to even), points just either side
of them, subnormals, the saturation boundary, zeros, NaN, and seeded random
values over many scales.
"""
import argparse
import json

import ml_dtypes
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261202)
    args = ap.parse_args()
    e4m3 = ml_dtypes.float8_e4m3fn
    codes = np.arange(256, dtype=np.uint8)
    values = codes.view(e4m3).astype(np.float32)

    finite = sorted({float(v) for v in values if np.isfinite(v)})
    inputs = [0.0, -0.0, 448.0, -448.0, 449.0, 464.0, 465.0, 1e6, -1e6, 3.0e38,
              float("inf"), float("-inf"), float("nan"), 1e-30, -1e-30, 2.0 ** -10,
              2.0 ** -10 * 1.0001, 2.0 ** -9 * 1.5, 2.0 ** -9 * 2.5]
    for a, b in zip(finite, finite[1:]):
        mid = np.float32((a + b) / 2)
        inputs += [float(mid), float(np.nextafter(mid, np.float32(a))),
                   float(np.nextafter(mid, np.float32(b)))]
    rng = np.random.default_rng(args.seed)
    for scale in [1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1000.0]:
        inputs += [float(x) for x in (rng.standard_normal(128) * scale).astype(np.float32)]
    x = np.array(inputs, dtype=np.float32)
    clipped = np.where(np.isnan(x), x, np.clip(x, -448.0, 448.0)).astype(np.float32)
    out_codes = clipped.astype(e4m3).view(np.uint8)

    def enc(v):
        return "nan" if np.isnan(v) else ("inf" if v == np.inf else ("-inf" if v == -np.inf
                                                                     else float(v)))

    doc = {
        "source": f"ml_dtypes {ml_dtypes.__version__} float8_e4m3fn, numpy {np.__version__}",
        "rule": "code = float8_e4m3fn(clip(x, -448, 448)); NaN stays NaN",
        "decode": [enc(v) for v in values],
        "encode": [{"x": enc(v), "bits": int(np.float32(v).view(np.uint32)), "code": int(c)}
                   for v, c in zip(x, out_codes)],
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
