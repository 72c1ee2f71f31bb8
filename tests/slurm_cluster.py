"""A real single-node Slurm for the tests: munged, slurmctld and slurmd from Debian 12's packages, on the loopback
address, with fake GPUs (character devices, which is what slurmd's gres.conf accepts), started in seconds and stopped
afterwards. Needs root (mknod, daemons) and the packages `slurmctld slurmd slurm-client munge` (`make test` installs
them as root: tests/apt-packages.txt).
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch")


def missing():
    """Why a cluster cannot be started here, or None."""
    absent = [d for d in DAEMONS if not shutil.which(d) and not Path("/usr/sbin", d).exists()]
    if absent:
        return (
            f"no {', '.join(absent)}: apt-get install slurmctld slurmd slurm-client munge (`make test` does, as root)"
        )
    if os.geteuid() != 0:
        return "starting Slurm's daemons and making GPU device files needs root"
    return None


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


CONF = """ClusterName=rosetta-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
{gres_types}MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus}{gres} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@contextmanager
def single_node_slurm(gpus=2, cpus=2):
    """Yield the environment (SLURM_CONF) of a running one-node cluster with `gpus` fake GPUs; stop it afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="rosetta-slurm-"))
    folder.chmod(0o755)  # munged runs as `munge` and must reach its socket folder
    host = socket.gethostname().split(".")[0]
    for sub in ("state", "spool", "dev", "munge"):
        (folder / sub).mkdir()
    shutil.chown(folder / "munge", "munge", "munge")
    for i in range(gpus):
        os.mknod(folder / "dev" / f"gpu{i}", 0o600 | 0o020000, os.makedev(195, i))  # like /dev/nvidiaN
    ctld_port, d_port = free_ports(2)
    conf = folder / "slurm.conf"
    conf.write_text(
        CONF.format(
            host=host,
            dir=folder,
            ctld_port=ctld_port,
            d_port=d_port,
            cpus=cpus,
            gres_types="GresTypes=gpu\n" if gpus else "",
            gres=f" Gres=gpu:{gpus}" if gpus else "",
        )
    )
    if gpus:
        (folder / "gres.conf").write_text(f"NodeName={host} Name=gpu File={folder}/dev/gpu[0-{gpus - 1}]\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(
            [
                "runuser",
                "-u",
                "munge",
                "--",
                "munged",
                f"--socket={folder}/munge/munge.sock",
                f"--pid-file={folder}/munge/munged.pid",
                f"--log-file={folder}/munge/munged.log",
                f"--seed-file={folder}/munge/seed",
            ],
            check=True,
        )
        subprocess.run(["slurmctld", "-i"], env=env, check=True)
        subprocess.run(["slurmd"], env=env, check=True)
        deadline = time.time() + 30
        while "idle" not in subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout:
            if time.time() > deadline:
                raise RuntimeError(
                    f"the test cluster did not come up: {(folder / 'slurmctld.log').read_text()[-2000:]}"
                )
            time.sleep(0.3)
        yield env
    finally:
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            try:
                os.kill(int((folder / pid_file).read_text()), 15)
            except (OSError, ValueError):
                pass
        time.sleep(0.5)
        shutil.rmtree(folder, ignore_errors=True)
