"""Run by the Theano environment's own python after pip (scripts/launch/venvs.py, docker/pyenv.Dockerfile,
gpu.Dockerfile).

Lasagne 0.1, the release on PyPI, imports `theano.tensor.signal.downsample`, a module Theano 1.0 removed in favour of
`theano.tensor.signal.pool`. This writes that module back as a thin mapping of the one function Lasagne imports from it,
so the PyPI releases of both run unchanged.
"""

import os
import sysconfig

MODULE = '''"""Added by the rosetta project (docker/theano/post_install.py): Theano 0.8's downsample API for
Lasagne 0.1."""
from theano.tensor.signal.pool import pool_2d


def max_pool_2d(input, ds, ignore_border=None, st=None, padding=(0, 0), mode="max"):
    return pool_2d(input, ws=ds, ignore_border=ignore_border, stride=st, pad=padding, mode=mode)
'''


def main():
    path = os.path.join(sysconfig.get_paths()["purelib"], "theano", "tensor", "signal", "downsample.py")
    with open(path, "w") as f:
        f.write(MODULE)
    print(f"theano: wrote {path}")


if __name__ == "__main__":
    main()
