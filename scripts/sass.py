#!/usr/bin/env python3
"""What a CUDA source compiles to, here, without a GPU.

Compiles one .cu file of the tree to a cubin with the flags the build uses
for it (from BUILD_DIR/compile_commands.json: the target's -gencode, -O3,
defines and includes), then prints for each kernel whose mangled name matches
PATTERN its registers, stack and local memory (cuobjdump -res-usage), its
instruction count with the most frequent opcodes and the size of its largest
innermost loop (a kernel's main loop) from cuobjdump -sass: a way to
compare two versions of a kernel before a card is lent (bench/results' int4
page, session 54: a kGemv rewrite that grew 1904 instructions to 2992 and
ran 8-21 % slower).

cuobjdump and nvdisasm are not part of the CUDA toolkit installed here; the
first run downloads them from PyPI (nvidia-cuda-cuobjdump,
nvidia-cuda-nvdisasm) into .deps/cuda-tools.

Usage: scripts/sass.py SOURCE.cu [PATTERN] [--build-dir DIR] [--tree DIR] [--sass|--tsv]
  --tree  compile SOURCE of another checkout instead (e.g. an older commit's:
          git worktree add /tmp/old COMMIT), with this build's flags;
  --sass  also print the matching kernels' whole SASS;
  --tsv   a line a kernel instead: source, kernel (its anonymous namespace's
          hash dropped, so that builds compare), registers, stack, local
          bytes, instructions, largest loop (scripts/device/pack.sh keeps
          these).
"""

import argparse
import collections
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, ".deps", "cuda-tools")
# cuobjdump -sass runs nvdisasm from its own folder.
WHEELS = ("nvidia-cuda-cuobjdump==13.5.37", "nvidia-cuda-nvdisasm==13.5.37")
BIN = os.path.join(TOOLS, "nvidia", "cu13", "bin")
CUOBJDUMP = os.path.join(BIN, "cuobjdump")


def ensure_cuobjdump():
    tools = [CUOBJDUMP, os.path.join(BIN, "nvdisasm")]
    if all(os.access(t, os.X_OK) for t in tools):
        return CUOBJDUMP
    os.makedirs(TOOLS, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--disable-pip-version-check", *WHEELS, "-d", tmp], check=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if len(wheels) != len(WHEELS):
            sys.exit(f"sass: pip gave {wheels} for {WHEELS}")
        for w in wheels:
            with zipfile.ZipFile(os.path.join(tmp, w)) as z:
                z.extractall(TOOLS)
    for t in tools:
        os.chmod(t, 0o755)
    return CUOBJDUMP


def compile_command(source, build_dir):
    path = os.path.join(build_dir, "compile_commands.json")
    try:
        with open(path) as f:
            commands = json.load(f)
    except OSError as e:
        sys.exit(f"sass: {path}: {e.strerror} (configure a CUDA build there first)")
    want = os.path.realpath(source)
    for c in commands:
        if os.path.realpath(os.path.join(c["directory"], c["file"])) == want:
            return shlex.split(c["command"]), c["directory"]
    sys.exit(f"sass: {source} is not compiled in {path}")


def to_cubin(args, out):
    """The build's nvcc command with -c FILE -o OBJ turned into -cubin -o OUT."""
    result, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a in ("-c", "-lineinfo") or a.startswith("-Xcompiler") or a.startswith(
                "-forward-unknown"):
            continue
        result.append(a)
    return result + ["-cubin", "-o", out]


def kernels(cuobjdump, cubin):
    """{mangled name: resource line} from cuobjdump -res-usage."""
    text = subprocess.run([cuobjdump, "-res-usage", cubin], check=True, capture_output=True,
                          text=True).stdout
    found, name = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            name = m.group(1)
        elif name and "REG:" in line:
            found[name] = " ".join(
                f"{k} {v}" for k, v in re.findall(r"(REG|STACK|LOCAL):(\d+)", line))
            name = None
    return found


def opcodes(sass):
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass)
    return len(ops), collections.Counter(ops)


def largest_loop(sass):
    """Instructions of the largest innermost loop (a backward branch's span
    holding no other backward branch: a kernel's main loop, where it has
    one); 0 without a backward branch."""
    loops = []
    for at, target in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?BRA\s+0x([0-9a-f]+)",
                                 sass):
        at, target = int(at, 16), int(target, 16)
        if target < at:
            loops.append((target, at))
    inner = [(t, e) for t, e in loops
             if not any((t2, e2) != (t, e) and t <= t2 and e2 <= e for t2, e2 in loops)]
    return max(((e - t) // 16 + 1 for t, e in inner), default=0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("pattern", nargs="?", default=".")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build-device"))
    p.add_argument("--tree", help="another checkout whose SOURCE to compile")
    p.add_argument("--sass", action="store_true")
    p.add_argument("--tsv", action="store_true")
    a = p.parse_args()
    cuobjdump = ensure_cuobjdump()
    args, directory = compile_command(a.source, a.build_dir)
    if a.tree:
        tree = os.path.realpath(a.tree)
        args = [x.replace(ROOT, tree) for x in args]
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        subprocess.run(to_cubin(args, cubin), check=True, cwd=directory)
        matched = 0
        for name, resources in sorted(kernels(cuobjdump, cubin).items()):
            if not re.search(a.pattern, name):
                continue
            matched += 1
            sass = subprocess.run([cuobjdump, "-sass", "-fun", name, cubin], check=True,
                                  capture_output=True, text=True).stdout
            count, ops = opcodes(sass)
            loop = largest_loop(sass)
            if a.tsv:
                res = dict(re.findall(r"(REG|STACK|LOCAL) (\d+)", resources))
                kernel = re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N_", name)
                print("\t".join([a.source, kernel, res.get("REG", "?"), res.get("STACK", "?"),
                                 res.get("LOCAL", "?"), str(count), str(loop)]))
                continue
            top = " ".join(f"{op} {n}" for op, n in ops.most_common(10))
            print(f"{name}\n  {resources}, {count} instructions (largest loop {loop}): {top}")
            if a.sass:
                print(sass)
        if matched == 0:
            sys.exit(f"sass: no kernel of {a.source} matches {a.pattern}")


if __name__ == "__main__":
    main()
