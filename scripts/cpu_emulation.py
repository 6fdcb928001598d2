"""Does the environment make this CPU behave like another? For each setting, in a fresh
process: the ATen CPU capability PyTorch dispatches to, the instruction set oneDNN reports,
our answer to "does this CPU do bf16" (translator.runtime.cpu_bf16), and what runs at what
speed under it: an fp32 matmul (MKL), an fp32 linear layer through oneDNN (as our decoder
runs them), a bf16 matmul (oneDNN where PyTorch sends bf16 there) and an elementwise exp
(ATen's vectorised kernels). Each measure stops at --seconds plus one operation.

    python scripts/cpu_emulation.py                  # this CPU as it is, then as an AVX2 one
    python scripts/cpu_emulation.py --setting "ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41"

The AVX2 setting is the one `make test-avx2` runs the precision and step-profile tests
under (docs/development.md): on a CPU with AVX-512 or AMX it makes oneDNN, MKL and ATen take
their AVX2 code, and our bf16 answer no. It cannot add instructions a CPU lacks: on an
AVX2-only CPU it changes nothing, and a lower setting shows that the variables take.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from common import timed_runs

AVX2 = "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2"
VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def measure(seconds: float) -> dict:
    """In this process, as its environment set it up."""
    import torch

    from translator.runtime import cpu_bf16

    def rate(work: float, run) -> float:
        run()  # untimed: what is built once is built
        _, times = timed_runs(run, 1_000_000, seconds)
        return work * len(times) / sum(times) / 1e9

    n = 1024
    a32 = torch.randn(n, n)
    a16 = a32[:512, :512].to(torch.bfloat16)
    linear = torch.nn.Linear(n, n)
    big = torch.randn(4_000_000)
    has, why = cpu_bf16()
    with torch.no_grad():
        results = {
            "capability": torch.backends.cpu.get_cpu_capability(),
            "bf16": f"{'yes' if has else 'no'}: {why}",
            "fp32 matmul 1024³": rate(2 * n**3, lambda: a32 @ a32),
            "fp32 oneDNN linear 1024²×1024": rate(
                2 * n**3,
                lambda: torch.ops.mkldnn._linear_pointwise(
                    a32, linear.weight, linear.bias, "none", [], ""
                ),
            ),
            "bf16 matmul 512³": rate(2 * 512**3, lambda: a16 @ a16),
            "exp over 4M floats": rate(len(big), lambda: torch.exp(big)),
        }
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            torch.ops.mkldnn._linear_pointwise(a32, linear.weight, linear.bias, "none", [], "")
    return results


def in_fresh_process(setting: str, seconds: float) -> tuple[dict, str]:
    """measure() in a child whose environment is this one's without VARIABLES, plus
    `setting`; its results and oneDNN's instruction set line."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(item.split("=", 1) for item in setting.split())
    code = f"import json, cpu_emulation; print(json.dumps(cpu_emulation.measure({seconds})))"
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    isa = next((line.split("isa:", 1)[1] for line in lines if "isa:" in line), "?")
    return json.loads(lines[-1]), isa.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--setting",
        action="append",
        help=f'variables for one process, e.g. "{AVX2}" (default: none, then that)',
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="each measure")
    args = parser.parse_args()
    settings = args.setting or ["", AVX2]
    began = time.perf_counter()
    rows = []
    for setting in settings:
        results, isa = in_fresh_process(setting, args.seconds)
        label = {"": "as it is", AVX2: "AVX2 emulation"}.get(setting, setting)
        rows.append((label, isa, results))
        print(f"{label} ({setting}): {isa}; {results}", flush=True)
    print(f"\n| setting | {' | '.join(name for name, _, _ in rows)} |")
    print("|---" * (len(rows) + 1) + "|")
    print(f"| oneDNN's ISA | {' | '.join(isa for _, isa, _ in rows)} |")
    for key in rows[0][2]:
        cells = [r[key] if isinstance(r[key], str) else f"{r[key]:,.2f}" for _, _, r in rows]
        unit = "" if isinstance(rows[0][2][key], str) else " (G/s)"
        print(f"| {key}{unit} | {' | '.join(cells)} |")
    print(f"\n({time.perf_counter() - began:.0f} s, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
