# The runner image of a family whose Python is older than any Debian still packages (CNTK: 3.6, Theano: 3.7,
# Caffe2: 3.8). Same layout and contract as docker/Dockerfile; the interpreter comes from the host's pyenv instead of
# the base's python3. scripts/launch/images.py stages it under .wheelhouse/ and passes:
#   PYTHON_HOME   the interpreter's prefix on the host (e.g. /root/.pyenv/versions/3.6.15). It is copied to the SAME
#                 path, because pyenv's builds link libpython through an absolute RUNPATH.
#   FAMILY        docker/FAMILY holds apt-packages.txt (what the stack needs from Debian) and, where the stack needs a
#                 fix after pip, post_install.py (CNTK's OpenMPI links, Lasagne's Theano module).
#   BOOTSTRAP     the newest pip/setuptools/wheel that still run on that Python (scripts/launch/venvs.py: BOOTSTRAP), from the
#                 wheelhouse: ensurepip's pip 18 on 3.6 cannot install manylinux2010 wheels.
#   make images FRAMEWORK=cntk VARIANT=cpu
ARG BASE_IMAGE=rosetta/debian:bookworm

FROM scratch AS wheels
ARG REQUIREMENTS=docker/cntk/requirements.txt
ARG WHEELHOUSE=.wheelhouse/cntk-cpu
ARG INTERPRETER=.wheelhouse/python-3.6.15
COPY ${REQUIREMENTS} /requirements.txt
COPY ${WHEELHOUSE}/ /wheels/
COPY ${INTERPRETER}/ /python/

FROM ${BASE_IMAGE}
ARG FAMILY=cntk
ARG PYTHON_HOME=/root/.pyenv/versions/3.6.15
ARG BOOTSTRAP="pip<22 setuptools<60 wheel<0.38"

# The libraries pyenv's interpreters were built against (MACHINE-NOTES: "CPU images for old interpreters"), then the
# stack's own packages.
COPY docker/${FAMILY}/ /tmp/family/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates libssl3 libffi8 \
      libsqlite3-0 libreadline8 libncursesw6 libbz2-1.0 liblzma5 zlib1g libuuid1 libnsl2 libtirpc3 libexpat1 \
      libgdbm6 $(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]].*//' /tmp/family/apt-packages.txt) \
 && rm -rf /var/lib/apt/lists/*

# The interpreter at its build path (readable by any uid: the runner does not run as root), a venv from it, the
# bootstrap pip, the pins from the bind-mounted wheelhouse (no network), then the family's post-install step.
RUN --mount=type=bind,from=wheels,target=/stage \
    mkdir -p "$(dirname "$PYTHON_HOME")" && cp -a /stage/python "$PYTHON_HOME" \
 && d="$PYTHON_HOME"; while [ "$d" != / ]; do chmod o+rx "$d"; d=$(dirname "$d"); done \
 && "$PYTHON_HOME"/bin/python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /stage/wheels -U $BOOTSTRAP \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /stage/wheels --requirement /stage/requirements.txt \
 && if [ -f /tmp/family/post_install.py ]; then /opt/venv/bin/python /tmp/family/post_install.py; fi \
 && rm -rf /tmp/family

COPY shared/ /app/shared/
COPY runners/ /app/runners/
# As docker/Dockerfile: the GPU build facts, scanned once (`docker run --rm IMAGE --inspect`).
RUN cd /app && /opt/venv/bin/python -m runners --inspect > /dev/null

ARG BASE_IMAGE
ARG IMAGE=rosetta/cntk:cpu
ARG CODE_HASH=unknown
LABEL org.opencontainers.image.title="rosetta runner ${IMAGE}" org.opencontainers.image.base.name="${BASE_IMAGE}" \
      org.rosetta.code-hash="${CODE_HASH}"

# As docker/Dockerfile: any uid may run it. ROSETTA_CACHE_DIR: where a runner keeps compiled code between cells
# (Theano's C modules); compose mounts a tmpfs of the cell's own there, so no cell loads code another compiled.
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
