# Attention, step by step — one image for a class.
#   docker build -t attention-demo . && docker run -p 8000:8000 attention-demo
# Settings are ATTENTION_* environment variables (README, "Configuration"). Alone it runs one worker, which
# keeps the live class rooms; with REDIS_URL (optional) the rooms live in Redis and the workers default to
# the CPUs, and several replicas serve one class (compose.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /srv

# 1) The dependencies, in their own layer and their own venv: only a change to the lock reinstalls
#    them. requirements.lock holds every package at the exact version and hashes `make test` ran
#    (README, "Reproducible installs"), so an image built next month runs what was tested today.
#    They are installed with their bytecode, which starts the workers faster; NumPy's own test
#    suite (17 MB) is left out, as nothing here runs it.
COPY requirements.lock ./
RUN python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --require-hashes --no-deps -r requirements.lock \
    && rm requirements.lock \
    && rm -rf /opt/venv/lib/python3*/site-packages/numpy/tests /opt/venv/lib/python3*/site-packages/numpy/*/tests

# 2) A user without a login or a home; the code stays root's, so the server cannot change it.
RUN groupadd --gid 10001 attention \
    && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin attention

# 3) The code, compiled now: the server, which may not write here, would otherwise compile it at every start;
#    each language's catalogue (app/locales/<lang>/LC_MESSAGES/messages.po) is read as it is, and checked here.
COPY app ./app
COPY templates ./templates
COPY static ./static
RUN /opt/venv/bin/python -m compileall -q app \
    && /opt/venv/bin/python -c 'from app.i18n import load_catalogues; load_catalogues()'

ENV PATH=/opt/venv/bin:$PATH \
    ATTENTION_HOST=0.0.0.0 \
    ATTENTION_PORT=8000 \
    OPENBLAS_NUM_THREADS=1
# OPENBLAS_NUM_THREADS: every worker process has a core of its own; BLAS threads would only compete.

USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 CMD ["python", "-m", "app.serve", "--check"]
STOPSIGNAL SIGTERM
# Exec form: uvicorn is PID 1 and gets SIGTERM itself, finishes the requests in flight and exits 0.
CMD ["python", "-m", "app.serve"]
