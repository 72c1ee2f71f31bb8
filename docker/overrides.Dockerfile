# A variant that is another variant's image with one library swapped (matrix.yaml: `parent`), e.g. PyTorch cu130 with
# a newer cuDNN. Only the swapped wheels form a new layer; everything else is the parent image's, so the two images
# differ in exactly what the variant names. scripts/launch/images.py builds the parent first, then:
#   DOCKER_BUILDKIT=1 docker build -f docker/overrides.Dockerfile --build-arg PARENT_IMAGE=rosetta/pytorch:cu130 \
#     --build-arg REQUIREMENTS=docker/pytorch/overrides-cudnn928.txt \
#     --build-arg WHEELHOUSE=.wheelhouse/pytorch-cu130-cudnn928 -t rosetta/pytorch:cu130-cudnn928 .
ARG PARENT_IMAGE=rosetta/pytorch:cu130

FROM scratch AS wheels
ARG REQUIREMENTS=docker/pytorch/overrides-cudnn928.txt
ARG WHEELHOUSE=.wheelhouse/pytorch-cu130-cudnn928
COPY ${REQUIREMENTS} /requirements.txt
COPY ${WHEELHOUSE}/ /wheels/

FROM ${PARENT_IMAGE}
USER root
# --no-deps: the framework pins the library it was released with exactly, so the resolver would refuse the swap;
# the variant's comment says why the swap is safe (e.g. cuDNN keeps its ABI within a major version).
RUN --mount=type=bind,from=wheels,target=/stage \
    /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /stage/wheels --no-deps \
      --requirement /stage/requirements.txt \
 && cd /app && /opt/venv/bin/python -m runners --inspect > /dev/null

ARG PARENT_IMAGE
ARG IMAGE=rosetta/pytorch:cu130-cudnn928
ARG CODE_HASH=unknown
LABEL org.opencontainers.image.title="rosetta runner ${IMAGE}" org.opencontainers.image.base.name="${PARENT_IMAGE}" \
      org.rosetta.code-hash="${CODE_HASH}"
ENV ROSETTA_IMAGE=${IMAGE} \
    ROSETTA_CODE_HASH=${CODE_HASH}
USER 1000:1000
