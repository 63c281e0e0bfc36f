# sustain: one image for `sustain serve` (the default), `sustain migrate` and `sustain simulate`.
# Build stage: a virtual environment with sustain and its dependencies (wheels only; no compiler
# is needed for them on this base). Final stage: the slim base, that venv, a non-root user.

FROM python:3.11-slim-bookworm AS build
# Marks the build stage's image, which the legacy builder leaves behind untagged, so that
# deploy/build-image.sh can remove it (and nothing else) afterwards.
LABEL org.sustain.stage="build"
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/sustain
# The dependencies first, from pyproject.toml alone: their layer is reused by every build whose
# pyproject.toml is unchanged, so a change to the code rebuilds only the layers below it. The
# `otel` extra too: the image exports OpenTelemetry wherever OTEL_EXPORTER_OTLP_ENDPOINT is set.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['otel']))" > /tmp/requirements.txt \
    && /opt/sustain/bin/pip install --no-cache-dir -r /tmp/requirements.txt
COPY README.md ./
COPY src ./src
COPY probes ./probes
COPY service ./service
COPY simulator ./simulator
COPY migrations ./migrations
# Bytecode compiled here: the root filesystem may be read-only at run time (Helm chart).
RUN /opt/sustain/bin/pip install --no-cache-dir --no-deps . \
    && /opt/sustain/bin/python -m compileall -q /opt/sustain

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="sustain" \
      org.opencontainers.image.description="Continuous monitoring of LLM inference endpoints" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 sustain \
    && useradd --system --uid 10001 --gid sustain --home-dir /var/lib/sustain \
       --create-home --shell /usr/sbin/nologin sustain
COPY --from=build /opt/sustain /opt/sustain
ENV PATH=/opt/sustain/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SUSTAIN_HOST=0.0.0.0 \
    SUSTAIN_PORT=8000 \
    SUSTAIN_DATA_DIR=/var/lib/sustain \
    SUSTAIN_LOG_FORMAT=json
WORKDIR /var/lib/sustain
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('SUSTAIN_PORT', '8000'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["sustain"]
CMD ["serve"]
