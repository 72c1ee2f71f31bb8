# The theano family's GPU image (keras2-theano and lasagne; matrix.yaml's `dockerfile` key picks this file for that
# variant, the CPU variant keeps docker/pyenv.Dockerfile). Theano's GPU backend is libgpuarray + pygpu, which are not
# on PyPI: Debian bullseye packages them (python3-pygpu 0.7.6) for its Python 3.9 and NumPy 1.19.5, so this image is
# bullseye's Python with a venv that sees Debian's packages (--system-site-packages) and the rest from the wheelhouse
# (docker/theano/requirements-gpu.txt). Same contract as docker/Dockerfile:
#   docker run --rm --gpus all IMAGE lasagne cnn --data /data/synthetic --out /results/x.json
# The local bullseye base is made once, without a registry (scripts/launch/images.py does it on first use):
#   ROSETTA_BASE_IMAGE=rosetta/debian:bullseye ROSETTA_BASE_SUITE=bullseye bash .ci/docker-setup.sh
#
# At run time libgpuarray dlopens three unversioned libraries:
#   libcuda.so    the host driver: the NVIDIA Container Toolkit links it to libcuda.so.1 beside the driver it mounts
#                 (libnvidia-container and nvidia-ctk's create-symlinks hook both do), so the image adds nothing
#   libnvrtc.so   NVRTC 11.8 from NVIDIA's wheel, which compiles libgpuarray's and Theano's kernels to PTX for the
#   libcublas.so  GPU it finds, and cuBLAS 11 (GEMMs and GpuCorrMM's convolutions): the wheels ship only versioned
#                 names, so the build links the unversioned ones and registers those two folders with ldconfig.
# The CUDA runtime wheel names the image's CUDA (`--inspect`); libgpuarray itself calls the driver API, not libcudart.
# Theano compiles its ops' C code with g++ at run time, against Python.h (python3-dev), libgpuarray's headers
# (libgpuarray-dev) and OpenBLAS (the CPU ops' blas.ldflags). No cuDNN: Theano 1.0.5's dnn ops need cuDNN <= 7.

ARG BASE_IMAGE=rosetta/debian:bullseye

# The pins and wheels, staged as in docker/Dockerfile.
FROM scratch AS wheels
ARG REQUIREMENTS=docker/theano/requirements-gpu.txt
ARG WHEELHOUSE=.wheelhouse/theano-requirements-gpu
COPY ${REQUIREMENTS} /requirements.txt
COPY ${WHEELHOUSE}/ /wheels/

FROM ${BASE_IMAGE}
# python3-h5py is Keras' h5py at the CPU image's version (2.10.0); PyPI has no 2.10.0 wheel for Python 3.9.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv python3-dev python3-pygpu python3-numpy python3-h5py libgpuarray-dev \
      g++ libopenblas-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# The pins from the bind-mounted wheelhouse (no network; pip keeps Debian's numpy and h5py, which satisfy them), the
# Lasagne pooling module (post_install.py), then the loader set-up described above.
COPY docker/theano/post_install.py /tmp/post_install.py
RUN --mount=type=bind,from=wheels,target=/stage \
    python3 -m venv --system-site-packages /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /stage/wheels \
      --requirement /stage/requirements.txt \
 && /opt/venv/bin/python /tmp/post_install.py && rm /tmp/post_install.py \
 && site=$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
 && ls -d "$site"/nvidia/cuda_nvrtc/lib "$site"/nvidia/cublas/lib > /etc/ld.so.conf.d/rosetta-wheels.conf \
 && for lib in "$site"/nvidia/cuda_nvrtc/lib/libnvrtc.so.* "$site"/nvidia/cublas/lib/libcublas.so.*; do \
      ln -s "$(basename "$lib")" "${lib%.so.*}.so"; done \
 && ldconfig

COPY shared/ /app/shared/
COPY runners/ /app/runners/
# As docker/Dockerfile: what the image carries for the GPU, scanned once (`docker run --rm IMAGE --inspect`).
RUN cd /app && /opt/venv/bin/python -m runners --inspect > /dev/null

ARG BASE_IMAGE
ARG IMAGE=rosetta/theano:cu118
ARG CODE_HASH=unknown
LABEL org.opencontainers.image.title="rosetta runner ${IMAGE}" org.opencontainers.image.base.name="${BASE_IMAGE}" \
      org.rosetta.code-hash="${CODE_HASH}"

# As docker/pyenv.Dockerfile: any uid may run it, and ROSETTA_CACHE_DIR keeps Theano's compiled C modules between
# cells (compose mounts a named volume there).
ENV PATH=/opt/venv/bin:$PATH \
    ROSETTA_IMAGE=${IMAGE} \
    ROSETTA_CODE_HASH=${CODE_HASH} \
    ROSETTA_CACHE_DIR=/cache \
    HOME=/tmp \
    USER=rosetta \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN mkdir -m 1777 /cache
WORKDIR /app
USER 1000:1000
ENTRYPOINT ["python", "-m", "runners"]
CMD ["--help"]
