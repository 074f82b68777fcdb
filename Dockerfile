# The assistant's API. Multi-arch (linux/amd64, linux/arm64): the base image is multi-arch and
# every dependency has wheels for both, so nothing here depends on the build machine.
#
#   docker compose build            # or: docker build -t nuisances-assistant:0.1.0 .
#   docker buildx build --platform linux/arm64,linux/amd64 -t nuisances-assistant:0.1.0 .
#
# The network is needed to build (PyPI), never to run: nothing is downloaded at start.

# Both stages: Python's minor version and Debian's release pinned, patch releases follow the tag.

# --- build: the project's wheel, then a virtual environment with it and its dependencies ---
FROM python:3.11-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Only what the wheel is made of (see [tool.hatch.build.targets.wheel] in pyproject.toml);
# .dockerignore keeps everything else out of the context.
COPY pyproject.toml README.md ./
COPY server ./server
COPY safety ./safety
COPY llm ./llm
COPY directory ./directory
COPY prompts ./prompts

# The wheel carries the package data: rules, directory, prompts, migrations.
# Installing that wheel (not the source tree) proves it; the last line loads the rules.
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/venv \
 && pip --python /opt/venv/bin/python install /wheels/*.whl \
 && /opt/venv/bin/nuisances safety check "fuite de gaz dans la cuisine" >/dev/null

# --- runtime: the virtual environment, no build tools, no dev extra, not root ---
FROM python:3.11-slim-bookworm AS runtime

LABEL org.opencontainers.image.title="nuisances-assistant" \
      org.opencontainers.image.description="Backend of the journal des nuisances assistant"

RUN groupadd --system --gid 10001 nuisances \
 && useradd --system --uid 10001 --gid nuisances --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin nuisances

COPY --from=build /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUISANCES_HOST=0.0.0.0 \
    NUISANCES_PORT=8000 \
    NUISANCES_DATABASE_URL=sqlite:////app/data/nuisances.db

WORKDIR /app
# A named volume mounted here starts as a copy of this folder, with its owner: the app's user.
RUN mkdir -p /app/data && chown 10001:10001 /app/data && chmod 0750 /app/data
VOLUME ["/app/data"]

USER 10001:10001
EXPOSE 8000

# Liveness only (/healthz answers without database or model); Python's stdlib, slim has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('NUISANCES_PORT', '8000') + '/healthz', timeout=4)"]

# Migrations first; with no device yet, creates one and prints its token (docker compose logs api).
CMD ["nuisances", "serve"]
