# Attention, step by step — one container for a class. Build: docker build -t attention-demo .
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv

# Dependencies first, in their own layer: a code change does not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir app && touch app/__init__.py \
    && pip install --no-compile . \
    && pip uninstall -y attention-demo \
    && rm -rf app

COPY app ./app
COPY templates ./templates
COPY static ./static

RUN useradd --system --uid 10001 --no-create-home attention
USER attention

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"]

CMD ["uvicorn", "app.main:app", "--host", "0.0.0.0", "--port", "8000"]
