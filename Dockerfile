# The eventloom image: every eventloom role of docker-compose.yml runs from it (`docker run IMAGE <command>`).
#
# Debian bookworm (glibc 2.36): every dependency ships a manylinux wheel for CPython 3.11 (PyNaCl's needs
# glibc >= 2.34), so nothing is compiled and the image carries no compiler. No Java: it only serves the local
# Neo4j of `eventloom dev neo4j`; deployments use a Neo4j server (the `neo4j` service).

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY eventloom/ eventloom/
COPY readmodels/ readmodels/
COPY projectors/ projectors/
COPY gateway/ gateway/
# The runtime dependencies of pyproject.toml only: no dev extras, no tests.
RUN python -m venv /opt/eventloom && /opt/eventloom/bin/python -m pip install .

FROM python:3.11-slim-bookworm
ENV PATH=/opt/eventloom/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EVENTLOOM_DATA_DIR=/data
# A fixed non-root uid owns /data; a new named volume mounted there starts with this owner and mode (0700:
# the data dir holds the node's private signing keys and the gateway's tokens). /nats-auth likewise: compose's
# nats-auth writes the NATS server's users there, for the nats container alone to read.
RUN groupadd --system --gid 10001 eventloom \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin eventloom \
    && install -d -o 10001 -g 10001 -m 0700 /data /nats-auth
COPY --from=build /opt/eventloom /opt/eventloom
USER 10001:10001
WORKDIR /data
ENTRYPOINT ["eventloom"]
CMD ["--help"]
