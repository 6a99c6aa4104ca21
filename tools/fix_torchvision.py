"""Make `import torchvision` work when its compiled ops cannot load (a CUDA wheel beside a CPU torch).

PyPI has only CUDA builds of torchvision. Against a CPU torch its `_C` extension does not load, which
torchvision tolerates everywhere except two unguarded `register_fake` calls (nms, qnms) in
`torchvision/_meta_registrations.py` that crash the import. transformers' video processors need only
torchvision's pure-Python transforms, so this script guards those two calls the way torchvision guards
all the others (`if torchvision.extension._has_ops()`). It changes nothing when the import already works.

Usage: python tools/fix_torchvision.py
"""

import importlib.util
import pathlib
import subprocess
import sys

UNGUARDED = '@torch.library.register_fake("torchvision::'
GUARD = '''

def register_fake_if_ops(qualname):
    # Added by pnd's tools/fix_torchvision.py: skip fake kernels of ops that did not load.
    return torch.library.register_fake(qualname) if torchvision.extension._has_ops() else (lambda fn: fn)
'''


def imports() -> bool:
    return subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True).returncode == 0


def main() -> int:
    if importlib.util.find_spec("torchvision") is None or imports():
        print("torchvision: imports as installed, nothing to do")
        return 0
    path = pathlib.Path(importlib.util.find_spec("torchvision").origin).parent / "_meta_registrations.py"
    source = path.read_text()
    if UNGUARDED not in source:
        print(f"torchvision: import fails and {path} has no unguarded register_fake; not patching", file=sys.stderr)
        return 1
    head, _, rest = source.partition("\n\n@register_meta(")
    path.write_text(head + GUARD + "\n\n@register_meta(" + rest.replace(UNGUARDED, '@register_fake_if_ops("torchvision::'))
    if not imports():
        print("torchvision: still fails to import after guarding register_fake", file=sys.stderr)
        return 1
    print(f"torchvision: guarded the nms/qnms fake kernels in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
