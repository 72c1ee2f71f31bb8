"""Entry point: parse the runner contract's arguments, import the framework's package, run one cell."""

import importlib
import json
import os
import sys

from runners import FRAMEWORKS, __version__, prepare_environment
from shared import buildinfo, threads
from shared.runner import config_from_args, parser, run


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        print(f"rosetta runners {__version__}; frameworks: {', '.join(FRAMEWORKS)}; python {sys.version.split()[0]}")
        return 0
    if argv[:1] == ["--inspect"]:  # what this environment carries for the GPU (scripts/launch/images.py checks it)
        print(json.dumps(buildinfo.cached(), indent=1))
        return 0
    if argv[:1] == ["--barrier-check"]:  # does FRAMEWORK's barrier wait for the GPU? (shared/barrier_check.py)
        return barrier_check(*argv[1:])
    cfg = config_from_args(parser(FRAMEWORKS).parse_args(argv))
    os.environ["ROSETTA_DEVICE"] = cfg.device  # for backends that fix their device at import (Theano, Keras 2 on CNTK)
    threads.apply()  # one thread rule for every framework, before any of them loads
    package = prepare_environment(cfg.framework)

    def family():
        try:
            return importlib.import_module(f"runners.{package}")
        except ImportError as e:
            raise RuntimeError(
                f"{cfg.framework} cannot be imported in {sys.executable}: {e} (the framework or a "
                f"library it loads is missing); rebuild its environment with `python -m scripts.launch.venvs "
                f"{cfg.framework}` or run the cell in its image"
            ) from e

    return run(
        cfg, lambda c: importlib.import_module(f"runners.{package}.{c.task}"), lambda: family().framework_info(), family
    )


def barrier_check(framework=None, device="gpu"):
    """`python -m runners --barrier-check FRAMEWORK [cpu|gpu]`: the self-test's result as JSON; exit 1 if it failed."""
    from shared import barrier_check as check

    if framework not in FRAMEWORKS:
        print(
            f"usage: python -m runners --barrier-check FRAMEWORK [gpu|cpu]; frameworks: {', '.join(FRAMEWORKS)}",
            file=sys.stderr,
        )
        return 2
    os.environ["ROSETTA_DEVICE"] = device
    try:
        family = importlib.import_module(f"runners.{prepare_environment(framework)}")
    except ImportError as e:
        result = {
            "framework": framework,
            "status": "failed",
            "reason": f"{framework} is not importable in {sys.executable}: {e}",
        }
    else:
        result = check.check(framework, family, device)
    print(json.dumps(result))
    return 1 if result["status"] == "failed" else 0


if __name__ == "__main__":
    sys.exit(main())
